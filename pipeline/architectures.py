"""The lineage's architectures, each registered once: what a stage asks whenever a model's kind matters.

It sits above every floor whose parts it names (``pipeline.model``, ``pipeline.pretrain``,
``pipeline.zero_shot``) and below the stages (``pipeline.stages``), which resolve an architecture once --
from ``model.architecture`` or from an export's config.json -- and hand its parts down.
One line of ``ARCHITECTURES`` per architecture names its parts:

* ``config`` -- its hyperparameters and their checks (``pipeline.model_config``): its name
  (``model.architecture``, the one setting that decides it), the objectives it trains
  (``objective.lm``), the prefix of their metrics and the names the report gives them;
* ``network`` -- what pretraining trains and the export holds; its ``layer_states`` are
  what downstream tasks read (``pipeline.model.downstream``);
* ``pretraining`` -- its LightningModule (``pipeline.pretrain``), built by ``from_setup``;
* ``scorer`` -- how it scores a sentence zero-shot (``pipeline.zero_shot.scorers``): its pretrained network
  and tokenizer -> a sentence scorer (pseudo-log-likelihood, left to right, both directions), or the
  statement that it has no probability of a sentence;
* ``folder`` -- the format of its export: a Hugging Face folder (``pipeline.model.hf``) or
  the lab's (``pipeline.model.folders``). Written once after pretraining, it is read back
  as the pretrained network (``model.init_from``), the encoder of frozen features, or a
  task model, fine-tuned or from scratch (the export's own ``model_type`` says which
  architecture a folder holds); its ``language_model`` is the network with the LM head a scorer needs.

Adding an architecture: its config class, network, pretraining module and scorer in their floors, and one
line here (docs/pipeline.md, "Adding an architecture").
"""
from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Protocol

from torch import nn

from pipeline.errors import DataError
from pipeline.finetune.encoders import Export
from pipeline.model.bert import BertForPreTraining
from pipeline.model_config import BertConfig, ElmoConfig, ModelConfig, StaticConfig, config_class
from pipeline.model.elmo import ElmoLM
from pipeline.model.folders import LabFolder, model_type
from pipeline.model.hf import BertFolder
from pipeline.model.static import StaticEmbeddings
from pipeline.zero_shot.scorers import NoSentenceScore, SentenceScorer, bert_scorer, elmo_scorer, word2vec_scorer


class FolderFormat(Protocol):
    """How an architecture's export is written and read (``arch`` is the architecture it belongs to)."""

    def model_type(self, arch: Architecture) -> str: ...
    def model_types(self, arch: Architecture) -> tuple[str, ...]: ...

    def save(self, arch: Architecture, network: nn.Module, out_dir: Path, tokenizer_dir: Path) -> Path: ...

    def read_config(self, arch: Architecture, folder: Path) -> ModelConfig: ...

    def load(self, arch: Architecture, folder: Path) -> nn.Module: ...

    def language_model(self, arch: Architecture, folder: Path) -> nn.Module: ...

    def encoder(self, arch: Architecture, folder: Path) -> nn.Module: ...

    def poolings(self, arch: Architecture) -> tuple[str, ...]: ...

    def task_model(self, arch: Architecture, kind: str, folder: Path, num_outputs: int,
                   pretrained: bool, pooling: str | None = None) -> nn.Module: ...


@dataclass(frozen=True)
class Architecture:
    config: type[ModelConfig]
    network: type[nn.Module]
    pretraining_at: str  # "<module>:<class>" of its LightningModule, imported when asked for (``pretraining``)
    scorer: Callable[..., SentenceScorer | NoSentenceScore]  # (network, tokenizer, *, pll, batch_size)
    folder: FolderFormat

    @property
    def pretraining(self) -> type:
        """Its LightningModule (a ``pipeline.pretrain.module.PretrainingModule``), imported here and not with the
        registry: a stage that only reads exports (the probe, zero-shot scoring) does not load Lightning, about 5 s
        of its start on 2 cores."""
        module, name = self.pretraining_at.split(":")
        return getattr(importlib.import_module(module), name)

    @property
    def name(self) -> str:
        return self.config.architecture

    @property
    def model_type(self) -> str:
        """config.json's ``model_type`` in its export."""
        return self.folder.model_type(self)

    @property
    def model_types(self) -> tuple[str, ...]:
        """Every ``model_type`` its export folders may carry (BERT's pre-LayerNorm one is RoBERTa-PreLayerNorm's)."""
        return self.folder.model_types(self)

    def save(self, network: nn.Module, out_dir: Path, tokenizer_dir: Path) -> Path:
        """The export: ``network`` (torch.compile's wrapper undone) and the tokenizer files, written atomically."""
        return self.folder.save(self, network, out_dir, tokenizer_dir)

    def read_config(self, folder: Path) -> ModelConfig:
        return self.folder.read_config(self, folder)

    def load(self, folder: Path) -> nn.Module:
        """The pretrained ``network`` of an export, in eval mode."""
        return self.folder.load(self, folder)

    def language_model(self, folder: Path) -> nn.Module:
        """The pretrained network with the LM head a sentence scorer reads, in eval mode (refused if it has none)."""
        return self.folder.language_model(self, folder)

    def encoder(self, folder: Path) -> nn.Module:
        """The network whose ``layer_states`` are an export's frozen features, in eval mode."""
        return self.folder.encoder(self, folder)

    def poolings(self) -> tuple[str, ...]:
        """How its sentence classifier may sum up a text (``pipeline.names.POOLINGS``)."""
        return self.folder.poolings(self)

    def task_model(self, kind: str, folder: Path, num_outputs: int, pretrained: bool,
                   pooling: str | None = None) -> nn.Module:
        """The network trained on a task of ``kind`` (``TaskData.kind``): the export's weights (``pretrained``)
        or fresh ones of its config (the architecture's own initialisation), with a new head of ``num_outputs``
        reading the text's summary of ``pooling`` (a sentence task's)."""
        return self.folder.task_model(self, kind, folder, num_outputs, pretrained, pooling)


ARCHITECTURES = {a.name: a for a in (
    #            config        network             pretraining                                    zero-shot scorer
    Architecture(BertConfig,   BertForPreTraining, "pipeline.pretrain.module:BertPretraining",    bert_scorer,
                 BertFolder()),
    Architecture(StaticConfig, StaticEmbeddings,   "pipeline.pretrain.lineage:StaticPretraining", word2vec_scorer,
                 LabFolder(vectors=True)),
    Architecture(ElmoConfig,   ElmoLM,             "pipeline.pretrain.lineage:BiLMPretraining",   elmo_scorer,
                 LabFolder()),
)}


def architecture(name: str) -> Architecture:
    """The architecture of ``model.architecture``."""
    return ARCHITECTURES[config_class(name).architecture]  # config_class refuses an unknown name


def architecture_of(folder: str | os.PathLike) -> Architecture:
    """The architecture of an export folder (or any Hugging Face BERT folder), by its config.json's ``model_type``."""
    kind = model_type(folder)
    found = next((a for a in ARCHITECTURES.values() if kind in a.model_types), None)
    if found is None:
        raise DataError(f"{Path(folder) / 'config.json'}: model_type={kind!r}: expected one of "
                        f"{', '.join(t for a in ARCHITECTURES.values() for t in a.model_types)}")
    return found


def open_export(folder: str | os.PathLike) -> Export:
    """An export folder with the downstream parts of its architecture (``architecture_of``)."""
    return Export(Path(folder), architecture_of(folder))
