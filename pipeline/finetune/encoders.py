"""The pretrained export as the finetune stage uses it, whatever its architecture (``pipeline.model.registry``).

An export folder holds BERT (a Hugging Face folder: BERT with masked LM, or the
left-to-right GPT-style model) or one of the models BERT grew out of (word2vec,
ELMo; ``pipeline.model.folders``); its config.json's ``model_type`` says which.
Heads on frozen features read the states of its layers (``Encoder``); a
fine-tuned (or from-scratch) run trains its task model.
"""
from __future__ import annotations

from pathlib import Path

from torch import nn

from pipeline.model.downstream import Encoder
from pipeline.model.registry import architecture_of


def frozen_encoder(export_dir: Path) -> Encoder:
    """The export's layers, for heads on frozen features."""
    return Encoder(architecture_of(export_dir).encoder(export_dir))


def task_model(export_dir: Path, kind: str, num_outputs: int, pretrained: bool) -> nn.Module:
    """The network trained on a task of ``kind``: the export's weights (``pretrained``) or fresh ones."""
    return architecture_of(export_dir).task_model(kind, export_dir, num_outputs, pretrained)
