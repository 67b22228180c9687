"""The pretrain stage: the examples of ``paths.pairs`` -> a trained model, its export and metrics.

``run`` reads like the stage's table of contents: tokenizer and model, data,
the LightningModule, the checkpoint folder a rerun resumes from, the MLflow run,
the Trainer, then training, export and the record of what was measured. A pilot of the learning-rate sweep
(``pilot_lr``, ``pipeline.sweep``) is the same run, shorter, with no export: ``run_pilot``. What
differs between architectures (``model.architecture``: its config, module,
scorer and export) is resolved once, here, from the registry
(``pipeline.architectures``), and handed down.
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

from pipeline.architectures import Architecture, architecture
from pipeline.data.datamodule import PairsDataModule
from pipeline.data.masking import MaskingConfig
from pipeline.data.ngram import FLOORS_OF
from pipeline.data.scored import EvalSet
from pipeline.data.tokenizer import load_tokenizer, special_ids, vocab_list
from pipeline.errors import ConfigError, TrainingError
from pipeline.io import atomic_dir, atomic_file, write_json
from pipeline.model_config import METRIC_PREFIX, ModelConfig, build_config, metric_prefix
from pipeline.pretrain.checkpoints import AtomicCheckpointIO, RunFolder, run_key
# every architecture's LightningModule: the registry names them by path, and this stage trains them all
from pipeline.pretrain import lineage  # noqa: F401
from pipeline.pretrain.module import PretrainingModule, PretrainSetup
from pipeline.settings import Lab, as_plain
from pipeline.sweep import PILOT_FILE, SCORE, chosen_rate, pilot_name, rate_text
from pipeline.tracking import check_tracking, metric_history, mlflow_logger, run_tags
from pipeline.variants import BASELINE
from pipeline.zero_shot.along import along_pretraining

# Model FLOPs utilisation is not computed on CPU runs; tokens/s and samples/s are.
warnings.filterwarnings("ignore", message="When using the `ThroughputMonitor`")
log = logging.getLogger(__name__)


def run(lab: Lab) -> dict:
    """Train ``model.architecture`` on ``paths.pairs``; write checkpoint + export to ``paths.pretrain``.

    Checkpoints go to ``paths.checkpoints/<run key>`` every
    ``trainer.checkpoint_every_n_steps``; a rerun of the same run (same settings
    and data) resumes from the last one, with the same data order, masks and
    dropout, and continues the same MLflow run.
    """
    check_tracking(lab.tracking)  # before any compute
    paths, trainer_settings, seed = lab.paths, lab.trainer, lab.run.training_seed
    L.seed_everything(seed, workers=True, verbose=False)
    tok = load_tokenizer(paths.tokenizer)
    data = PairsDataModule(paths.pairs, batch_size=trainer_settings.device_batch_size(devices_found(lab)), seed=seed,
                           num_workers=lab.runtime.loader_workers, length_grouped=trainer_settings.length_grouped)
    arch = architecture(lab.model.architecture)
    module = build_module(lab, arch, tok)
    folder = RunFolder(paths.checkpoints, checkpoint_key(lab))
    if folder.resume:
        log.info("resuming from %s (step %d)", folder.resume, folder.resumed_step)
    logger = open_run(lab, folder)
    if lab.run.pilot_lr is not None:
        return run_pilot(lab, module, data, logger, folder)
    # Under DDP/FSDP every process runs this function; only the first writes files and talks to MLflow.
    zero = rank_zero_only.rank == 0
    with (atomic_dir(paths.pretrain) if zero else _scratch_dir()) as tmp:
        trainer = build_trainer(lab, logger, root=tmp, checkpoints=folder.path)
        start = time.perf_counter()
        trainer.fit(module, datamodule=data, ckpt_path=str(folder.resume) if folder.resume else None)
        train_seconds = time.perf_counter() - start
        module.final = True  # every run on the whole layout probe, and what is measured at the end only
        final = {k: round(float(v), 6) for k, v in trainer.validate(module, datamodule=data, verbose=False)[0].items()}
        trainer.save_checkpoint(tmp / "checkpoints" / "last.ckpt", weights_only=False)  # full state, to resume
        if not zero:
            return final
        arch.save(module.model, tmp / "hf", Path(paths.tokenizer))  # unwraps torch.compile
        write_json(tmp / "run.json", {"mlflow_run_id": logger.run_id})
    metrics = {**final, "lm": metric_prefix(lab.objective.lm), "steps": trainer.global_step,
               "train_seconds": round(train_seconds, 1),
               "stopped_by": "max_steps" if trainer.global_step >= trainer_settings.max_steps else "max_time",
               "resumed_from_step": folder.resumed_step, "mlflow_run_id": logger.run_id,
               **cost(lab.pairs.max_seq_length, module), **sweep_record(lab)}
    record(lab, logger, metrics, module.eval_set)
    folder.remove()
    return metrics


def run_pilot(lab: Lab, module: PretrainingModule, data: PairsDataModule, logger, folder: RunFolder) -> dict:
    """One pilot of the learning-rate sweep (its settings already shrunk by ``pipeline.sweep.pilot_overrides``):
    trained, scored on the fixed set, and recorded in ``paths.metrics``/pilot.json with its curves; no export.
    A loss that leaves the finite numbers ends the pilot as ``diverged``, a result like any other."""
    zero = rank_zero_only.rank == 0
    with (atomic_dir(lab.paths.metrics) if zero else _scratch_dir()) as tmp, _scratch_dir() as root:
        trainer = build_trainer(lab, logger, root=root, checkpoints=folder.path)
        start, diverged = time.perf_counter(), None
        try:
            trainer.fit(module, datamodule=data, ckpt_path=str(folder.resume) if folder.resume else None)
        except TrainingError as e:  # check_finite: the loss is NaN or infinite
            diverged = str(e)
            log.warning("pilot at lr %g diverged: %s", lab.optim.lr, e)
        train_seconds = time.perf_counter() - start
        final = {} if diverged else {
            k: round(float(v), 6) for k, v in trainer.validate(module, datamodule=data, verbose=False)[0].items()}
        if not zero:
            return final
        pilot = {"variant": lab.run.variant or BASELINE, "lr": lab.optim.lr, "steps": trainer.global_step,
                 "max_steps": lab.trainer.max_steps, "fraction": lab.grid.sweep.fraction, "diverged": diverged is not None, "diverged_because": diverged,
                 "score_key": SCORE, "score": final.get(SCORE), "acc_masked": final.get("fixed/acc_masked"),
                 "train_seconds": round(train_seconds, 1), "mlflow_run_id": logger.run_id, **final,
                 **cost(lab.pairs.max_seq_length, module)}
        write_json(tmp / PILOT_FILE, pilot)
        write_curves(logger.experiment, logger.run_id, tmp, [c.name for c in module.eval_set.probe.cells])
    logger.experiment.set_tag(logger.run_id, "stopped_by", "diverged" if diverged else "max_steps")
    logger.experiment.log_dict(logger.run_id, pilot, f"metrics/{PILOT_FILE}")
    folder.remove()
    return pilot


def sweep_record(lab: Lab) -> dict:
    """A swept row's run: the peak rate its pilots chose and each pilot's score (``lr_sweep``); else nothing."""
    sweep, row = lab.grid.sweep if lab.grid else None, lab.run.variant or BASELINE
    if sweep is None or row not in sweep.rows:
        return {}
    _, chosen = chosen_rate(lab.runs[lab.run_name].rate_from, list(sweep.lrs), row)
    return {"lr_sweep": chosen}


def devices_found(lab: Lab) -> int | None:
    """The GPUs this machine has, where ``trainer.devices`` leaves the count to it (``auto``, -1); else None."""
    if lab.trainer.devices_per_node() is None and torch.cuda.is_available():
        return torch.cuda.device_count()
    return None


def model_config(lab: Lab, arch: Architecture, vocab_size: int) -> ModelConfig:
    """The model to pretrain: the size preset, or the config of ``model.init_from``; the fields the objective
    decides (causal attention left to right, word2vec's kind) set by ``objective.lm``."""
    init_from, lm = lab.model.init_from, lab.objective.lm
    if init_from:
        config = arch.read_config(Path(init_from))
        if config.vocab_size != vocab_size:
            raise ConfigError(
                f"model.init_from={init_from} has vocab_size={config.vocab_size}, but the tokenizer at "
                f"paths.tokenizer has {vocab_size} tokens: expected the same vocabulary "
                "(set tokenizer.from_folder to the same folder)")
        return dataclasses.replace(config, **config.objective_fields(lm))
    return build_config(lab.model.values(), vocab_size, lm)


def pretrain_setup(lab: Lab, tok) -> PretrainSetup:
    """The settings and inputs a pretraining module is built from, beside its model's config."""
    return PretrainSetup(optim=as_plain(lab.optim), max_steps=lab.trainer.max_steps, seed=lab.run.training_seed,
                         fused_optimizer=lab.runtime.fused_optimizer, eval_set=EvalSet(lab.paths.eval_set),
                         special=special_ids(tok), vocab=vocab_list(tok), pairs=Path(lab.paths.pairs),
                         masking=MaskingConfig(**as_plain(lab.masking)), nsp=lab.objective.nsp,
                         nsp_weight=lab.objective.nsp_weight)


def build_module(lab: Lab, arch: Architecture, tok) -> PretrainingModule:
    """The LightningModule of ``arch``, its weights freshly initialised (from the seed) or from
    ``model.init_from``."""
    module = arch.pretraining.from_setup(model_config(lab, arch, tok.get_vocab_size()), pretrain_setup(lab, tok))
    baseline = lab.run.variant in (None, BASELINE)
    module.along = along_pretraining(lab.zero_shot, arch.scorer, tok, baseline=baseline)
    # the baseline along pretraining on part of the layout probe; the other rows at the end only
    module.probe_along = lab.eval_set.layout.along_rows if baseline else 0
    if lab.model.init_from:
        module.model.load_state_dict(arch.load(Path(lab.model.init_from)).state_dict())
        log.info("starting from the weights in %s", lab.model.init_from)
    if lab.runtime.compile:
        module.model = torch.compile(module.model)
    return module


def checkpoint_key(lab: Lab) -> str:
    """The run's checkpoint folder name (``pipeline.pretrain.checkpoints.run_key``): a hash of the settings the
    run records for these groups, its seed and its inputs."""
    settings = {k: lab.resolved[k] for k in ("objective", "model", "optim", "masking", "trainer")}
    return run_key(settings, lab.run.training_seed, lab.paths.pairs, lab.paths.tokenizer)


def cost(seq_length: int, module: PretrainingModule) -> dict:
    """The model's size and its training arithmetic: parameters (tied ones once), matmul FLOPs per token."""
    flops = module.flops_per_token(int(seq_length))
    return {"parameters": sum(p.numel() for p in {id(p): p for p in module.model.parameters()}.values()),
            "train_flops_per_token": round(float(flops))}


def open_run(lab: Lab, folder: RunFolder):
    """The run's MLflow logger: a new run, or the one a resumed checkpoint was recording into."""
    pilot = lab.run.pilot_lr
    run_name = f"pretrain-{lab.run_name}-{lab.model.name}-{lab.objective.name}"
    extra = {"stage": "pretrain", "pretrain_seed": str(lab.run.pretrain_seed)}
    if pilot is not None:  # the sweep's pilots: one group of runs in `mlflow ui`, by these tags
        run_name = f"pilot-{pilot_name(lab.run.variant or BASELINE, pilot)}-{lab.model.name}"
        extra.update(stage="pilot", kind="pilot", sweep_row=lab.run.variant or BASELINE, sweep_lr=rate_text(pilot))
    logger = mlflow_logger(lab, run_name=run_name,
                           tags=run_tags({"pairs": lab.paths.pairs, "tokenizer": lab.paths.tokenizer}, extra),
                           run_id=folder.run_id)
    if rank_zero_only.rank == 0:
        folder.remember_run(logger.run_id)
    return logger


def build_trainer(lab: Lab, logger, root: Path, checkpoints: Path) -> L.Trainer:
    """Lightning's Trainer for the configured budget, devices and precision, checkpointing into ``checkpoints``."""
    t, runtime = lab.trainer, lab.runtime
    return L.Trainer(
        max_steps=t.max_steps, max_time=t.max_time, accelerator=t.accelerator,
        devices=list(t.devices) if isinstance(t.devices, tuple) else t.devices,
        strategy=t.strategy, num_nodes=t.num_nodes, precision=runtime.precision,
        accumulate_grad_batches=t.accumulate_grad_batches, gradient_clip_val=lab.optim.gradient_clip_val,
        val_check_interval=t.val_check_interval, check_val_every_n_epoch=None, limit_val_batches=t.limit_val_batches,
        log_every_n_steps=t.log_every_n_steps, logger=logger, deterministic=True,
        enable_progress_bar=runtime.progress, enable_model_summary=False, num_sanity_val_steps=0,
        default_root_dir=str(root), plugins=[AtomicCheckpointIO()],
        use_distributed_sampler=not t.length_grouped,  # length-grouped batches split over processes themselves
        callbacks=[
            ModelCheckpoint(dirpath=checkpoints, save_top_k=0, save_last=True,
                            every_n_train_steps=t.checkpoint_every_n_steps),
            ThroughputMonitor(batch_size_fn=lambda b: b["input_ids"].shape[0],
                              length_fn=lambda b: int(b["attention_mask"].sum()),  # real tokens, padding excluded
                              separator="/"),
            # tqdm rather than rich: it also updates in logs and under `dvc repro` without a terminal.
            *([TQDMProgressBar(refresh_rate=10)] if runtime.progress else []),
        ],
    )


def record(lab: Lab, logger, metrics: dict, eval_set: EvalSet) -> None:
    """``metrics/pretrain.json``, the curves for ``dvc plots``, the floors beside this kind of LM (``floor/<name>``:
    their accuracy at the fixed set's masked positions), and the export and metrics as MLflow artifacts."""
    floors, run_id, paths = eval_set.floors, logger.run_id, lab.paths
    write_json(Path(paths.metrics) / "pretrain.json", metrics)
    for name in FLOORS_OF[metric_prefix(lab.objective.lm)]:
        logger.experiment.log_metric(run_id, f"floor/{name}", floors[name]["masked"])
    write_curves(logger.experiment, run_id, Path(paths.plots), [c.name for c in eval_set.probe.cells])
    if lab.tracking.log_model:
        logger.experiment.log_artifacts(run_id, str(Path(paths.pretrain) / "hf"), artifact_path="hf")
    logger.experiment.log_dict(run_id, metrics, "metrics/pretrain.json")
    logger.experiment.set_tag(run_id, "stopped_by", metrics["stopped_by"])


@contextlib.contextmanager
def _scratch_dir():
    """Where a non-first process points Lightning's root folder: nothing it writes there is kept."""
    with tempfile.TemporaryDirectory(prefix="bert-lab-rank-") as d:
        yield Path(d)


# The fixed evaluation set along training (``plots/pretrain_fixed.csv``): what the report's learning curves draw.
FIXED_CURVE = ("fixed/acc_masked", "fixed/acc_replaced", "fixed/acc_unchanged", "fixed/loss_masked", "fixed/nsp_acc",
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
