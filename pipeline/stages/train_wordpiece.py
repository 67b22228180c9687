"""The train_wordpiece stage: ``paths.corpus``'s train split -> a vocabulary in ``paths.tokenizer``, fit statistics on
valid -> ``metrics/tokenizer.json``."""
from __future__ import annotations

from pathlib import Path

from pipeline.data.corpus import Sentences, read_documents
from pipeline.data.tokenizer import load_tokenizer, save_tokenizer, tokenizer_settings
from pipeline.data.wordpiece import tokenizer_stats, train_wordpiece
from pipeline.io import write_json
from pipeline.settings import Lab


def run(lab: Lab) -> dict:
    corpus, t, out = Path(lab.paths.corpus), lab.tokenizer, lab.paths.tokenizer
    if t.from_folder:
        # A published vocabulary (e.g. a local bert-base-uncased), to pretrain from its weights.
        tok = load_tokenizer(t.from_folder)
        lowercase, strip_accents = tokenizer_settings(t.from_folder)
        save_tokenizer(tok, out, lowercase=lowercase, strip_accents=strip_accents)
        stats = {"vocab_size": tok.get_vocab_size(), "from_folder": str(t.from_folder)}
    else:
        stats = train_wordpiece(Sentences(corpus / "train.txt"), out, vocab_size=t.vocab_size,
                                min_frequency=t.min_frequency, limit_alphabet=t.limit_alphabet,
                                lowercase=t.lowercase, strip_accents=t.strip_accents, progress=lab.runtime.progress)
    stats.update(tokenizer_stats(load_tokenizer(out), read_documents(corpus / "valid.txt")))
    write_json(Path(lab.paths.metrics) / "tokenizer.json", stats)
    return stats
