"""The fine-tuning modes (``pipeline.names.MODES``): what trains on a task, and from which start.

* ``pretrained`` -- fine-tuning: every weight trains, from the pretrained export;
* ``scratch`` -- the same architecture and budget from random weights: what pretraining bought;
* ``frozen_<set>`` -- feature-based: the encoder frozen, a small head trained on
  the states of the chosen layers (``FEATURE_SETS``, the paper's Table 7);
* ``tfidf`` -- the classical baseline without pretraining (scikit-learn).
"""
from __future__ import annotations

from pipeline.names import CLASSICAL, FROZEN


def is_frozen(mode: str) -> bool:
    return mode.startswith(FROZEN)


def feature_set(mode: str) -> str:
    """``frozen_last`` -> ``last``."""
    return mode[len(FROZEN):]


def mode_label(mode: str) -> str:
    """How tables and charts name a mode."""
    return {"pretrained": "fine-tuned", "scratch": "from scratch", CLASSICAL: "TF-IDF"}.get(
        mode, mode.replace(FROZEN, "frozen: ").replace("_", " "))


def scratch_seeds(seeds: tuple[int, ...] | list[int], baseline_runs: int) -> tuple[int, ...]:
    """The fine-tuning seeds from scratch runs: ``seeds``, then the next integers up to ``baseline_runs`` in all.
    From scratch trains no pretraining run, so its fine-tuning runs are its only units, where the pretrained
    arm's are the baseline's pretraining runs: as many on both sides of their test."""
    seeds = tuple(seeds)
    return seeds + tuple(range(max(seeds) + 1, max(seeds) + 1 + baseline_runs - len(seeds)))
