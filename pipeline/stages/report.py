"""The report stage: every run's metrics and curves -> ``reports/`` (HTML, Markdown, figures, JSON).

The report reads only files DVC tracks. Afterwards the grid gets its MLflow run
(``pipeline.tracking.record_grid``): the parent of every pretraining run
behind the report, with the report's numbers as metrics and the report itself
as artifacts.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.io import read_json
from pipeline.report import grammar, ledger, noise, protocol
from pipeline.report.model import AblationResults
from pipeline.report.render import write_report
from pipeline.report.results import BASELINE, ablation_results, load_families, row_labels
from pipeline.report.suites import add_suite, first_task
from pipeline.settings import Lab, as_plain
from pipeline.tracking import check_tracking, record_grid, redact


def run(lab: Lab) -> AblationResults:
    check_tracking(lab.tracking)
    grid, confidence, paths = lab.grid, lab.report.confidence, lab.paths
    runs = {name: as_plain(spec) for name, spec in lab.runs.items()}
    suite = as_plain(lab.suite) if lab.suite else None
    families, modes = load_families(list(grid.families)), list(grid.finetune.modes)
    task = first_task(suite) if suite else None
    eval_meta = read_json(Path(paths.eval_set) / "meta.json")  # the eval_set stage's sets and count-based floors
    res = ablation_results(runs, grid.name, families, modes, confidence=confidence, task=task,
                           floors=eval_meta["floors"], eval_meta=eval_meta)
    if suite:
        res = add_suite(res, runs, suite, families, modes, confidence)
    res.noise = noise.grid_noise(res, runs, confidence,  # every task's: after the suite adds its columns
                                 lambda t: lab.report.target(t if t is not None else lab.task.name))
    floor = Path(paths.metrics) / "zero_shot_floor.json"
    add_grammar(res, runs, read_json(floor) if floor.exists() else None, confidence)
    probe = read_json(probe_file) if (probe_file := Path(paths.metrics) / "probe.json").exists() else None
    add_protocol(res, runs, [c["task"] for c in res.suite["columns"]] if suite else [None])
    res.ledger = ledger.ledger(res, probe, confidence)
    res.summary["ledger"] = ledger.summary(res.ledger)
    base = Path(runs[BASELINE]["metrics"])
    ft = base / "finetune.json" if task is None else base / "tasks" / task / "finetune.json"
    write_report(res, corpus=read_json(Path(paths.metrics) / "corpus.json"), pre=read_json(base / "pretrain.json"),
                 ft=read_json(ft), out=Path(paths.reports),
                 lineage=[["grid", grid.name], ["code", "the git commit each MLflow run records (tag git_commit)"],
                          ["MLflow tracking", redact(lab.tracking.uri) if lab.tracking.uri
                                                else "the local store (mlflow.db in the project folder) or "
                                                     "$MLFLOW_TRACKING_URI"]],
                 probe=probe)
    pilots = [p["mlflow_run_id"] for s in res.sweeps or [] for p in s["pilots"] if p.get("mlflow_run_id")]
    record_grid(lab.tracking, grid.name, grid_metrics(res), [r.pretrain.mlflow_run_id for r in res.runs.values()],
                Path(paths.reports), groups={"lr-sweep": pilots} if pilots else None)
    return res


def add_grammar(res: AblationResults, runs: dict, floor: dict | None, confidence: float) -> None:
    """BLiMP zero-shot (``pipeline.report.grammar``) into the results, and each row's overall score and the
    floor's into ``summary.json``."""
    res.zero_shot = grammar.grid_result(res.families, runs, floor, confidence,
                                        res.intrinsic.floors if res.intrinsic else [])
    for variant, mean in res.zero_shot["mean"].items():
        res.summary.setdefault(variant, {})["blimp_overall"] = mean
    if res.zero_shot["floor"]:
        res.summary.setdefault("floors", {})["blimp_ngram"] = res.zero_shot["floor"]["overall"]


def add_protocol(res: AblationResults, runs: dict, tasks: list[str | None]) -> None:
    """What each arm chose on dev, and each task's word-order control (``pipeline.report.protocol``), into the
    results; each task's control in ``summary.json`` (``control``: ``<task>/<mode>_drop``, ``<task>/needs_word_order``)."""
    tasks = list(dict.fromkeys(tasks))
    res.choices = protocol.choices(runs, tasks)
    res.sweeps = protocol.sweeps(runs, row_labels(res.families)) or None
    for s in res.sweeps or []:  # each swept row's peak rate, in summary.json
        res.summary.setdefault(s["row"], {})["pretrain_lr"] = s["chosen_lr"]
    res.controls = protocol.controls(runs, tasks)
    for c in res.controls:
        entry = res.summary.setdefault("control", {})
        entry.update({f"{c['task_name']}/{mode}_drop": a["drop"] for mode, a in c["arms"].items()})
        if c["needs_word_order"] is not None:
            entry[f"{c['task_name']}/needs_word_order"] = c["needs_word_order"]


def grid_metrics(res: AblationResults) -> dict[str, float]:
    """The report's numbers as MLflow metrics: ``<row>/<number>`` of ``summary.json`` and
    ``<family>/<row>/<number>`` of its tables (means, intervals, differences, p-values)."""
    out = {f"{row}/{k}": v for row, numbers in res.summary.items() for k, v in numbers.items()}
    out.update({f"{fam}/{row}/{k}": v for fam, rows in res.table.items() for row, numbers in rows.items()
                for k, v in numbers.items()})
    return {k: float(v) for k, v in out.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
