"""The fine-tuning modes: what trains on a task, and from which start (torch-free: the validator imports it).

* ``pretrained`` -- fine-tuning: every weight trains, from the pretrained export;
* ``scratch`` -- the same architecture and budget from random weights: what pretraining bought;
* ``frozen_<set>`` -- feature-based: the encoder frozen, a small head trained on
  the states of the chosen layers (``FEATURE_SETS``, the paper's Table 7);
* ``tfidf`` -- the classical baseline without pretraining (scikit-learn).
"""
from __future__ import annotations

FEATURE_SETS = ("embeddings", "last", "second_to_last", "sum_last_four", "concat_last_four", "weighted")
FROZEN = "frozen_"
CLASSICAL = "tfidf"
MODES = ("pretrained", "scratch", CLASSICAL, *(f"{FROZEN}{f}" for f in FEATURE_SETS))
# Modes whose result does not depend on the pretrained weights: run once, with a variant's first pretraining seed.
SEED_FREE = ("scratch", CLASSICAL)


def is_frozen(mode: str) -> bool:
    return mode.startswith(FROZEN)


def feature_set(mode: str) -> str:
    """``frozen_last`` -> ``last``."""
    return mode[len(FROZEN):]


def mode_label(mode: str) -> str:
    """How tables and charts name a mode."""
    return {"pretrained": "fine-tuned", "scratch": "from scratch", CLASSICAL: "TF-IDF"}.get(
        mode, mode.replace(FROZEN, "frozen: ").replace("_", " "))
