"""The report stage: every run's metrics and curves -> ``reports/`` (HTML, Markdown, figures, JSON)."""
from __future__ import annotations

from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from pipeline.io import read_json
from pipeline.report.render import write_report
from pipeline.report.results import BASELINE, ablation_results, load_families
from pipeline.tracking import redact


def run(cfg: DictConfig) -> dict:
    runs = OmegaConf.to_container(cfg.runs, resolve=True)
    res = ablation_results(runs, cfg.grid.name, load_families(list(cfg.grid.families)), list(cfg.grid.finetune.modes),
                           confidence=cfg.report.confidence)
    base = Path(runs[BASELINE]["metrics"])
    write_report(res, corpus=read_json(Path(cfg.paths.metrics) / "corpus.json"), pre=read_json(base / "pretrain.json"),
                 ft=read_json(base / "finetune.json"), out=Path(cfg.paths.reports),
                 lineage=[["grid", cfg.grid.name], ["code", "the git commit each MLflow run records (tag git_commit)"],
                          ["MLflow tracking", redact(cfg.tracking.uri) if cfg.tracking.get("uri")
                                                else "the local store (mlflow.db in the project folder) or "
                                                     "$MLFLOW_TRACKING_URI"]],
                 probe=read_json(probe) if (probe := Path(cfg.paths.metrics) / "probe.json").exists() else None)
    return res
