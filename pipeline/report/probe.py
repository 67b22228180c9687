"""Polysemy, measured (the probe stage, ``pipeline.stages.probe``): how contextual each generation's representations are, and what it
does with a word's senses.

Two measures, on occurrences of words in the corpus (lowercased, as the models see them):

* Contextuality per layer (Ethayarajh 2019): a word's *self-similarity* is the
  mean cosine similarity between its representations in different sentences.
  Representations of any two words tend to point the same way (anisotropy), so
  the mean cosine of random pairs of different words' occurrences is
  subtracted. A static model gives every occurrence one vector: 1 by
  construction. The lower a layer's corrected self-similarity, the more its
  representation of a word depends on the sentence around it.
* Senses by example: for a polysemous word, one occurrence's nearest other
  occurrences by top-layer similarity. Where the raw text marks the senses --
  the King James Bible writes Abraham's nephew "Lot" capitalised and the lots
  that were cast "lot" -- the share of nearest neighbours of the same sense is
  counted; a static model cannot separate them (all its occurrences are one vector).

A word's representation is the mean of its word pieces' states. The words are
settings (``corpus.probe.words``, and the corpus's ``corpus.probe.most_frequent`` most frequent words beside them:
``frequent_words``); a listed word that does not occur is reported, not fatal.
"""
from __future__ import annotations

import logging
import random
import re
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from pipeline.data.corpus import read_documents
from pipeline.data.tokenizer import load_tokenizer
from pipeline.finetune.encoders import Export

log = logging.getLogger(__name__)


WORD = re.compile(r"\w+|[^\w\s]")  # words and punctuation apart, as BERT's basic tokenizer splits them


def split_words(sentence: str) -> list[str]:
    return WORD.findall(sentence)


def frequent_words(sentences: Sequence[str], n: int, besides: Sequence[str] = ()) -> list[str]:
    """The ``n`` most frequent words of ``sentences`` (whole words, any case, lowercased) that are not in
    ``besides``: words of three or more letters outside scikit-learn's English stop words, the most frequent first,
    equal counts alphabetically. The words a probe reads by rule, not by hand."""
    if n <= 0:
        return []
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    skip = {w.lower() for w in besides} | ENGLISH_STOP_WORDS
    counts: dict[str, int] = {}
    for s in sentences:
        for w in split_words(s):
            w = w.lower()
            if len(w) >= 3 and w.isalpha() and w not in skip:
                counts[w] = counts.get(w, 0) + 1
    return sorted(counts, key=lambda w: (-counts[w], w))[:n]


def index_occurrences(sentences: Sequence[str], words: Sequence[str], limit: int, seed: int
                      ) -> dict[str, list[tuple[str, int, bool]]]:
    """For each of ``words``: up to ``limit`` (sentence, word index, capitalised?) where it occurs as a whole word
    (any case), drawn at random with ``seed``. One pass over the corpus for all the words."""
    wanted = {w.lower(): w for w in words}
    found: dict[str, list[tuple[str, int, bool]]] = {w: [] for w in words}
    for s in sentences:
        for i, w in enumerate(split_words(s)):
            key = wanted.get(w.lower())
            if key is not None:
                found[key].append((s, i, w[0].isupper()))
    for w, items in found.items():
        random.Random(f"{seed}:{w}").shuffle(items)
        found[w] = items[:limit]
    return found


def occurrences(sentences: Sequence[str], word: str, limit: int, seed: int) -> list[tuple[str, int, bool]]:
    """Up to ``limit`` (sentence, word index, capitalised?) where ``word`` occurs as a whole word (any case)."""
    return index_occurrences(sentences, [word], limit, seed)[word]


@torch.no_grad()
def word_states(encoder, tok, items: list[tuple[str, int, bool]], batch_size: int = 32,
                max_len: int | None = None) -> np.ndarray:
    """(N, L+1, H): each occurrence's states at every layer, the mean over the word's pieces. A sentence longer
    than ``max_len`` pieces (the model's positions) is read as the window of ``max_len`` pieces around the word."""
    out = []
    tok.no_truncation()
    for i in range(0, len(items), batch_size):
        chunk = items[i:i + batch_size]
        encs = tok.encode_batch([split_words(s) for s, _, _ in chunk], is_pretokenized=True)
        seqs = [window(e.ids, [t for t, wid in enumerate(e.word_ids) if wid == w], max_len)
                for e, (_, w, _) in zip(encs, chunk)]
        T = max(len(ids) for ids, _ in seqs)
        ids = torch.zeros(len(chunk), T, dtype=torch.long)
        mask = torch.zeros(len(chunk), T, dtype=torch.long)
        for b, (seq, _) in enumerate(seqs):
            ids[b, :len(seq)] = torch.tensor(seq)
            mask[b, :len(seq)] = 1
        states = torch.stack(encoder(ids, torch.zeros_like(ids), mask), 2)   # (B, T, L+1, H)
        for b, (_, pieces) in enumerate(seqs):
            out.append(states[b, pieces].mean(0).numpy())
    return np.stack(out) if out else np.zeros((0, 0, 0))


def window(ids: list[int], pieces: list[int], max_len: int | None) -> tuple[list[int], list[int]]:
    """``ids`` cut to at most ``max_len`` pieces around the word at positions ``pieces`` (centred on it where the
    sentence allows), with the word's positions in the cut; unchanged where it fits."""
    if max_len is None or len(ids) <= max_len:
        return list(ids), pieces
    start = min(max(0, pieces[0] - (max_len - len(pieces)) // 2), len(ids) - max_len)
    return list(ids[start:start + max_len]), [p - start for p in pieces]


def _cos(x: np.ndarray) -> np.ndarray:
    x = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
    return x @ x.T


def self_similarity(states: np.ndarray) -> list[float]:
    """Per layer: the mean cosine between a word's occurrences (states: (N, L+1, H), N >= 2)."""
    n = states.shape[0]
    off = ~np.eye(n, dtype=bool)
    return [float(_cos(states[:, layer])[off].mean()) for layer in range(states.shape[1])]


def anisotropy(per_word: dict[str, np.ndarray], pairs: int, seed: int) -> list[float]:
    """Per layer: the mean cosine between occurrences of two different words, over random pairs."""
    rng = random.Random(seed)
    words = [w for w, s in per_word.items() if len(s)]
    if len(words) < 2:
        return []
    layers = next(iter(per_word.values())).shape[1]
    sums = np.zeros(layers)
    for _ in range(pairs):
        a, b = rng.sample(words, 2)
        x, y = per_word[a][rng.randrange(len(per_word[a]))], per_word[b][rng.randrange(len(per_word[b]))]
        num = (x * y).sum(-1)
        sums += num / np.maximum(np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1), 1e-12)
    return [float(v) for v in sums / pairs]


def probe_model(export: Export, sentences: list[str], words: list[str], senses: list[str], *, limit: int,
                min_occurrences: int, neighbours: int, pairs: int, seed: int) -> dict:
    """One model's contextuality per layer and its nearest occurrences for the ``senses`` words."""
    tok = load_tokenizer(export.folder)
    encoder = export.frozen_encoder().eval()
    found = index_occurrences(sentences, list(dict.fromkeys([*words, *senses])), limit, seed)
    max_len = getattr(encoder.model.config, "max_position_embeddings", None)  # none for an LSTM or a table
    states = {w: word_states(encoder, tok, items, max_len=max_len) for w, items in found.items()
              if len(items) >= min_occurrences}
    sims = {w: self_similarity(s) for w, s in states.items() if w in words}
    base = anisotropy(states, pairs, seed)
    layers = len(base)
    raw = [float(np.mean([v[layer] for v in sims.values()])) for layer in range(layers)] if sims else []
    out = {"layers": layers, "self_similarity": raw, "anisotropy": base,
           "corrected": [r - b for r, b in zip(raw, base)], "words": sorted(sims),
           "per_word": {w: [round(x, 4) for x in v] for w, v in sims.items()}, "senses": {}}
    for w in senses:
        if w not in states:
            continue
        top = states[w][:, -1]
        cos = _cos(top)[0]
        order = [int(i) for i in np.argsort(-cos, kind="stable") if i != 0][:neighbours]
        items = found[w]
        same = [items[i][2] == items[0][2] for i in order]
        out["senses"][w] = {"query": _snippet(items[0]), "query_capitalised": items[0][2],
                            "neighbours": [{"text": _snippet(items[i]), "cosine": round(float(cos[i]), 4),
                                            "capitalised": items[i][2]} for i in order],
                            "same_marking": round(sum(same) / len(same), 4) if same else None,
                            "marked_share": round(sum(x[2] for x in items) / len(items), 4)}
    return out


def _snippet(item: tuple[str, int, bool], width: int = 6) -> str:
    sentence, i, _ = item
    words = split_words(sentence)
    lo, hi = max(0, i - width), min(len(words), i + width + 1)
    return ("... " if lo else "") + " ".join(words[lo:i] + [f"[{words[i]}]"] + words[i + 1:hi]) + \
        (" ..." if hi < len(words) else "")


def corpus_sentences(corpus_file: Path, limit: int | None = None) -> list[str]:
    """The corpus's sentences with their original case (the capitals that mark some senses)."""
    out = [s for doc in read_documents(corpus_file) for s in doc]
    return out[:limit] if limit else out


def missing_words(sentences: Sequence[str], words: Sequence[str]) -> list[str]:
    found = index_occurrences(sentences, words, 1, 0)
    return [w for w in words if not found[w]]
