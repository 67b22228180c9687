"""The finetune stage: one task, every configured mode, several seeds.

Modes (``finetune.modes``):

* ``pretrained`` -- fine-tuning: all weights train, a task head on the pooled ``[CLS]``;
* ``scratch`` -- the same architecture and budget from random weights: what pretraining bought;
* ``frozen_<features>`` -- feature-based: the pretrained encoder frozen; each
  example's token states (mean over its real tokens) of the chosen layers feed
  a small trained head. Feature sets as in the paper's feature-based comparison:
  ``embeddings``, ``last``, ``second_to_last``, ``sum_last_four``,
  ``concat_last_four`` and ``weighted`` (a learned softmax-weighted sum of all
  layers times a learned scale, as ELMo mixes its layers). A model with fewer
  than four layers uses all of its states (embeddings included) for "last four";
* ``tfidf`` -- the classical baseline: TF-IDF word 1-2-grams with logistic
  regression (ridge regression for regression tasks), scikit-learn.

Each (mode, seed) is one MLflow run tagged with the task, mode, seed and the
pretrain run it started from. Results are reported per mode as mean and
standard deviation over seeds of each of the task's metrics.
"""
from __future__ import annotations

import logging
import statistics
import time
from pathlib import Path

import lightning.pytorch as L
import torch
import torch.nn.functional as F
from hydra.utils import instantiate
from lightning.pytorch.callbacks import TQDMProgressBar
from omegaconf import DictConfig
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from pipeline.data import pad_collate
from pipeline.errors import ConfigError, DataError
from pipeline.io import read_json, write_json
from pipeline.model.bert import BertForSequenceClassification, BertModel
from pipeline.model.hf import config_from_hf, load_hf
from pipeline.ner import encode_ner, ner_linear, ner_run
from pipeline.optim import build_optimizer
from pipeline.tasks import Example, TaskData, score
from pipeline.tracking import check_tracking, mlflow_logger, run_tags
from pipeline.wordpiece import load_tokenizer

log = logging.getLogger(__name__)

FEATURE_SETS = ("embeddings", "last", "second_to_last", "sum_last_four", "concat_last_four", "weighted")
MODES = ("pretrained", "scratch", "tfidf", *(f"frozen_{f}" for f in FEATURE_SETS))


def encode(tok, examples: list[Example], max_seq_length: int) -> list[dict]:
    """Token ids with BERT's ``[CLS] A [SEP] (B [SEP])`` template, truncated longest-first."""
    tok.enable_truncation(max_seq_length)
    pairs = [(e.text_a, e.text_b) if e.text_b is not None else e.text_a for e in examples]
    encodings = tok.encode_batch(pairs)
    return [{"input_ids": enc.ids, "token_type_ids": enc.type_ids, "label": e.label}
            for enc, e in zip(encodings, examples)]


def task_loss(outputs: torch.Tensor, labels: torch.Tensor, regression: bool) -> torch.Tensor:
    if regression:
        return F.mse_loss(outputs.squeeze(-1).float(), labels.float())
    return F.cross_entropy(outputs, labels)


def predictions(outputs: torch.Tensor, regression: bool) -> torch.Tensor:
    return outputs.squeeze(-1).float() if regression else outputs.argmax(-1)


class Classification(L.LightningModule):
    """A trainable network on a task: its loss, and the task's metrics over each dev pass.

    ``inputs`` names the batch entries the network takes: the token tensors for a
    fine-tuned BERT, ``("states",)`` for a head on frozen features.
    """

    TOKENS = ("input_ids", "token_type_ids", "attention_mask")

    def __init__(self, net: nn.Module, task: TaskData, optim: dict, total_steps: int, fused_optimizer: bool = True,
                 inputs: tuple[str, ...] = TOKENS):
        super().__init__()
        self.net, self.inputs = net, inputs
        self.task, self.optim, self.total_steps, self.fused = task, optim, total_steps, fused_optimizer
        self._preds: list[torch.Tensor] = []
        self._targets: list[torch.Tensor] = []

    def outputs(self, batch: dict) -> torch.Tensor:
        return self.net(*(batch[k] for k in self.inputs))

    def training_step(self, batch, batch_idx):
        loss = task_loss(self.outputs(batch), batch["label"], self.task.regression)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch["label"]))
        return loss

    def validation_step(self, batch, batch_idx):
        out = self.outputs(batch)
        self.log("val/loss", task_loss(out, batch["label"], self.task.regression), on_epoch=True,
                 batch_size=len(batch["label"]))
        self._preds.append(predictions(out, self.task.regression).cpu())
        self._targets.append(batch["label"].cpu())

    def on_validation_epoch_end(self) -> None:
        if self._preds:
            scores = score(self.task.metrics, torch.cat(self._preds), torch.cat(self._targets),
                           max(2, self.task.num_outputs))
            for k, v in scores.items():
                self.log(f"val/{k}", v, prog_bar=k == self.task.metrics[0])
        self._preds, self._targets = [], []

    def configure_optimizers(self):
        return build_optimizer(self.net, self.optim, self.total_steps, fused=self.fused)


class LayerMix(nn.Module):
    """The paper's feature sets: pick, add, concatenate or (ELMo) mix the states of the layers.

    Input (..., L+1, H), embeddings first; output (..., width).
    """

    def __init__(self, feature_set: str, n_states: int, hidden: int):
        super().__init__()
        if feature_set not in FEATURE_SETS:
            raise ValueError(f"feature set {feature_set!r}: expected one of {', '.join(FEATURE_SETS)}")
        self.feature_set, self.last_k = feature_set, min(4, n_states)
        if feature_set == "weighted":
            self.layer_logits = nn.Parameter(torch.zeros(n_states))  # softmax -> layer weights
            self.scale = nn.Parameter(torch.ones(()))                # ELMo's gamma
        self.width = hidden * self.last_k if feature_set == "concat_last_four" else hidden

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        f = self.feature_set
        if f == "embeddings":
            return states[..., 0, :]
        if f == "last":
            return states[..., -1, :]
        if f == "second_to_last":
            return states[..., -2, :]
        if f == "sum_last_four":
            return states[..., -self.last_k:, :].sum(-2)
        if f == "concat_last_four":
            return states[..., -self.last_k:, :].flatten(-2)
        weights = torch.softmax(self.layer_logits, 0)
        return self.scale * (weights[:, None] * states).sum(-2)

    def weights(self) -> list[float] | None:
        return [round(w, 4) for w in torch.softmax(self.layer_logits, 0).tolist()] if self.feature_set == "weighted" \
            else None


class FeatureHead(nn.Module):
    """A small classifier on frozen sentence features: mix the layers, then dense-tanh-dropout-dense."""

    def __init__(self, feature_set: str, n_states: int, hidden: int, num_outputs: int, dropout: float = 0.1):
        super().__init__()
        self.mix = LayerMix(feature_set, n_states, hidden)
        self.mlp = nn.Sequential(nn.Linear(self.mix.width, hidden), nn.Tanh(), nn.Dropout(dropout),
                                 nn.Linear(hidden, num_outputs))

    @property
    def layer_logits(self) -> torch.Tensor:
        return self.mix.layer_logits

    def features(self, states: torch.Tensor) -> torch.Tensor:
        """(B, L+1, H) pooled states of every layer -> (B, width)."""
        return self.mix(states)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.mix(states))


@torch.no_grad()
def pooled_states(encoder: BertModel, data: list[dict], batch_size: int = 64) -> torch.Tensor:
    """(N, L+1, H): each example's mean token state (real tokens only) at every layer, embeddings first."""
    encoder.eval()
    out = []
    for batch in DataLoader(data, batch_size=batch_size, collate_fn=pad_collate):
        enc = encoder(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], output_hidden_states=True)
        states = torch.stack(enc.hidden_states, 1)                     # (B, L+1, T, H)
        m = batch["attention_mask"][:, None, :, None].to(states.dtype)  # (B, 1, T, 1)
        out.append((states * m).sum(2) / m.sum(2))                     # (B, L+1, H)
    return torch.cat(out)


def _trainer(cfg: DictConfig, logger, epochs: int) -> L.Trainer:
    return L.Trainer(max_epochs=epochs, accelerator=cfg.trainer.accelerator, devices=1,
                     precision=cfg.runtime.precision, logger=logger, deterministic=True,
                     enable_checkpointing=False, enable_model_summary=False, num_sanity_val_steps=0,
                     enable_progress_bar=cfg.runtime.progress, log_every_n_steps=10,
                     gradient_clip_val=1.0, default_root_dir=None,
                     callbacks=[TQDMProgressBar(refresh_rate=10)] if cfg.runtime.progress else None)


def epoch_dev(cfg: DictConfig, dev_loader):
    """The dev loader for ``fit`` when dev scores are wanted after every epoch; the final score is taken anyway."""
    return dev_loader if cfg.finetune.eval_every_epoch else None


def _optim(ft: DictConfig, lr: float) -> dict:
    return {"name": "adamw", "lr": lr, "weight_decay": ft.weight_decay, "warmup_ratio": ft.warmup_ratio,
            "betas": [0.9, 0.999], "eps": 1e-6}


def build_model(mode: str, export_dir: Path, num_outputs: int, seed: int) -> BertForSequenceClassification:
    torch.manual_seed(seed)  # the classifier head (and, from scratch, everything) starts from this seed
    if mode == "pretrained":
        model = load_hf(export_dir, BertForSequenceClassification, num_labels=num_outputs)
    else:
        model = BertForSequenceClassification(config_from_hf(read_json(export_dir / "config.json")), num_outputs)
    return model.train()  # load_hf returns eval mode; both starts must train with dropout alike


def _final_scores(trainer: L.Trainer, module: L.LightningModule, dev_loader, task: TaskData) -> dict:
    final = trainer.validate(module, dev_loader, verbose=False)[0]
    scores = {m: round(float(final[f"val/{m}"]), 6) for m in task.metrics}
    return {**scores, "loss": round(float(final["val/loss"]), 6)}


def finetune_one(cfg: DictConfig, task: TaskData, train: list[dict], dev: list[dict], mode: str, seed: int,
                 export_dir: Path, input_tags: dict[str, str]) -> dict:
    """Fine-tune (``pretrained``) or train from scratch (``scratch``) with one seed."""
    L.seed_everything(seed, workers=True, verbose=False)
    model = build_model(mode, export_dir, task.num_outputs, seed)
    ft = cfg.finetune
    g = torch.Generator().manual_seed(seed)
    train_loader = DataLoader(train, batch_size=ft.batch_size, shuffle=True, generator=g, collate_fn=pad_collate)
    dev_loader = DataLoader(dev, batch_size=64, collate_fn=pad_collate)
    module = Classification(model, task, _optim(ft, ft.lr), ft.epochs * len(train_loader),
                            cfg.runtime.fused_optimizer)
    logger = _logger(cfg, task, mode, seed, input_tags)
    trainer = _trainer(cfg, logger, ft.epochs)
    trainer.fit(module, train_loader, epoch_dev(cfg, dev_loader))
    return {"seed": seed, **_final_scores(trainer, module, dev_loader, task), "mlflow_run_id": logger.run_id}


def frozen_one(cfg: DictConfig, task: TaskData, train_states: torch.Tensor, dev_states: torch.Tensor,
               train_labels: torch.Tensor, dev_labels: torch.Tensor, feature_set: str, seed: int,
               input_tags: dict[str, str]) -> dict:
    """Train a small head on frozen, pooled features with one seed."""
    L.seed_everything(seed, workers=True, verbose=False)
    ft = cfg.finetune
    head = FeatureHead(feature_set, train_states.shape[1], train_states.shape[2], task.num_outputs)

    def loader(states, labels, shuffle):
        ds = TensorDataset(states, labels)
        collate = lambda items: {"states": torch.stack([s for s, _ in items]),  # noqa: E731
                                 "label": torch.stack([y for _, y in items])}
        return DataLoader(ds, batch_size=ft.batch_size if shuffle else 256, shuffle=shuffle, collate_fn=collate,
                          generator=torch.Generator().manual_seed(seed) if shuffle else None)

    train_loader, dev_loader = loader(train_states, train_labels, True), loader(dev_states, dev_labels, False)
    module = Classification(head, task, _optim(ft, ft.feature_lr), ft.feature_epochs * len(train_loader),
                            cfg.runtime.fused_optimizer, inputs=("states",))
    mode = f"frozen_{feature_set}"
    logger = _logger(cfg, task, mode, seed, input_tags)
    trainer = _trainer(cfg, logger, ft.feature_epochs)
    trainer.fit(module, train_loader, epoch_dev(cfg, dev_loader))
    result = {"seed": seed, **_final_scores(trainer, module, dev_loader, task), "mlflow_run_id": logger.run_id}
    if feature_set == "weighted":
        result["layer_weights"] = head.mix.weights()
    return result


def tfidf_baseline(cfg: DictConfig, task: TaskData, input_tags: dict[str, str]) -> dict:
    """TF-IDF word 1-2-grams + logistic regression (ridge for regression); a pair is its two texts joined."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression, Ridge

    def texts(examples):
        return [e.text_a if e.text_b is None else f"{e.text_a} {e.text_b}" for e in examples]

    vec = TfidfVectorizer(ngram_range=(1, 2))
    x_train = vec.fit_transform(texts(task.train))
    x_dev = vec.transform(texts(task.dev))
    y_train = [e.label for e in task.train]
    model = Ridge() if task.regression else LogisticRegression(max_iter=2000)
    model.fit(x_train, y_train)
    preds = model.predict(x_dev)
    scores = score(task.metrics, torch.as_tensor(preds), torch.as_tensor([e.label for e in task.dev]),
                   max(2, task.num_outputs))
    logger = _logger(cfg, task, "tfidf", 0, input_tags)
    logger.log_metrics({f"val/{k}": v for k, v in scores.items()}, step=0)
    logger.finalize("success")
    return {"seed": 0, **scores, "mlflow_run_id": logger.run_id}


def _logger(cfg: DictConfig, task: TaskData, mode: str, seed: int, input_tags: dict[str, str]):
    run_name = f"finetune-{cfg.get('variant') or 'baseline'}-{task.name}-{mode}-s{seed}"
    logger = mlflow_logger(cfg, run_name=run_name, tags={**input_tags, "mode": mode, "seed": str(seed)})
    logger.log_hyperparams({"finetune.mode": mode, "finetune.seed": seed})
    return logger


def summarize(runs: list[dict], metrics: list[str]) -> dict:
    """Mean and standard deviation over seeds of each metric (std 0 for a single run)."""
    out = {}
    for m in metrics:
        values = [r[m] for r in runs]
        out[f"{m}_mean"] = round(statistics.fmean(values), 6)
        out[f"{m}_std"] = round(statistics.stdev(values), 6) if len(values) > 1 else 0.0
    return {**out, "n": len(runs), "runs": runs}


def finetune(cfg: DictConfig) -> dict:
    """Run every configured mode and seed on ``cfg.task``; write ``metrics/finetune.json``."""
    check_tracking(cfg)  # before any compute
    ft = cfg.finetune
    bad = [m for m in ft.modes if m not in MODES]
    if bad:
        raise ConfigError(f"finetune.modes: {bad} not known; the modes are: {', '.join(MODES)}")
    if ft.get("init_from"):
        # Any Hugging Face-format BERT folder (weights, config.json, tokenizer files).
        export_dir = Path(ft.init_from)
        if not (export_dir / "config.json").is_file():
            raise DataError(f"finetune.init_from={export_dir}: no config.json there (expected a BERT folder)")
        pretrain_run = f"external:{export_dir}"
    else:
        export_dir = Path(cfg.paths.pretrain) / "hf"
        pretrain_run = read_json(Path(cfg.paths.pretrain) / "run.json")["mlflow_run_id"]
    task: TaskData = instantiate(cfg.task.data)
    tok = load_tokenizer(export_dir)
    if getattr(task, "kind", None) == "ner":
        return finetune_ner(cfg, task, tok, export_dir, pretrain_run)
    train = encode(tok, task.train, cfg.task.max_seq_length)
    dev = encode(tok, task.dev, cfg.task.max_seq_length)
    log.info("task %s: %d train, %d dev examples, %s", task.name, len(train), len(dev),
             "regression" if task.regression else f"{len(task.labels)} labels")
    # Hashed once: every (mode, seed) run starts from the same export.
    input_tags = run_tags({"pretrained": export_dir}, {"stage": "finetune", "task": task.name,
                                                      "pretrain_run_id": pretrain_run})
    results: dict[str, dict] = {}
    states = None
    for mode in ft.modes:
        start = time.perf_counter()
        if mode == "tfidf":
            runs = [tfidf_baseline(cfg, task, input_tags)]  # deterministic: one run
        elif mode.startswith("frozen_"):
            if states is None:  # the frozen encoder's features, computed once for every head and seed
                encoder = load_hf(export_dir, BertForSequenceClassification, num_labels=task.num_outputs).bert
                states = (pooled_states(encoder, train), pooled_states(encoder, dev))
            dtype = torch.float32 if task.regression else torch.long
            labels = (torch.tensor([e["label"] for e in train], dtype=dtype),
                      torch.tensor([e["label"] for e in dev], dtype=dtype))
            runs = [frozen_one(cfg, task, states[0], states[1], labels[0], labels[1], mode[len("frozen_"):], seed,
                               input_tags) for seed in ft.seeds]
        else:
            runs = [finetune_one(cfg, task, train, dev, mode, seed, export_dir, input_tags) for seed in ft.seeds]
        results[mode] = {**summarize(runs, task.metrics), "seconds": round(time.perf_counter() - start, 1)}
        log.info("%s: %s", mode, ", ".join(f"{m} {results[mode][f'{m}_mean']:.4f} ± {results[mode][f'{m}_std']:.4f}"
                                           for m in task.metrics))
    metrics = {"task": task.name, "metric": task.metrics[0], "metrics": task.metrics,
               "train_examples": len(train), "dev_examples": len(dev), "pretrain_run_id": pretrain_run,
               "modes": results, "mode_order": list(results)}
    write_json(Path(cfg.paths.metrics) / "finetune.json", metrics)
    return metrics


def finetune_ner(cfg: DictConfig, task, tok, export_dir: Path, pretrain_run: str) -> dict:
    """The NER counterpart of ``finetune`` (see ``pipeline.ner``): same modes, seeds and summary."""
    train = encode_ner(tok, task.train, cfg.task.max_seq_length)
    dev = encode_ner(tok, task.dev, cfg.task.max_seq_length)
    log.info("task %s: %d train, %d dev sentences, %d tags", task.name, len(train), len(dev), len(task.labels))
    input_tags = run_tags({"pretrained": export_dir}, {"stage": "finetune", "task": task.name,
                                                      "pretrain_run_id": pretrain_run})
    results: dict[str, dict] = {}
    for mode in cfg.finetune.modes:
        start = time.perf_counter()
        if mode == "tfidf":
            scores = ner_linear(task)
            logger = _logger(cfg, task, mode, 0, input_tags)
            logger.log_metrics({f"val/{k}": v for k, v in scores.items()}, step=0)
            logger.finalize("success")
            runs = [{"seed": 0, **scores, "mlflow_run_id": logger.run_id}]
        else:
            runs = []
            for seed in cfg.finetune.seeds:
                logger = _logger(cfg, task, mode, seed, input_tags)
                runs.append({**ner_run(cfg, task, train, dev, mode, seed, export_dir, logger, _trainer, _optim),
                             "mlflow_run_id": logger.run_id})
        results[mode] = {**summarize(runs, task.metrics), "seconds": round(time.perf_counter() - start, 1)}
        log.info("%s: entity F1 %.4f ± %.4f", mode, results[mode]["f1_mean"], results[mode]["f1_std"])
    metrics = {"task": task.name, "metric": "f1", "metrics": task.metrics, "train_examples": len(train),
               "dev_examples": len(dev), "pretrain_run_id": pretrain_run, "modes": results,
               "mode_order": list(results)}
    write_json(Path(cfg.paths.metrics) / "finetune.json", metrics)
    return metrics
