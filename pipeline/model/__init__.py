"""BERT in plain PyTorch with Hugging Face-compatible parameter names, and HF-format folders."""
from pipeline.model.bert import (
    BertConfig,
    BertForPreTraining,
    BertForSequenceClassification,
    BertModel,
    EncoderOutput,
    PreTrainingOutput,
    num_parameters,
    pretraining_loss,
)
from pipeline.model.hf import config_from_hf, config_to_hf, load_hf, save_hf

__all__ = [
    "BertConfig",
    "BertForPreTraining",
    "BertForSequenceClassification",
    "BertModel",
    "EncoderOutput",
    "PreTrainingOutput",
    "num_parameters",
    "pretraining_loss",
    "config_from_hf",
    "config_to_hf",
    "load_hf",
    "save_hf",
]
