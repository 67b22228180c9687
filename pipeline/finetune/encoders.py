"""The pretrained export as downstream tasks use it, whatever its architecture.

An export folder holds BERT (a Hugging Face folder: BERT with masked LM, or the
left-to-right GPT-style model) or one of the models BERT grew out of (word2vec,
ELMo; ``pipeline.model.folders``); its config.json's ``model_type`` says which.
The stage that opens an export resolves its architecture once
(``pipeline.architectures.open_export``) and hands down an ``Export``: heads on
frozen features read the states of its layers (``frozen_encoder``); a
fine-tuned (or from-scratch) run trains its task model.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from torch import nn

from pipeline.model.downstream import Encoder


class Downstream(Protocol):
    """What an architecture offers downstream (``pipeline.architectures.Architecture``)."""

    def read_config(self, folder: Path): ...

    def encoder(self, folder: Path) -> nn.Module: ...

    def poolings(self) -> tuple[str, ...]: ...

    def task_model(self, kind: str, folder: Path, num_outputs: int, pretrained: bool,
                   pooling: str | None = None) -> nn.Module: ...


@dataclass(frozen=True)
class Export:
    """A pretrained export folder and the downstream parts of its architecture."""
    folder: Path
    architecture: Downstream

    def frozen_encoder(self) -> Encoder:
        """The export's layers, for heads on frozen features."""
        return Encoder(self.architecture.encoder(self.folder))

    @property
    def poolings(self) -> tuple[str, ...]:
        """How its sentence classifier, and a head on its frozen features, may sum up a text."""
        return self.architecture.poolings()

    @property
    def causal(self) -> bool:
        """Whether it reads left to right (its summary token is the last one, not [CLS])."""
        return bool(getattr(self.architecture.read_config(self.folder), "causal", False))

    def task_model(self, kind: str, num_outputs: int, pretrained: bool, pooling: str | None = None) -> nn.Module:
        """The network trained on a task of ``kind``: the export's weights (``pretrained``) or fresh ones."""
        return self.architecture.task_model(kind, self.folder, num_outputs, pretrained, pooling)
