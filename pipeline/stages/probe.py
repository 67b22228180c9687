"""The probe stage: the first pretraining run of every row of the grid -> ``metrics/probe.json`` (polysemy,
``pipeline.report.probe``)."""
from __future__ import annotations

import logging
from pathlib import Path

from pipeline.architectures import open_export
from pipeline.io import write_json
from pipeline.report.probe import corpus_sentences, frequent_words, missing_words, probe_model
from pipeline.settings import Lab

log = logging.getLogger(__name__)


def run(lab: Lab) -> dict:
    corpus = Path(lab.paths.corpus)
    sentences = corpus_sentences(corpus / "valid.txt") + corpus_sentences(corpus / "train.txt")
    listed, p = lab.corpus.probe, lab.probe
    words, senses = list(listed.words), list(listed.senses)
    missing = missing_words(sentences, [*words, *senses])
    for w in missing:
        log.warning("corpus.probe: %r does not occur in %s; it is left out", w, lab.paths.corpus)
    present = [w for w in words if w not in missing]
    present += frequent_words(sentences, listed.most_frequent, [*words, *senses])
    models = {}
    for name, spec in lab.runs.items():
        if spec.pretrain_seed:
            continue
        models[name] = probe_model(open_export(Path(spec.pretrain) / "hf"), sentences, present,
                                   [w for w in senses if w not in missing], limit=p.occurrences,
                                   min_occurrences=p.min_occurrences, neighbours=p.neighbours,
                                   pairs=p.random_pairs, seed=lab.run.seed)
        log.info("probe %s: corrected self-similarity per layer %s", name,
                 ", ".join(f"{x:.3f}" for x in models[name]["corrected"]))
    result = {"words": present, "senses": [w for w in senses if w not in missing], "missing": missing,
              "models": models}
    write_json(Path(lab.paths.metrics) / "probe.json", result)
    return result
