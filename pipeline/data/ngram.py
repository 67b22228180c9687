"""Count-based floors: the n-gram predictors neural LMs replaced, counted on the pretraining examples.

A pretrained model that predicts a hidden piece no better than a table of
counts has learned piece frequencies, not language. The tables here are
counted over the train split of the examples the model trains on (every
text piece with its neighbours inside its example, so ``[CLS]`` and ``[SEP]``
are context too) and predict, for a hidden piece, the piece seen most often:

* ``majority``: overall (always the most frequent piece);
* ``left``: after the left neighbour (a bigram table);
* ``right``: before the right neighbour;
* ``left_right``: between the left and right neighbours, backing off to
  ``left``, then ``right``, then ``majority`` when a context was never seen or
  a neighbour cannot be read (it is ``[MASK]`` itself);
* ``left2``: after the two left neighbours (a trigram table), backing off to
  ``left`` -- the left-to-right LM's floor.

Ties go to the smallest piece id. ``FLOORS`` names the floors the report
shows, each a predictor and the view of the context it reads (what the model
it stands beside reads): the corrupted sequence of a masked LM, or the
clean one of a left-to-right LM, ELMo and word2vec.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Sequence

import numpy as np
from tqdm import tqdm

from pipeline.data.shards import PairsDataset
from pipeline.errors import DataError

PAD = 0  # the context id of a position before the example's start


class Floor(NamedTuple):
    predictor: str
    view: str    # "masked": the corrupted sequence a masked LM reads; "clean": the sequence itself
    label: str
    short: str   # for a figure's line


FLOORS = {
    "majority": Floor("majority", "clean", "the most frequent piece", "majority"),
    "left": Floor("left", "masked", "most frequent after the left neighbour (bigram), masked input", "bigram"),
    "left_right": Floor("left_right", "masked", "most frequent between both neighbours, masked input",
                        "both neighbours"),
    "clean_left": Floor("left", "clean", "most frequent after the left neighbour (bigram), clean left context",
                        "bigram, clean"),
    "clean_left2": Floor("left2", "clean", "most frequent after the two left neighbours (trigram), clean left context",
                         "trigram, clean"),
    "clean_left_right": Floor("left_right", "clean", "most frequent between both neighbours, clean context",
                              "both neighbours, clean"),
}
# The floors beside each kind of language model (by its metric prefix, ``pipeline.model_config``), weakest
# first: what the model reads decides which apply.
FLOORS_OF = {"mlm": ("majority", "left", "left_right"),
             "ltr": ("majority", "clean_left", "clean_left2"),
             "bilm": ("majority", "clean_left", "clean_left_right"),
             "w2v": ("majority", "clean_left", "clean_left_right")}


@dataclass
class _Table:
    """The most frequent centre of each context: ``keys`` sorted, ``best`` aligned with them."""
    keys: np.ndarray
    best: np.ndarray

    @classmethod
    def of(cls, context: np.ndarray, centre: np.ndarray, V: int) -> "_Table":
        uniq, counts = np.unique(context * V + centre, return_counts=True)
        ctx, cen = uniq // V, uniq % V
        order = np.lexsort((-counts, ctx))            # by context, then most frequent first (ties: smaller id)
        ctx, cen = ctx[order], cen[order]
        first = np.ones(len(ctx), bool)
        first[1:] = ctx[1:] != ctx[:-1]
        return cls(ctx[first], cen[first])

    def lookup(self, context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(prediction, found) for each context key."""
        i = np.searchsorted(self.keys, context).clip(max=max(0, len(self.keys) - 1))
        found = (self.keys[i] == context) if len(self.keys) else np.zeros(len(context), bool)
        return self.best[i] if len(self.keys) else np.zeros(len(context), np.int64), found


class NgramTables:
    """The count tables of one set of examples (``count``), and their predictions (``predict``)."""

    def __init__(self, vocab_size: int, majority: int, tables: dict[str, _Table], n_counted: int):
        self.V, self.majority, self.tables, self.n_counted = vocab_size, majority, tables, n_counted

    @classmethod
    def count(cls, examples: PairsDataset, vocab_size: int, special: Sequence[int],
              progress: bool = False) -> "NgramTables":
        """Count every text piece (not ``special``) of ``examples`` with its neighbours, shard by shard."""
        V, special = int(vocab_size), np.asarray(list(special), np.int64)
        parts: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {k: [] for k in ("left", "right", "left_right",
                                                                                  "left2")}
        unigram = np.zeros(V, np.int64)
        for k in tqdm(range(examples.meta["n_shards"]), desc="count n-grams", unit="shard", disable=not progress):
            tokens, index, _ = examples._shard(k)
            x = np.asarray(tokens, np.int64)
            starts = np.zeros(len(x), np.int64)  # each token's example start
            starts[np.asarray(index[:, 0])] = np.asarray(index[:, 0])
            starts = np.maximum.accumulate(starts)
            pos = np.arange(len(x))
            centre = ~np.isin(x, special)
            centre[pos - starts < 1] = False  # an example's first piece is its [CLS]; never a centre
            c = pos[centre]
            left, right = x[c - 1], x[np.minimum(c + 1, len(x) - 1)]
            left2 = np.where(c - starts[c] >= 2, x[np.maximum(c - 2, 0)], PAD)
            unigram += np.bincount(x[c], minlength=V)[:V]
            parts["left"].append((left, x[c]))
            parts["right"].append((right, x[c]))
            parts["left_right"].append((left * V + right, x[c]))
            parts["left2"].append((left2 * V + left, x[c]))
        n = int(unigram.sum())
        if n == 0:
            raise DataError(f"{examples.path}: no text pieces to count the n-gram floors from "
                            "(the corpus's train split is empty)")
        tables = {k: _Table.of(np.concatenate([a for a, _ in v]), np.concatenate([b for _, b in v]), V)
                  for k, v in parts.items()}
        return cls(V, int(unigram.argmax()), tables, n)

    def predict(self, predictor: str, context: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                usable: np.ndarray) -> np.ndarray:
        """(M,) the predictor's piece for each position (``rows``, ``cols``) of ``context`` (N, T); a
        neighbour where ``usable`` is False (a ``[MASK]``) is not read, and the predictor backs off."""
        V, T = self.V, context.shape[1]
        out = np.full(len(rows), self.majority, np.int64)
        if predictor == "majority":
            return out

        def neighbour(offset: int) -> tuple[np.ndarray, np.ndarray]:
            j = cols + offset
            inside = (j >= 0) & (j < T)
            jj = j.clip(0, T - 1)
            return np.where(inside, context[rows, jj], PAD).astype(np.int64), np.where(inside, usable[rows, jj], True)

        (l1, ok1), (r1, okr) = neighbour(-1), neighbour(1)
        chain: list[tuple[str, np.ndarray, np.ndarray]] = []  # strongest first
        if predictor == "left_right":
            chain = [("left_right", l1 * V + r1, ok1 & okr), ("left", l1, ok1), ("right", r1, okr)]
        elif predictor == "left2":
            l2, ok2 = neighbour(-2)
            chain = [("left2", l2 * V + l1, ok1 & ok2), ("left", l1, ok1)]
        elif predictor == "left":
            chain = [("left", l1, ok1)]
        elif predictor == "right":
            chain = [("right", r1, okr)]
        else:
            raise ValueError(f"unknown n-gram predictor {predictor!r}")
        done = np.zeros(len(rows), bool)
        for table, key, ok in chain:
            pred, found = self.tables[table].lookup(key)
            take = ok & found & ~done
            out[take] = pred[take]
            done |= take
        return out
