"""The eval_set stage's output as every pretraining run reads it: the fixed evaluation set and the layout probe,
rows with their scored positions (``pipeline.data.eval_set`` builds them; this module only reads them, so the
stages that score a model do not depend on how the rows are cut)."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from pipeline.data.layout import Cell, Probe
from pipeline.io import read_versioned

FORMAT_VERSION = 2  # 2: the held-out text cut by the set's own recipe, and the layout probe
KINDS = ("masked", "replaced", "unchanged")  # what the masked LM sees at a scored position (kind 0, 1, 2)
NOT_SCORED = -1


def row_batches(arrays: dict[str, np.ndarray], batch_size: int) -> Iterator[dict[str, torch.Tensor]]:
    """Rows with scored positions (the fixed set's, or the layout probe's) in stored order, as (B, T) tensors
    padded to the batch's longest: ``input_ids`` (clean), ``corrupted``, ``token_type_ids``, ``attention_mask``,
    ``kind`` (-1 where not scored), and the fixed set's ``next_sentence_label`` (B, 0 = B follows A)."""
    for start in range(0, len(arrays["lengths"]), batch_size):
        sl = slice(start, start + batch_size)
        T = int(arrays["lengths"][sl].max())
        lengths = torch.from_numpy(arrays["lengths"][sl].astype(np.int64))
        yield {"input_ids": torch.from_numpy(arrays["input_ids"][sl, :T].astype(np.int64)),
               "corrupted": torch.from_numpy(arrays["corrupted"][sl, :T].astype(np.int64)),
               "token_type_ids": torch.from_numpy(arrays["token_type_ids"][sl, :T].astype(np.int64)),
               "attention_mask": (torch.arange(T)[None, :] < lengths[:, None]).long(),
               "kind": torch.from_numpy(arrays["kind"][sl, :T].astype(np.int64)),
               **({"next_sentence_label": torch.from_numpy(arrays["next_sentence_label"][sl].astype(np.int64))}
                  if "next_sentence_label" in arrays else {})}


class EvalSet:
    """A written fixed evaluation set (``arrays``, ``batches``) and its layout probe (``probe``), read whole."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.meta = read_versioned(self.path / "meta.json", "format_version", FORMAT_VERSION,
                                   f"has the eval_set stage written {self.path}?", "rerun the eval_set stage")
        with np.load(self.path / "eval_set.npz") as f:
            self.arrays = {k: f[k] for k in f.files}
        with np.load(self.path / "layout.npz") as f:
            cells = [Cell(c["layout"], c["length"], c["where"]) for c in self.meta["layout"]["cells"]]
            self.probe = Probe({k: f[k] for k in f.files}, cells)

    def __len__(self) -> int:
        return len(self.arrays["lengths"])

    def batches(self, batch_size: int) -> Iterator[dict[str, torch.Tensor]]:
        """The fixed set's rows (``row_batches``)."""
        return row_batches(self.arrays, batch_size)

    @property
    def floors(self) -> dict[str, dict[str, float]]:
        """Each count-based floor's accuracy on the set (``pipeline.data.ngram.FLOORS``), per kind and overall."""
        return self.meta["floors"]
