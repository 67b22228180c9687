"""The zero_shot_floor stage: the count-based floor of BLiMP, once per grid -> ``metrics/zero_shot_floor.json``.

An interpolated Kneser-Ney n-gram LM (``pipeline.zero_shot.ngram_lm``) counted on the baseline's pretraining text
(``<paths.pairs>/train/corpus``, the pieces every run read) scores the same pairs as the models: those whose
sentences fit the model's positions (and ``zero_shot.max_pieces``), so each row and its floor read one set of pairs.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

from pipeline.data.tokenizer import CLS, load_tokenizer
from pipeline.io import write_json
from pipeline.settings import Lab
from pipeline.stages.zero_shot import configured
from pipeline.zero_shot.blimp import load, read_published
from pipeline.zero_shot.score import evaluate, ngram_scorer

log = logging.getLogger(__name__)


def run(lab: Lab) -> dict:
    """Count the n-gram LM on ``paths.pairs``'s training text and score BLiMP with it."""
    settings, out, skipped = configured(lab, "zero_shot_floor")
    if skipped is not None:
        return skipped
    start = time.perf_counter()
    paradigms = load(settings.data, settings.paradigms, settings.pairs)  # bad data fails before counting
    tok = load_tokenizer(lab.paths.tokenizer)
    progress = lab.runtime.progress
    scorer = ngram_scorer(Path(lab.paths.pairs) / "train" / "corpus", tok.token_to_id(CLS),
                          order=settings.ngram_order, progress=progress)
    positions = lab.model.max_position_embeddings
    limit = min(positions, settings.max_pieces or positions)
    summary = evaluate(scorer, tok, paradigms, max_pieces=limit, progress=progress).summary()
    summary.update(configured=True, order=settings.ngram_order, pairs_per_paradigm=settings.pairs,
                   max_pieces=limit, seconds=round(time.perf_counter() - start, 1))
    if settings.published:  # the authors' own numbers, carried to the report in a DVC-tracked file
        published = read_published(settings.published)
        summary["published"] = {"overall": published.overall, "phenomenon": published.phenomenon}
    log.info("zero_shot_floor: the %d-gram LM at %.1f%% overall", settings.ngram_order, 100 * summary["overall"])
    write_json(out, summary)
    return summary
