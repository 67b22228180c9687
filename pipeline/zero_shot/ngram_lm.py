"""A smoothed n-gram language model over word pieces: the count-based floor of sentence log-likelihood.

``pipeline.data.ngram`` predicts one hidden piece (the most frequent in a
context), which is enough for accuracy floors but gives no probability. A
minimal pair needs a probability for every sentence, so here the same kind of
counts become interpolated Kneser-Ney (Kneser & Ney, 1995; Chen & Goodman,
1999): the highest order uses raw counts, each lower order the number of
distinct pieces seen before it (continuation counts), every order subtracts
an absolute discount ``D`` from each seen count and passes that mass to the
order below, and the unigram passes it to a uniform distribution over the
vocabulary, so every piece has a probability above zero and each context's
probabilities sum to one. ``D`` per order is Ney's estimate, n1 / (n1 + 2 n2)
(n1, n2: the n-grams of that order counted once and twice).

Sentences are counted as they are scored: a sentence's pieces after
``[CLS]``, with padding (id 0, as in ``pipeline.data.ngram``) before it, so the
first piece of a trigram model is predicted from ``([PAD], [CLS])``. BLiMP's
5-gram baseline (61.2%) was a word model counted on Gigaword; this one is a
piece model counted on the pretraining corpus, what the neural models read.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from pipeline.errors import ConfigError, DataError

PAD = 0                # the context id before a sentence's [CLS] (the [PAD] piece never occurs in text)
CHUNK = 4_000_000      # pieces counted at once: memory grows with the distinct n-grams, not the corpus
FALLBACK_DISCOUNT = 0.5  # when an order has no n-gram counted once (Ney's estimate undefined: a toy corpus)


@dataclass
class _Order:
    """One order k: the counts of k-grams (sorted keys) and, per (k-1)-piece context, their sum and number."""
    keys: np.ndarray       # (G,) int64 k-gram keys, sorted
    counts: np.ndarray     # (G,) raw counts (highest order) or continuation counts
    contexts: np.ndarray   # (C,) int64 context keys, sorted
    totals: np.ndarray     # (C,) sum of counts of each context's k-grams
    types: np.ndarray      # (C,) k-grams with the context
    discount: float

    @classmethod
    def of(cls, keys: np.ndarray, counts: np.ndarray, V: int) -> "_Order":
        contexts, inverse = np.unique(keys // V, return_inverse=True)
        totals = np.bincount(inverse, weights=counts).astype(np.int64)
        types = np.bincount(inverse).astype(np.int64)
        n1, n2 = int((counts == 1).sum()), int((counts == 2).sum())
        discount = n1 / (n1 + 2 * n2) if n1 else FALLBACK_DISCOUNT
        return cls(keys, counts, contexts, totals, types, discount)


def _find(sorted_keys: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index, found) of each query key in ``sorted_keys``."""
    if len(sorted_keys) == 0:
        return np.zeros(len(query), np.int64), np.zeros(len(query), bool)
    i = np.searchsorted(sorted_keys, query).clip(max=len(sorted_keys) - 1)
    return i, sorted_keys[i] == query


def context_windows(tokens: np.ndarray, starts: np.ndarray, cls_id: int, n: int) -> np.ndarray:
    """(M, n) int64: each piece of ``tokens`` (flat, sentences back to back; ``starts`` (M,) the start of each
    piece's sentence) with the n-1 pieces before it, ``[CLS]`` just before the sentence and ``PAD`` before that."""
    pos = np.arange(len(tokens))
    out = np.empty((len(tokens), n), np.int64)
    out[:, n - 1] = tokens
    for j in range(1, n):
        back = pos - j
        inside = back >= starts
        out[:, n - 1 - j] = np.where(inside, tokens[np.maximum(back, 0)],
                                     np.where(back == starts - 1, cls_id, PAD))
    return out


class NgramLM:
    """Interpolated Kneser-Ney over pieces; ``count`` builds it, ``log_probs`` scores pieces in context."""

    def __init__(self, orders: list[_Order], vocab_size: int, n_counted: int):
        self.orders, self.V, self.n, self.n_counted = orders, vocab_size, len(orders), n_counted

    @classmethod
    def count(cls, tokens: np.ndarray, sentences: np.ndarray, *, vocab_size: int, cls_id: int, order: int = 3,
              progress: bool = False) -> "NgramLM":
        """Count the sentences of a flat ``tokens`` array (``sentences`` (S+1,): offsets where each starts, the
        last = len(tokens); ``pipeline.data.encoded.EncodedCorpus`` holds exactly these), chunk by chunk."""
        V = int(vocab_size)
        if not (isinstance(order, int) and not isinstance(order, bool) and order >= 1) or V ** order >= 2 ** 63:
            raise ConfigError(f"zero_shot.ngram_order={order!r} is not allowed: expected a positive integer with "
                              f"vocab_size ** order < 2 ** 63 (vocab_size={V})")
        sentences = np.asarray(sentences, np.int64)
        n_tokens = int(sentences[-1]) if len(sentences) else 0
        if n_tokens == 0:
            raise DataError("no pieces to count the n-gram language model from (the corpus is empty)")
        weights = V ** np.arange(order - 1, -1, -1, dtype=np.int64)  # key = sum of piece * V ** (n-1-j)
        keys, counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
        cuts = sentences[np.searchsorted(sentences, np.arange(0, n_tokens, CHUNK))].tolist() + [n_tokens]
        for a, b in tqdm(list(zip(cuts[:-1], cuts[1:])), desc="count n-gram LM", unit="chunk", disable=not progress):
            if a == b:
                continue
            lo, hi = np.searchsorted(sentences, a, side="right") - 1, np.searchsorted(sentences, b, side="left")
            bounds = sentences[lo:hi + 1]
            starts = np.repeat(bounds[:-1], np.diff(bounds)) - a
            grams = context_windows(np.asarray(tokens[a:b], np.int64), starts, cls_id, order) @ weights
            chunk_keys, chunk_counts = np.unique(grams, return_counts=True)
            keys, inverse = np.unique(np.concatenate([keys, chunk_keys]), return_inverse=True)
            counts = np.bincount(inverse, weights=np.concatenate([counts, chunk_counts])).astype(np.int64)
        orders = [_Order.of(keys, counts, V)]
        distinct = keys
        for k in range(order - 1, 0, -1):
            # Continuation count of a k-gram: how many distinct pieces precede it (the (k+1)-grams ending in it).
            distinct = np.unique(distinct % V ** (k + 1))
            lower, continuation = np.unique(distinct % V ** k, return_counts=True)
            orders.append(_Order.of(lower, continuation.astype(np.int64), V))
        return cls(orders[::-1], V, n_tokens)

    def log_probs(self, grams: np.ndarray) -> np.ndarray:
        """(M,) natural-log probability of each row's last piece given the pieces before it; ``grams`` (M, n)."""
        grams = np.asarray(grams, np.int64)
        V = self.V
        p = np.full(len(grams), 1.0 / V)  # order 0: uniform over the vocabulary
        for k, o in enumerate(self.orders, 1):
            sub = grams[:, self.n - k:]                                   # (M, k): the last k pieces
            key = sub @ (V ** np.arange(k - 1, -1, -1, dtype=np.int64))
            ci, has_context = _find(o.contexts, key // V)
            gi, seen = _find(o.keys, key)
            count = np.where(seen, o.counts[gi], 0)
            total, types = o.totals[ci], o.types[ci]
            with np.errstate(divide="ignore", invalid="ignore"):
                smoothed = (np.maximum(count - o.discount, 0) + o.discount * types * p) / total
            p = np.where(has_context, smoothed, p)  # an unseen context: the lower order's estimate as it is
        return np.log(p)
