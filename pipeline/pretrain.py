"""The pretrain stage: a LightningModule around our BERT, trained on the pairs.

The module is wiring: one shared step for train and validation, metrics named
``split/metric``. Masking happens here, at batch time: dynamically with a
generator seeded from (seed, epoch, batch), so every batch gets a fresh mask
that is the same on every rerun, or statically (``masking.static``) with one
seed per stored example, so an example always gets the same mask.
"""
from __future__ import annotations

import csv
import time
import warnings
from pathlib import Path

import lightning.pytorch as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint, ThroughputMonitor, TQDMProgressBar
from omegaconf import DictConfig, OmegaConf
from torchmetrics.classification import MulticlassAccuracy

from pipeline.data import PairsDataModule
from pipeline.io import atomic_dir, atomic_file, write_json
from pipeline.masking import IGNORE, MaskingConfig, continuation_table, example_seed, mask_examples, mask_tokens
from pipeline.model.bert import BertConfig, BertForPreTraining, pretraining_loss
from pipeline.model.hf import save_hf
from pipeline.optim import build_optimizer
from pipeline.tracking import metric_history, mlflow_logger, run_tags
from pipeline.wordpiece import load_tokenizer, special_ids, vocab_list

# Model FLOPs utilisation is not computed on CPU runs; tokens/s and samples/s are.
warnings.filterwarnings("ignore", message="When using the `ThroughputMonitor`")


def model_config(cfg: DictConfig, vocab_size: int) -> BertConfig:
    fields = {k: v for k, v in OmegaConf.to_container(cfg.model).items() if k != "name"}
    return BertConfig(vocab_size=vocab_size, **fields)


def batch_seed(seed: int, epoch: int, batch_idx: int) -> int:
    """A seed for one batch's mask, stable across processes (unlike ``hash`` of a tuple)."""
    return ((seed * 1_000_003 + epoch + 1) * 1_000_033 + batch_idx) % (2**63 - 1)


class BertPretraining(L.LightningModule):
    def __init__(self, config: BertConfig, masking: MaskingConfig, *, nsp: bool, optim: dict, max_steps: int,
                 seed: int, mask_id: int, cls_id: int, sep_id: int, continuation: torch.Tensor | None = None):
        super().__init__()
        self.save_hyperparameters(ignore=["continuation"])
        self.continuation = continuation  # (V,) bool, for whole-word masking
        self.model = BertForPreTraining(config)
        self.masking, self.nsp, self.optim, self.max_steps = masking, nsp, optim, max_steps
        self.seed, self.mask_id, self.vocab_size = seed, mask_id, config.vocab_size
        self.cls_id, self.sep_id = cls_id, sep_id
        # Accumulated over a whole validation pass (counts, not means of means).
        self.val_mlm_acc = MulticlassAccuracy(num_classes=config.vocab_size, average="micro", ignore_index=IGNORE)
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

    def step(self, batch: dict, batch_idx: int, split: str) -> torch.Tensor:
        corrupted, labels = self._mask(batch, batch_idx, split)
        masked = labels != IGNORE                                       # (B, T)
        out = self.model(corrupted, batch["token_type_ids"], batch["attention_mask"], masked_positions=masked)
        targets = labels[masked]                                        # (N,)
        nsp_labels = batch["next_sentence_label"] if self.nsp else None
        loss, mlm_loss, nsp_loss = pretraining_loss(out, targets, nsp_labels)
        B = batch["input_ids"].shape[0]
        on_step = split == "train"
        self.log(f"{split}/loss", loss, prog_bar=True, on_step=on_step, on_epoch=not on_step, batch_size=B)
        self.log(f"{split}/mlm_loss", mlm_loss, on_step=on_step, on_epoch=not on_step, batch_size=B)
        if split == "train":
            self.log("train/mlm_acc", (out.mlm_logits.argmax(-1) == targets).float().mean(), batch_size=B)
            if self.nsp:
                self.log("train/nsp_loss", nsp_loss, batch_size=B)
                self.log("train/nsp_acc", (out.nsp_logits.argmax(-1) == nsp_labels).float().mean(), batch_size=B)
            self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"], batch_size=B)
        else:
            self.val_mlm_acc(out.mlm_logits, targets)
            self.log("val/mlm_acc", self.val_mlm_acc, on_epoch=True, prog_bar=True, batch_size=B)
            if self.nsp:
                self.log("val/nsp_loss", nsp_loss, on_epoch=True, batch_size=B)
                self.val_nsp_acc(out.nsp_logits, nsp_labels)
                self.log("val/nsp_acc", self.val_nsp_acc, on_epoch=True, batch_size=B)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"{split}/loss is {loss.item()} at step {self.global_step}: training stopped")
        return loss

    def training_step(self, batch, batch_idx):
        return self.step(batch, batch_idx, "train")

    def validation_step(self, batch, batch_idx):
        self.step(batch, batch_idx, "val")

    def configure_optimizers(self):
        return build_optimizer(self.model, self.optim, self.max_steps)


def pretrain(cfg: DictConfig) -> dict:
    """Train BERT on ``paths.pairs``; write checkpoint + Hugging Face export to ``paths.pretrain``."""
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    tok = load_tokenizer(cfg.paths.tokenizer)
    ids = special_ids(tok)
    config = model_config(cfg, tok.get_vocab_size())
    data = PairsDataModule(cfg.paths.pairs, batch_size=cfg.trainer.batch_size // cfg.trainer.accumulate_grad_batches,
                           seed=cfg.seed, num_workers=cfg.runtime.loader_workers)
    module = BertPretraining(config, MaskingConfig(**cfg.masking), nsp=cfg.objective.nsp,
                             optim=OmegaConf.to_container(cfg.optim), max_steps=cfg.trainer.max_steps,
                             seed=cfg.seed, mask_id=ids["mask"], cls_id=ids["cls"], sep_id=ids["sep"],
                             continuation=continuation_table(vocab_list(tok)) if cfg.masking.whole_word else None)
    if cfg.runtime.compile:
        module.model = torch.compile(module.model)

    logger = mlflow_logger(cfg, run_name=f"pretrain-{cfg.model.name}-{cfg.objective.name}",
                           tags=run_tags({"pairs": cfg.paths.pairs, "tokenizer": cfg.paths.tokenizer},
                                         {"stage": "pretrain"}))
    tokens_per_batch = lambda b: int(b["attention_mask"].sum())  # noqa: E731 (real tokens, padding excluded)
    out_dir = Path(cfg.paths.pretrain)
    with atomic_dir(out_dir) as tmp:
        trainer = L.Trainer(
            max_steps=cfg.trainer.max_steps, accelerator=cfg.trainer.accelerator, devices=cfg.trainer.devices,
            strategy=cfg.trainer.strategy, num_nodes=cfg.trainer.num_nodes, precision=cfg.runtime.precision,
            accumulate_grad_batches=cfg.trainer.accumulate_grad_batches,
            gradient_clip_val=cfg.optim.gradient_clip_val, val_check_interval=cfg.trainer.val_check_interval,
            check_val_every_n_epoch=None, limit_val_batches=cfg.trainer.limit_val_batches,
            log_every_n_steps=cfg.trainer.log_every_n_steps, logger=logger, deterministic=True,
            enable_progress_bar=cfg.runtime.progress, enable_model_summary=False, num_sanity_val_steps=0,
            default_root_dir=str(tmp),
            callbacks=[
                ModelCheckpoint(dirpath=tmp / "checkpoints", save_top_k=0, save_last=True,
                                every_n_train_steps=cfg.trainer.val_check_interval),
                ThroughputMonitor(batch_size_fn=lambda b: b["input_ids"].shape[0], length_fn=tokens_per_batch,
                                  separator="/"),
                # tqdm rather than rich: it also updates in logs and under `dvc repro` without a terminal.
                *([TQDMProgressBar(refresh_rate=10)] if cfg.runtime.progress else []),
            ],
        )
        start = time.perf_counter()
        trainer.fit(module, datamodule=data)
        train_seconds = time.perf_counter() - start
        final = trainer.validate(module, datamodule=data, verbose=False)[0]
        trainer.save_checkpoint(tmp / "checkpoints" / "last.ckpt", weights_only=False)  # full state, to resume
        save_hf(module.model, tmp / "hf", tokenizer_dir=cfg.paths.tokenizer)  # unwraps torch.compile
        run_id = logger.run_id
        write_json(tmp / "run.json", {"mlflow_run_id": run_id})

    metrics = {k: round(float(v), 6) for k, v in final.items()}
    metrics.update({"steps": trainer.global_step, "train_seconds": round(train_seconds, 1),
                    "mlflow_run_id": run_id})
    write_json(Path(cfg.paths.metrics) / "pretrain.json", metrics)
    write_curves(logger, run_id, Path(cfg.paths.plots))
    if cfg.tracking.get("log_model", True):
        logger.experiment.log_artifacts(run_id, str(out_dir / "hf"), artifact_path="hf")
    logger.experiment.log_dict(run_id, metrics, "metrics/pretrain.json")
    return metrics


def write_curves(logger, run_id: str, plots_dir: Path) -> None:
    """Training and validation curves from MLflow, as CSV files for ``dvc plots``."""
    client = logger.experiment
    for split, keys in {"train": ["train/loss", "train/mlm_acc", "train/nsp_acc"],
                        "val": ["val/loss", "val/mlm_acc", "val/nsp_acc"]}.items():
        series = {k: dict(metric_history(client, run_id, k)) for k in keys}
        series = {k: v for k, v in series.items() if v}
        steps = sorted({s for v in series.values() for s in v})
        with atomic_file(plots_dir / f"pretrain_{split}.csv", newline="") as f:
            w = csv.writer(f)
            w.writerow(["step"] + [k.split("/")[1] for k in series])
            for s in steps:
                w.writerow([s] + [("" if s not in v else f"{v[s]:.6g}") for v in series.values()])
