"""Sentence-pair pretraining examples with the semantics of BERT's original data script.

google-research/bert ``create_pretraining_data.py`` turns documents (lists of
sentences) into ``[CLS] A [SEP] B [SEP]`` examples for masked LM + next-sentence
prediction. This module follows its recipe step by step:

* per pass (``dupe_factor`` passes) and per document, a target length is drawn
  once: ``max_seq_length - 3``, or with probability ``short_seq_prob`` a random
  ``randint(2, max_num_tokens)``. As in the original, the draw is made per
  *document*, not per example, so a document that drew a short target yields
  only short examples (and more of them).
* sentences are gathered until the chunk reaches the target (or the document
  ends); a random prefix of the chunk becomes A;
* B is the rest of the chunk, or (50%, and always for a one-sentence chunk) text
  from a random *other* document, in which case the unused sentences of the chunk
  are put back so the next chunk starts with them;
* the pair is trimmed to ``max_seq_length - 3`` tokens, one token at a time from
  the longer side, front or back at random;
* the finished examples are shuffled.

Two deliberate differences: documents are visited in the given order (the
original shuffles them first, which changes which draws meet which document but
not the distribution), and the draw of the random document is retried until it
differs from the current one (the original gives up after 10 tries).

Masking is not part of this module.

NSP label convention is Hugging Face's: 0 = B follows A, 1 = B is random.

Storage is a folder of memory-mapped shards (see ``write_pairs``) read by
``PairsDataset`` one example at a time.
"""
from __future__ import annotations

import json
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from pipeline.errors import DataError

FORMAT_VERSION = 1

Documents = Sequence[Sequence[Sequence[int]]]


@dataclass
class Pair:
    """One example before storage: the two segments without special tokens."""

    tokens_a: list[int]
    tokens_b: list[int]
    is_random_next: bool


# --------------------------------------------------------------------------- #
# Generation
# --------------------------------------------------------------------------- #
def _clean_documents(documents: Documents) -> list[list[Sequence[int]]]:
    """Drop empty sentences, then empty documents; refuse inputs NSP cannot use."""
    docs = [[s for s in doc if len(s) > 0] for doc in documents]
    docs = [d for d in docs if d]
    if not docs:
        raise DataError(
            f"no training pairs could be made: every document is empty "
            f"({len(documents)} documents given, none with a non-empty sentence)"
        )
    if len(docs) < 2:
        raise DataError(
            "at least two non-empty documents are needed for next-sentence prediction "
            "(a random B must come from a different document); got 1"
        )
    return docs


def _check_settings(max_seq_length: int, short_seq_prob: float, dupe_factor: int) -> None:
    if not (isinstance(max_seq_length, int) and max_seq_length >= 5):
        raise DataError(
            f"max_seq_length={max_seq_length!r}: must be an integer >= 5 "
            "([CLS], two [SEP] and at least one token of A and of B)"
        )
    if not 0.0 <= short_seq_prob <= 1.0:
        raise DataError(f"short_seq_prob={short_seq_prob!r}: must be a probability in [0, 1]")
    if not (isinstance(dupe_factor, int) and dupe_factor >= 1):
        raise DataError(f"dupe_factor={dupe_factor!r}: must be an integer >= 1")


def _truncate_pair(tokens_a: list[int], tokens_b: list[int], max_num_tokens: int, rng: random.Random) -> None:
    """Trim the longer segment (B on a tie) one token at a time, front or back at random."""
    while len(tokens_a) + len(tokens_b) > max_num_tokens:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        # Trimming both ends keeps the model from always seeing sentence edges.
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def _pairs_from_document(
    docs: list[list[Sequence[int]]],
    doc_index: int,
    max_num_tokens: int,
    short_seq_prob: float,
    rng: random.Random,
) -> tuple[list[Pair], bool]:
    """All pairs of one pass over ``docs[doc_index]``, and whether its target was short."""
    document = docs[doc_index]
    # Usually fill the whole sequence (padding wastes compute); sometimes aim
    # shorter so pretraining also sees lengths like those of fine-tuning.
    target = max_num_tokens
    short = rng.random() < short_seq_prob
    if short:
        target = rng.randint(2, max_num_tokens)

    pairs: list[Pair] = []
    chunk: list[Sequence[int]] = []
    chunk_len = 0
    i = 0
    while i < len(document):
        chunk.append(document[i])
        chunk_len += len(document[i])
        if i == len(document) - 1 or chunk_len >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            tokens_a = [t for sent in chunk[:a_end] for t in sent]

            if len(chunk) == 1 or rng.random() < 0.5:
                is_random_next = True
                target_b = target - len(tokens_a)
                other = rng.randint(0, len(docs) - 1)
                while other == doc_index:
                    other = rng.randint(0, len(docs) - 1)
                random_doc = docs[other]
                tokens_b: list[int] = []
                for sent in random_doc[rng.randint(0, len(random_doc) - 1):]:
                    tokens_b.extend(sent)
                    if len(tokens_b) >= target_b:
                        break
                # Put the unused sentences back: the next chunk starts with them.
                i -= len(chunk) - a_end
            else:
                is_random_next = False
                tokens_b = [t for sent in chunk[a_end:] for t in sent]

            _truncate_pair(tokens_a, tokens_b, max_num_tokens, rng)
            pairs.append(Pair(tokens_a, tokens_b, is_random_next))
            chunk = []
            chunk_len = 0
        i += 1
    return pairs, short


def _generate(
    documents: Documents,
    *,
    max_seq_length: int,
    short_seq_prob: float,
    dupe_factor: int,
    rng: random.Random,
    progress: bool,
) -> tuple[list[Pair], dict]:
    """``create_pairs`` plus the counts ``write_pairs`` reports."""
    _check_settings(max_seq_length, short_seq_prob, dupe_factor)
    docs = _clean_documents(documents)
    max_num_tokens = max_seq_length - 3

    pairs: list[Pair] = []
    n_short_examples = 0
    n_short_docs = 0
    with tqdm(total=dupe_factor * len(docs), desc="pairs", unit="doc", disable=not progress) as bar:
        for _ in range(dupe_factor):
            for doc_index in range(len(docs)):
                doc_pairs, short = _pairs_from_document(docs, doc_index, max_num_tokens, short_seq_prob, rng)
                pairs.extend(doc_pairs)
                n_short_docs += short
                n_short_examples += len(doc_pairs) if short else 0
                bar.update(1)
    rng.shuffle(pairs)

    counts = {
        "n_documents": len(docs),
        "n_sentences": sum(len(d) for d in docs),
        "n_short_target_examples": n_short_examples,
        "n_short_target_documents": n_short_docs,
    }
    return pairs, counts


def create_pairs(
    documents: Documents,
    *,
    max_seq_length: int,
    short_seq_prob: float,
    dupe_factor: int,
    rng: random.Random,
) -> list[Pair]:
    """Make shuffled A/B pairs from documents of sentences of token ids (no special tokens).

    Empty sentences and documents are skipped. Raises ``ValueError`` when nothing
    is left, or when fewer than two documents are left (a random B needs another
    document). All randomness comes from ``rng``.
    """
    pairs, _ = _generate(
        documents,
        max_seq_length=max_seq_length,
        short_seq_prob=short_seq_prob,
        dupe_factor=dupe_factor,
        rng=rng,
        progress=False,
    )
    return pairs


# --------------------------------------------------------------------------- #
# Storage
# --------------------------------------------------------------------------- #
def _token_dtype(vocab_size: int) -> np.dtype:
    if vocab_size <= 2**16:
        return np.dtype(np.uint16)
    if vocab_size <= 2**32:
        return np.dtype(np.uint32)
    raise DataError(f"vocab_size={vocab_size}: at most 2**32 token ids can be stored")


def _shard_stem(k: int) -> str:
    return f"shard-{k:05d}"


def _write_shard(folder: Path, k: int, pairs: Sequence[Pair], cls_id: int, sep_id: int,
                 vocab_size: int, dtype: np.dtype) -> int:
    """Write one shard's three arrays; returns its token count."""
    # index[:, 0] offset into tokens, [:, 1] total length, [:, 2] length of
    # "[CLS] A [SEP]" (where segment 1 starts).
    index = np.empty((len(pairs), 3), dtype=np.int64)
    offset = 0
    for row, p in enumerate(pairs):
        n = len(p.tokens_a) + len(p.tokens_b) + 3
        index[row] = (offset, n, len(p.tokens_a) + 2)
        offset += n

    stem = _shard_stem(k)
    ids = np.fromiter(
        (t for p in pairs for t in (cls_id, *p.tokens_a, sep_id, *p.tokens_b, sep_id)),
        dtype=np.int64,
        count=offset,
    )
    if offset and (ids.min() < 0 or ids.max() >= vocab_size):
        bad = int(ids.min() if ids.min() < 0 else ids.max())
        raise DataError(f"token id {bad} is outside the vocabulary [0, {vocab_size})")
    tokens = np.lib.format.open_memmap(folder / f"{stem}.tokens.npy", mode="w+", dtype=dtype, shape=(offset,))
    tokens[:] = ids
    tokens.flush()
    del tokens

    np.save(folder / f"{stem}.index.npy", index)
    np.save(folder / f"{stem}.nsp.npy", np.fromiter((p.is_random_next for p in pairs), dtype=np.int8, count=len(pairs)))
    return offset


def write_pairs(
    documents: Documents,
    out_dir: Path,
    *,
    cls_id: int,
    sep_id: int,
    vocab_size: int,
    max_seq_length: int = 128,
    short_seq_prob: float = 0.1,
    dupe_factor: int = 1,
    seed: int = 12345,
    shard_size: int = 50_000,
    progress: bool = True,
) -> dict:
    """Generate pairs with ``random.Random(seed)`` and store them as shards in ``out_dir``.

    Layout of ``out_dir`` (replaced as a whole, never left half-written):

    * ``meta.json`` — format version, counts, dtype, ids, settings, seed, stats;
    * ``shard-NNNNN.tokens.npy`` — (n_tokens,) uint16/uint32, ``[CLS] A [SEP] B [SEP]``
      of each example back to back;
    * ``shard-NNNNN.index.npy`` — (N, 3) int64: offset, length, length of ``[CLS] A [SEP]``;
    * ``shard-NNNNN.nsp.npy`` — (N,) int8: 1 if B is random, 0 if B follows A.

    Returns the stats that are also stored in ``meta.json``.
    """
    out_dir = Path(out_dir)
    if not (isinstance(shard_size, int) and shard_size >= 1):
        raise DataError(f"shard_size={shard_size!r}: must be an integer >= 1")
    dtype = _token_dtype(vocab_size)
    for name, value in (("cls_id", cls_id), ("sep_id", sep_id)):
        if not 0 <= value < vocab_size:
            raise DataError(f"{name}={value}: must be a token id in [0, {vocab_size})")

    pairs, counts = _generate(
        documents,
        max_seq_length=max_seq_length,
        short_seq_prob=short_seq_prob,
        dupe_factor=dupe_factor,
        rng=random.Random(seed),
        progress=progress,
    )

    n = len(pairs)
    n_tokens = sum(len(p.tokens_a) + len(p.tokens_b) + 3 for p in pairs)
    stats = {
        "n_examples": n,
        "n_tokens": n_tokens,
        "mean_length": n_tokens / n,
        "fraction_random_next": sum(p.is_random_next for p in pairs) / n,
        # Examples made under a short target (a document's draw, so approximate
        # as a per-example rate); shorter-than-max examples also come from
        # document ends.
        "fraction_short_target": counts["n_short_target_examples"] / n,
        "fraction_short_target_documents": counts["n_short_target_documents"] / (dupe_factor * counts["n_documents"]),
        "n_documents": counts["n_documents"],
        "n_sentences": counts["n_sentences"],
    }

    shard_counts = [min(shard_size, n - start) for start in range(0, n, shard_size)]
    meta = {
        "format_version": FORMAT_VERSION,
        "n_examples": n,
        "n_shards": len(shard_counts),
        "shard_counts": shard_counts,
        "token_dtype": dtype.name,
        "vocab_size": vocab_size,
        "max_seq_length": max_seq_length,
        "cls_id": cls_id,
        "sep_id": sep_id,
        "settings": {
            "max_seq_length": max_seq_length,
            "short_seq_prob": short_seq_prob,
            "dupe_factor": dupe_factor,
            "seed": seed,
            "shard_size": shard_size,
        },
        "stats": stats,
    }

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_dir.with_name(f"{out_dir.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)  # left by a killed run with a recycled pid
    tmp.mkdir()
    try:
        for k, start in enumerate(range(0, n, shard_size)):
            _write_shard(tmp, k, pairs[start:start + shard_size], cls_id, sep_id, vocab_size, dtype)
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    # A folder cannot be renamed over a non-empty one: move the old output
    # aside first, so only a complete folder ever carries the name out_dir.
    old = out_dir.with_name(f"{out_dir.name}.old-{os.getpid()}")
    if out_dir.exists():
        shutil.rmtree(old, ignore_errors=True)
        out_dir.rename(old)
    tmp.rename(out_dir)
    shutil.rmtree(old, ignore_errors=True)
    return stats


# --------------------------------------------------------------------------- #
# Reading
# --------------------------------------------------------------------------- #
class PairsDataset(torch.utils.data.Dataset):
    """Examples written by ``write_pairs``, read one at a time from memory maps.

    Each item is ``{"input_ids": (T,) int64, "token_type_ids": (T,) int64,
    "next_sentence_label": int}`` with ``T <= max_seq_length`` (unpadded).
    Shards are opened lazily in the process that reads them, so the dataset
    pickles cheaply into DataLoader workers.
    """

    def __init__(self, path: Path):
        self.path = Path(path)
        meta_path = self.path / "meta.json"
        if not meta_path.is_file():
            raise FileNotFoundError(f"{meta_path}: not found (has make_pairs written {self.path}?)")
        self.meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if self.meta.get("format_version") != FORMAT_VERSION:
            raise DataError(
                f"{meta_path}: format_version {self.meta.get('format_version')!r}, "
                f"this code reads {FORMAT_VERSION}; rerun make_pairs"
            )
        # ends[k] = number of examples in shards 0..k
        self._ends = np.cumsum(np.asarray(self.meta["shard_counts"], dtype=np.int64))
        self._shards: list[tuple[np.ndarray, np.ndarray, np.ndarray] | None] = [None] * self.meta["n_shards"]

    def __len__(self) -> int:
        return int(self.meta["n_examples"])

    def _shard(self, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._shards[k] is None:
            stem = self.path / _shard_stem(k)
            self._shards[k] = tuple(
                np.load(f"{stem}.{part}.npy", mmap_mode="r") for part in ("tokens", "index", "nsp")
            )
        return self._shards[k]

    def __getitem__(self, i: int) -> dict:
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"index {i} out of range for {n} examples")
        k = int(np.searchsorted(self._ends, i, side="right"))
        row = i - (int(self._ends[k - 1]) if k else 0)
        tokens, index, nsp = self._shard(k)
        start, length, seg0 = (int(x) for x in index[row])
        input_ids = np.asarray(tokens[start:start + length], dtype=np.int64)  # (T,)
        token_type_ids = np.zeros(length, dtype=np.int64)  # (T,)
        token_type_ids[seg0:] = 1
        return {
            "input_ids": input_ids,
            "token_type_ids": token_type_ids,
            "next_sentence_label": int(nsp[row]),
        }

    def __getstate__(self) -> dict:
        # Pickling a memory map would copy the whole shard; reopen instead.
        state = self.__dict__.copy()
        state["_shards"] = [None] * len(self._shards)
        return state
