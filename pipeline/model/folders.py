"""Model folders for the lineage's other models (word2vec, ELMo), laid out as BERT's Hugging Face folders are.

A folder holds ``config.json`` (``model_type``: ``lab-word2vec`` or ``lab-elmo``,
then the config's fields), ``model.safetensors`` and the tokenizer files, so the
finetune stage reads every generation the same way; a word2vec folder also
holds ``vectors.txt`` in word2vec's text format (a header line "V d", then one
token and its d numbers per line), which gensim and the original tools read.
BERT folders are ``pipeline.model.hf``'s; ``model_type`` tells them apart.
"""
from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from pipeline.data.tokenizer import load_tokenizer, vocab_list
from pipeline.errors import DataError, MissingFileError
from pipeline.io import atomic_dir, read_json
from pipeline.model.config import ElmoConfig, StaticConfig
from pipeline.model.elmo import ElmoLM
from pipeline.model.hf import write_tokenizer_files
from pipeline.model.static import StaticEmbeddings

TYPES = {"lab-word2vec": (StaticConfig, StaticEmbeddings), "lab-elmo": (ElmoConfig, ElmoLM)}


def model_type(folder: str | os.PathLike) -> str:
    """``bert`` for a Hugging Face BERT folder, else the lab's ``lab-word2vec`` / ``lab-elmo``."""
    return read_json(Path(folder) / "config.json").get("model_type", "bert")


def save_model(model: nn.Module, out_dir: str | os.PathLike, tokenizer_dir: str | os.PathLike) -> Path:
    """Write a word2vec or ELMo model (and the tokenizer) as a folder; built beside ``out_dir``, then renamed."""
    model = getattr(model, "_orig_mod", model)
    kind = next(k for k, (_, cls) in TYPES.items() if isinstance(model, cls))
    out_dir = Path(out_dir)
    with atomic_dir(out_dir) as tmp:
        config = {"model_type": kind, **dataclasses.asdict(model.config)}
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()},
                  str(tmp / "model.safetensors"), metadata={"format": "pt"})
        write_tokenizer_files(Path(tokenizer_dir), tmp, max_length=512)
        if kind == "lab-word2vec":
            write_vectors(model.embeddings.weight.detach().cpu(), vocab_list(load_tokenizer(tokenizer_dir)),
                          tmp / "vectors.txt")
    return out_dir


def write_vectors(weight: torch.Tensor, vocab: list[str], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{weight.shape[0]} {weight.shape[1]}\n")
        for token, row in zip(vocab, weight.tolist()):
            f.write(token + " " + " ".join(f"{x:.6g}" for x in row) + "\n")


def load_model(folder: str | os.PathLike) -> nn.Module:
    """The word2vec or ELMo model of a folder written by ``save_model`` (in eval mode)."""
    folder = Path(folder)
    if not (folder / "model.safetensors").is_file():
        raise MissingFileError(f"no model.safetensors in {folder}")
    config = read_json(folder / "config.json")
    kind = config.pop("model_type", None)
    if kind not in TYPES:
        raise DataError(f"{folder / 'config.json'}: model_type={kind!r}: expected one of {', '.join(TYPES)}")
    config_cls, model_cls = TYPES[kind]
    try:
        model = model_cls(config_cls(**config))
        model.load_state_dict(load_file(str(folder / "model.safetensors")))
    except (TypeError, ValueError, RuntimeError) as e:
        raise DataError(f"{folder}: not a readable {kind} folder ({type(e).__name__}: {e})") from None
    return model.eval()
