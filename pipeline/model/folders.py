"""Model folders for the lineage's other models (word2vec, ELMo), laid out as BERT's Hugging Face folders are.

A folder holds ``config.json`` (``model_type``: ``lab-<architecture>``, e.g.
``lab-word2vec`` or ``lab-elmo``, then the config's fields),
``model.safetensors`` and the tokenizer files, so the finetune stage reads
every generation the same way; a word2vec folder also holds ``vectors.txt`` in
word2vec's text format (a header line "V d", then one token and its d numbers
per line), which gensim and the original tools read. BERT folders are
``pipeline.model.hf``'s; ``model_type`` tells them apart. ``LabFolder`` is the
format as the architecture registry (``pipeline.architectures``) uses it.
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from pipeline.data.tokenizer import load_tokenizer, vocab_list
from pipeline.errors import DataError, MissingFileError
from pipeline.io import atomic_dir, read_json
from pipeline.model.downstream import TASK_HEADS
from pipeline.model.hf import MODEL_TYPE, write_tokenizer_files


def model_type(folder: str | os.PathLike) -> str:
    """``bert`` for a Hugging Face BERT folder, else the lab's ``lab-<architecture>``."""
    return read_json(Path(folder) / "config.json").get("model_type", MODEL_TYPE)


def lab_model_type(architecture: str) -> str:
    """What a lab folder's config.json calls an architecture (``lab-word2vec``, ``lab-elmo``)."""
    return f"lab-{architecture}"


def save_model(model: nn.Module, out_dir: str | os.PathLike, tokenizer_dir: str | os.PathLike,
               vectors: bool = False) -> Path:
    """Write a word2vec or ELMo model (and the tokenizer) as a folder, with ``vectors`` its word vectors as
    ``vectors.txt`` too; built beside ``out_dir``, then renamed."""
    model = getattr(model, "_orig_mod", model)
    out_dir = Path(out_dir)
    with atomic_dir(out_dir) as tmp:
        config = {"model_type": lab_model_type(model.config.architecture), **dataclasses.asdict(model.config)}
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()},
                  str(tmp / "model.safetensors"), metadata={"format": "pt"})
        write_tokenizer_files(Path(tokenizer_dir), tmp, max_length=512)
        if vectors:
            write_vectors(model.embeddings.weight.detach().cpu(), vocab_list(load_tokenizer(tokenizer_dir)),
                          tmp / "vectors.txt")
    return out_dir


def write_vectors(weight: torch.Tensor, vocab: list[str], path: Path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"{weight.shape[0]} {weight.shape[1]}\n")
        for token, row in zip(vocab, weight.tolist()):
            f.write(token + " " + " ".join(f"{x:.6g}" for x in row) + "\n")


def read_config(folder: str | os.PathLike, config_cls: type):
    """The ``config_cls`` of a folder written by ``save_model`` (its ``model_type`` must be that architecture's)."""
    path = Path(folder) / "config.json"
    config = read_json(path)
    kind, expected = config.pop("model_type", None), lab_model_type(config_cls.architecture)
    if kind != expected:
        raise DataError(f"{path}: model_type={kind!r}: expected {expected!r}")
    try:
        return config_cls(**config)
    except (TypeError, ValueError) as e:
        raise DataError(f"{path}: not a readable {kind} config ({type(e).__name__}: {e})") from None


def load_model(folder: str | os.PathLike, config_cls: type, model_cls: type[nn.Module]) -> nn.Module:
    """The ``model_cls`` of a folder written by ``save_model`` (in eval mode)."""
    folder = Path(folder)
    if not (folder / "model.safetensors").is_file():
        raise MissingFileError(f"no model.safetensors in {folder}")
    config = read_config(folder, config_cls)
    try:
        model = model_cls(config)
        model.load_state_dict(load_file(str(folder / "model.safetensors")))
    except (TypeError, ValueError, RuntimeError) as e:
        raise DataError(f"{folder}: not a readable {lab_model_type(config.architecture)} folder "
                        f"({type(e).__name__}: {e})") from None
    return model.eval()


@dataclass(frozen=True)
class LabFolder:
    """The lab's export of a lineage model as the registry uses it: saved by ``save_model`` (``vectors``: with
    ``vectors.txt``), read back as the pretrained network -- also the encoder of frozen features -- or a task model
    (``pipeline.model.downstream.TASK_HEADS`` on it)."""

    vectors: bool = False

    def model_type(self, arch) -> str:
        return lab_model_type(arch.name)

    def model_types(self, arch) -> tuple[str, ...]:
        return (self.model_type(arch),)

    def save(self, arch, network: nn.Module, out_dir: Path, tokenizer_dir: Path) -> Path:
        return save_model(network, out_dir, tokenizer_dir, vectors=self.vectors)

    def read_config(self, arch, folder: Path):
        return read_config(folder, arch.config)

    def load(self, arch, folder: Path) -> nn.Module:
        return load_model(folder, arch.config, arch.network)

    def language_model(self, arch, folder: Path) -> nn.Module:
        return self.load(arch, folder)

    def encoder(self, arch, folder: Path) -> nn.Module:
        return self.load(arch, folder)

    def poolings(self, arch) -> tuple[str, ...]:
        return ("mean",)  # no summary token trained to read the text: its classifier reads the mean

    def task_model(self, arch, kind: str, folder: Path, num_outputs: int, pretrained: bool,
                   pooling: str | None = None) -> nn.Module:
        network = self.load(arch, folder) if pretrained else arch.network(self.read_config(arch, folder))
        return TASK_HEADS[kind](network, num_outputs)
