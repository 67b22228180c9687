"""The fine-tuning protocol: every arm at its best under the same tuning budget, chosen on dev, reported on test.

For each mode (an arm: fine-tuned, from scratch, a head on frozen features, the
classical baseline) the runner offers its candidates -- learning rates crossed
with poolings, TF-IDF's regularisation and n-grams. ``choose`` trains one run
per candidate with the first seed, scores each on the dev split alone and keeps
the best (the first on a tie); only then is the winner scored on test.
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
    choice was inherited from ``by``, the run that made it)."""
    settings: dict
    by: str
    seed: int | None = None
    grid: list[dict] = field(default_factory=list)

    def as_json(self) -> dict:
        return {"chosen": self.settings, "by": self.by, "seed": self.seed, "grid": self.grid}


def choose(runner: Runner, mode: str, seed: int, open_run: OpenRun, by: str) -> tuple[Choice, Trained]:
    """Train every candidate of ``mode`` with ``seed``, score each on dev, and return the choice with the winning
    run (not yet scored on test)."""
    headline = runner.task.metrics[0]
    grid, best, best_score = [], None, None
    candidates = runner.candidates(mode)
    for i, settings in enumerate(candidates):
        logger = open_run(mode, seed, {"candidate": str(i), **{k: str(v) for k, v in settings.items()}})
        if hasattr(logger, "log_hyperparams"):
            logger.log_hyperparams({f"finetune.{k}": v for k, v in settings.items()})
        run = runner.train(mode, settings, seed, logger)
        dev = scored(runner, run, "dev")
        grid.append({**settings, "dev": dev, "mlflow_run_id": getattr(logger, "run_id", None)})
        log.info("%s, candidate %d/%d %s: dev %s %.4f", mode, i + 1, len(candidates), settings, headline,
                 dev[headline])
        if best_score is None or dev[headline] > best_score:  # the first of equals stays
            if best is not None and best.logger is not None:
                best.logger.finalize("success")
            best, best_score = run, dev[headline]
            best.extra = {**(best.extra or {}), "dev": dev}
        elif logger is not None:
            logger.finalize("success")
        del run
        release()  # the losing candidate's network and Trainer
    log.info("%s: chose %s on dev (%s %.4f)", mode, best.settings, headline, best_score)
    return Choice(settings=dict(best.settings), by=by, seed=seed, grid=grid), best


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
