"""The prepare_corpus stage: the configured source's documents -> ``paths.corpus``, statistics -> ``metrics/corpus.json``."""
from __future__ import annotations

from pathlib import Path

from hydra.utils import instantiate

from pipeline.data.corpus import prepare_corpus
from pipeline.io import write_json
from pipeline.settings import Lab


def run(lab: Lab) -> dict:
    documents = instantiate(lab.corpus.source, _convert_="all")
    stats = prepare_corpus(documents, lab.paths.corpus, valid_fraction=lab.corpus.valid_fraction, seed=lab.run.seed,
                           name=lab.corpus.name, progress=lab.runtime.progress)
    write_json(Path(lab.paths.metrics) / "corpus.json", stats)
    return stats
