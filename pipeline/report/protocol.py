"""Every arm at its best in the report: the peak pretraining rate each swept row's pilots chose, what each arm
chose on dev for fine-tuning, and what each task's word-order control says about whether the task needs reading.

``sweeps`` reads the learning-rate sweep (``pipeline.sweep``) from the first run of each swept row: every
pilot's rate, fixed-set loss and accuracy (or that it diverged), and the rate chosen.

``choices`` reads, for every task, the fine-tuning of each run that chose settings on dev (the baseline's first
run, and each variant that chose its own): each mode's candidates with their dev scores, the chosen settings
and the test score at them. ``controls`` reads the word-order control the baseline's first run ran on every
task: each control mode on the task and with every text's words shuffled (the same seeds), the drop, and
whether the task needs word order -- its best arm without pretraining falls to within ``NEAR_CHANCE`` of
chance, or by at least ``BIG_DROP``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import numpy as np

from pipeline.io import read_json
from pipeline.names import CLASSICAL
from pipeline.variants import BASELINE

NEAR_CHANCE = 0.03   # within 3 points of chance: nothing left to learn from the words alone
BIG_DROP = 0.10      # or down by 10 points: the order carried much of what the arm learned
WITHOUT_PRETRAINING = (CLASSICAL, "scratch")


def sweeps(runs: Mapping[str, Mapping], labels: Mapping[str, str]) -> list[dict]:
    """Each swept row's pilots and choice (its first run's ``lr_sweep``), in the grid's order; ``labels``: each
    variant's label in the report."""
    out = []
    for run in runs.values():
        if run["pretrain_seed"]:
            continue
        chosen = read_json(Path(run["metrics"]) / "pretrain.json").get("lr_sweep")
        if chosen:
            out.append({"row": run["variant"], "label": labels.get(run["variant"], run["variant"]), **chosen})
    return out


def finetune_file(run: Mapping, task: str | None) -> Path:
    return Path(run["metrics"]) / ("finetune.json" if task is None else f"tasks/{task}/finetune.json")


def choices(runs: Mapping[str, Mapping], tasks: list[str | None]) -> list[dict]:
    """Per task: each choosing run's modes, their candidates' dev scores, the chosen settings and the test score."""
    out = []
    for task in tasks:
        entry: dict = {"task": task, "runs": {}}
        for name, run in runs.items():
            if run.get("chooser", name) != name:
                continue
            ft = read_json(finetune_file(run, task))
            metric = ft["metric"]
            entry.update(task_name=ft["task"], metric=metric)
            entry["runs"][name] = {mode: {
                "chosen": r["selection"]["chosen"], "seed": r["selection"].get("seed"),
                **{k: r["selection"][k] for k in ("extended", "at_limit") if k in r["selection"]},  # newer runs
                "grid": [{**{k: v for k, v in g.items() if k not in ("dev", "mlflow_run_id")}, "dev": g["dev"][metric]}
                         for g in r["selection"]["grid"]],
                "test": r[f"{metric}_mean"], "n": r["n"]}
                for mode, r in ((m, ft["modes"][m]) for m in ft.get("mode_order", ft["modes"]))}
        out.append(entry)
    return out


def controls(runs: Mapping[str, Mapping], tasks: list[str | None]) -> list[dict]:
    """Per task, the word-order control of the baseline's first run (tasks without one are left out)."""
    out = []
    for task in tasks:
        ft = read_json(finetune_file(runs[BASELINE], task))
        if not ft.get("control"):
            continue
        out.append(control(ft, task))
    return out


def control(ft: dict, task: str | None) -> dict:
    """One task's control: each mode's test score on the task and shuffled (the control's seeds on both sides),
    its drop, and the verdict from the best arm without pretraining."""
    metric, seeds = ft["metric"], ft["control"]["seeds"]
    chance = ft.get("chance")
    arms = {}
    order = [m for m in ft.get("mode_order", []) if m in ft["control"]["modes"]] or list(ft["control"]["modes"])
    for mode, shuffled in ((m, ft["control"]["modes"][m]) for m in order):
        on_task = [r[metric] for r in ft["modes"][mode]["runs"] if r["seed"] in seeds or mode == CLASSICAL]
        arms[mode] = {"task": round(float(np.mean(on_task)), 6), "shuffled": shuffled[f"{metric}_mean"],
                      "drop": round(float(np.mean(on_task)) - shuffled[f"{metric}_mean"], 6)}
    without = [m for m in WITHOUT_PRETRAINING if m in arms]
    best = max(without, key=lambda m: arms[m]["task"]) if without else None
    needs = None
    if best is not None:
        a = arms[best]
        near = chance is not None and a["shuffled"] <= chance + NEAR_CHANCE
        needs = bool(near or a["drop"] >= BIG_DROP)
    return {"task": task, "task_name": ft["task"], "metric": metric, "chance": chance, "seeds": seeds, "arms": arms,
            "best_without_pretraining": best, "needs_word_order": needs}
