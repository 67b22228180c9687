"""What a pretraining run learns to predict (torch-free: the validator imports it).

``objective.lm``: ``masked`` (BERT's cloze task over chosen positions),
``left_to_right`` (each token predicts the next, GPT-style, with causal
attention), ``cbow`` / ``skipgram`` (word2vec's static embeddings) or ``bilm``
(ELMo's forward and backward LSTM language models); ``objective.nsp`` adds
next-sentence prediction to a masked LM. Each trains one architecture
(``model.architecture``).
"""
from __future__ import annotations

ARCHITECTURE_OF = {"masked": "bert", "left_to_right": "bert", "cbow": "word2vec", "skipgram": "word2vec",
                   "bilm": "elmo"}
LM_OBJECTIVES = tuple(ARCHITECTURE_OF)


def metric_prefix(lm: str) -> str:
    """The prefix of the LM's metrics: ``mlm`` (``val/mlm_acc``), ``ltr``, ``w2v`` or ``bilm``."""
    return {"masked": "mlm", "left_to_right": "ltr", "cbow": "w2v", "skipgram": "w2v", "bilm": "bilm"}[lm]
