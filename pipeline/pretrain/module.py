"""The pretraining LightningModule around our BERT: masked LM (+ NSP) or a left-to-right LM.

The module is wiring: one shared step for train and validation, metrics named
``split/metric``. Masking happens here, at batch time: dynamically with a
generator seeded from (seed, epoch, batch), so every batch gets a fresh mask
that is the same on every rerun, or statically (``masking.static``) with one
seed per stored example, so an example always gets the same mask.
"""
from __future__ import annotations

import logging

import lightning.pytorch as L
import torch
import torch.nn.functional as F
from torchmetrics.aggregation import MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from pipeline.data.masking import MaskingConfig, example_seed, mask_examples, mask_tokens
from pipeline.errors import TrainingError
from pipeline.model.bert import BertForPreTraining, pretraining_loss
from pipeline.model.config import IGNORE_INDEX, BertConfig
from pipeline.optim import build_optimizer, clip_gradients

log = logging.getLogger(__name__)
PREDICTION_ROWS = 64  # predicted positions per batch are padded to a multiple of this (see _inputs_and_targets)
# Checkpoints are loaded with weights_only=True; the module's hyperparameters hold these two.
torch.serialization.add_safe_globals([BertConfig, MaskingConfig])


def batch_seed(seed: int, epoch: int, batch_idx: int) -> int:
    """A seed for one batch's mask, stable across processes (unlike ``hash`` of a tuple)."""
    return ((seed * 1_000_003 + epoch + 1) * 1_000_033 + batch_idx) % (2**63 - 1)


class PretrainingModule(L.LightningModule):
    """What every pretraining objective shares: its optimiser and schedule, a loss that must stay finite, the
    RNG state in checkpoints (a resumed run draws what the uninterrupted one would), resuming at another world
    size, and perplexity over a whole validation pass. ``model`` is the network being pretrained; each subclass
    defines ``step(batch, batch_idx, split) -> loss``, which the training and validation hooks call."""

    model: torch.nn.Module

    def __init__(self, *, optim: dict, max_steps: int, fused_optimizer: bool = True):
        super().__init__()
        self.optim, self.max_steps, self.fused = optim, max_steps, fused_optimizer
        self.val_lm_loss = MeanMetric()  # per predicted token, for perplexity

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
        return self.step(batch, batch_idx, "train")

    def validation_step(self, batch, batch_idx):
        self.step(batch, batch_idx, "val")

    def on_validation_epoch_end(self) -> None:
        # Perplexity of the objective's own predictions: exp(mean cross-entropy per predicted token).
        if self.val_lm_loss.update_count:
            self.log("val/perplexity", torch.exp(self.val_lm_loss.compute()))
        self.val_lm_loss.reset()

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # Dropout draws from torch's global generator: save it so a resumed run draws what the
        # uninterrupted run would have (masks and data order have their own seeded generators).
        checkpoint["torch_rng_state"] = torch.get_rng_state()
        checkpoint["world_size"] = self.trainer.world_size

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        if "torch_rng_state" in checkpoint:
            torch.set_rng_state(checkpoint["torch_rng_state"])
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
                 fused_optimizer: bool = True):
        super().__init__(optim=optim, max_steps=max_steps, fused_optimizer=fused_optimizer)
        self.save_hyperparameters(ignore=["continuation", "seed"])  # seed + pretrain_seed: logged as the config
        self.continuation = continuation  # (V,) bool, for whole-word masking
        self.model = BertForPreTraining(config)
        self.ltr = config.causal
        self.lm = "ltr" if self.ltr else "mlm"  # metric prefix
        self.masking, self.nsp = masking, nsp and not self.ltr
        self.seed, self.mask_id, self.vocab_size = seed, mask_id, config.vocab_size
        self.cls_id, self.sep_id = cls_id, sep_id
        # Accumulated over a whole validation pass (counts, not means of means).
        self.val_lm_acc = MulticlassAccuracy(num_classes=config.vocab_size, average="micro", ignore_index=IGNORE_INDEX)
        self.val_nsp_acc = MulticlassAccuracy(num_classes=2, average="micro")

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
        loss, lm_loss, nsp_loss = pretraining_loss(out, targets, nsp_labels)
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
