"""Any generation of the lineage as a downstream task uses it: the states of its layers, and a classifier on them.

Every pretrained network offers ``layer_states(input_ids, token_type_ids, attention_mask)``:
its L+1 layers, the token layer first -- BERT's embeddings and blocks, ELMo's
token layer and LSTM layers (both directions side by side), word2vec's one
table. ``Encoder`` gives any of them one face for heads on frozen features.
BERT brings its own classifiers (a head on the pooled ``[CLS]``, Hugging
Face's parts and names); the models BERT grew out of classify a text from the
mean of their top layer over its tokens (``PooledClassifier``) and tag a token
from its top-layer state (``TokenClassifier``), fine-tuning every weight.
"""
from __future__ import annotations

import torch
from torch import nn


class Encoder(nn.Module):
    """Any generation's layers: ``forward`` returns L+1 states (B, T, H), the token layer first."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        self.hidden_size = model.config.hidden_size
        self.n_states = model.config.num_hidden_layers + 1

    def forward(self, input_ids, token_type_ids=None, attention_mask=None) -> tuple[torch.Tensor, ...]:
        return self.model.layer_states(input_ids, token_type_ids, attention_mask)


class PooledClassifier(nn.Module):
    """A label (or a number) per text from the mean of the top layer's states over its tokens."""

    def __init__(self, model: nn.Module, num_labels: int, dropout: float = 0.1):
        super().__init__()
        self.encoder = Encoder(model)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(self.encoder.hidden_size, num_labels)

    def forward(self, input_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        top = self.encoder(input_ids, token_type_ids, attention_mask)[-1]                  # (B, T, H)
        m = (attention_mask if attention_mask is not None else torch.ones_like(input_ids))[..., None].to(top.dtype)
        return self.classifier(self.dropout((top * m).sum(1) / m.sum(1)))                   # (B, labels)


class TokenClassifier(PooledClassifier):
    """A label per token from its top-layer state (the same parts as ``PooledClassifier``, no pooling)."""

    def forward(self, input_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        return self.classifier(self.dropout(self.encoder(input_ids, token_type_ids, attention_mask)[-1]))


# The task models of a network without its own, by the kind of task (``TaskData.kind``): a label per text, a label
# per word, a start and an end score per token (SQuAD: two outputs).
TASK_HEADS = {"sentence": PooledClassifier, "ner": TokenClassifier, "span": TokenClassifier}
