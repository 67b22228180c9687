"""The make_pairs stage: pretraining examples with the semantics of BERT's original data script, streamed
and in parallel (the stage's ``run`` is ``pipeline.stages.make_pairs``'s).

Two steps, both on disk so that memory does not grow with the corpus:

1. ``encode_corpus`` (``pipeline.data.encoded``) tokenizes a corpus file (one
   sentence per line, a blank line between documents) into an
   ``EncodedCorpus``: flat token ids plus the token offset of every sentence
   and the first sentence of every document, all memory-mapped.
2. ``write_examples`` cuts the documents into *shards* of about
   ``shard_tokens`` input tokens (whole documents each; the cut depends only on
   the corpus, never on the worker count), generates each shard's examples
   with its own random stream (seeded by ``seed`` and the shard number) and
   writes them as memory-mapped arrays. Shards run in ``num_workers``
   processes; the output is byte-identical for any worker count.

The recipe of google-research/bert's ``create_pretraining_data.py``
(``format="nsp_pairs"``):

* per pass (``dupe_factor`` passes) and per document a target length is drawn
  once: ``max_seq_length - 3``, or with probability ``short_seq_prob`` a random
  ``randint(2, max_seq_length - 3)``;
* sentences are gathered until the chunk reaches the target (or the document
  ends); a random number of them (at least one) becomes A;
* B is the rest of the chunk, or -- with probability 0.5, and always for a
  one-sentence chunk -- text from a random sentence of a different, randomly
  chosen document, gathered up to the target; then the chunk's unused
  sentences are put back, so the next chunk starts with them;
* the longer of A and B (B on a tie) is trimmed one token at a time, from the
  front or the back at random, until the pair fits. The trims are counted in
  closed form: which side loses a token at each step is fixed by the lengths,
  and the front/back split of ``n`` trims of one side is ``Binomial(n, 1/2)``,
  exactly the distribution of ``n`` coin flips;
* ``[CLS] A [SEP] B [SEP]`` with segment 0 up to the first ``[SEP]``.

Deliberate differences from the original, none changing the distributions:
documents are visited in corpus order (the original shuffles them once),
a random document is redrawn until it differs from the current one (the
original gives up after 10 tries), and examples are shuffled within a shard
rather than globally (training draws batches in a global random order anyway).

For the NSP-off ablation two packings without pairs (RoBERTa, Liu et al. 2019):
``doc_sentences`` fills ``[CLS] ... [SEP]`` with consecutive whole sentences of
one document; ``full_sentences`` continues into the next document with a
``[SEP]`` between documents. A sentence longer than a whole sequence is cut
into sequence-sized pieces so no text is lost. Packed examples have segment 0
throughout and no NSP label.

NSP label convention is Hugging Face's: 0 = B follows A, 1 = B is random;
``-1`` is stored for packed examples (the dataset returns -100, "ignore").

Masking is not applied here: ``pipeline.data.masking`` masks batches as they are
drawn (dynamically, or statically: the same mask for an example every time).
"""
from __future__ import annotations

import bisect
import contextlib
import hashlib
import multiprocessing
import os
import random
import resource
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
from tqdm.auto import tqdm

from pipeline.data.encoded import EncodedCorpus, encode_corpus
from pipeline.data.shards import PART_FILE, write_meta, write_shard
from pipeline.errors import DataError
from pipeline.io import atomic_dir, write_json
from pipeline.settings import PairsSettings


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


# --------------------------------------------------------------------------- #
# Checks
# --------------------------------------------------------------------------- #
def _check_corpus(corpus: EncodedCorpus, source: str, fmt: str, cls_id: int, sep_id: int) -> None:
    if corpus.n_documents == 0:
        raise DataError(f"{source}: no training examples can be made: every document is empty")
    if fmt == "nsp_pairs" and corpus.n_documents < 2:
        raise DataError(f"{source}: at least two non-empty documents are needed for next-sentence prediction "
                        "(a random B must come from a different document); got 1")
    for name, value in (("cls_id", cls_id), ("sep_id", sep_id)):
        if not 0 <= value < corpus.vocab_size:
            raise DataError(f"{name}={value}: must be a token id in [0, {corpus.vocab_size})")


# --------------------------------------------------------------------------- #
# Generation
# --------------------------------------------------------------------------- #
class Example(NamedTuple):
    """One example before storage: spans of the flat corpus, each followed by ``[SEP]`` in the output."""

    segments: tuple[tuple[int, int], ...]  # (token offset, length); pairs: (A, B)
    is_random_next: int                    # 1 random B, 0 actual next, -1 packed (no pair)
    short_target: bool                     # made under a short target length (nsp_pairs only)
    document: int                          # the document the example starts in


def trim_counts(la: int, lb: int, max_num: int) -> tuple[int, int]:
    """Tokens trimmed from A and from B when the longer one (B on a tie) loses one token per step.

    The longer side is trimmed until the lengths meet, then both alternately, B first.
    """
    excess = la + lb - max_num
    if excess <= 0:
        return 0, 0
    gap = min(excess, abs(la - lb))
    ta, tb = (gap, 0) if la > lb else (0, gap)
    return ta + (excess - gap) // 2, tb + (excess - gap + 1) // 2


def plan_shards(corpus: EncodedCorpus, shard_tokens: int) -> list[tuple[int, int]]:
    """Cut the documents into ranges ``[d0, d1)`` of at least ``shard_tokens`` tokens (the last may be smaller)."""
    doc_end_tokens = corpus.sentences[corpus.documents[1:]]  # (n_documents,) token offset where each ends
    shards, d0 = [], 0
    while d0 < corpus.n_documents:
        start = int(corpus.sentences[corpus.documents[d0]])
        d1 = int(np.searchsorted(doc_end_tokens, start + shard_tokens, side="left")) + 1
        d1 = min(max(d1, d0 + 1), corpus.n_documents)
        shards.append((d0, d1))
        d0 = d1
    return shards


def shard_rng(seed: int, shard: int) -> random.Random:
    """The random stream of one shard: a function of the seed and the shard number only."""
    digest = hashlib.sha256(f"bert-lab pairs {seed} {shard}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "little"))


def pair_examples(corpus: EncodedCorpus, docs: tuple[int, int], *, max_seq_length: int, short_seq_prob: float,
                  dupe_factor: int, rng: random.Random) -> list[Example]:
    """BERT's A/B pairs for the documents ``docs = (d0, d1)``, ``dupe_factor`` passes, unshuffled."""
    d0, d1 = docs
    s_lo, s_hi = int(corpus.documents[d0]), int(corpus.documents[d1])
    offs = corpus.sentences[s_lo:s_hi + 1].tolist()         # token offsets of this shard's sentences
    starts = (corpus.documents[d0:d1 + 1] - s_lo).tolist()  # first sentence of each document, shard-relative
    all_docs, all_sents = corpus.documents, corpus.sentences
    n_docs = corpus.n_documents
    max_num = max_seq_length - 3
    randint, rand, bits = rng.randint, rng.random, rng.getrandbits
    out: list[Example] = []
    for _ in range(dupe_factor):
        for d in range(d1 - d0):
            lo, hi = starts[d], starts[d + 1]
            # Usually fill the whole sequence (padding wastes compute); sometimes aim
            # shorter so pretraining also sees lengths like those of fine-tuning.
            short = rand() < short_seq_prob
            target = randint(2, max_num) if short else max_num
            i = lo
            while i < hi:
                # Chunk = sentences i..e-1: up to the first that reaches the target, or the document's end.
                e = bisect.bisect_left(offs, offs[i] + target, i + 1, hi)
                n = e - i
                a_end = i + (randint(1, n - 1) if n >= 2 else 1)
                a_start = offs[i]
                la = offs[a_end] - a_start
                if n == 1 or rand() < 0.5:
                    random_next = 1
                    other = randint(0, n_docs - 1)
                    while other == d0 + d:
                        other = randint(0, n_docs - 1)
                    os0, os1 = int(all_docs[other]), int(all_docs[other + 1])
                    sb = randint(os0, os1 - 1)
                    b_start = int(all_sents[sb])
                    # Whole sentences from sb until B reaches its share of the target (at least one).
                    eb = sb + 1 + int(np.searchsorted(all_sents[sb + 1:os1 + 1], b_start + target - la))
                    lb = int(all_sents[min(eb, os1)]) - b_start
                    i = a_end  # the chunk's unused sentences are put back
                else:
                    random_next = 0
                    b_start = offs[a_end]
                    lb = offs[e] - b_start
                    i = e
                if la + lb > max_num:
                    ta, tb = trim_counts(la, lb, max_num)
                    a_start += bits(ta).bit_count()  # Binomial(ta, 1/2) of the trims are at the front
                    b_start += bits(tb).bit_count()
                    la -= ta
                    lb -= tb
                out.append(Example(((a_start, la), (b_start, lb)), random_next, short, d0 + d))
    return out


def packed_examples(corpus: EncodedCorpus, docs: tuple[int, int], *, max_seq_length: int, cross_documents: bool,
                    dupe_factor: int) -> list[Example]:
    """RoBERTa's packing of whole sentences into ``[CLS] ... [SEP]`` (``[SEP]`` between documents too)."""
    d0, d1 = docs
    s_lo, s_hi = int(corpus.documents[d0]), int(corpus.documents[d1])
    offs = corpus.sentences[s_lo:s_hi + 1].tolist()
    starts = (corpus.documents[d0:d1 + 1] - s_lo).tolist()
    piece_max = max_seq_length - 2
    examples: list[Example] = []
    segments: list[list[int]] = []  # [offset, length] of each document's part, each followed by [SEP]
    total = 1                       # tokens so far, [CLS] included
    first_doc = d0

    def flush() -> None:
        nonlocal segments, total
        if segments:
            examples.append(Example(tuple((s, n) for s, n in segments), -1, False, first_doc))
        segments, total = [], 1

    for d in range(d1 - d0):
        if not cross_documents:
            flush()
        new_doc = True
        for j in range(starts[d], starts[d + 1]):
            for start in range(offs[j], offs[j + 1], piece_max):  # a too-long sentence in pieces
                n = min(piece_max, offs[j + 1] - start)
                if total + n + (1 if new_doc or not segments else 0) > max_seq_length:
                    flush()
                if not segments:
                    first_doc = d0 + d
                if segments and not new_doc:
                    segments[-1][1] += n  # the document's text is contiguous in the corpus
                    total += n
                else:
                    segments.append([start, n])
                    total += n + 1
                new_doc = False
    flush()
    return examples * dupe_factor


def _shard_job(job: dict) -> dict:
    """Generate and write one shard (runs in a worker process or in the caller)."""
    corpus = EncodedCorpus(job["corpus"])
    k, docs, fmt = job["shard"], tuple(job["docs"]), job["format"]
    rng = shard_rng(job["seed"], k)
    if fmt == "nsp_pairs":
        examples = pair_examples(corpus, docs, max_seq_length=job["max_seq_length"],
                                 short_seq_prob=job["short_seq_prob"], dupe_factor=job["dupe_factor"], rng=rng)
    else:
        examples = packed_examples(corpus, docs, max_seq_length=job["max_seq_length"],
                                   cross_documents=fmt == "full_sentences", dupe_factor=job["dupe_factor"])
    rng.shuffle(examples)
    n_tokens = write_shard(Path(job["out"]), k, examples, corpus.tokens, job["cls_id"], job["sep_id"])
    return {
        "shard": k,
        "n_examples": len(examples),
        "n_tokens": n_tokens,
        "n_random_next": sum(ex.is_random_next == 1 for ex in examples),
        "n_short_target": sum(ex.short_target for ex in examples),
        "n_full_length": sum(sum(n for _, n in ex.segments) + len(ex.segments) + 1 == job["max_seq_length"]
                             for ex in examples),
        "pid": os.getpid(),
        "peak_rss_mb": _peak_rss_mb(),
    }


def write_examples(corpus: EncodedCorpus, out_dir: str | Path, pairs: PairsSettings, *, seed: int, cls_id: int,
                   sep_id: int, num_workers: int = 1, progress: bool = True, run_info: dict | None = None) -> dict:
    """Generate the examples of ``corpus`` by the ``pairs`` settings and store them as shards in ``out_dir``.

    Layout of ``out_dir`` (replaced as a whole, never left half-written):

    * ``meta.json`` -- format version, counts, dtype, ids, settings, seed, stats;
    * ``shard-NNNNN.tokens.npy`` -- (n_tokens,) uint8/16/32: each example's ``[CLS] ... [SEP]`` back to back;
    * ``shard-NNNNN.index.npy`` -- (N, 3) int64: offset, length, position where segment 1 starts;
    * ``shard-NNNNN.nsp.npy`` -- (N,) int8: 1 if B is random, 0 if B follows A, -1 packed.

    Returns the stats that are also stored in ``meta.json``. ``run_info``, if
    given, receives how the run went (seconds, workers, each worker's peak RSS).
    """
    _check_corpus(corpus, str(corpus.folder), pairs.format, cls_id, sep_id)
    with atomic_dir(out_dir) as tmp:
        return _write_examples_into(tmp, corpus, cls_id=cls_id, sep_id=sep_id, num_workers=num_workers,
                                    progress=progress, run_info=run_info, name=Path(out_dir).name,
                                    settings=job_settings(pairs, seed))


def job_settings(pairs: PairsSettings, seed: int) -> dict:
    """What every shard job is made with, as ``meta.json`` records it: the ``pairs`` settings and the seed."""
    return {"format": pairs.format, "max_seq_length": pairs.max_seq_length, "short_seq_prob": pairs.short_seq_prob,
            "dupe_factor": pairs.dupe_factor, "seed": seed, "shard_tokens": pairs.shard_tokens}


@contextlib.contextmanager
def _workers(n: int, pool=None):
    """``imap`` over ``n`` worker processes (in order), or plain ``map`` in this process for ``n == 1``."""
    if n <= 1:
        yield map
    elif pool is not None:
        yield pool.imap
    else:
        with _new_pool(n) as own:
            yield own.imap


@contextlib.contextmanager
def _new_pool(n: int):
    # fork: no re-import of __main__ (scripts without a main guard work); the
    # workers never touch the tokenizer, torch or CUDA.
    pool = multiprocessing.get_context("fork").Pool(n)
    try:
        yield pool
    finally:
        pool.terminate()
        pool.join()


def _write_examples_into(folder: Path, corpus: EncodedCorpus, *, cls_id: int, sep_id: int, num_workers: int,
                         progress: bool, run_info: dict | None, name: str, settings: dict, pool=None,
                         part: tuple[int, int] | None = None) -> dict:
    """Write the shards (all, or with ``part=(i, n)`` those with index ``k % n == i``) and their metadata."""
    shards = plan_shards(corpus, settings["shard_tokens"])
    jobs = [dict(settings, corpus=str(corpus.folder), out=str(folder), shard=k, docs=list(d), cls_id=cls_id,
                 sep_id=sep_id) for k, d in enumerate(shards) if part is None or k % part[1] == part[0]]
    results: list[dict] = []
    started = time.perf_counter()
    workers = min(num_workers, len(jobs))
    with tqdm(total=len(jobs), desc=f"examples {name}", unit="shard", disable=not progress, mininterval=1.0) as bar, \
            _workers(workers, pool) as run:
        for r in run(_shard_job, jobs):
            results.append(r)
            n = sum(x["n_examples"] for x in results)
            bar.update(1)
            bar.set_postfix(examples=n, ex_per_s=f"{n / (time.perf_counter() - started):.0f}", refresh=False)
    if run_info is not None:
        run_info.update(seconds=time.perf_counter() - started, workers=workers,
                        worker_peak_rss_mb={r["pid"]: r["peak_rss_mb"] for r in results})
    summary = {"n_documents": corpus.n_documents, "n_sentences": int(corpus.meta["n_sentences"]),
               "n_input_tokens": int(corpus.meta["n_tokens"]), "token_dtype": corpus.dtype.name,
               "vocab_size": corpus.vocab_size}
    if part is not None:  # a share of the work: merge_parts writes meta.json once every part is done
        write_json(folder / PART_FILE, {"part": list(part), "shard_documents": [list(d) for d in shards],
                                        "corpus": summary, "settings": settings, "cls_id": cls_id, "sep_id": sep_id,
                                        "results": [{k: v for k, v in r.items() if k not in ("pid", "peak_rss_mb")}
                                                    for r in results]})
        return {"part": list(part), "n_shards": len(jobs)}
    return write_meta(folder, summary, shards, results, settings, cls_id, sep_id)


def make_examples(tok, text_path: str | Path, out_dir: str | Path, pairs: PairsSettings, *, seed: int, cls_id: int,
                  sep_id: int, num_workers: int = 1, progress: bool = True, run_info: dict | None = None,
                  part: tuple[int, int] | None = None) -> dict:
    """Tokenize a corpus file and write its examples into ``out_dir`` (the encoded corpus in ``out_dir/corpus``).

    ``out_dir`` appears complete or not at all (as ``write_examples``'s).
    ``part=(i, n)``: this machine's share of the shards, for ``merge_parts`` to join.
    """
    # Workers are forked before the tokenizer starts its threads (forking after that is unsafe for it).
    with contextlib.ExitStack() as stack:
        pool = stack.enter_context(_new_pool(num_workers)) if num_workers > 1 else None
        tmp = stack.enter_context(atomic_dir(out_dir))
        corpus = encode_corpus(tok, text_path, tmp / "corpus", progress=progress)
        _check_corpus(corpus, str(text_path), pairs.format, cls_id, sep_id)
        return _write_examples_into(tmp, corpus, cls_id=cls_id, sep_id=sep_id, num_workers=num_workers,
                                    progress=progress, run_info=run_info, name=Path(out_dir).name,
                                    settings=job_settings(pairs, seed), pool=pool, part=part)


SPLITS = ("train", "valid")


def part_dir(out: Path, i: int, n: int) -> Path:
    """Where machine ``i`` of ``n`` writes its share of the shards, beside the output."""
    return out.with_name(f"{out.name}.part-{i}-of-{n}")
