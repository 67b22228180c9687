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

from pipeline.data.shards import PairsDataset


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


class LengthGroupedBatches(torch.utils.data.Sampler):
    """Batches of examples of similar length, so little of each batch is padding.

    Per epoch: shuffle (seeded by seed and epoch), keep this process's share
    (every ``world``-th example from ``rank``), cut it into pools of ``pool``
    batches, sort each pool by length, cut it into batches and shuffle the
    batches. Every example of the share is used at most once an epoch; the last
    incomplete batch is dropped (with ``drop_last`` false, kept: every example every epoch, as fine-tuning
    wants).
    """

    def __init__(self, lengths: np.ndarray, batch_size: int, seed: int, rank: int = 0, world: int = 1,
                 pool: int = 50, drop_last: bool = True):
        self.lengths, self.batch_size, self.seed = np.asarray(lengths), batch_size, seed
        self.rank, self.world, self.pool, self.epoch = rank, world, pool, 0
        self.drop_last = drop_last

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        n = len(range(self.rank, len(self.lengths), self.world))
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def __iter__(self):
        # Each pass is the next epoch: Lightning calls ``set_epoch`` on a loader's sampler, not on its batch
        # sampler, so without this every epoch would repeat the first one's batches.
        epoch, self.epoch = self.epoch, self.epoch + 1
        g = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
        share = torch.randperm(len(self.lengths), generator=g).numpy()[self.rank::self.world]
        if self.drop_last:
            share = share[: len(self) * self.batch_size]
        size = self.pool * self.batch_size
        batches = []
        for start in range(0, len(share), size):
            chunk = share[start:start + size]
            chunk = chunk[np.argsort(self.lengths[chunk], kind="stable")]
            batches += [chunk[i:i + self.batch_size].tolist() for i in range(0, len(chunk), self.batch_size)]
        for i in torch.randperm(len(batches), generator=g).tolist():
            yield batches[i]


class PairsDataModule(L.LightningDataModule):
    """Train/valid pairs written by the make_pairs stage (``<path>/train``, ``<path>/valid``).

    ``length_grouped``: training batches of similar length (``LengthGroupedBatches``),
    split over processes here rather than by Lightning's distributed sampler.
    """

    def __init__(self, path: str | Path, batch_size: int, seed: int, num_workers: int = 0,
                 length_grouped: bool = False):
        super().__init__()
        self.path = Path(path)
        self.batch_size = batch_size
        self.seed = seed
        self.num_workers = num_workers
        self.length_grouped = length_grouped
        self.train_set = PairsDataset(self.path / "train")
        self.valid_set = PairsDataset(self.path / "valid")

    def train_dataloader(self) -> StatefulDataLoader:
        if self.length_grouped:
            rank, world = (self.trainer.global_rank, self.trainer.world_size) if self._trainer_attached() else (0, 1)
            batches = LengthGroupedBatches(self.train_set.lengths(), self.batch_size, self.seed, rank, world)
            return StatefulDataLoader(self.train_set, batch_sampler=batches, collate_fn=pad_collate,
                                      num_workers=self.num_workers, persistent_workers=self.num_workers > 0)
        # An explicit generator: the order of examples depends on the seed alone. The
        # loader's position goes into checkpoints, so a resumed run continues the same order.
        g = torch.Generator().manual_seed(self.seed)
        return StatefulDataLoader(self.train_set, batch_size=self.batch_size, shuffle=True, drop_last=True,
                                  generator=g, collate_fn=pad_collate, num_workers=self.num_workers,
                                  persistent_workers=self.num_workers > 0)

    def _trainer_attached(self) -> bool:
        return getattr(self, "trainer", None) is not None

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.valid_set, batch_size=self.batch_size, shuffle=False, collate_fn=pad_collate,
                          num_workers=self.num_workers, persistent_workers=self.num_workers > 0)
