"""The fixed evaluation set: held-out sequences with scored positions drawn once, the same for every variant.

Each row's own validation accuracy is measured on its own masking (a 40% row
predicts more and sees less), so it does not compare across rows. This set
does: the valid split of the baseline's examples, ``mlm_probability`` of each
sequence's text pieces chosen once, from ``seed``, and corrupted once by the
80/10/10 recipe (``mask_token_prob`` / ``random_token_prob`` / ``keep_prob``).
Every pretraining run -- whatever its mask ratio, masking procedure, NSP or
depth -- is scored on exactly these positions and this corruption, and so are
the count-based floors (``pipeline.data.ngram``).

What each kind of row sees at a scored position:

* a masked LM reads the corrupted sequence: the position holds ``[MASK]``
  (kind ``masked``, the headline), a random piece (``replaced``) or the piece
  itself (``unchanged``: the answer is visible, so it is reported apart);
* a left-to-right LM, ELMo and word2vec read the clean sequence and never see
  the scored piece, only its context (the left side for a left-to-right LM).

A row's positions are chosen per sequence, each with its own seed, so the set
does not depend on how sequences are batched. Stored as one ``eval_set.npz``
(right-padded (N, T) arrays) beside ``meta.json``.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import torch
from omegaconf import DictConfig

from pipeline.data.masking import MaskingConfig, mask_examples
from pipeline.data.ngram import FLOORS, NgramTables
from pipeline.data.shards import PairsDataset
from pipeline.data.tokenizer import load_tokenizer, special_ids
from pipeline.errors import ConfigError, DataError
from pipeline.io import atomic_dir, read_versioned
from pipeline.model.config import IGNORE_INDEX
from pipeline.settings import EvalSetSettings, RuntimeSettings

FORMAT_VERSION = 1
KINDS = ("masked", "replaced", "unchanged")  # what the masked LM sees at a scored position (kind 0, 1, 2)
NOT_SCORED = -1


@dataclass(frozen=True)
class EvalSetConfig:
    """The ``eval_set`` settings (checked at start-up by ``pipeline.config.validate``) and the seed."""
    mlm_probability: float = 0.15   # share of each sequence's text pieces scored
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    keep_prob: float = 0.1
    max_sequences: int | None = None   # the first N valid examples; None: all
    seed: int = 0

    def masking(self) -> MaskingConfig:
        return MaskingConfig(mlm_probability=self.mlm_probability, mask_token_prob=self.mask_token_prob,
                             random_token_prob=self.random_token_prob, keep_prob=self.keep_prob,
                             max_predictions_per_seq=None)


def sequence_seed(seed: int, index: int) -> int:
    """The seed of sequence ``index``'s positions and corruption (stable across processes)."""
    return ((seed * 1_000_003 + 11) * 3_000_017 + index) % (2**63 - 1)


def build(valid: PairsDataset, config: EvalSetConfig, *, mask_id: int, cls_id: int, sep_id: int,
          vocab_size: int) -> dict[str, np.ndarray]:
    """The set's arrays from the valid examples: clean and corrupted ids, segments, lengths, kinds, NSP labels."""
    n = len(valid) if config.max_sequences is None else min(len(valid), config.max_sequences)
    if n == 0:
        raise DataError(f"{valid.path}: no valid examples to build the fixed evaluation set from "
                        "(the corpus's valid split is empty)")
    items = [valid[i] for i in range(n)]
    T = max(len(it["input_ids"]) for it in items)
    ids = np.zeros((n, T), np.int64)
    types = np.zeros((n, T), np.int8)
    lengths = np.array([len(it["input_ids"]) for it in items], np.int32)
    for i, it in enumerate(items):
        ids[i, :lengths[i]] = it["input_ids"]
        types[i, :lengths[i]] = it["token_type_ids"]
    tensor = torch.from_numpy(ids)
    special = (tensor == 0) | (tensor == cls_id) | (tensor == sep_id)
    corrupted, labels = mask_examples(tensor, special, [sequence_seed(config.seed, i) for i in range(n)],
                                      config.masking(), mask_id=mask_id, vocab_size=vocab_size)
    corrupted, scored = corrupted.numpy(), labels.numpy() != IGNORE_INDEX
    kind = np.full((n, T), NOT_SCORED, np.int8)
    kind[scored & (corrupted == mask_id)] = 0
    kind[scored & (corrupted != mask_id) & (corrupted != ids)] = 1
    kind[scored & (corrupted == ids)] = 2
    if not (kind == 0).any():
        raise ConfigError(f"eval_set.mlm_probability={config.mlm_probability} leaves no masked position in the "
                          f"{n} valid sequences of {valid.path}: expected a larger share or more sequences")
    nsp = np.array([it["next_sentence_label"] for it in items], np.int64)
    dtype = np.int32 if vocab_size < 2**31 else np.int64
    return {"input_ids": ids.astype(dtype), "corrupted": corrupted.astype(dtype), "token_type_ids": types,
            "lengths": lengths, "kind": kind, "next_sentence_label": nsp}


class EvalSet:
    """A written fixed evaluation set, read whole (a few MB): ``batches`` gives torch tensors."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.meta = read_versioned(self.path / "meta.json", "format_version", FORMAT_VERSION,
                                   f"has the eval_set stage written {self.path}?", "rerun the eval_set stage")
        with np.load(self.path / "eval_set.npz") as f:
            self.arrays = {k: f[k] for k in f.files}

    def __len__(self) -> int:
        return len(self.arrays["lengths"])

    @property
    def floors(self) -> dict[str, dict[str, float]]:
        """Each count-based floor's accuracy on the set (``pipeline.data.ngram.FLOORS``), per kind and overall."""
        return self.meta["floors"]

    def batches(self, batch_size: int) -> Iterator[dict[str, torch.Tensor]]:
        """(B, T) tensors, padded to the batch's longest: ``input_ids`` (clean), ``corrupted``, ``token_type_ids``,
        ``attention_mask``, ``kind`` (-1 where not scored)."""
        a = self.arrays
        for start in range(0, len(self), batch_size):
            sl = slice(start, start + batch_size)
            T = int(a["lengths"][sl].max())
            lengths = torch.from_numpy(a["lengths"][sl].astype(np.int64))
            yield {"input_ids": torch.from_numpy(a["input_ids"][sl, :T].astype(np.int64)),
                   "corrupted": torch.from_numpy(a["corrupted"][sl, :T].astype(np.int64)),
                   "token_type_ids": torch.from_numpy(a["token_type_ids"][sl, :T].astype(np.int64)),
                   "attention_mask": (torch.arange(T)[None, :] < lengths[:, None]).long(),
                   "kind": torch.from_numpy(a["kind"][sl, :T].astype(np.int64))}


def write(out: str | Path, arrays: dict[str, np.ndarray], config: EvalSetConfig, source: Path,
          floors: dict[str, dict[str, float]], counted: int) -> dict:
    """``out/eval_set.npz`` and ``out/meta.json`` (settings, size, the floors), atomically; returns the meta. The
    source is named by its split folder only, so the same inputs give the same bytes wherever they lie."""
    kinds = arrays["kind"]
    meta = {"format_version": FORMAT_VERSION, "settings": asdict(config),
            "source": f"paths.pairs/{Path(source).name}",
            "stats": {"sequences": int(len(arrays["lengths"])), "tokens": int(arrays["lengths"].sum()),
                      "scored": {k: int((kinds == i).sum()) for i, k in enumerate(KINDS)}},
            "floors": floors, "floor_tokens_counted": counted}
    with atomic_dir(out) as tmp:
        np.savez(tmp / "eval_set.npz", **arrays)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return meta


def score_floors(tables: NgramTables, arrays: dict[str, np.ndarray], mask_id: int) -> dict[str, dict[str, float]]:
    """Each count-based floor's accuracy at the set's scored positions, per kind and overall, reading the context
    its view gives: the corrupted sequence (a masked neighbour is masked for the table too) or the clean one."""
    kind = arrays["kind"]
    rows, cols = np.nonzero(kind != NOT_SCORED)
    targets, kinds = arrays["input_ids"][rows, cols], kind[rows, cols]
    out = {}
    for name, floor in FLOORS.items():
        context = arrays["corrupted"] if floor.view == "masked" else arrays["input_ids"]
        hit = tables.predict(floor.predictor, context, rows, cols, usable=context != mask_id) == targets
        out[name] = {**{k: round(float(hit[kinds == i].mean()), 6) for i, k in enumerate(KINDS)},
                     "all": round(float(hit.mean()), 6)}
    return out


def settings(cfg: DictConfig) -> EvalSetConfig:
    """The ``eval_set`` settings; the seed is the pipeline's ``seed`` (the set is drawn once per seed)."""
    return EvalSetConfig(**asdict(EvalSetSettings.read(cfg.eval_set)), seed=int(cfg.seed))


def run(cfg: DictConfig) -> dict:
    """The stage: the baseline's valid examples -> ``paths.eval_set``: the set, and in its ``meta.json`` its size
    and the count-based floors scored on it (counted on the baseline's train examples)."""
    config = settings(cfg)
    tok = load_tokenizer(cfg.paths.tokenizer)
    ids = special_ids(tok)
    pairs = Path(cfg.paths.pairs)
    arrays = build(PairsDataset(pairs / "valid"), config, mask_id=ids["mask"], cls_id=ids["cls"],
                   sep_id=ids["sep"], vocab_size=tok.get_vocab_size())
    tables = NgramTables.count(PairsDataset(pairs / "train"), tok.get_vocab_size(),
                               special=[ids[k] for k in ("pad", "cls", "sep", "mask")],
                               progress=RuntimeSettings.read(cfg.runtime).progress)
    return write(cfg.paths.eval_set, arrays, config, pairs / "valid", score_floors(tables, arrays, ids["mask"]),
                 tables.n_counted)
