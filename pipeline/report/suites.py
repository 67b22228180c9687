"""A task suite in the report: each family's rows across the suite's columns (a task, its metric, a mode).

Every column is the family's table computed on that task's fine-tuning alone
(``family_result``), so each cell carries the same test as the single-task
table; ``add_suite`` puts the columns, their findings and their numbers
(``summary.json``, the grid's MLflow run) into the results of the suite's
first task.
"""
from __future__ import annotations

from typing import Mapping

from pipeline.errors import ConfigError
from pipeline.finetune.modes import mode_label
from pipeline.report.model import AblationResults, FamilyResult, Row, SuiteCell
from pipeline.report.cells import signed
from pipeline.report.results import BASELINE, by_variant, family_result, load_runs, score


def first_task(suite: Mapping) -> str:
    """The task of the suite's first column: the one the report's detailed tables show."""
    return (suite.get("columns") or [{"task": next(iter(suite["tasks"]))}])[0]["task"]


def column_label(col: Mapping, task_name: str, metric: str) -> str:
    """A suite column's heading: the task, the metric, and the mode where the column fixes one."""
    mode = f" ({mode_label(col['mode'])})" if col.get("mode") else ""
    return f"{task_name} {metric}{mode}"


def suite_result(runs: Mapping[str, Mapping], suite: Mapping, families: Mapping[str, dict], modes: list[str],
                 confidence: float) -> dict:
    """The grid across a suite's tasks: per family, each row's score in each column (a task, its metric, a mode)
    with its interval, its test against the family's reference row in that column, and the paper's number.

    Each column is the family's table computed on that task's fine-tuning (``family_result``), so every cell's
    verdict is the same test as the single-task table's.
    """
    columns = list(suite.get("columns") or [{"task": t} for t in suite["tasks"]])
    per_task = {t: by_variant(load_runs(runs, t)) for t in dict.fromkeys(c["task"] for c in columns)}
    cols, tables = [], {name: [] for name in families}
    for col in columns:
        variants = per_task[col["task"]]
        ft = variants[BASELINE][0]["finetune"]
        metric = col.get("metric") or ft["metric"]
        if metric not in ft["metrics"]:
            raise ConfigError(f"suite.columns: metric {metric!r} for task {col['task']} is not one the task reports "
                              f"({', '.join(ft['metrics'])})")
        col_modes = [col["mode"], *(m for m in modes if m != col["mode"])] if col.get("mode") else list(modes)
        cols.append({"task": col["task"], "task_name": ft["task"], "metric": metric, "mode": col.get("mode"),
                     "paper": col.get("paper"), "label": column_label(col, ft["task"], metric),
                     "train_examples": ft.get("train_questions", ft["train_examples"]),
                     "dev_examples": ft.get("dev_questions", ft["dev_examples"]),
                     "test_examples": ft.get("test_questions", ft.get("test_examples", 0)),
                     "unit": "questions" if "train_questions" in ft else "examples",
                     "comparable": ft.get("comparable", True)})
        for name, spec in families.items():
            tables[name].append(family_result(name, spec, variants, metric, col_modes, confidence))
    fams = [suite_family(name, spec, cols, tables[name]) for name, spec in families.items()]
    summary: dict[str, dict[str, float]] = {}  # per variant, each column's score (its mode, else the grid's first)
    for col in cols:
        mode = col["mode"] or modes[0]
        for variant, vruns in per_task[col["task"]].items():
            s = score(vruns, mode, col["metric"], confidence)
            if s:
                summary.setdefault(variant, {})[f"{col['task']}/{mode}_{col['metric']}"] = s.mean
    return {"name": suite.get("name"), "columns": cols, "families": fams, "summary": summary}


def suite_family(name: str, spec: dict, cols: list[dict], tables: list[FamilyResult]) -> dict:
    """A family across the suite's columns: each row's cell in each column (its table on that column's task)."""
    rows = []
    by_label = [{r.label: r for r in table.rows} for table in tables]  # a mode row a task lacks is absent
    for label in (row["label"] for row in spec["rows"]):
        present = [rs[label] for rs in by_label if label in rs]
        if present:
            rows.append({"label": label, "name": present[0].name, "key": present[0].key,
                         "ran": any(r.ran for r in present),
                         "cells": [suite_cell(rs.get(label), col) for col, rs in zip(cols, by_label)]})
    return {"name": name, "title": spec["title"], "reference_row": tables[0].reference_row, "rows": rows,
            "classical": [table.classical.mean if table.classical else None for table in tables]}


def suite_cell(row: Row | None, col: dict) -> SuiteCell:
    """A row's cell in one column: its primary score there and its test (not ran: the paper's number alone)."""
    paper = row.paper.get(col["paper"]) if row and col["paper"] else None
    if row is None or not row.ran or not row.primary:
        return SuiteCell(ran=False, paper=paper)
    s = row.primary
    return SuiteCell(ran=True, paper=paper, mean=s.mean, low=s.low, high=s.high, n_pretrain=s.n_pretrain,
                     n_finetune=s.n_finetune, vs=row.vs, vs_row=row.vs_row)


def suite_findings(suite: dict) -> list[str]:
    """One sentence per row and family across the suite's columns: the difference to the reference in each,
    its verdict, and the paper's difference where it has both numbers."""
    out = []
    for fam in suite["families"]:
        ref = next((r for r in fam["rows"] if r["ran"]), None)
        for r in fam["rows"]:
            parts = []
            for col, cell, ref_cell in zip(suite["columns"], r["cells"], ref["cells"] if ref else []):
                if not cell.ran or cell.vs is None:
                    continue
                part = f"{col['label']} {signed(col['metric'], cell.vs.diff)} ({cell.vs.verdict})"
                if cell.paper is not None and ref_cell.paper is not None and cell.vs_row == ref["label"]:
                    part += f", paper {cell.paper - ref_cell.paper:+.1f}".replace("-", "−")
                parts.append(part)
            if parts:
                against = r["cells"][0].vs_row or fam["reference_row"]
                out.append(f"{fam['title']}, across suite {suite['name']}: {r['label']} against {against}: "
                           + "; ".join(parts) + ".")
    return out


def add_suite(res: AblationResults, runs: Mapping[str, Mapping], suite: Mapping, families: Mapping[str, dict],
              modes: list[str], confidence: float) -> AblationResults:
    """``res`` (``ablation_results`` of the suite's first task) with every column of the suite: ``suite``, its
    findings first, each variant's score per column in ``summary`` and each cell's numbers in ``table``."""
    res.suite = suite_result(runs, suite, families, modes, confidence)
    res.findings = [*suite_findings(res.suite), *res.findings]
    for variant, numbers in res.suite.pop("summary").items():  # what `dvc exp show` lists
        res.summary.setdefault(variant, {}).update(numbers)
    for i, col in enumerate(res.suite["columns"]):  # each cell's numbers in the grid's MLflow run
        key = f"{col['task']}/{col['mode'] or 'primary'}_{col['metric']}"
        for fam in res.suite["families"]:
            for r in fam["rows"]:
                cell = r["cells"][i]
                if cell.ran:
                    entry = res.table.setdefault(fam["name"], {}).setdefault(r.get("key") or r["name"], {})
                    entry.update({f"{key}_{k}": getattr(cell, k) for k in ("mean", "low", "high")
                                  if getattr(cell, k) is not None})
                    if cell.vs and cell.vs.p is not None:
                        entry[f"{key}_vs_p"] = cell.vs.p
    return res
