"""What a pretraining run learns to predict (torch-free: the validator imports it).

``objective.lm``: ``masked`` (BERT's cloze task over chosen positions) or
``left_to_right`` (each token predicts the next, GPT-style, with causal
attention); ``objective.nsp`` adds next-sentence prediction to a masked LM.
"""
from __future__ import annotations

LM_OBJECTIVES = ("masked", "left_to_right")


def metric_prefix(lm: str) -> str:
    """The prefix of the LM's metrics: ``mlm`` (``val/mlm_acc``) or ``ltr`` (``val/ltr_acc``)."""
    return "ltr" if lm == "left_to_right" else "mlm"
