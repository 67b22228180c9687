"""The fine-tuning protocol: every arm at its best under the same tuning budget, chosen on dev, reported on test.

For each mode (an arm: fine-tuned, from scratch, a head on frozen features, the
classical baseline) the runner offers its candidates -- learning rates crossed
with poolings, TF-IDF's regularisation and n-grams. ``choose`` trains one run
per candidate with the first seed, scores each on the dev split alone and keeps
the best (the first on a tie); a learning rate (TF-IDF: its C) chosen on its
grid's edge extends the grid past that edge (``step_past``) until the choice is
inside it or on a bound of ``finetune.lr_bounds`` (``finetune.tfidf.c_bounds``);
only then is the winner scored on test.
``run_mode`` trains the other seeds at the chosen settings and scores every
run on dev and on test; a run that inherits its choice (a variant fine-tuned
like the baseline, or a further pretraining run) passes it in and trains every
seed. The test split is read by ``score(run, "test")`` alone, and that is
called only once the choice is fixed.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from pipeline.finetune.training import Runner, Trained
from pipeline.memory import release
from pipeline.names import CLASSICAL

log = logging.getLogger(__name__)

# A logger for one run: (mode, seed, tags) -> a Lightning logger with ``run_id``, ``log_metrics``, ``finalize``.
OpenRun = Callable[[str, int, dict], object]


@dataclass
class Choice:
    """A mode's chosen settings and the dev scores of every candidate behind them (``grid``: empty when the
    choice was inherited from ``by``, the run that made it). ``extended``: each step the learning-rate grid (TF-IDF:
    the C grid) took past one of its edges, in order (``{"edge": "lowest" | "highest", "lr" | "c": the value
    added}``; its run is in ``grid`` like every other); ``at_limit``: the edge whose bound (``finetune.lr_bounds``,
    ``finetune.tfidf.c_bounds``) the chosen value sits on, so the best may lie past what the settings let the
    protocol try, or None."""
    settings: dict
    by: str
    seed: int | None = None
    grid: list[dict] = field(default_factory=list)
    extended: list[dict] = field(default_factory=list)
    at_limit: str | None = None

    def as_json(self) -> dict:
        return {"chosen": self.settings, "by": self.by, "seed": self.seed, "grid": self.grid,
                "extended": self.extended, "at_limit": self.at_limit}


def choose(runner: Runner, mode: str, seed: int, open_run: OpenRun, by: str) -> tuple[Choice, Trained]:
    """Train every candidate of ``mode`` with ``seed``, score each on dev, and return the choice with the winning
    run (not yet scored on test).

    A learning rate chosen on its grid's edge says the best may lie past it, so the grid is extended there: one
    run one step past the edge (``step_past``), at the winner's other settings (its pooling) alone -- one run a
    step, the same rule for every arm -- and the best of every candidate so far is chosen again, until the chosen
    rate is inside the rates tried at its pooling or sits on the bound (``Grid.lr_bounds``) it may not pass. The
    classical baseline has no learning rate: its regularisation C extends the same way, at its n-grams, within
    ``Grid.c_bounds``. A grid of one value has no step to extend by."""
    headline = runner.task.metrics[0]
    grid: list[dict] = []
    best: Trained | None = None
    best_score: float | None = None

    def train(settings: dict, label: str, tags: dict) -> None:
        nonlocal best, best_score
        logger = open_run(mode, seed, {"candidate": str(len(grid)), **tags,
                                       **{k: str(v) for k, v in settings.items()}})
        if hasattr(logger, "log_hyperparams"):
            logger.log_hyperparams({f"finetune.{k}": v for k, v in settings.items()})
        run = runner.train(mode, settings, seed, logger)
        dev = scored(runner, run, "dev")
        grid.append({**settings, "dev": dev, "mlflow_run_id": getattr(logger, "run_id", None)})
        log.info("%s, %s %s: dev %s %.4f", mode, label, settings, headline, dev[headline])
        if best_score is None or dev[headline] > best_score:  # the first of equals stays
            if best is not None and best.logger is not None:
                best.logger.finalize("success")
            best, best_score = run, dev[headline]
            best.extra = {**(best.extra or {}), "dev": dev}
        elif logger is not None:
            logger.finalize("success")
        del run
        release()  # the losing candidate's network and Trainer

    candidates = runner.candidates(mode)
    for i, settings in enumerate(candidates):
        train(settings, f"candidate {i + 1}/{len(candidates)}", {})
    key, bounds, where = (("c", runner.recipe.grid.c_bounds, "finetune.tfidf.c_bounds") if mode == CLASSICAL else
                          ("lr", runner.recipe.grid.lr_bounds, "finetune.lr_bounds"))
    extended, at_limit = [], None
    while bounds is not None and key in best.settings:
        step = step_past(rates_beside(grid, best.settings, key), best.settings[key], bounds)
        if step is None:
            break
        edge, value = step
        if value is None:
            at_limit = edge
            log.warning("%s: chose %s %g, the bound of %s at the grid's %s edge: the best may lie past it",
                        mode, key, best.settings[key], where, edge)
            break
        extended.append({"edge": edge, key: value})
        train({**best.settings, key: value}, f"past the grid's {edge} {key}", {"extended": edge})
    log.info("%s: chose %s on dev (%s %.4f)", mode, best.settings, headline, best_score)
    return Choice(settings=dict(best.settings), by=by, seed=seed, grid=grid, extended=extended,
                  at_limit=at_limit), best


def rates_beside(grid: list[dict], settings: dict, key: str = "lr") -> list[float]:
    """The values of ``key`` (the learning rate, or TF-IDF's C) tried at ``settings``' other settings (its pooling,
    its n-grams), lowest first."""
    return sorted({g[key] for g in grid if all(g.get(k) == v for k, v in settings.items() if k != key)})


def step_past(rates: list[float], lr: float, bounds: tuple[float, float]) -> tuple[str, float | None] | None:
    """Where ``lr`` (or a C) stands among ``rates`` (distinct, lowest first): None inside them (or with a single rate,
    which gives no ratio to step by); on an edge, ``(edge, the next rate past it)`` -- the edge rate times the
    ratio between it and its neighbour, to two significant figures, and a step that would cross the edge's
    bound lands on it -- or ``(edge, None)`` where ``lr`` is on that bound already."""
    if len(rates) < 2 or rates[0] < lr < rates[-1]:
        return None
    if lr == rates[0]:
        edge, bound, exact = "lowest", bounds[0], max(bounds[0], lr * rates[0] / rates[1])
    else:
        edge, bound, exact = "highest", bounds[1], min(bounds[1], lr * rates[-1] / rates[-2])
    if (lr <= bound) if edge == "lowest" else (lr >= bound):
        return edge, None
    rounded = float(f"{exact:.2g}")  # 9e-3, not 0.009000000000000001, where that stays between lr and the bound
    inside = bound <= rounded < lr if edge == "lowest" else lr < rounded <= bound
    return edge, rounded if inside and exact != bound else exact


def run_mode(runner: Runner, mode: str, seeds: tuple[int, ...], choice: Choice, open_run: OpenRun,
             winner: Trained | None = None) -> list[dict]:
    """Every seed of ``mode`` at ``choice.settings``, each scored on dev and then on test: the winner of the
    choice stands for its own seed. The classical baseline is deterministic: one run."""
    runs = []
    for seed in (seeds[:1] if mode == CLASSICAL else seeds):
        if winner is not None and seed == winner.seed:
            run, dev, winner = winner, winner.extra["dev"], None
        else:
            run = runner.train(mode, choice.settings, seed, open_run(mode, seed, {"chosen": "true"}))
            dev = scored(runner, run, "dev")
        test = scored(runner, run, "test")
        extra = {k: v for k, v in (run.extra or {}).items() if k not in ("dev", "null_threshold")}
        runs.append({"seed": seed, **test, "dev": dev, **extra,
                     "mlflow_run_id": getattr(run.logger, "run_id", None)})
        if run.logger is not None:
            run.logger.finalize("success")
        del run
        release()
    return runs


def scored(runner: Runner, run: Trained, split: str) -> dict:
    """``runner.score`` of ``run`` on ``split``, logged to its MLflow run as ``val/...`` (dev) or ``test/...``
    where no Trainer logged it (the classical baseline)."""
    scores = runner.score(run, split)
    if run.scorer is not None and run.logger is not None:
        prefix = "val" if split == "dev" else "test"
        run.logger.log_metrics({f"{prefix}/{k}": v for k, v in scores.items() if isinstance(v, (int, float))}, step=0)
    return scores
