"""BLiMP scored with a sentence scorer (``pipeline.zero_shot.scorers``: each neural generation's), and the
count-based floor's scorer: an interpolated Kneser-Ney n-gram LM's own smoothed log-likelihood
(``pipeline.zero_shot.ngram_lm``), counted on the pretraining text.

A pair is right when the good sentence's log-likelihood is the higher; a pair with a sentence longer than the
model reads is left out and counted, never dropped silently.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from pipeline.data.encoded import EncodedCorpus
from pipeline.zero_shot.blimp import BlimpResult, Paradigm, ParadigmResult
from pipeline.zero_shot.ngram_lm import NgramLM, context_windows
from pipeline.zero_shot.scorers import Encoded, NoSentenceScore, SentenceScorer, encode


class NgramScorer:
    """The count-based floor: an interpolated Kneser-Ney n-gram LM's log-likelihood."""
    method = "ngram"
    max_pieces = None

    def __init__(self, lm: NgramLM, cls_id: int):
        self.lm, self.cls_id = lm, cls_id

    def log_likelihoods(self, sentences: Sequence[Encoded], progress: bool = False) -> np.ndarray:
        pieces = [s.ids[s.text] for s in sentences]
        lengths = np.array([len(p) for p in pieces])
        owner = np.repeat(np.arange(len(sentences)), lengths)
        starts = np.repeat(np.cumsum(lengths) - lengths, lengths)
        tokens = np.concatenate(pieces) if pieces else np.zeros(0, np.int64)
        logp = self.lm.log_probs(context_windows(tokens, starts, self.cls_id, self.lm.n))
        return np.bincount(owner, weights=logp, minlength=len(sentences))


def ngram_scorer(corpus: str | os.PathLike, cls_id: int, *, order: int = 3, progress: bool = False) -> NgramScorer:
    """The n-gram floor counted on an encoded corpus (``<pairs>/train/corpus``: the pretraining text)."""
    c = EncodedCorpus(corpus)
    return NgramScorer(NgramLM.count(c.tokens, c.sentences, vocab_size=c.vocab_size, cls_id=cls_id, order=order,
                                     progress=progress), cls_id)


# --------------------------------------------------------------------------------------------------- scoring


def evaluate(scorer: SentenceScorer | NoSentenceScore, tokenizer, paradigms: Sequence[Paradigm], *,
             max_pieces: int | None = None, progress: bool = False) -> BlimpResult:
    """Every pair of ``paradigms`` scored: both sentences' log-likelihoods, a pair right when the good one is higher.

    A pair with a sentence longer than the model reads (its positions, or ``max_pieces`` if smaller) is left out
    and counted (``ParadigmResult.excluded``); its scores are NaN."""
    if isinstance(scorer, NoSentenceScore):
        return BlimpResult(method=None, reason=scorer.reason)
    limits = [x for x in (scorer.max_pieces, max_pieces) if x is not None]
    limit = min(limits) if limits else None
    sentences = [s for p in paradigms for s in (*p.good, *p.bad)]
    encoded = encode(tokenizer, sentences)
    fits = np.array([limit is None or len(e.ids) <= limit for e in encoded], bool)
    start = 0
    for p in paradigms:  # a pair is scored only when both of its sentences fit
        n = len(p)
        both = fits[start:start + n] & fits[start + n:start + 2 * n]
        fits[start:start + 2 * n] = np.concatenate([both, both])
        start += 2 * n
    keep = np.flatnonzero(fits)
    scores = np.full(len(encoded), np.nan)
    scores[keep] = scorer.log_likelihoods([encoded[i] for i in keep], progress=progress)
    results, start = [], 0
    for p in paradigms:
        n = len(p)
        results.append(ParadigmResult(p.uid, p.field, p.phenomenon, scores[start:start + n],
                                      scores[start + n:start + 2 * n]))
        start += 2 * n
    return BlimpResult(method=scorer.method, paradigms=results)
