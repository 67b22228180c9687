"""The fixed evaluation set and the layout probe: held-out text with scored positions drawn once, the same for
every variant.

Each row's own validation accuracy is measured on its own examples and masking
(a 40% row predicts more and sees less; a row of 16-piece examples is asked
about 16-piece sequences), so it does not compare across rows. This set does:
sentence pairs cut from the held-out split by BERT's original recipe at
``max_seq_length`` positions (the fine-tuning length, whatever the pretraining
examples' length; ``short_seq_prob`` of the documents at a shorter target, half
of the B segments the actual next ones), ``mlm_probability`` of each
sequence's text pieces chosen once, from ``seed``, and corrupted once by the
80/10/10 recipe (``mask_token_prob`` / ``random_token_prob`` / ``keep_prob``).
Every pretraining run -- whatever its examples, mask ratio, masking procedure,
NSP or depth -- is scored on exactly these positions and this corruption, and
so are the count-based floors (``pipeline.data.ngram``). Beside it the layout
probe (``pipeline.data.layout``) asks the same question of single segments of
each length and of natural sentence pairs, one hidden piece a row.

What each kind of row sees at a scored position:

* a masked LM reads the corrupted sequence: the position holds ``[MASK]``
  (kind ``masked``, the headline), a random piece (``replaced``) or the piece
  itself (``unchanged``: the answer is visible, so it is reported apart);
* a left-to-right LM, ELMo and word2vec read the clean sequence and never see
  the scored piece, only its context (the left side for a left-to-right LM).

A row's positions are chosen per sequence, each with its own seed, so the set
does not depend on how sequences are batched. Stored as ``eval_set.npz`` and
``layout.npz`` (right-padded (N, T) arrays) beside ``meta.json``.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from pipeline.data.encoded import EncodedCorpus
from pipeline.data.layout import Probe
from pipeline.data.masking import MaskingConfig, mask_examples
from pipeline.data.ngram import FLOORS, NgramTables
from pipeline.data.pairs import write_examples
from pipeline.data.scored import FORMAT_VERSION, KINDS, NOT_SCORED
from pipeline.data.shards import PairsDataset
from pipeline.errors import ConfigError, DataError
from pipeline.io import atomic_dir
from pipeline.names import IGNORE_INDEX
from pipeline.settings import EvalSetSettings, PairsSettings


@dataclass(frozen=True)
class EvalSetConfig:
    """The fixed set's settings (``eval_set``, checked at start-up by ``pipeline.config.validate``) and the seed."""
    max_seq_length: int = 128       # BERT's pair recipe at this length, on the held-out split
    short_seq_prob: float = 0.1
    mlm_probability: float = 0.15   # share of each sequence's text pieces scored
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    keep_prob: float = 0.1
    max_sequences: int | None = 600    # the first N held-out sequences; None: all
    seed: int = 0

    @classmethod
    def of(cls, settings: EvalSetSettings, seed: int) -> EvalSetConfig:
        """The fixed set of the ``eval_set`` settings; its seed is the pipeline's ``seed`` (drawn once per seed)."""
        return cls(**{k: v for k, v in asdict(settings).items() if k != "layout"}, seed=int(seed))

    def pairs(self) -> PairsSettings:
        """The held-out sequences' recipe: BERT's pairs at ``max_seq_length``, one pass."""
        return PairsSettings(format="nsp_pairs", max_seq_length=self.max_seq_length,
                             short_seq_prob=self.short_seq_prob, dupe_factor=1, shard_tokens=1 << 40)

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


def percentiles(values: np.ndarray) -> dict[str, float]:
    """The 10th, 50th and 90th percentiles (``p10``, ``p50``, ``p90``)."""
    return {f"p{q}": float(np.percentile(values, q)) for q in (10, 50, 90)}


def sequence_stats(arrays: dict[str, np.ndarray], sep_id: int) -> dict:
    """What the set's sequences look like (the layout a model is scored in): lengths, where the first ``[SEP]``
    stands, and the share of B segments that follow their A."""
    labels = arrays["next_sentence_label"]
    return {"sequences": int(len(arrays["lengths"])), "tokens": int(arrays["lengths"].sum()),
            "length": percentiles(arrays["lengths"]), "first_sep": percentiles((arrays["input_ids"] == sep_id).argmax(1)),
            "actual_next": round(float((labels == 0).mean()), 6)}


def write(out: str | Path, arrays: dict[str, np.ndarray], probe: Probe, config: EvalSetConfig, layout: dict,
          floors: dict[str, dict[str, float]], probe_floors: dict[str, dict[str, float]], counted: int,
          sep_id: int) -> dict:
    """``out/eval_set.npz``, ``out/layout.npz`` and ``out/meta.json`` (settings, what the sequences look like, the
    probe's cells, the floors on both), atomically; returns the meta."""
    kinds = arrays["kind"]
    meta = {"format_version": FORMAT_VERSION, "settings": asdict(config), "source": "paths.pairs/valid/corpus",
            "stats": {**sequence_stats(arrays, sep_id),
                      "scored": {k: int((kinds == i).sum()) for i, k in enumerate(KINDS)}},
            "floors": floors, "floor_tokens_counted": counted,
            "layout": {"settings": layout, "cells": probe.describe(), "floors": probe_floors}}
    with atomic_dir(out) as tmp:
        np.savez(tmp / "eval_set.npz", **arrays)
        np.savez(tmp / "layout.npz", **probe.arrays)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return meta


def floor_hits(tables: NgramTables, arrays: dict[str, np.ndarray], mask_id: int) -> dict[str, np.ndarray]:
    """Each count-based floor's hits (M,) at the scored positions in row-major order, reading the context its view
    gives: the corrupted sequence (a masked neighbour is masked for the table too) or the clean one."""
    rows, cols = np.nonzero(arrays["kind"] != NOT_SCORED)
    targets = arrays["input_ids"][rows, cols]
    out = {}
    for name, floor in FLOORS.items():
        context = arrays["corrupted"] if floor.view == "masked" else arrays["input_ids"]
        out[name] = tables.predict(floor.predictor, context, rows, cols, usable=context != mask_id) == targets
    return out


def score_floors(tables: NgramTables, arrays: dict[str, np.ndarray], mask_id: int) -> dict[str, dict[str, float]]:
    """Each count-based floor's accuracy at the set's scored positions, per kind and overall."""
    kind = arrays["kind"]
    kinds = kind[kind != NOT_SCORED]
    return {name: {**{k: round(float(hit[kinds == i].mean()), 6) for i, k in enumerate(KINDS)},
                   "all": round(float(hit.mean()), 6)}
            for name, hit in floor_hits(tables, arrays, mask_id).items()}


def score_probe_floors(tables: NgramTables, probe: Probe, mask_id: int) -> dict[str, dict[str, float]]:
    """Each count-based floor's accuracy in each cell of the layout probe (one hidden piece a row)."""
    return {name: probe.accuracy(hit) for name, hit in floor_hits(tables, probe.arrays, mask_id).items()}


def held_out(corpus: EncodedCorpus, config: EvalSetConfig, cls_id: int, sep_id: int, folder: Path) -> PairsDataset:
    """The held-out split cut into sequences by the fixed set's recipe (``config.pairs``), written to ``folder``."""
    write_examples(corpus, folder, config.pairs(), seed=config.seed, cls_id=cls_id, sep_id=sep_id, progress=False)
    return PairsDataset(folder)
