"""Every generation of the lineage as the finetune stage uses it: the states of its layers, and its classifiers.

An export folder holds BERT (a Hugging Face folder: BERT with masked LM, or the
left-to-right GPT-style model) or one of the models BERT grew out of (word2vec,
ELMo; ``pipeline.model.folders``). ``Encoder`` gives any of them one face: the
states of its layers, the token layer first -- BERT's embeddings and blocks,
ELMo's token layer and LSTM layers (both directions side by side), word2vec's
one table. BERT keeps its own classifiers (a head on the pooled ``[CLS]``);
the others classify a text from the mean of their top layer over its tokens,
tag a word from its top-layer state and score an answer's start and end
tokens from it, fine-tuning every weight.
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from pipeline.io import read_json
from pipeline.model.bert import (BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification,
                                 BertModel)
from pipeline.model.elmo import ElmoLM
from pipeline.model.folders import TYPES, load_model, model_type
from pipeline.model.hf import config_from_hf, load_hf


class Encoder(nn.Module):
    """Any generation's layers: ``forward`` returns L+1 states (B, T, H), the token layer first."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model
        config = model.config
        self.hidden_size = config.hidden_size
        self.n_states = config.num_hidden_layers + 1

    def forward(self, input_ids, token_type_ids=None, attention_mask=None) -> tuple[torch.Tensor, ...]:
        m = self.model
        if isinstance(m, BertModel):
            return m(input_ids, token_type_ids, attention_mask, output_hidden_states=True).hidden_states
        if isinstance(m, ElmoLM):
            return m.hidden_states(input_ids, attention_mask)
        return (m(input_ids),)  # word2vec: one vector per token, whatever the context


def is_bert(export_dir: Path) -> bool:
    return model_type(export_dir) == "bert"


def _lineage_model(export_dir: Path, pretrained: bool) -> nn.Module:
    if pretrained:
        return load_model(export_dir)
    config = read_json(export_dir / "config.json")
    config_cls, model_cls = TYPES[config.pop("model_type")]
    return model_cls(config_cls(**config))


def frozen_encoder(export_dir: Path) -> Encoder:
    """The export's layers, for heads on frozen features."""
    return Encoder(load_hf(export_dir, BertModel) if is_bert(export_dir) else load_model(export_dir))


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


def sequence_classifier(export_dir: Path, num_outputs: int, pretrained: bool) -> nn.Module:
    """The network fine-tuned on a sentence task: the export's weights (``pretrained``) or fresh ones."""
    if is_bert(export_dir):
        if pretrained:
            return load_hf(export_dir, BertForSequenceClassification, num_labels=num_outputs)
        return BertForSequenceClassification(config_from_hf(read_json(export_dir / "config.json")), num_outputs)
    return PooledClassifier(_lineage_model(export_dir, pretrained), num_outputs)


def token_classifier(export_dir: Path, num_outputs: int, pretrained: bool) -> nn.Module:
    """The network fine-tuned on a tagging task (NER)."""
    if is_bert(export_dir):
        if pretrained:
            return load_hf(export_dir, BertForTokenClassification, num_labels=num_outputs)
        return BertForTokenClassification(config_from_hf(read_json(export_dir / "config.json")), num_outputs)
    return TokenClassifier(_lineage_model(export_dir, pretrained), num_outputs)


def span_model(export_dir: Path, pretrained: bool) -> nn.Module:
    """The network fine-tuned on extractive QA: (B, T, 2) start and end logits per token."""
    if is_bert(export_dir):
        if pretrained:
            return load_hf(export_dir, BertForQuestionAnswering)
        return BertForQuestionAnswering(config_from_hf(read_json(export_dir / "config.json")))
    return TokenClassifier(_lineage_model(export_dir, pretrained), 2)
