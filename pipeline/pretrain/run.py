"""The pretrain stage: the examples of ``paths.pairs`` -> a trained model, its export and metrics.

``run`` reads like the stage's table of contents: tokenizer and model, data,
the LightningModule, the checkpoint folder a rerun resumes from, the MLflow run,
the Trainer, then training, export and the record of what was measured. What
differs between architectures (``model.architecture``: its config, module and
export) is the registry's (``pipeline.model.registry``).
"""
from __future__ import annotations

import contextlib
import csv
import dataclasses
import logging
import tempfile
import time
import warnings
from pathlib import Path

import lightning.pytorch as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint, ThroughputMonitor, TQDMProgressBar
from lightning.pytorch.utilities.rank_zero import rank_zero_only
from omegaconf import DictConfig, OmegaConf

from pipeline.data.datamodule import PairsDataModule
from pipeline.data.scored import EvalSet
from pipeline.data.ngram import FLOORS_OF
from pipeline.data.masking import MaskingConfig
from pipeline.data.tokenizer import load_tokenizer, special_ids, vocab_list
from pipeline.errors import ConfigError
from pipeline.io import atomic_dir, atomic_file, write_json
from pipeline.model_config import DEFAULT_ARCHITECTURE, METRIC_PREFIX, ModelConfig, build_config, metric_prefix
from pipeline.model.registry import architecture
from pipeline.pretrain.checkpoints import AtomicCheckpointIO, RunFolder, run_key
from pipeline.pretrain.module import PretrainSetup, PretrainingModule
from pipeline.settings import EvalSetSettings, ZeroShotSettings
from pipeline.tracking import check_tracking, metric_history, mlflow_logger, run_tags
from pipeline.variants import BASELINE
from pipeline.zero_shot.along import along_pretraining

# Model FLOPs utilisation is not computed on CPU runs; tokens/s and samples/s are.
warnings.filterwarnings("ignore", message="When using the `ThroughputMonitor`")
log = logging.getLogger(__name__)


def run(cfg: DictConfig) -> dict:
    """Train ``model.architecture`` on ``paths.pairs``; write checkpoint + export to ``paths.pretrain``.

    Checkpoints go to ``paths.checkpoints/<run key>`` every
    ``trainer.checkpoint_every_n_steps``; a rerun of the same run (same settings
    and data) resumes from the last one, with the same data order, masks and
    dropout, and continues the same MLflow run.
    """
    check_tracking(cfg)  # before any compute
    seed = training_seed(cfg)
    L.seed_everything(seed, workers=True, verbose=False)
    tok = load_tokenizer(cfg.paths.tokenizer)
    data = PairsDataModule(cfg.paths.pairs, batch_size=device_batch_size(cfg), seed=seed,
                           num_workers=cfg.runtime.loader_workers, length_grouped=length_grouped(cfg))
    arch = architecture(model_architecture(cfg))
    module = build_module(cfg, tok)
    folder = RunFolder(cfg.paths.checkpoints, checkpoint_key(cfg))
    if folder.resume:
        log.info("resuming from %s (step %d)", folder.resume, folder.resumed_step)
    logger = open_run(cfg, folder)
    # Under DDP/FSDP every process runs this function; only the first writes files and talks to MLflow.
    zero = rank_zero_only.rank == 0
    with (atomic_dir(cfg.paths.pretrain) if zero else _scratch_dir()) as tmp:
        trainer = build_trainer(cfg, logger, root=tmp, checkpoints=folder.path)
        start = time.perf_counter()
        trainer.fit(module, datamodule=data, ckpt_path=str(folder.resume) if folder.resume else None)
        train_seconds = time.perf_counter() - start
        module.final = True  # every run on the whole layout probe, and what is measured at the end only
        final = {k: round(float(v), 6) for k, v in trainer.validate(module, datamodule=data, verbose=False)[0].items()}
        trainer.save_checkpoint(tmp / "checkpoints" / "last.ckpt", weights_only=False)  # full state, to resume
        if not zero:
            return final
        arch.save(module.model, tmp / "hf", Path(cfg.paths.tokenizer))  # unwraps torch.compile
        write_json(tmp / "run.json", {"mlflow_run_id": logger.run_id})
    metrics = {**final, "lm": metric_prefix(cfg.objective.lm), "steps": trainer.global_step, "train_seconds": round(train_seconds, 1),
               "stopped_by": "max_steps" if trainer.global_step >= cfg.trainer.max_steps else "max_time",
               "resumed_from_step": folder.resumed_step, "mlflow_run_id": logger.run_id, **cost(cfg, module)}
    record(cfg, logger, metrics, module.eval_set)
    folder.remove()
    return metrics


def training_seed(cfg: DictConfig) -> int:
    """The seed of this run's training randomness: ``seed``, plus ``pretrain_seed`` for a variant's further runs."""
    return cfg.seed + (cfg.get("pretrain_seed") or 0)


def model_architecture(cfg: DictConfig) -> str:
    """``model.architecture``: the one setting that decides the architecture (``objective.lm`` is one it trains)."""
    return cfg.model.get("architecture", DEFAULT_ARCHITECTURE)


def model_config(cfg: DictConfig, vocab_size: int) -> ModelConfig:
    """The model to pretrain: the size preset, or the config of ``model.init_from``; the fields the objective
    decides (causal attention left to right, word2vec's kind) set by ``objective.lm``."""
    init_from = cfg.model.get("init_from")
    if init_from:
        config = architecture(model_architecture(cfg)).read_config(Path(init_from))
        if config.vocab_size != vocab_size:
            raise ConfigError(
                f"model.init_from={init_from} has vocab_size={config.vocab_size}, but the tokenizer at "
                f"paths.tokenizer has {vocab_size} tokens: expected the same vocabulary "
                "(set tokenizer.from_folder to the same folder)")
        return dataclasses.replace(config, **config.objective_fields(cfg.objective.lm))
    return build_config(OmegaConf.to_container(cfg.model), vocab_size, cfg.objective.lm)


def pretrain_setup(cfg: DictConfig, tok) -> PretrainSetup:
    """The settings and inputs a pretraining module is built from, beside its model's config."""
    return PretrainSetup(optim=OmegaConf.to_container(cfg.optim), max_steps=cfg.trainer.max_steps,
                         seed=training_seed(cfg), fused_optimizer=cfg.runtime.fused_optimizer,
                         eval_set=EvalSet(cfg.paths.eval_set), special=special_ids(tok), vocab=vocab_list(tok),
                         pairs=Path(cfg.paths.pairs), masking=MaskingConfig(**cfg.masking), nsp=cfg.objective.nsp)


def build_module(cfg: DictConfig, tok) -> PretrainingModule:
    """The LightningModule of ``model.architecture``, its weights freshly initialised (from the seed) or from
    ``model.init_from``."""
    arch = architecture(model_architecture(cfg))
    module = arch.pretraining.from_setup(model_config(cfg, tok.get_vocab_size()), pretrain_setup(cfg, tok))
    baseline = cfg.get("variant") in (None, BASELINE)
    module.along = along_pretraining(ZeroShotSettings.read(cfg.zero_shot), arch, tok, baseline=baseline)
    # the baseline along pretraining on part of the layout probe; the other rows at the end only
    module.probe_along = EvalSetSettings.read(cfg.eval_set).layout.along_rows if baseline else 0
    if cfg.model.get("init_from"):
        module.model.load_state_dict(arch.load(Path(cfg.model.init_from)).state_dict())
        log.info("starting from the weights in %s", cfg.model.init_from)
    if cfg.runtime.compile:
        module.model = torch.compile(module.model)
    return module


def checkpoint_key(cfg: DictConfig) -> str:
    """The run's checkpoint folder name (``pipeline.pretrain.checkpoints.run_key``) for these settings."""
    settings = {k: OmegaConf.to_container(cfg[k], resolve=True)
                for k in ("objective", "model", "optim", "masking", "trainer")}
    return run_key(settings, training_seed(cfg), cfg.paths.pairs, cfg.paths.tokenizer)


def cost(cfg: DictConfig, module: PretrainingModule) -> dict:
    """The model's size and its training arithmetic: parameters (tied ones once), matmul FLOPs per token."""
    flops = module.flops_per_token(int(cfg.pairs.max_seq_length))
    return {"parameters": sum(p.numel() for p in {id(p): p for p in module.model.parameters()}.values()),
            "train_flops_per_token": round(float(flops))}


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


def length_grouped(cfg: DictConfig) -> bool:
    return bool(cfg.trainer.get("length_grouped", False))


def open_run(cfg: DictConfig, folder: RunFolder):
    """The run's MLflow logger: a new run, or the one a resumed checkpoint was recording into."""
    k = cfg.get("pretrain_seed") or 0
    run = f"{cfg.get('variant') or 'baseline'}{f'-s{k}' if k else ''}"
    run_name = f"pretrain-{run}-{cfg.model.name}-{cfg.objective.name}"
    logger = mlflow_logger(cfg, run_name=run_name,
                           tags=run_tags({"pairs": cfg.paths.pairs, "tokenizer": cfg.paths.tokenizer},
                                         {"stage": "pretrain", "pretrain_seed": str(k)}), run_id=folder.run_id)
    if rank_zero_only.rank == 0:
        folder.remember_run(logger.run_id)
    return logger


def build_trainer(cfg: DictConfig, logger, root: Path, checkpoints: Path) -> L.Trainer:
    """Lightning's Trainer for the configured budget, devices and precision, checkpointing into ``checkpoints``."""
    t = cfg.trainer
    return L.Trainer(
        max_steps=t.max_steps, max_time=t.get("max_time"), accelerator=t.accelerator, devices=t.devices,
        strategy=t.strategy, num_nodes=t.num_nodes, precision=cfg.runtime.precision,
        accumulate_grad_batches=t.accumulate_grad_batches, gradient_clip_val=cfg.optim.gradient_clip_val,
        val_check_interval=t.val_check_interval, check_val_every_n_epoch=None, limit_val_batches=t.limit_val_batches,
        log_every_n_steps=t.log_every_n_steps, logger=logger, deterministic=True,
        enable_progress_bar=cfg.runtime.progress, enable_model_summary=False, num_sanity_val_steps=0,
        default_root_dir=str(root), plugins=[AtomicCheckpointIO()],
        use_distributed_sampler=not length_grouped(cfg),  # length-grouped batches split over processes themselves
        callbacks=[
            ModelCheckpoint(dirpath=checkpoints, save_top_k=0, save_last=True,
                            every_n_train_steps=t.checkpoint_every_n_steps),
            ThroughputMonitor(batch_size_fn=lambda b: b["input_ids"].shape[0],
                              length_fn=lambda b: int(b["attention_mask"].sum()),  # real tokens, padding excluded
                              separator="/"),
            # tqdm rather than rich: it also updates in logs and under `dvc repro` without a terminal.
            *([TQDMProgressBar(refresh_rate=10)] if cfg.runtime.progress else []),
        ],
    )


def record(cfg: DictConfig, logger, metrics: dict, eval_set: EvalSet) -> None:
    """``metrics/pretrain.json``, the curves for ``dvc plots``, the floors beside this kind of LM (``floor/<name>``:
    their accuracy at the fixed set's masked positions), and the export and metrics as MLflow artifacts."""
    floors = eval_set.floors
    run_id = logger.run_id
    write_json(Path(cfg.paths.metrics) / "pretrain.json", metrics)
    for name in FLOORS_OF[metric_prefix(cfg.objective.lm)]:
        logger.experiment.log_metric(run_id, f"floor/{name}", floors[name]["masked"])
    write_curves(logger.experiment, run_id, Path(cfg.paths.plots), [c.name for c in eval_set.probe.cells])
    if cfg.tracking.get("log_model", True):
        logger.experiment.log_artifacts(run_id, str(Path(cfg.paths.pretrain) / "hf"), artifact_path="hf")
    logger.experiment.log_dict(run_id, metrics, "metrics/pretrain.json")
    logger.experiment.set_tag(run_id, "stopped_by", metrics["stopped_by"])


@contextlib.contextmanager
def _scratch_dir():
    """Where a non-first process points Lightning's root folder: nothing it writes there is kept."""
    with tempfile.TemporaryDirectory(prefix="bert-lab-rank-") as d:
        yield Path(d)


# The fixed evaluation set along training (``plots/pretrain_fixed.csv``): what the report's learning curves draw.
FIXED_CURVE = ("fixed/acc_masked", "fixed/acc_replaced", "fixed/acc_unchanged", "fixed/loss_masked",
               "fixed/tokens", "fixed/token_slots", "fixed/flops", "fixed/seconds", "fixed/blimp")


def write_curves(client, run_id: str, plots_dir: Path, cells: list[str]) -> None:
    """Training, validation, fixed-set and layout-probe curves (``cells``: the probe's cell names) from MLflow, as
    CSV files for ``dvc plots``."""
    accuracies = list(dict.fromkeys(f"{p}_acc" for p in METRIC_PREFIX.values()))  # each LM's, by its prefix
    for split, keys in {"train": ["train/loss", *(f"train/{a}" for a in accuracies), "train/nsp_acc"],
                        "val": ["val/loss", *(f"val/{a}" for a in accuracies), "val/nsp_acc", "val/perplexity"],
                        "fixed": [*FIXED_CURVE],
                        "layout": ["fixed/tokens", "layout/rows", *(f"layout/{c}" for c in cells)]}.items():
        series = {k: dict(metric_history(client, run_id, k)) for k in keys}
        series = {k: v for k, v in series.items() if v}
        steps = sorted({s for v in series.values() for s in v})
        with atomic_file(plots_dir / f"pretrain_{split}.csv", newline="") as f:
            w = csv.writer(f)
            w.writerow(["step"] + [k.split("/")[1] for k in series])
            for s in steps:
                w.writerow([s] + [("" if s not in v else f"{v[s]:.6g}") for v in series.values()])
