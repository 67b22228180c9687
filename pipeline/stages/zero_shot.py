"""The zero_shot stage: one pretraining run's export scored on BLiMP -> ``<metrics>/zero_shot.json``, and its
accuracies (overall, per field, per phenomenon) added to the run's own MLflow run.

With ``zero_shot.data`` null (the default: BLiMP is not shipped) the stage writes that nothing was configured
and scores nothing, so `dvc repro` on a machine without BLiMP still reaches the report.
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from pipeline.architectures import architecture_of
from pipeline.data.tokenizer import load_tokenizer
from pipeline.errors import ConfigError, DataError
from pipeline.io import read_json, write_json
from pipeline.settings import Lab, ZeroShotSettings
from pipeline.tracking import log_to_run
from pipeline.zero_shot.blimp import BlimpResult, load
from pipeline.zero_shot.score import evaluate
from pipeline.zero_shot.scorers import NoSentenceScore, SentenceScorer

log = logging.getLogger(__name__)

NOT_CONFIGURED = ("zero_shot.data is null: no BLiMP folder configured, nothing scored (point it at a copy of "
                  "BLiMP's data/ folder: docs/zero_shot.md)")
PREFIX = "zero_shot"  # MLflow metric names: zero_shot/overall, zero_shot/field/<f>, zero_shot/phenomenon/<p>


def folder_scorer(folder: str | os.PathLike, *, pll: str = "token",
                  batch_size: int = 256) -> SentenceScorer | NoSentenceScore:
    """The scorer of any model folder the pretrain stage exports (or a Hugging Face BERT folder): its
    architecture's (``pipeline.architectures``, by config.json's ``model_type``) on its language model."""
    folder = Path(folder)
    arch = architecture_of(folder)
    try:
        return arch.scorer(arch.language_model(folder), load_tokenizer(folder), pll=pll, batch_size=batch_size)
    except DataError as e:
        raise DataError(str(e) if str(e).startswith(str(folder)) else f"{folder}: {e}") from e


def score_folder(folder: str | os.PathLike, settings: ZeroShotSettings, *, progress: bool = False) -> BlimpResult:
    """A model folder's BLiMP result under configured ``zero_shot`` settings (``data`` set)."""
    if settings.data is None:
        raise ConfigError("zero_shot.data is null: expected the folder of BLiMP's paradigm files to score on")
    scorer = folder_scorer(folder, pll=settings.pll, batch_size=settings.batch_size)
    paradigms = load(settings.data, settings.paradigms, settings.pairs)
    tokenizer = None if isinstance(scorer, NoSentenceScore) else load_tokenizer(folder)
    return evaluate(scorer, tokenizer, paradigms, max_pieces=settings.max_pieces, progress=progress)


def not_configured() -> dict[str, Any]:
    return {"configured": False, "reason": NOT_CONFIGURED, "scored": False, "overall": None}


def configured(lab: Lab, name: str) -> tuple[ZeroShotSettings, Path, dict[str, Any] | None]:
    """A zero_shot stage's settings, its output ``<metrics>/<name>.json``, and, without a BLiMP folder, the
    summary saying nothing was configured (already written to the output; else None)."""
    settings = lab.zero_shot
    out = Path(lab.paths.metrics) / f"{name}.json"
    if settings.data is not None:
        return settings, out, None
    log.info(NOT_CONFIGURED)
    write_json(out, not_configured())
    return settings, out, not_configured()


def mlflow_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """A scored summary's accuracies as MLflow metrics (fractions; groups with no scored pair left out)."""
    out = {f"{PREFIX}/overall": summary["overall"]}
    for part in ("field", "phenomenon"):
        out.update({f"{PREFIX}/{part}/{name}": v for name, v in summary[part].items()})
    return {k: v for k, v in out.items() if v is not None}


def run(lab: Lab) -> dict:
    """Score ``paths.pretrain``'s export on BLiMP under the ``zero_shot`` settings."""
    settings, out, skipped = configured(lab, "zero_shot")
    if skipped is not None:
        return skipped
    start = time.perf_counter()
    summary = score_folder(Path(lab.paths.pretrain) / "hf", settings, progress=lab.runtime.progress).summary()
    summary.update(configured=True, pairs_per_paradigm=settings.pairs,
                   seconds=round(time.perf_counter() - start, 1))
    if summary["scored"]:
        log.info("zero_shot: %.1f%% overall (mean over %d paradigms; %d pairs left out as too long) in %.0f s",
                 100 * summary["overall"], len(summary["paradigm"]), summary["excluded_total"], summary["seconds"])
        run_id = read_json(Path(lab.paths.pretrain) / "run.json").get("mlflow_run_id")
        if run_id:
            log_to_run(lab.tracking, run_id, mlflow_metrics(summary))
    write_json(out, summary)
    return summary
