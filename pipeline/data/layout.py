"""The layout probe: masked pieces of ordinary held-out text, in the layouts a model is used on.

A masked LM scored only on sequences cut like its pretraining examples can look
fluent while it has learned their layout -- one length, ``[SEP]`` at one
position, positions past the examples' length never trained. The probe asks
about the held-out text as fine-tuning and ``fill-mask`` give it:

* **single segments** ``[CLS] text [SEP]`` of each of ``lengths`` positions
  (consecutive text of one document from a sentence start), the hidden piece a
  quarter, half or three quarters of the way into the text ("early",
  "middle", "late"); the three offsets of a length read the same windows, so
  they compare like with like;
* **sentence pairs** ``[CLS] A [SEP] B [SEP]`` of two consecutive sentences
  of one document, at their natural lengths (pairs longer than the longest
  length are left out), the hidden piece in the middle of A or of B.

Every row hides one piece, shown as ``[MASK]``; the rest of the row is clean,
so each row asks one question. Windows and pairs are drawn once from ``seed``
and stored in the order drawn, so the first rows of a cell are a random sample
of it (what a run is scored on along pretraining).
The rows are stored as the fixed set's are (``pipeline.data.scored``: clean
and corrupted ids, segments, lengths, kind 0 at the hidden piece), with the
cell of each row, so every kind of model reads them as it reads the fixed set
and the count-based floors are scored on the same positions.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from pipeline.errors import DataError

WHERE = {"early": 0.25, "middle": 0.5, "late": 0.75}   # a single segment's hidden piece: share of its text
SEGMENTS = ("A", "B")                                   # a pair's hidden piece: the middle of A or of B


@dataclass(frozen=True)
class Cell:
    """One group of rows: a layout, its length in positions (None: a pair's natural length) and where the
    hidden piece is."""
    layout: str        # "single" or "pair"
    length: int | None
    where: str         # WHERE's names for a single segment, SEGMENTS' for a pair

    @property
    def name(self) -> str:
        return f"single{self.length}_{self.where}" if self.layout == "single" else f"pair_{self.where}"

    @property
    def label(self) -> str:
        if self.layout == "single":
            return f"one segment of {self.length}, {self.where}"
        return f"sentence pair, in {self.where}"


@dataclass(frozen=True)
class Probe:
    """The probe's rows (``arrays``, as the fixed set's plus ``cell``: each row's index into ``cells``)."""
    arrays: dict[str, np.ndarray]
    cells: list[Cell]

    def describe(self) -> list[dict]:
        """Each cell: its name, label, layout, length, where the hidden piece is, and its number of rows."""
        counts = np.bincount(self.arrays["cell"], minlength=len(self.cells))
        return [{"name": c.name, "label": c.label, "layout": c.layout, "length": c.length, "where": c.where,
                 "rows": int(n)} for c, n in zip(self.cells, counts)]

    def head(self, rows: int) -> "Probe":
        """The first ``rows`` rows of each cell (of a length's windows, the first ``rows`` of each offset)."""
        cell = self.arrays["cell"]
        first = np.zeros(len(cell), bool)
        for i in range(len(self.cells)):
            first[np.nonzero(cell == i)[0][:rows]] = True
        return Probe({k: v[first] for k, v in self.arrays.items()}, self.cells)

    def accuracy(self, hits: np.ndarray) -> dict[str, float]:
        """Each cell's share of ``hits`` (N,): one per row, in row order."""
        cell = self.arrays["cell"]
        return {c.name: round(float(hits[cell == i].mean()), 6) for i, c in enumerate(self.cells)}


def cells(lengths: tuple[int, ...]) -> list[Cell]:
    """The probe's cells in report order: each length's three offsets, then the pair's two segments."""
    return [Cell("single", n, w) for n in lengths for w in WHERE] + [Cell("pair", None, s) for s in SEGMENTS]


def _window_starts(corpus, n: int) -> np.ndarray:
    """Token offsets of every sentence start with ``n`` pieces of its document from there on."""
    starts = np.asarray(corpus.sentences[:-1])
    doc_of = np.repeat(np.arange(corpus.n_documents), np.diff(np.asarray(corpus.documents)))
    doc_end = np.asarray(corpus.sentences)[np.asarray(corpus.documents)[1:]][doc_of]
    return starts[starts + n <= doc_end]


def _pair_starts(corpus, longest: int) -> np.ndarray:
    """Indices s of the sentences followed by a sentence s + 1 of the same document, both fitting ``longest``
    positions with ``[CLS]`` and two ``[SEP]``."""
    sents, docs = np.asarray(corpus.sentences), np.asarray(corpus.documents)
    s = np.arange(len(sents) - 2)
    same_doc = ~np.isin(s + 1, docs)
    return s[same_doc & (sents[s + 2] - sents[s] + 3 <= longest)]


def build(corpus, *, lengths: tuple[int, ...], rows: int, seed: int, cls_id: int, sep_id: int,
          mask_id: int, source: str) -> Probe:
    """The probe's rows from the held-out ``corpus`` (an ``EncodedCorpus``; the readers of a probe need not import
    its code): up to ``rows`` windows per length (the same windows for
    its three offsets) and ``rows`` sentence pairs, in cell order."""
    rng = random.Random(seed)
    tokens = np.asarray(corpus.tokens, np.int64)
    longest = max(lengths)
    made: list[tuple[list[int], int, int, int]] = []   # (ids, first position of segment B, hidden position, cell)
    for i, n in enumerate(lengths):
        starts = _window_starts(corpus, n - 2)
        if len(starts) == 0:
            raise DataError(f"{source}: no document of the held-out split holds {n - 2} consecutive pieces, so "
                            f"eval_set.layout.lengths cannot hold {n}: expected lengths the valid split can fill")
        for t in rng.sample(range(len(starts)), min(rows, len(starts))):  # in random order: any first rows are a sample
            text = tokens[starts[t]:starts[t] + n - 2].tolist()
            for j, share in enumerate(WHERE.values()):
                made.append(([cls_id, *text, sep_id], n, 1 + int((n - 2) * share), 3 * i + j))
    sents = np.asarray(corpus.sentences)
    pairs = _pair_starts(corpus, longest)
    if len(pairs) == 0:
        raise DataError(f"{source}: no two consecutive sentences of one document fit eval_set.layout.lengths' "
                        f"longest, {longest} positions: expected a held-out split with sentences that short")
    for s in rng.sample(list(pairs), min(rows, len(pairs))):
        a, b = tokens[sents[s]:sents[s + 1]].tolist(), tokens[sents[s + 1]:sents[s + 2]].tolist()
        ids = [cls_id, *a, sep_id, *b, sep_id]
        for j, (lo, n) in enumerate(((1, len(a)), (len(a) + 2, len(b)))):
            made.append((ids, len(a) + 2, lo + n // 2, 3 * len(lengths) + j))
    return Probe(_arrays(made, mask_id), cells(lengths))


def _arrays(made: list[tuple[list[int], int, int, int]], mask_id: int) -> dict[str, np.ndarray]:
    N, T = len(made), max(len(ids) for ids, *_ in made)
    ids = np.zeros((N, T), np.int64)
    types = np.zeros((N, T), np.int8)
    kind = np.full((N, T), -1, np.int8)
    lengths, cell = np.zeros(N, np.int32), np.zeros(N, np.int16)
    for r, (row, type1, hidden, c) in enumerate(made):
        ids[r, :len(row)] = row
        types[r, type1:len(row)] = 1
        kind[r, hidden] = 0
        lengths[r], cell[r] = len(row), c
    corrupted = np.where(kind == 0, mask_id, ids)
    return {"input_ids": ids, "corrupted": corrupted, "token_type_ids": types, "lengths": lengths, "kind": kind,
            "cell": cell}
