"""Hugging Face-format model folders, both ways, without importing ``transformers``: BERT's export.

A folder written by :func:`save_hf` loads unchanged with
``transformers.BertForPreTraining.from_pretrained`` (or ``AutoModel``/``AutoTokenizer``),
and :func:`load_hf` reads folders written by ``save_pretrained``, including old ones
(``pytorch_model.bin``, ``LayerNorm.gamma``/``beta``, bare ``BertModel`` checkpoints
without the ``bert.`` prefix). ``BertFolder`` is the format as the architecture
registry (``pipeline.architectures``) uses it.

A pre-LayerNorm BERT (``layer_norm="pre"``) has no BERT class in ``transformers``: its folder is a
RoBERTa-PreLayerNorm one (``model_type`` ``roberta-prelayernorm``), which
``transformers.RobertaPreLayerNormForMaskedLM.from_pretrained`` loads unchanged. RoBERTa counts positions
from ``pad_token_id + 1``, so its position table has that many rows in front of ours (zeros) and
``max_position_embeddings`` says so; its masked-LM head is ``lm_head``; the pooler and the NSP head travel
under their own names (the masked-LM class leaves them unread, :func:`load_hf` reads them back).
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from pipeline.errors import DataError, MissingFileError
from pipeline.io import atomic_dir
from pipeline.model.bert import (BertForPreTraining, BertForQuestionAnswering, BertForSequenceClassification,
                                 BertForTokenClassification, BertModel)
from pipeline.model_config import BertConfig
from pipeline.names import SPECIAL_TOKENS as SPECIAL_TOKEN_LIST

log = logging.getLogger(__name__)

# Tied to the word embeddings and cls.predictions.bias: Hugging Face stores neither and
# re-ties them on load, and safetensors refuses to store one tensor under two names.
TIED_KEYS = ("cls.predictions.decoder.weight", "cls.predictions.decoder.bias")

# BERT's special tokens under the names BertTokenizer gives them.
SPECIAL_TOKENS = dict(zip(("pad_token", "unk_token", "cls_token", "sep_token", "mask_token"), SPECIAL_TOKEN_LIST))

_HF_DEFAULT_VOCAB_SIZE = 30522  # transformers.BertConfig's default, for config.json files that omit it
MODEL_TYPE = "bert"  # config.json's model_type, as transformers names BERT
PRE_LN_MODEL_TYPE = "roberta-prelayernorm"  # a pre-LayerNorm BERT's: transformers' RoBERTa-PreLayerNorm
PRE_LN_PREFIX = "roberta_prelayernorm."
# Our pre-LayerNorm classes and the transformers classes their folders load as.
PRE_LN_CLASSES = {"BertForPreTraining": "RobertaPreLayerNormForMaskedLM", "BertModel": "RobertaPreLayerNormModel"}
# The masked-LM head's names, ours -> RoBERTa's (its decoder is tied, as ours).
_PRE_LN_HEAD = {"cls.predictions.transform.dense.": "lm_head.dense.",
                "cls.predictions.transform.LayerNorm.": "lm_head.layer_norm.", "cls.predictions.bias": "lm_head.bias"}
_POSITIONS = "embeddings.position_embeddings.weight"

# BERT's own task models by the kind of task (``TaskData.kind``): Hugging Face's classes and parameter names.
TASK_MODELS = {"sentence": BertForSequenceClassification, "ner": BertForTokenClassification,
               "span": BertForQuestionAnswering}


# ---------------------------------------------------------------------------- config


def config_to_hf(config: BertConfig) -> dict[str, Any]:
    """Our config as the fields of ``transformers.BertConfig`` (its config.json)."""
    d = asdict(config)
    causal = d.pop("causal")
    if d.pop("layer_norm") == "pre":
        return _pre_ln_config(d, causal)
    d.update(
        model_type=MODEL_TYPE,
        # HF's BertModel attends causally exactly when is_decoder is set, so a left-to-right
        # model says so; a normal (bidirectional) BERT writes false.
        is_decoder=causal,
        add_cross_attention=False,
        position_embedding_type="absolute",
        classifier_dropout=None,
        tie_word_embeddings=True,
        use_cache=causal,
    )
    return d


def _pre_ln_config(d: dict[str, Any], causal: bool) -> dict[str, Any]:
    """A pre-LayerNorm config as ``transformers.RobertaPreLayerNormConfig``'s fields."""
    if causal:
        raise DataError("model.layer_norm=pre with a left-to-right model has no transformers class to export to: "
                        "expected model.layer_norm=post for objective=ltr")
    if d["hidden_act"] != "gelu":  # RoBERTa's masked-LM head applies gelu whatever hidden_act says
        raise DataError(f"model.hidden_act={d['hidden_act']!r} with model.layer_norm=pre: expected gelu (the "
                        "RoBERTa-PreLayerNorm export's masked-LM head always applies gelu)")
    d.update(model_type=PRE_LN_MODEL_TYPE, max_position_embeddings=d["max_position_embeddings"] + d["pad_token_id"] + 1,
             is_decoder=False, add_cross_attention=False, position_embedding_type="absolute",
             classifier_dropout=None, tie_word_embeddings=True, use_cache=False)
    return d


def config_from_hf(d: dict[str, Any]) -> BertConfig:
    """``transformers.BertConfig`` fields (a parsed config.json) to our config; a RoBERTa-PreLayerNorm one (the
    export of ``layer_norm="pre"``) to a pre-LayerNorm config."""
    kind = d.get("model_type", MODEL_TYPE)
    if kind not in (MODEL_TYPE, PRE_LN_MODEL_TYPE):
        raise DataError(f"model_type={kind!r} is not supported, only {MODEL_TYPE!r} or {PRE_LN_MODEL_TYPE!r}")
    if kind == PRE_LN_MODEL_TYPE:
        if d.get("pad_token_id") is None or "max_position_embeddings" not in d:
            raise DataError(f"model_type={kind!r} without pad_token_id or max_position_embeddings: expected both "
                            "(its positions count from pad_token_id + 1)")
        d = {**d, "layer_norm": "pre",
             "max_position_embeddings": d["max_position_embeddings"] - d["pad_token_id"] - 1}
    if d.get("position_embedding_type", "absolute") != "absolute":
        raise DataError(
            f"position_embedding_type={d['position_embedding_type']!r} is not supported, only 'absolute'"
        )
    if d.get("add_cross_attention"):
        raise DataError("add_cross_attention=true is not supported: BERT here is an encoder only")
    kwargs = {f.name: d[f.name] for f in fields(BertConfig) if f.name in d and f.name not in ("causal", "layer_norm")}
    kwargs["layer_norm"] = "pre" if kind == PRE_LN_MODEL_TYPE else "post"  # a BERT folder is post-LayerNorm
    kwargs.setdefault("vocab_size", _HF_DEFAULT_VOCAB_SIZE)
    if kwargs.get("pad_token_id") is None:
        kwargs["pad_token_id"] = 0  # HF allows none; only the initial zero row depends on it
    return BertConfig(**kwargs, causal=bool(d.get("is_decoder", False)))


# -------------------------------------------------------------------------------- save


def _unwrap(model: nn.Module) -> nn.Module:
    """The model under a torch.compile or DistributedDataParallel wrapper."""
    model = getattr(model, "_orig_mod", model)
    if isinstance(model, nn.parallel.DistributedDataParallel):
        model = model.module
    return getattr(model, "_orig_mod", model)


def save_hf(model: nn.Module, out_dir: str | os.PathLike, tokenizer_dir: str | os.PathLike | None = None,
            do_lower_case: bool = True) -> Path:
    """Write ``model`` (BertForPreTraining, BertForSequenceClassification or BertModel) as a
    Hugging Face folder: config.json + model.safetensors, and with ``tokenizer_dir`` (a
    folder holding vocab.txt and, optionally, tokenizer.json) the tokenizer files too.

    The folder is built next to ``out_dir`` and renamed into place, so a crash leaves
    either the previous folder or none.
    """
    model = _unwrap(model)
    out_dir = Path(out_dir)
    hf_config = config_to_hf(model.config)
    pre_ln = model.config.layer_norm == "pre"
    if pre_ln and type(model).__name__ not in PRE_LN_CLASSES:
        raise DataError(f"{type(model).__name__} with model.layer_norm=pre has no transformers export: expected "
                        f"one of {', '.join(PRE_LN_CLASSES)}")
    hf_config["architectures"] = [PRE_LN_CLASSES[type(model).__name__] if pre_ln else type(model).__name__]
    hf_config["dtype"] = str(next(model.parameters()).dtype).removeprefix("torch.")
    if isinstance(model, BertForSequenceClassification):
        # HF reads num_labels from the size of id2label.
        hf_config["id2label"] = {str(i): f"LABEL_{i}" for i in range(model.num_labels)}
        hf_config["label2id"] = {f"LABEL_{i}": i for i in range(model.num_labels)}
        if model.num_labels == 1:
            hf_config["problem_type"] = "regression"
    tensors = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items() if k not in TIED_KEYS}
    if pre_ln:
        tensors = to_pre_ln(tensors, model.config.pad_token_id)

    with atomic_dir(out_dir) as tmp:
        (tmp / "config.json").write_text(json.dumps(hf_config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        if tokenizer_dir is not None:
            write_tokenizer_files(Path(tokenizer_dir), tmp, model.config.max_position_embeddings, do_lower_case)
    return out_dir


def to_pre_ln(state: dict[str, torch.Tensor], pad_token_id: int) -> dict[str, torch.Tensor]:
    """A pre-LayerNorm BERT's weights under RoBERTa-PreLayerNorm's names, its position table behind
    ``pad_token_id + 1`` zero rows."""
    out = {}
    for key, value in state.items():
        head = next((ours for ours in _PRE_LN_HEAD if key.startswith(ours)), None)
        if head is not None:
            key = _PRE_LN_HEAD[head] + key[len(head):]
        elif key.startswith("bert."):
            key = PRE_LN_PREFIX + key.removeprefix("bert.")
        if key.endswith(_POSITIONS):
            value = torch.cat([value.new_zeros(pad_token_id + 1, value.shape[1]), value])
        out[key] = value.contiguous()
    return out


def from_pre_ln(state: dict[str, torch.Tensor], pad_token_id: int) -> dict[str, torch.Tensor]:
    """``to_pre_ln`` undone: a RoBERTa-PreLayerNorm folder's weights under our names (its tied decoder dropped)."""
    theirs = {v: k for k, v in _PRE_LN_HEAD.items()}
    out = {}
    for key, value in state.items():
        if key.startswith("lm_head.decoder."):
            continue  # tied to the word embeddings and lm_head.bias
        head = next((t for t in theirs if key.startswith(t)), None)
        if head is not None:
            key = theirs[head] + key[len(head):]
        elif key.startswith(PRE_LN_PREFIX):
            key = "bert." + key.removeprefix(PRE_LN_PREFIX)
        if key.endswith(_POSITIONS):
            value = value[pad_token_id + 1:]
        out[key] = value
    return out


def write_tokenizer_files(src: Path, dst: Path, max_length: int, do_lower_case: bool = True) -> None:
    """Copy a tokenizer folder's files into a model folder, with the config files Hugging Face reads."""
    if not (src / "vocab.txt").is_file():
        raise MissingFileError(f"no vocab.txt in tokenizer folder {src}")
    shutil.copyfile(src / "vocab.txt", dst / "vocab.txt")
    if (src / "tokenizer.json").is_file():
        shutil.copyfile(src / "tokenizer.json", dst / "tokenizer.json")
    # The tokenizer stage's own settings (casing, accents) win over the defaults here.
    source_config = _read_json(src / "tokenizer_config.json") if (src / "tokenizer_config.json").is_file() else {}
    tokenizer_config = {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": do_lower_case,
        "tokenize_chinese_chars": True,
        "strip_accents": None,
        **source_config,
        **SPECIAL_TOKENS,
        "model_max_length": max_length,
    }
    for name, content in (("tokenizer_config.json", tokenizer_config), ("special_tokens_map.json", SPECIAL_TOKENS)):
        (dst / name).write_text(json.dumps(content, indent=2, sort_keys=True) + "\n", encoding="utf-8")


# -------------------------------------------------------------------------------- load


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise MissingFileError(f"{path} not found: not a Hugging Face model folder")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path} is unreadable: {e}") from e


def _read_weights(folder: Path) -> dict[str, torch.Tensor]:
    """model.safetensors, its sharded form, or the older pytorch_model.bin."""
    single, index, legacy = folder / "model.safetensors", folder / "model.safetensors.index.json", folder / "pytorch_model.bin"
    if single.is_file():
        files = [single]
    elif index.is_file():
        try:
            files = [folder / shard for shard in sorted(set(_read_json(index)["weight_map"].values()))]
        except (KeyError, AttributeError, TypeError) as e:
            raise DataError(f"{index} has no valid weight_map") from e
    elif legacy.is_file():
        files = [legacy]
    else:
        raise MissingFileError(f"no model.safetensors or pytorch_model.bin in {folder}")
    state: dict[str, torch.Tensor] = {}
    for file in files:
        try:
            if file.suffix == ".bin":
                state.update(torch.load(file, map_location="cpu", weights_only=True))
            else:
                state.update(load_file(str(file), device="cpu"))
        except Exception as e:  # safetensors and torch.load raise several unrelated types for a bad file
            raise DataError(f"{file} is unreadable: {type(e).__name__}: {e}") from e
    return state


def weight_names(folder: Path) -> set[str]:
    """The tensor names of a model folder's weights, read from headers only where the format allows."""
    single, index, legacy = folder / "model.safetensors", folder / "model.safetensors.index.json", folder / "pytorch_model.bin"
    if single.is_file():
        with safe_open(str(single), "pt") as f:
            return set(f.keys())
    if index.is_file():
        return set(_read_json(index).get("weight_map", {}))
    if legacy.is_file():
        return set(torch.load(legacy, map_location="cpu", weights_only=True, mmap=True))
    return set()


def _rename(state: dict[str, torch.Tensor], expected: set[str]) -> dict[str, torch.Tensor]:
    """Map checkpoint names onto ours: old LayerNorm names, the ``bert.`` prefix, tied heads."""
    has_prefix = any(k.startswith("bert.") for k in expected)
    out = {}
    for key, value in state.items():
        key = key.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")
        if has_prefix and key.split(".", 1)[0] in ("embeddings", "encoder", "pooler"):
            key = "bert." + key  # a bare BertModel checkpoint
        elif not has_prefix and key.startswith("bert."):
            key = key.removeprefix("bert.")  # a model with heads, loaded as a bare BertModel
        out[key] = value
    # Some old checkpoints keep the output bias only under the decoder's name.
    if "cls.predictions.decoder.bias" in out and "cls.predictions.bias" not in out:
        out["cls.predictions.bias"] = out["cls.predictions.decoder.bias"]
    for key in TIED_KEYS:
        out.pop(key, None)
    return out


def load_hf(path: str | os.PathLike, model_cls: type[nn.Module] = BertForPreTraining, **kwargs: Any) -> nn.Module:
    """Build ``model_cls(config, **kwargs)`` from a Hugging Face folder and load its weights.

    The encoder (embeddings and every block) must be complete, else ValueError. Heads the
    folder lacks (a classifier when starting from a pre-training checkpoint, or a pooler)
    stay freshly initialised and are listed in a warning; weights the model has no place
    for (e.g. the pre-training heads when fine-tuning) are dropped. Returned in eval mode,
    as ``from_pretrained`` does.
    """
    folder = Path(path)
    if not folder.is_dir():
        raise MissingFileError(f"model folder {folder} does not exist")
    hf_config = _read_json(folder / "config.json")
    try:
        config = config_from_hf(hf_config)
    except (ValueError, TypeError) as e:
        raise DataError(f"{folder / 'config.json'}: {e}") from e
    if issubclass(model_cls, BertForSequenceClassification) and "num_labels" not in kwargs and "id2label" in hf_config:
        kwargs["num_labels"] = len(hf_config["id2label"])
    model = model_cls(config, **kwargs)

    expected = set(model.state_dict())
    state = _read_weights(folder)
    if config.layer_norm == "pre":
        state = from_pre_ln(state, config.pad_token_id)
    state = _rename(state, expected)
    try:
        result = model.load_state_dict(state, strict=False)
    except RuntimeError as e:  # shape mismatches
        raise DataError(f"weights in {folder} do not fit {model_cls.__name__} built from its config.json: {e}") from e
    missing = [k for k in result.missing_keys if k not in TIED_KEYS]
    backbone = ("bert.embeddings.", "bert.encoder.") if "bert.embeddings.word_embeddings.weight" in expected \
        else ("embeddings.", "encoder.")
    missing_backbone = [k for k in missing if k.startswith(backbone)]
    if missing_backbone:
        raise DataError(
            f"{folder} lacks {len(missing_backbone)} encoder weight(s), e.g. {missing_backbone[:3]}: "
            "not a complete BERT checkpoint for this config"
        )
    if missing:
        log.warning("%s: freshly initialised (not in the checkpoint): %s", folder, ", ".join(missing))
    if result.unexpected_keys:
        log.info("%s: ignored checkpoint weights: %s", folder, ", ".join(result.unexpected_keys))
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    return model.eval()


# --------------------------------------------------------------------- the export format


class BertFolder:
    """BERT's export as the registry uses it: a Hugging Face folder, read back as the pretrained network, the
    encoder of frozen features (``BertModel``) or a task model (``TASK_MODELS``: HF's heads, so that a
    fine-tuned BERT is a Hugging Face model too)."""

    def model_type(self, arch) -> str:
        return MODEL_TYPE

    def model_types(self, arch) -> tuple[str, ...]:
        return MODEL_TYPE, PRE_LN_MODEL_TYPE  # a pre-LayerNorm BERT's export is a RoBERTa-PreLayerNorm folder

    def save(self, arch, network: nn.Module, out_dir: Path, tokenizer_dir: Path) -> Path:
        return save_hf(network, out_dir, tokenizer_dir=tokenizer_dir)

    def read_config(self, arch, folder: Path) -> BertConfig:
        return config_from_hf(_read_json(Path(folder) / "config.json"))

    def load(self, arch, folder: Path) -> nn.Module:
        return load_hf(folder, arch.network)

    def language_model(self, arch, folder: Path) -> nn.Module:
        if not any(n.startswith(("cls.predictions.transform.", "lm_head.dense.")) for n in weight_names(folder)):
            raise DataError(f"{folder}: no language-model head (cls.predictions.*, or a pre-LayerNorm export's "
                            "lm_head.*) in its weights, so no sentence probability: expected a BertForMaskedLM, "
                            "BertForPreTraining or RobertaPreLayerNormForMaskedLM folder")
        return self.load(arch, folder)

    def encoder(self, arch, folder: Path) -> nn.Module:
        return load_hf(folder, BertModel)

    def poolings(self, arch) -> tuple[str, ...]:
        return BertForSequenceClassification.POOLINGS

    def task_model(self, arch, kind: str, folder: Path, num_outputs: int, pretrained: bool,
                   pooling: str | None = None) -> nn.Module:
        """Fine-tuned from the export, or from scratch: the export's network with BERT's own initialisation (the
        pretraining speed-up ``attention_init`` is part of pretraining, not of the network)."""
        model_cls = TASK_MODELS[kind]
        kwargs = {"pooling": pooling} if pooling is not None else {}
        if pretrained:
            return load_hf(folder, model_cls, num_labels=num_outputs, **kwargs)
        return model_cls(replace(self.read_config(arch, folder), attention_init="normal"), num_outputs, **kwargs)


__all__ = ["config_to_hf", "config_from_hf", "save_hf", "load_hf", "to_pre_ln", "from_pre_ln", "TIED_KEYS", "BertFolder"]
