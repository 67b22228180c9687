"""The train_wordpiece stage: a WordPiece vocabulary trained with Hugging Face ``tokenizers``.

It writes a tokenizer folder (``pipeline.data.tokenizer`` describes it and loads
it); ``run`` is the stage.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Iterable

from tokenizers import Tokenizer, trainers

from pipeline.data.tokenizer import UNK, add_bert_template, new_tokenizer, save_tokenizer
from pipeline.errors import DataError
from pipeline.names import SPECIAL_TOKENS


def alphabet(tok: Tokenizer, sentences: Iterable[str], limit: int) -> list[str]:
    """The ``limit`` most frequent characters of the normalised text, ties broken by code point, sorted."""
    counts: Counter[str] = Counter()
    normalize = tok.normalizer.normalize_str
    for s in sentences:
        counts.update(normalize(s))
    chars = sorted((c for c in counts if not c.isspace()), key=lambda c: (-counts[c], c))[:limit]
    return sorted(chars)


def train_wordpiece(sentences: Iterable[str], out_dir: str | Path, *, vocab_size: int, min_frequency: int = 2,
                    limit_alphabet: int = 1000, lowercase: bool = True, strip_accents: bool | None = None,
                    progress: bool = True) -> dict:
    """Train a WordPiece vocabulary on ``sentences`` and write it to ``out_dir``; return statistics.

    ``sentences`` is read twice (an iterator is first materialised; pass a
    re-iterable object for a large corpus). The result is the same bytes on
    every run: ``tokenizers`` numbers the ``##`` pieces in hash-map order and
    breaks ties between equally frequent merges by those numbers, so here the
    alphabet is chosen first (most frequent, ties by code point) and its ``##``
    pieces are registered before training, in code-point order. They are
    registered as special tokens only so the trainer numbers them first; the
    saved tokenizer treats them as ordinary vocabulary.
    """
    if iter(sentences) is sentences:
        sentences = list(sentences)
    tok = new_tokenizer(lowercase, strip_accents)
    chars = alphabet(tok, sentences, limit_alphabet)
    pieces = [f"##{c}" for c in chars]
    trainer = trainers.WordPieceTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, limit_alphabet=len(chars), initial_alphabet=chars,
        special_tokens=[*SPECIAL_TOKENS, *pieces], continuing_subword_prefix="##", show_progress=progress)
    tok.train_from_iterator(sentences, trainer=trainer)
    tok = _ordinary(tok, set(pieces))
    vocab = tok.get_vocab()
    if len(vocab) <= len(SPECIAL_TOKENS) + len(pieces):
        raise DataError("the corpus produced no vocabulary beyond the special tokens (is the train split empty?)")
    for i, t in enumerate(SPECIAL_TOKENS):
        assert vocab[t] == i, f"special token {t} has id {vocab[t]}, expected {i}"
    add_bert_template(tok)
    save_tokenizer(tok, out_dir, lowercase=lowercase, strip_accents=strip_accents)
    return {"vocab_size": len(vocab), "requested_vocab_size": vocab_size, "alphabet_size": len(chars)}


def _ordinary(tok: Tokenizer, pieces: set[str]) -> Tokenizer:
    """``tok`` with ``pieces`` dropped from its added (special) tokens: they stay ordinary vocabulary."""
    spec = json.loads(tok.to_str())
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] not in pieces]
    return Tokenizer.from_str(json.dumps(spec))


def tokenizer_stats(tok: Tokenizer, documents: Iterable[list[str]]) -> dict:
    """How the vocabulary fits held-out text: word pieces per word and the [UNK] rate."""
    unk = tok.token_to_id(UNK)
    words = pieces = unknown = 0
    for doc in documents:
        for enc in tok.encode_batch(doc, add_special_tokens=False):
            words += len(set(w for w in enc.word_ids if w is not None))
            pieces += len(enc.ids)
            unknown += sum(i == unk for i in enc.ids)
    return {"valid_pieces_per_word": round(pieces / max(words, 1), 4),
            "valid_unk_rate": round(unknown / max(pieces, 1), 6)}
