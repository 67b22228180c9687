"""The finetune stage: sequence classification from the pretrained export or from scratch.

Each (mode, seed) is one MLflow run tagged with the task, the mode, the seed and
the pretrain run it started from. ``scratch`` uses the same architecture and
budget with random weights: the baseline that shows what pretraining bought.
"""
from __future__ import annotations

import logging
import statistics
from pathlib import Path

import lightning.pytorch as L
import torch
import torch.nn.functional as F
from hydra.utils import instantiate
from lightning.pytorch.callbacks import TQDMProgressBar
from omegaconf import DictConfig
from torch.utils.data import DataLoader
from torchmetrics.classification import MulticlassAccuracy

from pipeline.data import pad_collate
from pipeline.errors import DataError
from pipeline.io import read_json, write_json
from pipeline.model.bert import BertForSequenceClassification
from pipeline.model.hf import config_from_hf, load_hf
from pipeline.optim import build_optimizer
from pipeline.tasks import Example, TaskData
from pipeline.tracking import mlflow_logger, run_tags
from pipeline.wordpiece import load_tokenizer

log = logging.getLogger(__name__)


def encode(tok, examples: list[Example], max_seq_length: int) -> list[dict]:
    """Token ids with BERT's ``[CLS] A [SEP] (B [SEP])`` template, truncated longest-first."""
    tok.enable_truncation(max_seq_length)
    pairs = [(e.text_a, e.text_b) if e.text_b is not None else e.text_a for e in examples]
    encodings = tok.encode_batch(pairs)
    return [{"input_ids": enc.ids, "token_type_ids": enc.type_ids, "label": e.label}
            for enc, e in zip(encodings, examples)]


class SequenceClassification(L.LightningModule):
    def __init__(self, model: BertForSequenceClassification, num_labels: int, optim: dict, total_steps: int,
                 fused_optimizer: bool = True):
        super().__init__()
        self.model, self.optim, self.total_steps, self.fused = model, optim, total_steps, fused_optimizer
        self.val_acc = MulticlassAccuracy(num_classes=num_labels, average="micro")

    def step(self, batch: dict, split: str) -> torch.Tensor:
        logits = self.model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        loss = F.cross_entropy(logits, batch["label"])
        B = len(batch["label"])
        if split == "train":
            self.log("train/loss", loss, prog_bar=True, batch_size=B)
        else:
            self.log("val/loss", loss, on_epoch=True, batch_size=B)
            self.val_acc(logits, batch["label"])
            self.log("val/accuracy", self.val_acc, on_epoch=True, prog_bar=True, batch_size=B)
        return loss

    def training_step(self, batch, batch_idx):
        return self.step(batch, "train")

    def validation_step(self, batch, batch_idx):
        self.step(batch, "val")

    def configure_optimizers(self):
        return build_optimizer(self.model, self.optim, self.total_steps, fused=self.fused)


def build_model(mode: str, export_dir: Path, num_labels: int, seed: int) -> BertForSequenceClassification:
    torch.manual_seed(seed)  # the classifier head (and, from scratch, everything) starts from this seed
    if mode == "pretrained":
        model = load_hf(export_dir, BertForSequenceClassification, num_labels=num_labels)
    else:
        model = BertForSequenceClassification(config_from_hf(read_json(export_dir / "config.json")), num_labels)
    return model.train()  # load_hf returns eval mode; both starts must train with dropout alike


def finetune_one(cfg: DictConfig, task: TaskData, train: list[dict], dev: list[dict], mode: str, seed: int,
                 export_dir: Path, input_tags: dict[str, str]) -> dict:
    L.seed_everything(seed, workers=True, verbose=False)
    model = build_model(mode, export_dir, len(task.labels), seed)
    ft = cfg.finetune
    g = torch.Generator().manual_seed(seed)
    train_loader = DataLoader(train, batch_size=ft.batch_size, shuffle=True, generator=g, collate_fn=pad_collate)
    dev_loader = DataLoader(dev, batch_size=64, collate_fn=pad_collate)
    total = ft.epochs * len(train_loader)
    optim = {"lr": ft.lr, "weight_decay": ft.weight_decay, "warmup_ratio": ft.warmup_ratio,
             "betas": [0.9, 0.999], "eps": 1e-6}
    module = SequenceClassification(model, len(task.labels), optim, total, cfg.runtime.fused_optimizer)
    logger = mlflow_logger(
        cfg, run_name=f"finetune-{task.name}-{mode}-s{seed}",
        tags={**input_tags, "mode": mode, "seed": str(seed)})
    logger.log_hyperparams({"finetune.mode": mode, "finetune.seed": seed})
    trainer = L.Trainer(max_epochs=ft.epochs, accelerator=cfg.trainer.accelerator, devices=1,
                        precision=cfg.runtime.precision, logger=logger, deterministic=True,
                        enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0,
                        enable_progress_bar=cfg.runtime.progress, log_every_n_steps=10,
                        gradient_clip_val=1.0, default_root_dir=None,
                        callbacks=[TQDMProgressBar(refresh_rate=10)] if cfg.runtime.progress else None)
    trainer.fit(module, train_loader, dev_loader)
    final = trainer.validate(module, dev_loader, verbose=False)[0]
    return {"seed": seed, "accuracy": round(float(final["val/accuracy"]), 6),
            "loss": round(float(final["val/loss"]), 6), "mlflow_run_id": logger.run_id}


def finetune(cfg: DictConfig) -> dict:
    """Fine-tune every configured mode and seed on ``cfg.task``; write ``metrics/finetune.json``."""
    if cfg.finetune.get("init_from"):
        # Any Hugging Face-format BERT folder (weights, config.json, tokenizer files).
        export_dir = Path(cfg.finetune.init_from)
        if not (export_dir / "config.json").is_file():
            raise DataError(f"finetune.init_from={export_dir}: no config.json there (expected a BERT folder)")
        pretrain_run = f"external:{export_dir}"
    else:
        export_dir = Path(cfg.paths.pretrain) / "hf"
        pretrain_run = read_json(Path(cfg.paths.pretrain) / "run.json")["mlflow_run_id"]
    task: TaskData = instantiate(cfg.task.data)
    tok = load_tokenizer(export_dir)
    train = encode(tok, task.train, cfg.task.max_seq_length)
    dev = encode(tok, task.dev, cfg.task.max_seq_length)
    log.info("task %s: %d train, %d dev examples, %d labels", task.name, len(train), len(dev), len(task.labels))
    # Hashed once: every (mode, seed) run starts from the same export.
    input_tags = run_tags({"pretrained": export_dir}, {"stage": "finetune", "task": task.name,
                                                      "pretrain_run_id": pretrain_run})
    results = {}
    for mode in cfg.finetune.modes:
        runs = [finetune_one(cfg, task, train, dev, mode, seed, export_dir, input_tags)
                for seed in cfg.finetune.seeds]
        accs = [r["accuracy"] for r in runs]
        results[mode] = {"accuracy_mean": round(statistics.fmean(accs), 6),
                         "accuracy_std": round(statistics.stdev(accs), 6) if len(accs) > 1 else 0.0,
                         "runs": runs}
    metrics = {"task": task.name, "metric": cfg.task.metric, "train_examples": len(train),
               "dev_examples": len(dev), "pretrain_run_id": pretrain_run, "modes": results}
    write_json(Path(cfg.paths.metrics) / "finetune.json", metrics)
    return metrics
