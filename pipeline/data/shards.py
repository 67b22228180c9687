"""The on-disk format of pretraining examples: sharded, memory-mapped arrays, their metadata and reader.

Made by ``pipeline.data.pairs``, written by ``write_shard`` and ``write_meta`` (shards
made on several machines are joined by ``merge_parts``); read by ``PairsDataset`` one example at a time,
so one batch costs O(batch) to load and no shard is ever read whole. A folder
holds:

* ``meta.json`` -- format version, counts, dtype, ids, settings, seed, stats;
* ``shard-NNNNN.tokens.npy`` -- (n_tokens,) uint8/16/32 (the smallest type that
  holds the vocabulary): each example's ``[CLS] ... [SEP]`` back to back;
* ``shard-NNNNN.index.npy`` -- (N, 3) int64: offset, length, position where segment 1 starts;
* ``shard-NNNNN.nsp.npy`` -- (N,) int8: 1 if B is random, 0 if B follows A, -1 packed (no pair).
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Sequence

import numpy as np

from pipeline.errors import DataError
from pipeline.io import atomic_dir, read_versioned
from pipeline.names import IGNORE_INDEX

FORMAT_VERSION = 2
SHARD_FILES = ("tokens", "index", "nsp")  # the arrays of one shard
PART_FILE = "part.json"  # what one machine's share of the shards records for merge_parts


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


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + n)`` for each (s, n), vectorised."""
    ends = np.cumsum(lengths)
    return np.arange(int(ends[-1]) if len(ends) else 0, dtype=np.int64) + np.repeat(starts - (ends - lengths), lengths)


def write_shard(folder: Path, k: int, examples: Sequence, corpus_tokens: np.ndarray, cls_id: int, sep_id: int,
                chunk: int = 4096) -> int:
    """Write one shard's tokens, index and NSP labels; returns its token count.

    ``examples``: ``pipeline.data.pairs.Example``s, each one's spans (offset, length) of ``corpus_tokens`` (the
    flat tokenized corpus, whose dtype the shard keeps) and NSP label.
    """
    n = len(examples)
    counts = np.fromiter((len(ex.segments) for ex in examples), dtype=np.int64, count=n)
    seg = np.fromiter((v for ex in examples for s in ex.segments for v in s), dtype=np.int64,
                      count=2 * int(counts.sum())).reshape(-1, 2)
    seg_out = seg[:, 1] + 1                                   # each segment and its [SEP]
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))     # first segment of each example
    lengths = 1 + np.add.reduceat(seg_out, first) if n else np.zeros(0, np.int64)
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1])) if n else np.zeros(0, np.int64)
    nsp = np.fromiter((ex.is_random_next for ex in examples), dtype=np.int8, count=n)
    # Where segment 1 starts: after "[CLS] A [SEP]" for pairs, nowhere (= length) when packed.
    type1 = np.where(nsp >= 0, 1 + seg_out[first], lengths)
    within = np.cumsum(seg_out) - seg_out
    seg_pos = np.repeat(offsets, counts) + 1 + within - np.repeat(within[first], counts)  # (S,) output start

    stem = shard_stem(folder, k)
    total = int(lengths.sum())
    tokens = np.lib.format.open_memmap(f"{stem}.tokens.npy", mode="w+", dtype=corpus_tokens.dtype, shape=(total,))
    for e0 in range(0, n, chunk):
        e1 = min(n, e0 + chunk)
        s0, s1 = int(first[e0]), int(first[e1]) if e1 < n else len(seg)
        base = int(offsets[e0])
        end = int(offsets[e1]) if e1 < n else total
        buf = np.empty(end - base, dtype=corpus_tokens.dtype)
        src = _ranges(seg[s0:s1, 0], seg[s0:s1, 1])
        buf[_ranges(seg_pos[s0:s1] - base, seg[s0:s1, 1])] = corpus_tokens[src]
        buf[offsets[e0:e1] - base] = cls_id
        buf[seg_pos[s0:s1] - base + seg[s0:s1, 1]] = sep_id
        tokens[base:end] = buf
    tokens.flush()
    del tokens
    np.save(f"{stem}.index.npy", np.stack([offsets, lengths, type1], axis=1).astype(np.int64).reshape(n, 3))
    np.save(f"{stem}.nsp.npy", nsp)
    return total


def write_meta(folder: Path, corpus: dict, shards: list, results: list[dict], settings: dict,
               cls_id: int, sep_id: int) -> dict:
    """Write ``meta.json`` from the per-shard results (in shard order); return the stats it holds.

    ``corpus`` summarises the encoded corpus: n_documents, n_sentences,
    n_input_tokens, token_dtype, vocab_size.
    """
    n = sum(r["n_examples"] for r in results)
    n_tok = sum(r["n_tokens"] for r in results)
    fmt = settings["format"]
    stats = {
        "format": fmt,
        "n_examples": n,
        "n_tokens": n_tok,
        "mean_length": n_tok / n,
        "fraction_full_length": sum(r["n_full_length"] for r in results) / n,
        "n_documents": corpus["n_documents"],
        "n_sentences": corpus["n_sentences"],
        "n_input_tokens": corpus["n_input_tokens"],
        "n_shards": len(shards),
    }
    if fmt == "nsp_pairs":
        stats["fraction_random_next"] = sum(r["n_random_next"] for r in results) / n
        # Examples made under a short target; the target is drawn per document and pass, as in the original.
        stats["fraction_short_target"] = sum(r["n_short_target"] for r in results) / n
    meta = {
        "format_version": FORMAT_VERSION,
        "n_examples": n,
        "n_shards": len(shards),
        "shard_counts": [r["n_examples"] for r in results],
        "shard_documents": [list(d) for d in shards],
        "token_dtype": corpus["token_dtype"],
        "vocab_size": corpus["vocab_size"],
        "max_seq_length": settings["max_seq_length"],
        "cls_id": cls_id,
        "sep_id": sep_id,
        "settings": settings,
        "stats": stats,
    }
    (folder / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return stats


def merge_parts(part_dirs: list[Path], out_dir: str | Path) -> dict:
    """Join the folders that ``make_examples(part=(i, n))`` wrote on ``n`` machines into one ``out_dir``.

    The result is the same bytes as one ``make_examples`` run; each part folder
    is checked (present, same settings, complete), and removed once merged.
    """
    infos = []
    for i, d in enumerate(part_dirs):
        f = Path(d) / PART_FILE
        if not f.is_file():
            raise DataError(f"{f}: not found: part {i} of {len(part_dirs)} has not finished "
                            f"(run make_pairs with runtime.part={i} runtime.parts={len(part_dirs)} first)")
        infos.append(json.loads(f.read_text(encoding="utf-8")))
    first = infos[0]
    n_shards = len(first["shard_documents"])
    for i, info in enumerate(infos):
        if info["part"] != [i, len(part_dirs)] or info["settings"] != first["settings"] or \
                info["shard_documents"] != first["shard_documents"]:
            raise DataError(f"{Path(part_dirs[i]) / PART_FILE}: part {info['part']} with settings "
                            f"{info['settings']} does not belong with part 0's ({first['settings']})")
    results = sorted((r for info in infos for r in info["results"]), key=lambda r: r["shard"])
    if [r["shard"] for r in results] != list(range(n_shards)):
        raise DataError(f"{part_dirs[0]}: the parts hold shards {[r['shard'] for r in results]}, "
                        f"expected 0..{n_shards - 1}")
    with atomic_dir(out_dir) as tmp:
        os.rename(Path(part_dirs[0]) / "corpus", tmp / "corpus")
        for r in results:
            src = shard_stem(Path(part_dirs[r["shard"] % len(part_dirs)]), r["shard"])
            for suffix in SHARD_FILES:
                os.rename(f"{src}.{suffix}.npy", f"{shard_stem(tmp, r['shard'])}.{suffix}.npy")
        stats = write_meta(tmp, first["corpus"], first["shard_documents"], results, first["settings"],
                           first["cls_id"], first["sep_id"])
    for d in part_dirs:
        shutil.rmtree(d, ignore_errors=True)
    return stats


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
                np.load(f"{stem}.{part}.npy", mmap_mode="r") for part in SHARD_FILES
            )
        return self._shards[k]

    def lengths(self) -> np.ndarray:
        """(N,) int64: every example's length, read from the shards' small index files only."""
        return np.concatenate([np.asarray(self._shard(k)[1][:, 1]) for k in range(len(self._shards))]) \
            if len(self) else np.zeros(0, np.int64)

    def token_counts(self, vocab_size: int) -> np.ndarray:
        """(V,) int64: how often each token id occurs in the examples, read shard by shard."""
        counts = np.zeros(vocab_size, np.int64)
        for k in range(len(self._shards)):
            counts += np.bincount(np.asarray(self._shard(k)[0]), minlength=vocab_size)[:vocab_size]
        return counts

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
            "next_sentence_label": label if label >= 0 else IGNORE_INDEX,  # packed: no pair
            "index": i,
        }

    def __getstate__(self) -> dict:
        # Pickling a memory map would copy the whole shard; reopen instead.
        state = self.__dict__.copy()
        state["_shards"] = [None] * len(self._shards)
        return state
