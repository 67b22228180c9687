"""The report stage: every run's metrics and curves -> ``reports/`` (HTML, Markdown, figures, JSON)."""
from __future__ import annotations

from pathlib import Path

from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from pipeline.io import read_json
from pipeline.report.render import write_report
from pipeline.report.results import BASELINE, ablation_results, load_families
from pipeline.tracking import check_tracking, git_commit, redact, tracking_uri


def run(cfg: DictConfig) -> dict:
    check_tracking(cfg)
    runs = OmegaConf.to_container(cfg.runs, resolve=True)
    res = ablation_results(runs, cfg.grid.name, load_families(list(cfg.grid.families)), list(cfg.grid.finetune.modes),
                           confidence=cfg.report.confidence)
    base = Path(runs[BASELINE]["metrics"])
    write_report(res, corpus=read_json(Path(cfg.paths.metrics) / "corpus.json"), pre=read_json(base / "pretrain.json"),
                 ft=read_json(base / "finetune.json"), client=MlflowClient(tracking_uri(cfg)),
                 out=Path(cfg.paths.reports),
                 lineage=[["git commit", git_commit()], ["grid", cfg.grid.name],
                          ["MLflow tracking", redact(tracking_uri(cfg))]],
                 probe=read_json(probe) if (probe := Path(cfg.paths.metrics) / "probe.json").exists() else None)
    return res
