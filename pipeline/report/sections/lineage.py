"""Lineage: where every number comes from -- the grid, the code, the tracking store, each run's MLflow ids."""
from __future__ import annotations

from pipeline.report.doc import Doc, Sources
from pipeline.report.model import AblationResults


def write(doc: Doc, src: Sources) -> None:
    lineage_section(doc, src.res, src.lineage)


def lineage_section(doc: Doc, res: AblationResults, lineage: list[list[str]]) -> None:
    """Where every number comes from: the grid, the code, the tracking store, and each run's MLflow ids."""
    doc.heading("Lineage")
    rows = [list(row) for row in lineage]
    for name, run in res.runs.items():
        n_finetune = sum(len(ids) for ids in run.finetune_runs.values())
        rows.append([f"{name}: pretraining run", run.pretrain.mlflow_run_id])
        rows.append([f"{name}: fine-tuning runs",
                     f"{n_finetune} runs, e.g. {next(iter(run.finetune_runs.values()))[0]}"])
    doc.table(["lineage", ""], rows)
