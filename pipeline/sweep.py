"""The learning-rate sweep: each swept row of a grid at its own best peak learning rate, chosen by pilots.

An ablation that trains one arm at a good learning rate and another at a poor one measures the learning rate.
``grid.sweep`` (``SweepSettings``) names the rows to sweep (``baseline`` among them, or any of the grid's
variants), the peak rates ``lrs`` and the ``fraction`` of the budget a pilot trains for. Every (row, rate) is one
pilot: the row's first run (its settings, its seed, its examples) at that peak rate for ``fraction`` of
``trainer.max_steps``, the schedule (warm-up, decay) shrunk with it, scored on the fixed evaluation set.
The pilot writes ``pilot.json`` and its curves under ``<paths.metrics>/sweeps/<row>/lr-<rate>`` and no model.
Every pretraining run of a swept row then trains at the rate whose pilot reached the lowest fixed-set loss
at the masked positions (the loss still ranks rates where accuracy ties on the unigram plateau). A pilot whose
loss left the finite numbers is a recorded outcome, ``diverged``, ranked below every pilot that did not.

DVC runs each pilot as ``pilot@<row>-lr<rate>`` (``pilots``, the resolver ``lab.pilots``); a swept row's
pretrain stages depend on its folder of pilots (``runs.<run>.rate_from``). By hand:
``python -m stages.pretrain variant=layers_12 pilot_lr=3e-4`` runs one pilot. Torch-free.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from pipeline.errors import ConfigError, DataError
from pipeline.io import read_json

PILOT_FILE = "pilot.json"
SCORE = "fixed/loss_masked"  # what ranks the pilots: lower is better


def rate_text(lr: float) -> str:
    """A rate as it appears in names and folders: ``3e-4``, ``1p5e-4`` (1.5e-4), ``1e12``: distinct rates stay
    distinct, with no ``.`` (DVC reads one in a key as nesting) and no ``+`` (MLflow refuses it in a name)."""
    mantissa, exponent = f"{float(lr):.6e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".").replace(".", "p")
    return f"{mantissa}e{int(exponent)}"


def sweep_folder(metrics_root: str, row: str) -> str:
    """Where the pilots of ``row`` write, one folder per rate."""
    return f"{metrics_root}/sweeps/{row}"


def pilot_folder(metrics_root: str, row: str, lr: float) -> str:
    return f"{sweep_folder(metrics_root, row)}/lr-{rate_text(lr)}"


def pilot_name(row: str, lr: float) -> str:
    """A pilot's DVC key and MLflow run name stem: ``<row>-lr<rate>``."""
    return f"{row}-lr{rate_text(lr)}"


def pilot_steps(max_steps: int, fraction: float) -> int:
    """A pilot's budget: ``fraction`` of the full run's optimiser steps, at least one."""
    return max(1, round(max_steps * fraction))


def read_pilot(folder: Path) -> dict:
    """One pilot's record; a clear error where the pilot stage has not written it."""
    path = folder / PILOT_FILE
    if not path.is_file():
        raise DataError(f"{path} not found: expected the pilot of the learning-rate sweep to have run (dvc repro "
                        f"runs pilot@... before the swept row's pretrain stages)")
    return read_json(path)


def rank_value(pilot: Mapping) -> float:
    """The pilot's score for ranking, lower is better; a diverged pilot (or one without a finite score) last."""
    value = pilot.get("score")
    if pilot.get("diverged") or value is None or not math.isfinite(value):
        return math.inf
    return float(value)


def choose(pilots: list[Mapping], row: str) -> Mapping:
    """The pilot with the lowest score (the lower rate on a tie); refused where every pilot diverged."""
    ranked = sorted(pilots, key=lambda p: (rank_value(p), p["lr"]))
    if not ranked or math.isinf(rank_value(ranked[0])):
        raise DataError(f"grid.sweep: every pilot of row {row!r} diverged or has no score "
                        f"({', '.join(rate_text(p['lr']) for p in pilots)}): expected at least one rate that trains "
                        "(add lower rates to grid.sweep.lrs)")
    return ranked[0]


def chosen_rate(folder: str | Path, lrs: list[float], row: str) -> tuple[float, dict]:
    """The rate a swept row trains at, from its pilots in ``folder``, and the sweep's record for its metrics."""
    pilots = [read_pilot(Path(folder) / f"lr-{rate_text(lr)}") for lr in lrs]
    best = choose(pilots, row)
    record = {"chosen_lr": best["lr"], "score": SCORE, "fraction": best.get("fraction"),
              "edge": best["lr"] in (min(lrs), max(lrs)),
              "pilots": [{k: p.get(k) for k in ("lr", "score", "acc_masked", "diverged", "steps", "mlflow_run_id")}
                         for p in pilots]}
    return float(best["lr"]), record


def pilot_overrides(cfg: Any, lr: float) -> dict:
    """The settings a pilot changes on its row's first run: the peak rate, and a budget of ``fraction`` of the
    steps (validation and checkpoints no further apart than the pilot is long)."""
    sweep = cfg.grid.get("sweep")
    if not sweep:
        raise ConfigError(f"pilot_lr={lr}: grid {cfg.grid.name} has no sweep: expected grid.sweep (rows, lrs, "
                          "fraction), e.g. grid=depth")
    steps = pilot_steps(int(cfg.trainer.max_steps), float(sweep.fraction))
    return {"optim": {"lr": float(lr)},
            "trainer": {"max_steps": steps, "max_time": None,
                        "val_check_interval": min(int(cfg.trainer.val_check_interval), steps),
                        "checkpoint_every_n_steps": min(int(cfg.trainer.checkpoint_every_n_steps), steps)}}
