"""The pretrain stage: a LightningModule around our BERT, trained on the pairs.

The module is wiring: one shared step for train and validation, metrics named
``split/metric``. Masking happens here, at batch time: dynamically with a
generator seeded from (seed, epoch, batch), so every batch gets a fresh mask
that is the same on every rerun, or statically (``masking.static``) with one
seed per stored example, so an example always gets the same mask.
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path

import lightning.pytorch as L
import torch
from lightning.fabric.plugins.io.torch_io import TorchCheckpointIO
from lightning.pytorch.callbacks import ModelCheckpoint, ThroughputMonitor, TQDMProgressBar
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig, OmegaConf
from torchmetrics.aggregation import MeanMetric
from torchmetrics.classification import MulticlassAccuracy

from pipeline.data import PairsDataModule
from pipeline.errors import ConfigError, TrainingError
from pipeline.io import atomic_dir, atomic_file, read_json, write_json
from pipeline.masking import IGNORE, MaskingConfig, continuation_table, example_seed, mask_examples, mask_tokens
from pipeline.model.bert import BertConfig, BertForPreTraining, pretraining_loss
from pipeline.model.hf import config_from_hf, load_hf, save_hf
from pipeline.optim import build_optimizer
from pipeline.tracking import check_tracking, content_hash, metric_history, mlflow_logger, run_tags
from pipeline.wordpiece import load_tokenizer, special_ids, vocab_list

# Model FLOPs utilisation is not computed on CPU runs; tokens/s and samples/s are.
warnings.filterwarnings("ignore", message="When using the `ThroughputMonitor`")
log = logging.getLogger(__name__)
# Checkpoints are loaded with weights_only=True; the module's hyperparameters hold these two.
torch.serialization.add_safe_globals([BertConfig, MaskingConfig])


def model_config(cfg: DictConfig, vocab_size: int) -> BertConfig:
    """The model to pretrain: the size preset, or the config of ``model.init_from``; causal for left-to-right."""
    causal = cfg.objective.lm == "left_to_right"
    init_from = cfg.model.get("init_from")
    if init_from:
        config = config_from_hf(read_json(Path(init_from) / "config.json"))
        if config.vocab_size != vocab_size:
            raise ConfigError(
                f"model.init_from={init_from} has vocab_size={config.vocab_size}, but the tokenizer at "
                f"paths.tokenizer has {vocab_size} tokens: expected the same vocabulary "
                "(set tokenizer.from_folder to the same folder)")
        return dataclasses.replace(config, causal=causal)
    fields = {k: v for k, v in OmegaConf.to_container(cfg.model).items() if k not in ("name", "init_from")}
    return BertConfig(vocab_size=vocab_size, causal=causal, **fields)


def batch_seed(seed: int, epoch: int, batch_idx: int) -> int:
    """A seed for one batch's mask, stable across processes (unlike ``hash`` of a tuple)."""
    return ((seed * 1_000_003 + epoch + 1) * 1_000_033 + batch_idx) % (2**63 - 1)


class BertPretraining(L.LightningModule):
    """Masked LM (+ NSP) or left-to-right LM on our BERT; metrics are ``split/name``."""

    def __init__(self, config: BertConfig, masking: MaskingConfig, *, nsp: bool, optim: dict, max_steps: int,
                 seed: int, mask_id: int, cls_id: int, sep_id: int, continuation: torch.Tensor | None = None,
                 fused_optimizer: bool = True):
        super().__init__()
        self.save_hyperparameters(ignore=["continuation"])
        self.continuation = continuation  # (V,) bool, for whole-word masking
        self.model = BertForPreTraining(config)
        self.ltr = config.causal
        self.lm = "ltr" if self.ltr else "mlm"  # metric prefix
        self.masking, self.nsp, self.optim, self.max_steps = masking, nsp and not self.ltr, optim, max_steps
        self.seed, self.mask_id, self.vocab_size = seed, mask_id, config.vocab_size
        self.cls_id, self.sep_id, self.fused = cls_id, sep_id, fused_optimizer
        # Accumulated over a whole validation pass (counts, not means of means).
        self.val_lm_acc = MulticlassAccuracy(num_classes=config.vocab_size, average="micro")
        self.val_lm_loss = MeanMetric()  # per predicted token, for perplexity
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
        """(input ids, predicted positions (B, T) bool, targets (N,)) for the configured objective."""
        ids, real = batch["input_ids"], batch["attention_mask"].bool()
        if self.ltr:
            # Each position predicts the next real token; the inputs stay uncorrupted.
            positions = torch.zeros_like(real)
            positions[:, :-1] = real[:, 1:]
            return ids, positions, ids[:, 1:][real[:, 1:]]
        corrupted, labels = self._mask(batch, batch_idx, split)
        masked = labels != IGNORE
        return corrupted, masked, labels[masked]

    def step(self, batch: dict, batch_idx: int, split: str) -> torch.Tensor:
        inputs, positions, targets = self._inputs_and_targets(batch, batch_idx, split)
        out = self.model(inputs, batch["token_type_ids"], batch["attention_mask"], masked_positions=positions)
        nsp_labels = batch["next_sentence_label"] if self.nsp else None
        loss, lm_loss, nsp_loss = pretraining_loss(out, targets, nsp_labels)
        B, lm = batch["input_ids"].shape[0], self.lm
        if not torch.isfinite(loss):
            raise TrainingError(
                f"{split}/loss is {loss.item()} at step {self.global_step}: training stopped. The last good "
                f"checkpoint is kept under {self.checkpoint_dir}; lower optim.lr or raise optim.warmup_ratio")
        if split == "train":
            self.log("train/loss", loss, prog_bar=True, batch_size=B)
            self.log(f"train/{lm}_loss", lm_loss, batch_size=B)
            self.log(f"train/{lm}_acc", (out.mlm_logits.argmax(-1) == targets).float().mean(), batch_size=B)
            if self.nsp:
                self.log("train/nsp_loss", nsp_loss, batch_size=B)
                self.log("train/nsp_acc", (out.nsp_logits.argmax(-1) == nsp_labels).float().mean(), batch_size=B)
            self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"], batch_size=B)
        else:
            self.log("val/loss", loss, on_epoch=True, prog_bar=True, batch_size=B)
            self.log(f"val/{lm}_loss", lm_loss, on_epoch=True, batch_size=B)
            self.val_lm_acc(out.mlm_logits, targets)
            self.log(f"val/{lm}_acc", self.val_lm_acc, on_epoch=True, prog_bar=True, batch_size=B)
            self.val_lm_loss.update(lm_loss.detach(), weight=targets.numel())
            if self.nsp:
                self.log("val/nsp_loss", nsp_loss, on_epoch=True, batch_size=B)
                self.val_nsp_acc(out.nsp_logits, nsp_labels)
                self.log("val/nsp_acc", self.val_nsp_acc, on_epoch=True, batch_size=B)
        return loss

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


class AtomicCheckpointIO(TorchCheckpointIO):
    """Checkpoints written to a temporary file and renamed: a kill never leaves a truncated ``last.ckpt``."""

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        try:
            super().save_checkpoint(checkpoint, tmp, storage_options)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)


# Where a run runs, not what it computes: a checkpoint written on 2 devices resumes on 1 and back.
PLACEMENT = ("max_time", "accelerator", "devices", "strategy", "num_nodes")


def run_key(cfg: DictConfig) -> str:
    """What makes a pretraining run itself: its settings and its input data (not speed or placement)."""
    parts = {k: OmegaConf.to_container(cfg[k], resolve=True) for k in ("objective", "model", "optim", "masking")}
    parts["trainer"] = {k: v for k, v in OmegaConf.to_container(cfg.trainer).items() if k not in PLACEMENT}
    parts["seed"] = cfg.seed
    for split in ("train", "valid"):
        meta = Path(cfg.paths.pairs) / split / "meta.json"
        parts[f"pairs.{split}"] = hashlib.sha256(meta.read_bytes()).hexdigest() if meta.exists() else None
    parts["tokenizer"] = content_hash(Path(cfg.paths.tokenizer) / "tokenizer.json")
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def checkpoint_step(path: Path) -> int:
    """The step a checkpoint was saved at; a clear error naming the file if torch cannot read it.

    Loaded as Lightning loads it, with ``weights_only=True`` (no arbitrary unpickling).
    """
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
        ckpt["state_dict"]
        return int(ckpt["global_step"])
    except Exception as e:  # noqa: BLE001 (any failure to read means the same thing here)
        raise TrainingError(f"{path}: checkpoint cannot be read ({type(e).__name__}: {e}); "
                            "delete it to start this run over") from None


def world_size(cfg: DictConfig) -> int:
    """Processes that train together: ``trainer.devices`` (a count, a list, or "auto") x ``trainer.num_nodes``."""
    d = cfg.trainer.devices
    if isinstance(d, str) and d == "auto":
        d = torch.cuda.device_count() if cfg.trainer.accelerator in ("gpu", "cuda", "auto") and \
            torch.cuda.is_available() else 1
    per_node = len(d) if OmegaConf.is_list(d) or isinstance(d, (list, tuple)) else int(d)
    return max(1, per_node) * int(cfg.trainer.num_nodes)


def device_batch_size(cfg: DictConfig) -> int:
    """Sequences per device per forward pass: the global ``trainer.batch_size`` split over devices and accumulation."""
    parts = world_size(cfg) * cfg.trainer.accumulate_grad_batches
    if cfg.trainer.batch_size % parts:
        raise ConfigError(f"trainer.batch_size={cfg.trainer.batch_size} is not allowed: expected a multiple of "
                          f"devices x nodes x accumulate_grad_batches = {parts}")
    return cfg.trainer.batch_size // parts


def pretrain(cfg: DictConfig) -> dict:
    """Train BERT on ``paths.pairs``; write checkpoint + Hugging Face export to ``paths.pretrain``.

    Checkpoints go to ``paths.checkpoints/<run key>`` every
    ``trainer.checkpoint_every_n_steps``; a rerun of the same run (same settings
    and data) resumes from the last one, with the same data order, masks and
    dropout, and continues the same MLflow run.
    """
    check_tracking(cfg)  # before any compute
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    tok = load_tokenizer(cfg.paths.tokenizer)
    ids = special_ids(tok)
    config = model_config(cfg, tok.get_vocab_size())
    # Each process reads only its share of the memory-mapped examples (Lightning's distributed sampler).
    grouped = bool(cfg.trainer.get("length_grouped", False))
    data = PairsDataModule(cfg.paths.pairs, batch_size=device_batch_size(cfg), seed=cfg.seed,
                           num_workers=cfg.runtime.loader_workers, length_grouped=grouped)
    module = BertPretraining(config, MaskingConfig(**cfg.masking), nsp=cfg.objective.nsp,
                             optim=OmegaConf.to_container(cfg.optim), max_steps=cfg.trainer.max_steps,
                             seed=cfg.seed, mask_id=ids["mask"], cls_id=ids["cls"], sep_id=ids["sep"],
                             continuation=continuation_table(vocab_list(tok)) if cfg.masking.whole_word else None,
                             fused_optimizer=cfg.runtime.fused_optimizer)
    if cfg.model.get("init_from"):
        initial = load_hf(cfg.model.init_from, BertForPreTraining)
        module.model.load_state_dict(initial.state_dict())
        log.info("starting from the weights in %s", cfg.model.init_from)
    if cfg.runtime.compile:
        module.model = torch.compile(module.model)

    # Under DDP/FSDP every process runs this function; only the first writes files and talks to MLflow.
    zero = rank_zero_only.rank == 0
    work = Path(cfg.paths.checkpoints) / run_key(cfg)
    work.mkdir(parents=True, exist_ok=True)
    resume = work / "last.ckpt" if (work / "last.ckpt").exists() else None
    resumed_step = checkpoint_step(resume) if resume else None
    run_file = work / "mlflow_run_id"
    run_id = run_file.read_text().strip() if resume and run_file.exists() else None
    if resume:
        log.info("resuming from %s (step %d)", resume, resumed_step)
    run_name = f"pretrain-{cfg.get('variant') or 'baseline'}-{cfg.model.name}-{cfg.objective.name}"
    logger = mlflow_logger(cfg, run_name=run_name,
                           tags=run_tags({"pairs": cfg.paths.pairs, "tokenizer": cfg.paths.tokenizer},
                                         {"stage": "pretrain"}), run_id=run_id)
    if zero:
        run_file.write_text(logger.run_id + "\n")
    tokens_per_batch = lambda b: int(b["attention_mask"].sum())  # noqa: E731 (real tokens, padding excluded)
    out_dir = Path(cfg.paths.pretrain)
    with (atomic_dir(out_dir) if zero else _scratch_dir()) as tmp:
        trainer = L.Trainer(
            max_steps=cfg.trainer.max_steps, max_time=cfg.trainer.get("max_time"),
            accelerator=cfg.trainer.accelerator, devices=cfg.trainer.devices,
            strategy=cfg.trainer.strategy, num_nodes=cfg.trainer.num_nodes, precision=cfg.runtime.precision,
            accumulate_grad_batches=cfg.trainer.accumulate_grad_batches,
            gradient_clip_val=cfg.optim.gradient_clip_val, val_check_interval=cfg.trainer.val_check_interval,
            check_val_every_n_epoch=None, limit_val_batches=cfg.trainer.limit_val_batches,
            log_every_n_steps=cfg.trainer.log_every_n_steps, logger=logger, deterministic=True,
            enable_progress_bar=cfg.runtime.progress, enable_model_summary=False, num_sanity_val_steps=0,
            default_root_dir=str(tmp), plugins=[AtomicCheckpointIO()],
            use_distributed_sampler=not grouped,  # length-grouped batches split over processes themselves
            callbacks=[
                ModelCheckpoint(dirpath=work, save_top_k=0, save_last=True,
                                every_n_train_steps=cfg.trainer.checkpoint_every_n_steps),
                ThroughputMonitor(batch_size_fn=lambda b: b["input_ids"].shape[0], length_fn=tokens_per_batch,
                                  separator="/"),
                # tqdm rather than rich: it also updates in logs and under `dvc repro` without a terminal.
                *([TQDMProgressBar(refresh_rate=10)] if cfg.runtime.progress else []),
            ],
        )
        start = time.perf_counter()
        trainer.fit(module, datamodule=data, ckpt_path=str(resume) if resume else None)
        train_seconds = time.perf_counter() - start
        final = trainer.validate(module, datamodule=data, verbose=False)[0]
        trainer.save_checkpoint(tmp / "checkpoints" / "last.ckpt", weights_only=False)  # full state, to resume
        if not trainer.is_global_zero:
            return {k: round(float(v), 6) for k, v in final.items()}
        save_hf(module.model, tmp / "hf", tokenizer_dir=cfg.paths.tokenizer)  # unwraps torch.compile
        run_id = logger.run_id
        write_json(tmp / "run.json", {"mlflow_run_id": run_id})

    metrics = {k: round(float(v), 6) for k, v in final.items()}
    stopped_by = "max_steps" if trainer.global_step >= cfg.trainer.max_steps else "max_time"
    metrics.update({"steps": trainer.global_step, "train_seconds": round(train_seconds, 1),
                    "stopped_by": stopped_by, "resumed_from_step": resumed_step, "mlflow_run_id": run_id})
    write_json(Path(cfg.paths.metrics) / "pretrain.json", metrics)
    write_curves(logger, run_id, Path(cfg.paths.plots))
    if cfg.tracking.get("log_model", True):
        logger.experiment.log_artifacts(run_id, str(out_dir / "hf"), artifact_path="hf")
    logger.experiment.log_dict(run_id, metrics, "metrics/pretrain.json")
    logger.experiment.set_tag(run_id, "stopped_by", stopped_by)
    shutil.rmtree(work, ignore_errors=True)  # finished: the output holds the final checkpoint
    return metrics


@contextlib.contextmanager
def _scratch_dir():
    """Where a non-first process points Lightning's root folder: nothing it writes there is kept."""
    with tempfile.TemporaryDirectory(prefix="bert-lab-rank-") as d:
        yield Path(d)


def write_curves(logger, run_id: str, plots_dir: Path) -> None:
    """Training and validation curves from MLflow, as CSV files for ``dvc plots``."""
    client = logger.experiment
    for split, keys in {"train": ["train/loss", "train/mlm_acc", "train/ltr_acc", "train/nsp_acc"],
                        "val": ["val/loss", "val/mlm_acc", "val/ltr_acc", "val/nsp_acc", "val/perplexity"]}.items():
        series = {k: dict(metric_history(client, run_id, k)) for k in keys}
        series = {k: v for k, v in series.items() if v}
        steps = sorted({s for v in series.values() for s in v})
        with atomic_file(plots_dir / f"pretrain_{split}.csv", newline="") as f:
            w = csv.writer(f)
            w.writerow(["step"] + [k.split("/")[1] for k in series])
            for s in steps:
                w.writerow([s] + [("" if s not in v else f"{v[s]:.6g}") for v in series.values()])
