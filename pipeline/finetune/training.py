"""What every fine-tuning run shares, whatever the kind of task: the recipe, the Trainer, the LightningModule,
and the runner of a task's modes.

A run trains one network (a fine-tuned model, one from scratch, or a head on
frozen features) with one seed. ``Finetuning`` is the wiring: the loss of each
batch and the task's scores over each dev pass come from an ``Objective`` --
a label per text (``pipeline.finetune.sentence``), a label per word
(``pipeline.finetune.tokens``) or an answer span (``pipeline.finetune.spans``).
``Runner`` is what the stage calls for each (mode, seed); each kind of task
subclasses it with what differs.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import lightning.pytorch as L
import torch
from lightning.pytorch.callbacks import TQDMProgressBar
from torch import nn
from torch.utils.data import DataLoader

from pipeline.data.datamodule import pad_collate
from pipeline.finetune.encoders import Export
from pipeline.finetune.modes import is_frozen
from pipeline.names import FROZEN
from pipeline.optim import build_optimizer, clip_gradients


@dataclass(frozen=True)
class Recipe:
    """The ``finetune`` settings (and where and how fast it runs), unpacked from the config by the stage."""

    seeds: tuple[int, ...]
    epochs: int                   # passes when every weight trains (fine-tuned and from scratch)
    feature_epochs: int           # passes for a head on frozen features
    batch_size: int
    lr: float                     # peak, fine-tuned and from scratch
    feature_lr: float             # peak, heads on frozen features
    weight_decay: float
    warmup_ratio: float
    betas: tuple[float, float]
    eps: float
    gradient_clip_val: float
    eval_batch_size: int          # dev batches of token sequences (and the frozen encoder's passes)
    feature_eval_batch_size: int  # dev batches of precomputed features
    eval_every_epoch: bool
    max_seq_length: int           # the task's
    accelerator: str = "cpu"
    precision: str = "32-true"
    progress: bool = False
    fused_optimizer: bool = True

    def optim(self, lr: float) -> dict:
        """BERT's fine-tuning optimiser: AdamW, linear warm-up, then linear decay to zero over every step."""
        return {"name": "adamw", "lr": lr, "weight_decay": self.weight_decay, "warmup_ratio": self.warmup_ratio,
                "betas": list(self.betas), "eps": self.eps, "schedule": "linear", "decay_ratio": 1.0}

    def trainer(self, logger, epochs: int) -> L.Trainer:
        return L.Trainer(max_epochs=epochs, accelerator=self.accelerator, devices=1, precision=self.precision,
                         logger=logger, deterministic=True, enable_checkpointing=False, enable_model_summary=False,
                         num_sanity_val_steps=0, enable_progress_bar=self.progress, log_every_n_steps=10,
                         gradient_clip_val=self.gradient_clip_val, default_root_dir=None,
                         callbacks=[TQDMProgressBar(refresh_rate=10)] if self.progress else None)


class Objective(Protocol):
    """A kind of task: its loss on a batch, and its scores accumulated over a dev pass."""

    def loss(self, outputs: torch.Tensor, batch: dict) -> torch.Tensor: ...

    def batch_size(self, batch: dict) -> int: ...

    def collect(self, outputs: torch.Tensor, batch: dict) -> None: ...

    def scores(self) -> dict[str, float]:
        """The task's metrics over what was collected since the last call (which starts afresh)."""
        ...

    @property
    def headline(self) -> str: ...


class Finetuning(L.LightningModule):
    """A trainable network on a task. ``inputs`` names the batch entries the network takes:
    the token tensors for a BERT, ``("states",)`` for a head on precomputed features."""

    TOKENS = ("input_ids", "token_type_ids", "attention_mask")

    def __init__(self, net: nn.Module, objective: Objective, optim: dict, total_steps: int,
                 fused_optimizer: bool = True, inputs: tuple[str, ...] = TOKENS):
        super().__init__()
        self.net, self.objective, self.inputs = net, objective, inputs
        self.optim, self.total_steps, self.fused = optim, total_steps, fused_optimizer

    def outputs(self, batch: dict) -> torch.Tensor:
        return self.net(*(batch[k] for k in self.inputs))

    def training_step(self, batch, batch_idx):
        loss = self.objective.loss(self.outputs(batch), batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=self.objective.batch_size(batch))
        return loss

    def validation_step(self, batch, batch_idx):
        out = self.outputs(batch)
        self.log("val/loss", self.objective.loss(out, batch), on_epoch=True,
                 batch_size=self.objective.batch_size(batch))
        self.objective.collect(out, batch)

    def on_validation_epoch_end(self) -> None:
        for k, v in self.objective.scores().items():
            self.log(f"val/{k}", v, prog_bar=k == self.objective.headline)

    def configure_optimizers(self):
        return build_optimizer(self.net, self.optim, self.total_steps, fused=self.fused)

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        clip_gradients(self, optimizer, gradient_clip_val, gradient_clip_algorithm)


def fit_and_score(recipe: Recipe, module: Finetuning, logger, epochs: int, train_loader, dev_loader,
                  metrics: list[str]) -> dict:
    """Train, then score on dev: ``{metric: value, ..., "loss": value}`` (dev scores after every epoch
    too when ``recipe.eval_every_epoch``; the final score is taken either way)."""
    trainer = recipe.trainer(logger, epochs)
    trainer.fit(module, train_loader, dev_loader if recipe.eval_every_epoch else None)
    final = trainer.validate(module, dev_loader, verbose=False)[0]
    return {**{m: round(float(final[f"val/{m}"]), 6) for m in metrics}, "loss": round(float(final["val/loss"]), 6)}


class Runner:
    """The runs of one task from one export: the task's examples encoded once, then each mode's training.

    The finetune stage calls ``fine_tune`` (``pretrained`` or ``scratch``), ``frozen`` (a head on frozen
    features) and ``classical`` (the baseline without pretraining) for each mode and seed, then writes
    ``outputs()`` beside its metrics. A kind of task (``kind``: ``TaskData.kind``) subclasses it with what
    differs: its examples (``train``, ``dev`` and ``collate``), its ``objective``, its head on frozen features
    (``frozen_head``) and its ``classical`` baseline; the task model itself is the export's architecture's.
    """

    kind: ClassVar[str]
    collate = staticmethod(pad_collate)
    train: list[dict]
    dev: list[dict]

    def __init__(self, recipe: Recipe, task, export: Export):
        self.recipe, self.task, self.export = recipe, task, export
        self.files: dict[str, Any] = {}  # outputs(): JSON files of the stage beside its metrics

    # -- what the stage calls

    def fine_tune(self, mode: str, seed: int, logger) -> dict:
        """Fine-tune (``pretrained``) or train from scratch (``scratch``) with one seed."""
        seed_everything(seed)
        # load_hf returns eval mode; both starts must train with dropout alike
        net = self.export.task_model(self.kind, self.num_outputs, pretrained=mode == "pretrained").train()
        return {"seed": seed, **self.fit(net, mode, seed, logger)}

    def frozen(self, feature_set: str, seed: int, logger) -> dict:
        """Train a small head on the frozen encoder's features of ``feature_set`` with one seed."""
        seed_everything(seed)
        head = self.frozen_head(feature_set).train()
        result = {"seed": seed, **self.fit(head, f"{FROZEN}{feature_set}", seed, logger)}
        if feature_set == "weighted":
            result["layer_weights"] = head.mix.weights()
        return result

    def classical(self) -> dict:
        """The task's baseline without a network or pretraining (deterministic: one run)."""
        raise NotImplementedError(f"{type(self).__name__} must define classical() (an abstract hook of {__name__})")

    def outputs(self) -> dict[str, Any]:
        """The runs' files the stage writes beside its metrics: {path under ``paths.metrics``: JSON content}."""
        return dict(self.files)

    def data_summary(self) -> dict:
        """What the stage's metrics say about the task's data."""
        return {"train_examples": len(self.train), "dev_examples": len(self.dev)}

    # -- what a kind of task provides

    @property
    def num_outputs(self) -> int:
        return self.task.num_outputs

    def objective(self) -> Objective:
        raise NotImplementedError(f"{type(self).__name__} must define objective() (an abstract hook of {__name__})")

    def frozen_head(self, feature_set: str) -> nn.Module:
        """The trainable network on the frozen encoder (it reads ``inputs(mode)`` of each batch)."""
        raise NotImplementedError(f"{type(self).__name__} must define frozen_head() (an abstract hook of {__name__})")

    def loaders(self, mode: str, seed: int) -> tuple[DataLoader, DataLoader]:
        """(train, dev) batches of a run: the train examples shuffled by the seed."""
        r = self.recipe
        g = torch.Generator().manual_seed(seed)
        train = DataLoader(self.train, batch_size=r.batch_size, shuffle=True, generator=g, collate_fn=self.collate)
        dev = DataLoader(self.dev, batch_size=r.eval_batch_size, collate_fn=self.collate)
        return train, dev

    def inputs(self, mode: str) -> tuple[str, ...]:
        """The batch entries the network of ``mode`` takes."""
        return Finetuning.TOKENS

    def finish(self, mode: str, seed: int, objective: Objective) -> dict:
        """What a run reports beside its scores (and files it leaves for ``outputs``), after its last dev pass."""
        return {}

    # --

    def fit(self, net: nn.Module, mode: str, seed: int, logger) -> dict:
        """Train ``net`` in ``mode`` with one seed, then score it on dev."""
        r = self.recipe
        lr, epochs = (r.feature_lr, r.feature_epochs) if is_frozen(mode) else (r.lr, r.epochs)
        train, dev = self.loaders(mode, seed)
        objective = self.objective()
        module = Finetuning(net, objective, r.optim(lr), epochs * len(train), r.fused_optimizer,
                            inputs=self.inputs(mode))
        scores = fit_and_score(r, module, logger, epochs, train, dev, self.task.metrics)
        return {**scores, **self.finish(mode, seed, objective)}


def seed_everything(seed: int) -> None:
    """One run's randomness (Python, NumPy, torch; DataLoader workers): its head's initialisation, and from
    scratch every weight, start from ``seed``."""
    L.seed_everything(seed, workers=True, verbose=False)


def summarize(runs: list[dict], metrics: list[str]) -> dict:
    """Mean and standard deviation over seeds of each metric (std 0 for a single run)."""
    out = {}
    for m in metrics:
        values = [r[m] for r in runs]
        out[f"{m}_mean"] = round(statistics.fmean(values), 6)
        out[f"{m}_std"] = round(statistics.stdev(values), 6) if len(values) > 1 else 0.0
    return {**out, "n": len(runs), "runs": runs}
