"""The on-disk format of pretraining examples: sharded, memory-mapped arrays, and their reader.

Written by ``pipeline.pairs``; read by ``PairsDataset`` one example at a time,
so one batch costs O(batch) to load and no shard is ever read whole. A folder
holds:

* ``meta.json`` -- format version, counts, dtype, ids, settings, seed, stats;
* ``shard-NNNNN.tokens.npy`` -- (n_tokens,) uint8/16/32 (the smallest type that
  holds the vocabulary): each example's ``[CLS] ... [SEP]`` back to back;
* ``shard-NNNNN.index.npy`` -- (N, 3) int64: offset, length, position where segment 1 starts;
* ``shard-NNNNN.nsp.npy`` -- (N,) int8: 1 if B is random, 0 if B follows A, -1 packed (no pair).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.errors import DataError
from pipeline.io import read_versioned

FORMAT_VERSION = 2
FORMATS = ("nsp_pairs", "doc_sentences", "full_sentences")
NO_NSP_LABEL = -100  # returned for packed examples: cross-entropy's ignore_index


def token_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer type that holds every id of the vocabulary."""
    if vocab_size <= 2**8:
        return np.dtype(np.uint8)
    if vocab_size <= 2**16:
        return np.dtype(np.uint16)
    if vocab_size <= 2**32:
        return np.dtype(np.uint32)
    raise DataError(f"vocab_size={vocab_size}: at most 2**32 token ids can be stored")



def shard_stem(folder: Path, k: int) -> Path:
    return Path(folder) / f"shard-{k:05d}"


class PairsDataset:
    """Examples written by ``write_examples``, read one at a time from memory maps.

    Each item is ``{"input_ids": (T,) int64, "token_type_ids": (T,) int64,
    "next_sentence_label": int, "index": int}`` with ``T <= max_seq_length``
    (unpadded); ``index`` is the example's position, for static masking. Shards
    are opened lazily in the process that reads them, so the dataset pickles
    cheaply into DataLoader workers; one item reads only its own bytes.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.meta = read_versioned(self.path / "meta.json", "format_version", FORMAT_VERSION,
                                   f"has make_pairs written {self.path}?", "rerun make_pairs")
        # ends[k] = number of examples in shards 0..k
        self._ends = np.cumsum(np.asarray(self.meta["shard_counts"], dtype=np.int64))
        self._shards: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = [None] * self.meta["n_shards"]

    @property
    def format(self) -> str:
        return self.meta["settings"]["format"]

    def __len__(self) -> int:
        return int(self.meta["n_examples"])

    def _shard(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._shards[k] is None:
            stem = shard_stem(self.path, k)
            self._shards[k] = tuple(
                np.load(f"{stem}.{part}.npy", mmap_mode="r") for part in ("tokens", "index", "nsp")
            )
        return self._shards[k]

    def lengths(self) -> np.ndarray:
        """(N,) int64: every example's length, read from the shards' small index files only."""
        return np.concatenate([np.asarray(self._shard(k)[1][:, 1]) for k in range(len(self._shards))]) \
            if len(self) else np.zeros(0, np.int64)

    def __getitem__(self, i: int) -> dict:
        n = len(self)
        i = int(i)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"index {i} out of range for {n} examples")
        k = int(np.searchsorted(self._ends, i, side="right"))
        row = i - (int(self._ends[k - 1]) if k else 0)
        tokens, index, nsp = self._shard(k)
        start, length, type1 = (int(x) for x in index[row])
        input_ids = np.asarray(tokens[start:start + length], dtype=np.int64)  # (T,)
        token_type_ids = np.zeros(length, dtype=np.int64)  # (T,)
        token_type_ids[type1:] = 1
        label = int(nsp[row])
        return {
            "input_ids": input_ids,
            "token_type_ids": token_type_ids,
            "next_sentence_label": label if label >= 0 else NO_NSP_LABEL,
            "index": i,
        }

    def __getstate__(self) -> dict:
        # Pickling a memory map would copy the whole shard; reopen instead.
        state = self.__dict__.copy()
        state["_shards"] = [None] * len(self._shards)
        return state
