"""Batches for pretraining: memory-mapped pairs, padded to the longest in the batch."""
from __future__ import annotations

import warnings
from pathlib import Path

import lightning.pytorch as L
import numpy as np
import torch
from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

# torchdata 0.11 calls a torch API that torch 2.13 deprecates; nothing for users to act on.
warnings.filterwarnings("ignore", message="'set_vital' is deprecated")

from pipeline.shards import PairsDataset


def pad_collate(items: list[dict], pad_id: int = 0) -> dict[str, torch.Tensor]:
    """Stack examples into (B, T) tensors, T = the longest example (dynamic padding).

    ``input_ids`` and ``token_type_ids`` are padded and an ``attention_mask`` is
    added; every other key holds one number per example and becomes a (B,) tensor.
    """
    T = max(len(it["input_ids"]) for it in items)
    B = len(items)
    input_ids = np.full((B, T), pad_id, dtype=np.int64)
    token_type_ids = np.zeros((B, T), dtype=np.int64)
    attention_mask = np.zeros((B, T), dtype=np.int64)
    for i, it in enumerate(items):
        n = len(it["input_ids"])
        input_ids[i, :n] = it["input_ids"]
        token_type_ids[i, :n] = it["token_type_ids"]
        attention_mask[i, :n] = 1
    batch = {
        "input_ids": torch.from_numpy(input_ids),
        "token_type_ids": torch.from_numpy(token_type_ids),
        "attention_mask": torch.from_numpy(attention_mask),
    }
    for key in items[0].keys() - batch.keys():
        batch[key] = torch.tensor([it[key] for it in items])
    return batch


class PairsDataModule(L.LightningDataModule):
    """Train/valid pairs written by the make_pairs stage (``<path>/train``, ``<path>/valid``)."""

    def __init__(self, path: str | Path, batch_size: int, seed: int, num_workers: int = 0):
        super().__init__()
        self.path = Path(path)
        self.batch_size = batch_size
        self.seed = seed
        self.num_workers = num_workers
        self.train_set = PairsDataset(self.path / "train")
        self.valid_set = PairsDataset(self.path / "valid")

    def train_dataloader(self) -> StatefulDataLoader:
        # An explicit generator: the order of examples depends on the seed alone. The
        # loader's position goes into checkpoints, so a resumed run continues the same order.
        g = torch.Generator().manual_seed(self.seed)
        return StatefulDataLoader(self.train_set, batch_size=self.batch_size, shuffle=True, drop_last=True,
                                  generator=g, collate_fn=pad_collate, num_workers=self.num_workers,
                                  persistent_workers=self.num_workers > 0)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.valid_set, batch_size=self.batch_size, shuffle=False, collate_fn=pad_collate,
                          num_workers=self.num_workers, persistent_workers=self.num_workers > 0)
