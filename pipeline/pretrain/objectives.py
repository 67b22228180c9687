"""What a pretraining run learns to predict (torch-free: the validator imports it).

``objective.lm``: ``masked`` (BERT's cloze task over chosen positions),
``left_to_right`` (each token predicts the next, GPT-style, with causal
attention), ``cbow`` / ``skipgram`` (word2vec's static embeddings) or ``bilm``
(ELMo's forward and backward LSTM language models); ``objective.nsp`` adds
next-sentence prediction to a masked LM. Each is trained by one architecture
(``model.architecture``), whose config class declares it with the prefix of its
metrics (``pipeline.model.config``); the names here are read from there.
"""
from __future__ import annotations

from pipeline.model.config import config_classes

METRIC_PREFIX = {lm: prefix for c in config_classes().values() for lm, prefix in c.objectives.items()}
LM_OBJECTIVES = tuple(METRIC_PREFIX)


def metric_prefix(lm: str) -> str:
    """The prefix of the LM's metrics: ``mlm`` (``val/mlm_acc``), ``ltr``, ``w2v`` or ``bilm``."""
    return METRIC_PREFIX[lm]
