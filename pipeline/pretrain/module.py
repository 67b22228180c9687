"""The pretraining LightningModule around our BERT: masked LM (+ NSP) or a left-to-right LM.

The module is wiring: one shared step for train and validation, metrics named
``split/metric``. Masking happens here, at batch time: dynamically with a
generator seeded from (seed, epoch, batch), so every batch gets a fresh mask
that is the same on every rerun, or statically (``masking.static``) with one
seed per stored example, so an example always gets the same mask.

Every pretraining module is built the same way, ``from_setup(config, setup)``:
its model's config and the ``PretrainSetup`` the stage unpacks from the settings.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import lightning.pytorch as L
import numpy as np
import torch
import torch.nn.functional as F
from torchmetrics.aggregation import MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from pipeline.data.scored import KINDS, EvalSet, row_batches
from pipeline.data.masking import MaskingConfig, continuation_table, example_seed, mask_examples, mask_tokens
from pipeline.errors import TrainingError
from pipeline.memory import release
from pipeline.model.bert import BertForPreTraining, pretraining_loss
from pipeline.model_config import BertConfig
from pipeline.names import IGNORE_INDEX
from pipeline.optim import build_optimizer, clip_gradients

log = logging.getLogger(__name__)
PREDICTION_ROWS = 64  # predicted positions per batch are padded to a multiple of this (see _inputs_and_targets)
# Checkpoints are loaded with weights_only=True; the module's hyperparameters hold these two. Checkpoints written
# before the model configs moved to pipeline/model_config.py name them by their old module: they resume too.
torch.serialization.add_safe_globals([BertConfig, MaskingConfig, (BertConfig, "pipeline.model.config.BertConfig")])


def batch_seed(seed: int, epoch: int, batch_idx: int) -> int:
    """A seed for one batch's mask, stable across processes (unlike ``hash`` of a tuple)."""
    return ((seed * 1_000_003 + epoch + 1) * 1_000_033 + batch_idx) % (2**63 - 1)


@dataclass(frozen=True)
class PretrainSetup:
    """What a pretraining module is built from beside its model's config: the settings and inputs the stage
    unpacks for it. Each kind of module takes what it needs."""

    optim: dict
    max_steps: int
    seed: int                   # of this run's training randomness (seed + pretrain_seed)
    fused_optimizer: bool
    eval_set: EvalSet | None
    special: dict[str, int]     # the tokenizer's special token ids: pad, cls, sep, mask, unk
    vocab: list[str]            # the tokenizer's pieces by id
    pairs: Path                 # the examples' folder (word2vec draws noise by their token counts)
    masking: MaskingConfig      # a masked LM's
    nsp: bool                   # a masked LM's next-sentence prediction
    nsp_weight: float | None = None  # its loss's weight in the total (None: BERT's 1)

    def common(self) -> dict:
        """The arguments every pretraining module takes."""
        return dict(optim=self.optim, max_steps=self.max_steps, seed=self.seed, cls_id=self.special["cls"],
                    sep_id=self.special["sep"], fused_optimizer=self.fused_optimizer, eval_set=self.eval_set)


class PretrainingModule(L.LightningModule):
    """What every pretraining objective shares: its optimiser and schedule, a loss that must stay finite, the
    RNG state in checkpoints (a resumed run draws what the uninterrupted one would), resuming at another world
    size, perplexity over a whole validation pass, and the fixed evaluation set scored at every validation
    (``fixed/*``, with the tokens, FLOPs and seconds of training so far, for learning curves against the
    floors). ``model`` is the network being pretrained; each subclass defines ``step(batch, batch_idx, split) ->
    loss``, which the training and validation hooks call, ``fixed_scores`` (its prediction and loss at the
    fixed set's scored positions, reading what that kind of model reads) and ``step_flops``."""

    model: torch.nn.Module
    FIXED_BATCH = 64  # sequences per forward pass over the fixed evaluation set
    # BLiMP along pretraining (``pipeline.zero_shot.along``): the network -> its overall accuracy, logged as
    # ``fixed/blimp`` at every validation; set by the pretrain stage on a baseline run when configured.
    along: Callable[[torch.nn.Module], float | None] | None = None
    # The layout probe along pretraining: the first ``probe_along`` rows of each cell at every validation (the
    # baseline's runs; 0 for the others: the whole probe reads several times the fixed set's tokens). At the
    # validation after training (``final``, set by the pretrain stage) every run is scored on all of it.
    probe_along: int = 0
    final: bool = False

    @classmethod
    def from_setup(cls, config, setup: PretrainSetup) -> "PretrainingModule":
        """The module pretraining a model of ``config``, its weights freshly initialised."""
        raise NotImplementedError(f"{cls.__name__} must define from_setup() (an abstract hook of {__name__})")

    def __init__(self, *, optim: dict, max_steps: int, fused_optimizer: bool = True, eval_set: EvalSet | None = None):
        super().__init__()
        self.optim, self.max_steps, self.fused = optim, max_steps, fused_optimizer
        self.val_lm_loss = MeanMetric()  # per predicted token, for perplexity
        self.eval_set = eval_set
        # Training so far, summed over processes: real tokens, token slots (padding too), matmul FLOPs, seconds
        # in training steps (validation and checkpoints excluded). Kept in checkpoints, so a resumed run goes on.
        self.seen = {"tokens": 0, "token_slots": 0, "flops": 0.0, "seconds": 0.0}
        self._batch_start = 0.0

    def logs_this_step(self) -> bool:
        """Whether training metrics logged now reach the logger (every ``trainer.log_every_n_steps`` steps)."""
        return self._trainer is None or (self.global_step + 1) % max(1, self.trainer.log_every_n_steps) == 0

    def check_finite(self, loss: torch.Tensor, split: str) -> None:
        if not torch.isfinite(loss):
            raise TrainingError(
                f"{split}/loss is {loss.item()} at step {self.global_step}: training stopped. The last good "
                f"checkpoint is kept under {self.checkpoint_dir}; lower optim.lr or raise optim.warmup_ratio")

    @property
    def checkpoint_dir(self) -> str:
        cb = getattr(self.trainer, "checkpoint_callback", None) if self._trainer is not None else None
        return str(cb.dirpath) if cb is not None and cb.dirpath else "(no checkpoint directory)"

    def training_step(self, batch, batch_idx):
        loss = self.step(batch, batch_idx, "train")
        B, T = batch["input_ids"].shape
        world = self.trainer.world_size if self._trainer is not None else 1
        self.seen["tokens"] += world * int(batch["attention_mask"].sum())
        self.seen["token_slots"] += world * B * T
        self.seen["flops"] += world * float(self.step_flops(B, T))
        return loss

    def on_train_batch_start(self, batch, batch_idx) -> None:
        self._batch_start = time.perf_counter()

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        self.seen["seconds"] += time.perf_counter() - self._batch_start

    def flops_per_token(self, length: int) -> float:
        """Matmul FLOPs of a training step per token of a sequence of ``length`` (forward and backward)."""
        return self.model.config.train_flops_per_token(length)

    def step_flops(self, batch_size: int, length: int) -> float:
        """Matmul FLOPs of one training step on a (batch_size, length) batch (forward and backward)."""
        return self.flops_per_token(length) * batch_size * length

    def validation_step(self, batch, batch_idx):
        self.step(batch, batch_idx, "val")

    def on_validation_epoch_end(self) -> None:
        # Perplexity of the objective's own predictions: exp(mean cross-entropy per predicted token).
        if self.val_lm_loss.update_count:
            self.log("val/perplexity", torch.exp(self.val_lm_loss.compute()))
        self.val_lm_loss.reset()
        if self.eval_set is not None:
            rows = None if self.final else self.probe_along
            measured = {**self.fixed_metrics(), **(self.probe_metrics(rows) if rows != 0 else {}),
                        **{f"fixed/{k}": float(v) for k, v in self.seen.items()}}
            for k, v in measured.items():
                self.log(k, v)
        if self.along is not None and (blimp := self.along(self.model)) is not None:
            self.log("fixed/blimp", blimp)
        release()  # the evaluations' batches of every length leave the heap fragmented (pipeline.memory)

    @torch.no_grad()
    def fixed_metrics(self) -> dict[str, float]:
        """Accuracy on the fixed set's scored positions of each kind (``fixed/acc_masked``: the headline), and
        the mean loss at the masked ones (``fixed/loss_masked``)."""
        hits, counts, loss = torch.zeros(len(KINDS)), torch.zeros(len(KINDS)), 0.0
        for batch in self.eval_set.batches(self.FIXED_BATCH):
            batch = {k: v.to(self.device) for k, v in batch.items()}
            kinds = batch["kind"][batch["kind"] >= 0]
            predictions, nll = self.fixed_scores(batch)
            right = (predictions == batch["input_ids"][batch["kind"] >= 0]).float().cpu()
            kinds = kinds.cpu()
            for i in range(len(KINDS)):
                hits[i] += right[kinds == i].sum()
                counts[i] += (kinds == i).sum()
            loss += float(nll.float().cpu()[kinds == 0].sum())
        out = {f"fixed/acc_{k}": float(hits[i] / counts[i]) for i, k in enumerate(KINDS) if counts[i]}
        out["fixed/loss_masked"] = loss / float(counts[0])
        return out

    @torch.no_grad()
    def probe_metrics(self, rows: int | None = None) -> dict[str, float]:
        """Accuracy in each cell of the layout probe (``layout/<cell>``, ``pipeline.data.layout``): single segments
        of each length with the hidden piece early, in the middle and late, and natural sentence pairs; the first
        ``rows`` rows of each cell (None: all), and how many rows a cell had (``layout/rows``)."""
        probe, hits = self.eval_set.probe, []
        probe = probe if rows is None else probe.head(rows)
        for batch in row_batches(probe.arrays, self.FIXED_BATCH):
            batch = {k: v.to(self.device) for k, v in batch.items()}
            predictions, _ = self.fixed_scores(batch)
            hits.append((predictions == batch["input_ids"][batch["kind"] >= 0]).cpu())
        rows_per_cell = int(np.bincount(probe.arrays["cell"], minlength=len(probe.cells)).min())
        return {**{f"layout/{k}": v for k, v in probe.accuracy(torch.cat(hits).numpy()).items()},
                "layout/rows": float(rows_per_cell)}

    def fixed_scores(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """(predicted piece (M,), cross-entropy of the true piece (M,)) at the M positions where ``batch["kind"]``
        >= 0, in row-major order. ``batch`` holds the clean ``input_ids``, the ``corrupted`` ones, segments,
        attention mask and kinds (``pipeline.data.scored.EvalSet.batches``)."""
        raise NotImplementedError(f"{type(self).__name__} must define fixed_scores() (an abstract hook of {__name__})")

    @staticmethod
    def scored_from_logits(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = logits.float()
        return logits.argmax(-1), F.cross_entropy(logits, targets, reduction="none")

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # Dropout draws from torch's global generator: save it so a resumed run draws what the
        # uninterrupted run would have (masks and data order have their own seeded generators).
        checkpoint["torch_rng_state"] = torch.get_rng_state()
        checkpoint["world_size"] = self.trainer.world_size
        checkpoint["seen"] = dict(self.seen)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        if "torch_rng_state" in checkpoint:
            torch.set_rng_state(checkpoint["torch_rng_state"])
        self.seen.update(checkpoint.get("seen", {}))
        saved = checkpoint.get("world_size", 1)
        if self._trainer is not None and saved != self.trainer.world_size:
            # The loader's position counts batches of another split of the data: start the data afresh
            # (weights, optimiser, schedule and step count carry over).
            checkpoint.get("loops", {}).get("fit_loop", {}).get("state_dict", {}).pop("combined_loader", None)
            log.warning("checkpoint written by %d processes, resuming on %d: the data order starts afresh",
                        saved, self.trainer.world_size)

    def configure_optimizers(self):
        return build_optimizer(self.model, self.optim, self.max_steps, fused=self.fused)

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        clip_gradients(self, optimizer, gradient_clip_val, gradient_clip_algorithm)


class BertPretraining(PretrainingModule):
    """Masked LM (+ NSP) or left-to-right LM on our BERT; metrics are ``split/name``."""

    def __init__(self, config: BertConfig, masking: MaskingConfig, *, nsp: bool, optim: dict, max_steps: int,
                 seed: int, mask_id: int, cls_id: int, sep_id: int, continuation: torch.Tensor | None = None,
                 fused_optimizer: bool = True, eval_set: EvalSet | None = None, nsp_weight: float | None = None):
        super().__init__(optim=optim, max_steps=max_steps, fused_optimizer=fused_optimizer, eval_set=eval_set)
        # seed + pretrain_seed: logged as the config; the fixed set: a DVC-tracked file
        self.save_hyperparameters(ignore=["continuation", "seed", "eval_set"])
        self.continuation = continuation  # (V,) bool, for whole-word masking
        self.model = BertForPreTraining(config)
        self.ltr = config.causal
        self.lm = config.metric_prefix
        self.masking, self.nsp = masking, nsp and not self.ltr
        self.nsp_weight = 1.0 if nsp_weight is None else float(nsp_weight)
        self.seed, self.mask_id, self.vocab_size = seed, mask_id, config.vocab_size
        self.cls_id, self.sep_id = cls_id, sep_id
        # Accumulated over a whole validation pass (counts, not means of means).
        self.val_lm_acc = MulticlassAccuracy(num_classes=config.vocab_size, average="micro", ignore_index=IGNORE_INDEX)
        self.val_nsp_acc = MulticlassAccuracy(num_classes=2, average="micro")

    @classmethod
    def from_setup(cls, config: BertConfig, setup: PretrainSetup) -> "BertPretraining":
        m = setup.masking
        return cls(config, m, nsp=setup.nsp, nsp_weight=setup.nsp_weight, mask_id=setup.special["mask"],
                   continuation=continuation_table(setup.vocab) if m.whole_word else None, **setup.common())

    def flops_per_token(self, length: int) -> float:
        # The LM head runs at the predicted share of positions: the mask ratio, or every position left to right.
        share = 1.0 if self.ltr else self.masking.mlm_probability
        return self.model.config.train_flops_per_token(length, share)

    def fixed_metrics(self) -> dict[str, float]:
        """The masked LM's scores on the fixed set, and with NSP the head's accuracy on its clean pairs, at every
        validation: the curve shows when (and whether) the head leaves its base rate."""
        return {**super().fixed_metrics(), **(self.nsp_metrics() if self.nsp else {})}

    @torch.no_grad()
    def nsp_metrics(self) -> dict[str, float]:
        """The NSP head's accuracy on the fixed set's clean pairs (``fixed/nsp_acc``; about half of their B
        segments are the actual next one, ``meta.json``'s ``stats.actual_next``)."""
        right = total = 0
        for batch in self.eval_set.batches(self.FIXED_BATCH):
            batch = {k: v.to(self.device) for k, v in batch.items()}
            pooled = self.model.bert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]).pooler_output
            predicted = self.model.cls.seq_relationship(pooled).argmax(-1)
            right += int((predicted == batch["next_sentence_label"]).sum())
            total += len(predicted)
        return {"fixed/nsp_acc": right / total}

    def fixed_scores(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """A masked LM reads the corrupted sequence and predicts at the scored position itself; a left-to-right LM
        reads the clean one and predicts each scored piece from the position before it (its left context)."""
        scored = batch["kind"] >= 0
        at = scored
        if self.ltr:
            at = torch.zeros_like(scored)
            at[:, :-1] = scored[:, 1:]  # row-major order of (r, c - 1) is that of (r, c)
        inputs = batch["input_ids"] if self.ltr else batch["corrupted"]
        h = self.model.bert(inputs, batch["token_type_ids"], batch["attention_mask"]).last_hidden_state
        return self.scored_from_logits(self.model.cls.predictions(h[at]), batch["input_ids"][scored])

    def _mask(self, batch: dict, batch_idx: int, split: str) -> tuple[torch.Tensor, torch.Tensor]:
        ids = batch["input_ids"]
        special = (batch["attention_mask"] == 0) | (ids == self.cls_id) | (ids == self.sep_id)
        if self.masking.static and split == "train":
            # One fixed mask per stored example (each of the dupe_factor copies has its own).
            seeds = [example_seed(self.seed, int(i)) for i in batch["index"]]
            return mask_examples(ids, special, seeds, self.masking, mask_id=self.mask_id,
                                 vocab_size=self.vocab_size, continuation=self.continuation)
        # Validation reuses the same masks at every check, so its curve compares like with like.
        epoch = self.current_epoch if split == "train" else -1
        g = torch.Generator().manual_seed(batch_seed(self.seed, epoch, batch_idx))
        return mask_tokens(ids, special, self.masking, mask_id=self.mask_id,
                           vocab_size=self.vocab_size, generator=g, continuation=self.continuation)

    def _inputs_and_targets(self, batch: dict, batch_idx: int, split: str):
        """(input ids, predicted rows (N,) of the flattened positions, targets (N,)) for the configured objective.

        N is padded up to a multiple of ``PREDICTION_ROWS`` (repeating row 0, target ``IGNORE_INDEX``, which
        the loss and the metrics skip): the vocabulary projection then sees a handful of shapes instead of
        one per batch, which otherwise fragments glibc's heap and grows the process by ~0.5 GB over a run.
        """
        ids, real = batch["input_ids"], batch["attention_mask"].bool()
        if self.ltr:
            # Each position predicts the next real token; the inputs stay uncorrupted.
            positions = torch.zeros_like(real)
            positions[:, :-1] = real[:, 1:]
            inputs, targets = ids, ids[:, 1:][real[:, 1:]]
        else:
            inputs, labels = self._mask(batch, batch_idx, split)
            positions = labels != IGNORE_INDEX
            targets = labels[positions]
        rows = positions.flatten().nonzero().squeeze(1)
        pad = -len(rows) % PREDICTION_ROWS
        return inputs, F.pad(rows, (0, pad)), F.pad(targets, (0, pad), value=IGNORE_INDEX)

    def step(self, batch: dict, batch_idx: int, split: str) -> torch.Tensor:
        inputs, positions, targets = self._inputs_and_targets(batch, batch_idx, split)
        # An argmax over every predicted token's vocabulary (for accuracy): only when it is logged.
        predict = split != "train" or self.logs_this_step()
        out = self.model(inputs, batch["token_type_ids"], batch["attention_mask"], masked_positions=positions,
                         mlm_targets=targets, return_predictions=predict)
        nsp_labels = batch["next_sentence_label"] if self.nsp else None
        loss, lm_loss, nsp_loss = pretraining_loss(out, targets, nsp_labels, self.nsp_weight)
        B, lm = batch["input_ids"].shape[0], self.lm
        self.check_finite(loss, split)
        if split == "train":
            self.log("train/loss", loss, prog_bar=True, batch_size=B)
            self.log(f"train/{lm}_loss", lm_loss, batch_size=B)
            if predict:
                valid = targets != IGNORE_INDEX
                self.log(f"train/{lm}_acc", (out.mlm_predictions[valid] == targets[valid]).float().mean(),
                         batch_size=B)
            if self.nsp:
                self.log("train/nsp_loss", nsp_loss, batch_size=B)
                self.log("train/nsp_acc", (out.nsp_logits.argmax(-1) == nsp_labels).float().mean(), batch_size=B)
            self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"], batch_size=B)
        else:
            self.log("val/loss", loss, on_epoch=True, prog_bar=True, batch_size=B)
            self.log(f"val/{lm}_loss", lm_loss, on_epoch=True, batch_size=B)
            self.val_lm_acc(out.mlm_predictions, targets)
            self.log(f"val/{lm}_acc", self.val_lm_acc, on_epoch=True, prog_bar=True, batch_size=B)
            self.val_lm_loss.update(lm_loss.detach(), weight=int((targets != IGNORE_INDEX).sum()))
            if self.nsp:
                self.log("val/nsp_loss", nsp_loss, on_epoch=True, batch_size=B)
                self.val_nsp_acc(out.nsp_logits, nsp_labels)
                self.log("val/nsp_acc", self.val_nsp_acc, on_epoch=True, batch_size=B)
        return loss
