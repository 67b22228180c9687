"""What every fine-tuning run shares, whatever the kind of task: the recipe, the Trainer, the LightningModule,
and the runner of a task's modes.

A run trains one network (a fine-tuned model, one from scratch, or a head on
frozen features) with one seed and one setting of its mode's candidates (a
learning rate, a pooling). ``Finetuning`` is the wiring: the loss of each
batch and the task's scores over each pass of a split come from an
``Objective`` -- a label per text (``pipeline.finetune.sentence``), a label per
word (``pipeline.finetune.tokens``) or an answer span
(``pipeline.finetune.spans``). ``Runner`` trains and scores what the protocol
(``pipeline.finetune.protocol``) asks for; each kind of task subclasses it with
what differs.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Protocol

import lightning.pytorch as L
import numpy as np
import torch
from lightning.fabric import Fabric
from lightning.pytorch.callbacks import TQDMProgressBar
from torch import nn
from torch.utils.data import DataLoader

from pipeline.data.datamodule import LengthGroupedBatches, pad_collate
from pipeline.finetune.encoders import Export
from pipeline.finetune.modes import is_frozen
from pipeline.names import CLASSICAL, FROZEN
from pipeline.optim import build_optimizer, clip_gradients

SPLITS = ("dev", "test")  # where a run is scored: dev for every choice, test for what is reported


@dataclass(frozen=True)
class Grid:
    """The candidates each mode's settings are chosen from (``finetune.lrs``, ``feature_lrs``, ``poolings``,
    ``tfidf``), and how far a learning-rate grid (``lr_bounds``) or TF-IDF's C grid (``c_bounds``) may be extended
    past its edges (None: never, the grid as given, for a caller that fixes its values by hand)."""
    lrs: tuple[float, ...]
    feature_lrs: tuple[float, ...]
    poolings: tuple[str, ...]
    tfidf_c: tuple[float, ...]
    tfidf_ngrams: tuple[int, ...]
    lr_bounds: tuple[float, float] | None = None
    c_bounds: tuple[float, float] | None = None


@dataclass(frozen=True)
class Recipe:
    """The ``finetune`` settings (and where and how fast it runs), unpacked from the config by the stage."""

    seeds: tuple[int, ...]
    epochs: int                   # passes when every weight trains (fine-tuned and from scratch)
    feature_epochs: int           # passes for a head on frozen features
    batch_size: int
    grid: Grid
    weight_decay: float
    warmup_ratio: float
    betas: tuple[float, float]
    eps: float
    gradient_clip_val: float
    eval_batch_size: int          # dev batches of token sequences (and the frozen encoder's passes)
    feature_eval_batch_size: int  # dev batches of precomputed features
    eval_every_epoch: bool
    max_seq_length: int           # the task's
    length_grouped: bool = False  # training batches of similar length
    accelerator: str = "cpu"
    precision: str = "32-true"
    progress: bool = False
    fused_optimizer: bool = True

    def optim(self, lr: float) -> dict:
        """BERT's fine-tuning optimiser: AdamW, linear warm-up, then linear decay to zero over every step."""
        return {"name": "adamw", "lr": lr, "weight_decay": self.weight_decay, "warmup_ratio": self.warmup_ratio,
                "betas": list(self.betas), "eps": self.eps, "schedule": "linear", "decay_ratio": 1.0}

    def trainer(self, logger, epochs: int) -> L.Trainer:
        """A Trainer for ``epochs`` logging to ``logger`` (None: nowhere, not Lightning's default folder)."""
        return L.Trainer(max_epochs=epochs, accelerator=self.accelerator, devices=1, precision=self.precision,
                         logger=logger if logger is not None else False, deterministic=True, enable_checkpointing=False, enable_model_summary=False,
                         num_sanity_val_steps=0, enable_progress_bar=self.progress, log_every_n_steps=50,
                         gradient_clip_val=self.gradient_clip_val, default_root_dir=None,
                         callbacks=[TQDMProgressBar(refresh_rate=10)] if self.progress else None)


class Objective(Protocol):
    """A kind of task: its loss on a batch, and its scores accumulated over a pass of one split."""

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
    the token tensors for a BERT, ``("states",)`` for a head on precomputed features. ``prefix`` names the split
    its scoring passes log under (``val``: dev, ``test``)."""

    TOKENS = ("input_ids", "token_type_ids", "attention_mask")

    def __init__(self, net: nn.Module, objective: Objective, optim: dict, total_steps: int,
                 fused_optimizer: bool = True, inputs: tuple[str, ...] = TOKENS):
        super().__init__()
        self.net, self.objective, self.inputs = net, objective, inputs
        self.optim, self.total_steps, self.fused = optim, total_steps, fused_optimizer
        self.prefix = "val"

    def outputs(self, batch: dict) -> torch.Tensor:
        return self.net(*(batch[k] for k in self.inputs))

    def training_step(self, batch, batch_idx):
        loss = self.objective.loss(self.outputs(batch), batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=self.objective.batch_size(batch))
        return loss

    def validation_step(self, batch, batch_idx):
        out = self.outputs(batch)
        self.log(f"{self.prefix}/loss", self.objective.loss(out, batch), on_epoch=True,
                 batch_size=self.objective.batch_size(batch))
        self.objective.collect(out, batch)

    def on_validation_epoch_end(self) -> None:
        for k, v in self.objective.scores().items():
            self.log(f"{self.prefix}/{k}", v, prog_bar=k == self.objective.headline)

    def configure_optimizers(self):
        return build_optimizer(self.net, self.optim, self.total_steps, fused=self.fused)

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        clip_gradients(self, optimizer, gradient_clip_val, gradient_clip_algorithm)


@dataclass
class Trained:
    """One run's trained network (or fitted classical model), ready to be scored on any split."""
    mode: str
    settings: dict
    seed: int
    module: Finetuning | None = None                       # a network
    scorer: Callable[[str], dict] | None = None            # a classical model: split -> its scores
    logger: Any = None
    extra: dict | None = None                              # what the run reports beside its scores


class Runner:
    """The runs of one task from one export: the task's examples encoded once, then each mode's training.

    The protocol (``pipeline.finetune.protocol``) asks for a mode's ``candidates``, trains a run with
    ``train`` (a mode, one candidate's settings, a seed) and scores it on a split with ``score``. A kind of
    task (``kind``: ``TaskData.kind``) subclasses it with what differs: its examples (``encoded``: train, dev
    and test, and ``collate``), its ``objective`` on a split, its head on frozen features (``frozen_head``) and
    its ``classical`` baseline; the task model itself is the export's architecture's.
    """

    kind: ClassVar[str]
    collate = staticmethod(pad_collate)

    def __init__(self, recipe: Recipe, task, export: Export):
        self.recipe, self.task, self.export = recipe, task, export
        self.encoded: dict[str, list[dict]] = {}   # "train", "dev", "test": the task's examples as the network reads
        self.files: dict[str, Any] = {}  # outputs(): JSON files of the stage beside its metrics

    # -- what the protocol calls

    def candidates(self, mode: str) -> list[dict]:
        """The settings a mode's choice is made from: learning rates (fine-tuned, from scratch, a frozen head's),
        crossed with the poolings where the task sums up a text; the classical baseline's grid."""
        g = self.recipe.grid
        if mode == CLASSICAL:
            return self.classical_candidates()
        lrs = g.feature_lrs if is_frozen(mode) else g.lrs
        poolings = self.poolings()
        return [{"lr": lr, **({"pooling": p} if p else {})} for p in poolings for lr in lrs]

    def train(self, mode: str, settings: dict, seed: int, logger) -> Trained:
        """One run of ``mode`` with ``settings`` (a candidate) and ``seed``, trained on the train split."""
        if mode == CLASSICAL:
            return Trained(mode, settings, seed, scorer=self.classical(settings), logger=logger)
        seed_everything(seed)
        if is_frozen(mode):
            net = self.frozen_head(mode[len(FROZEN):], settings.get("pooling")).train()
        else:  # load_hf returns eval mode; both starts must train with dropout alike
            net = self.export.task_model(self.kind, self.num_outputs, pretrained=mode == "pretrained",
                                         pooling=settings.get("pooling")).train()
        r = self.recipe
        epochs = r.feature_epochs if is_frozen(mode) else r.epochs
        train = self.train_loader(mode, settings, seed)
        module = Finetuning(net, self.objective("dev"), r.optim(settings["lr"]), epochs * len(train),
                            r.fused_optimizer, inputs=self.inputs(mode))
        if is_frozen(mode) and not r.eval_every_epoch:
            fit_head(module, train, epochs, r, logger)
        else:
            r.trainer(logger, epochs).fit(module, train,
                                          self.eval_loader(mode, settings, "dev") if r.eval_every_epoch else None)
        extra = {"layer_weights": net.mix.weights()} if mode == f"{FROZEN}weighted" else None
        return Trained(mode, settings, seed, module=module, logger=logger, extra=extra)

    def score(self, run: Trained, split: str) -> dict:
        """``run``'s scores on ``split`` (``SPLITS``): the task's metrics and the loss (logged as ``val/...`` for
        dev and ``test/...`` for test in the run's MLflow run)."""
        if split not in SPLITS:
            raise ValueError(f"split {split!r}: expected one of {', '.join(SPLITS)}")
        if run.scorer is not None:
            return run.scorer(split)
        objective = self.objective(split, run)
        run.module.objective, run.module.prefix = objective, "val" if split == "dev" else "test"
        final = self.recipe.trainer(run.logger, 1).validate(run.module, self.eval_loader(run.mode, run.settings,
                                                                                          split), verbose=False)[0]
        p = run.module.prefix
        scores = {**{m: round(float(final[f"{p}/{m}"]), 6) for m in self.task.metrics},
                  "loss": round(float(final[f"{p}/loss"]), 6)}
        return {**scores, **self.finish(run, split, objective)}

    def outputs(self) -> dict[str, Any]:
        """The runs' files the stage writes beside its metrics: {path under ``paths.metrics``: JSON content}."""
        return dict(self.files)

    def data_summary(self) -> dict:
        """What the stage's metrics say about the task's data."""
        return {f"{split}_examples": len(self.encoded[split]) for split in ("train", *SPLITS)}

    # -- what a kind of task provides

    @property
    def num_outputs(self) -> int:
        return self.task.num_outputs

    def poolings(self) -> list[str | None]:
        """The poolings a candidate may use: None where the task does not sum up a text (a label per word)."""
        return [None]

    def objective(self, split: str, run: Trained | None = None) -> Objective:
        """The task's loss, and its scores over a pass of ``split`` (of ``run``, where scoring depends on it)."""
        raise NotImplementedError(f"{type(self).__name__} must define objective() (an abstract hook of {__name__})")

    def frozen_head(self, feature_set: str, pooling: str | None) -> nn.Module:
        """The trainable network on the frozen encoder (it reads ``inputs(mode)`` of each batch)."""
        raise NotImplementedError(f"{type(self).__name__} must define frozen_head() (an abstract hook of {__name__})")

    def classical_candidates(self) -> list[dict]:
        """The classical baseline's settings to choose from (one, with nothing to choose, unless a kind says)."""
        return [{}]

    def classical(self, settings: dict) -> Callable[[str], dict]:
        """The task's baseline without a network or pretraining, fitted on train: split -> its scores."""
        raise NotImplementedError(f"{type(self).__name__} must define classical() (an abstract hook of {__name__})")

    def train_loader(self, mode: str, settings: dict, seed: int) -> DataLoader:
        """The train examples, shuffled by the seed (in batches of similar length with ``length_grouped``)."""
        r, data = self.recipe, self.encoded["train"]
        if r.length_grouped:
            lengths = np.array([len(x["input_ids"]) for x in data])
            batches = LengthGroupedBatches(lengths, r.batch_size, seed, drop_last=False)
            return DataLoader(data, batch_sampler=batches, collate_fn=self.collate)
        g = torch.Generator().manual_seed(seed)
        return DataLoader(data, batch_size=r.batch_size, shuffle=True, generator=g, collate_fn=self.collate)

    def eval_loader(self, mode: str, settings: dict, split: str) -> DataLoader:
        """A split's examples in batches of similar length, in ``eval_order`` (the scores do not depend on it)."""
        data = self.encoded[split]
        return DataLoader([data[i] for i in self.eval_order(split)], batch_size=self.recipe.eval_batch_size,
                          collate_fn=self.collate)

    def eval_order(self, split: str) -> list[int]:
        """The split's example indices in the order ``eval_loader`` gives them: shortest first (a stable sort)."""
        data = self.encoded[split]
        return sorted(range(len(data)), key=lambda i: len(data[i]["input_ids"]))

    def inputs(self, mode: str) -> tuple[str, ...]:
        """The batch entries the network of ``mode`` takes."""
        return Finetuning.TOKENS

    def finish(self, run: Trained, split: str, objective: Objective) -> dict:
        """What a run reports beside its scores on ``split`` (and files it leaves for ``outputs``)."""
        return {}


def fit_head(module: Finetuning, loader: DataLoader, epochs: int, recipe: Recipe, logger=None) -> None:
    """Train a head on precomputed features as ``recipe.trainer`` would, bit for bit -- the same batches
    (``len(loader)`` an epoch, so the shuffling sampler is never run past them, as the Trainer's loop leaves it),
    zero_grad, loss, backward, gradient clipping, optimiser step and per-step schedule -- without the Trainer's
    per-step machinery (its hooks and result collection), which costs such a head more than its arithmetic: 2.5
    against 1.3 ms a step on 2 cores (``tests/test_finetune.py`` checks the weights against the Trainer's).
    Lightning Fabric places it on the recipe's accelerator and precision; ``train/loss`` goes to ``logger``
    every 50 steps, the Trainer's cadence."""
    fabric = Fabric(accelerator=recipe.accelerator, devices=1, precision=recipe.precision)
    conf = module.configure_optimizers()
    net, optimizer = fabric.setup(module.net, conf["optimizer"])
    scheduler = conf["lr_scheduler"]["scheduler"]
    params = [p for group in optimizer.param_groups for p in group["params"]]
    objective, step = module.objective, 0
    for _ in range(epochs):
        batches = iter(loader)
        for _ in range(len(loader)):
            batch = fabric.to_device(next(batches))
            optimizer.zero_grad()
            with fabric.autocast():
                loss = objective.loss(net(*(batch[k] for k in module.inputs)), batch)
            fabric.backward(loss)
            if (recipe.gradient_clip_val or 0) > 0:  # as the Trainer: none at 0, below it or unset
                torch.nn.utils.clip_grad_norm_(params, recipe.gradient_clip_val)
            optimizer.step()
            scheduler.step()
            step += 1
            if logger is not None and step % 50 == 0:
                logger.log_metrics({"train/loss": loss.item()}, step=step - 1)


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
