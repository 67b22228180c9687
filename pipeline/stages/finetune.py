"""The finetune stage: one task, every configured mode (``pipeline.finetune.modes``), several seeds.

The task's kind (``TaskData.kind``) picks its runner (``RUNNERS``, each a
``pipeline.finetune.training.Runner``): a label per text through
``pipeline.finetune.sentence``, a label per word (NER) through
``pipeline.finetune.tokens``, extractive question answering (SQuAD) through
``pipeline.finetune.spans``, whose runs also leave their answers for
``metrics/predictions``; all offer the same three ways to train (fine-tune,
frozen features, the classical baseline). This module writes every output.
Each (mode, seed) is one MLflow run tagged with the task, mode, seed and the
pretrain run it started from, nested under one run of the stage, which is
nested under that pretrain run: in ``mlflow ui`` a pretraining run unfolds into
its fine-tuning. The stage's run and the pretrain run carry the summary (each
mode's mean and standard deviation over seeds of each of the task's metrics),
as ``metrics/finetune.json`` does.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

from hydra.utils import instantiate
from mlflow.entities import Metric

from pipeline.architectures import open_export
from pipeline.data.tokenizer import load_tokenizer
from pipeline.errors import DataError
from pipeline.finetune.modes import feature_set, is_frozen
from pipeline.finetune.sentence import SentenceRunner
from pipeline.finetune.spans import SpanRunner
from pipeline.finetune.tasks import check_columns
from pipeline.finetune.tokens import TokenRunner
from pipeline.finetune.training import Recipe, Runner, summarize
from pipeline.io import read_json, write_json
from pipeline.names import CLASSICAL
from pipeline.settings import Lab
from pipeline.tracking import PARENT, check_tracking, known_run, mlflow_logger, run_tags

log = logging.getLogger(__name__)
RUNNERS: dict[str, type[Runner]] = {r.kind: r for r in (SentenceRunner, TokenRunner, SpanRunner)}


def run(lab: Lab) -> dict:
    """Run every configured mode and seed on ``task``; write ``metrics/finetune.json``."""
    check_tracking(lab.tracking)  # before any compute
    if lab.suite is not None:
        check_columns(lab.suite)
    export_dir, pretrain_run = start(lab)
    task = instantiate(lab.task.data, _convert_="all")
    runner = RUNNERS[task.kind](recipe(lab), task, load_tokenizer(export_dir), open_export(export_dir))
    # Hashed once: every (mode, seed) run starts from the same export.
    k = lab.run.pretrain_seed
    input_tags = run_tags({"pretrained": export_dir}, {"stage": "finetune", "task": task.name,
                                                      "pretrain_run_id": pretrain_run, "pretrain_seed": str(k)})
    known = known_run(lab.tracking, pretrain_run)  # in this tracking store: the stage's run nests under it
    parent = open_run(lab, task.name, None, None, {**input_tags, **({PARENT: pretrain_run} if known else {})})
    input_tags = {**input_tags, PARENT: parent.run_id}
    results: dict[str, dict] = {}
    for mode in lab.finetune.modes:
        started = time.perf_counter()
        if mode == CLASSICAL:  # deterministic: one run
            scores = runner.classical()
            logger = open_run(lab, task.name, mode, 0, input_tags)
            logger.log_metrics({f"val/{k}": v for k, v in scores.items() if isinstance(v, (int, float))}, step=0)
            logger.finalize("success")
            runs = [{"seed": 0, "pretrain_seed": k, **scores, "mlflow_run_id": logger.run_id}]
        else:
            runs = []
            for seed in lab.finetune.seeds:
                logger = open_run(lab, task.name, mode, seed, input_tags)
                result = runner.frozen(feature_set(mode), seed, logger) if is_frozen(mode) else \
                    runner.fine_tune(mode, seed, logger)
                runs.append({**result, "pretrain_seed": k, "mlflow_run_id": logger.run_id})
        results[mode] = {**summarize(runs, task.metrics), "seconds": round(time.perf_counter() - started, 1)}
        log.info("%s: %s", mode, ", ".join(f"{m} {results[mode][f'{m}_mean']:.4f} ± {results[mode][f'{m}_std']:.4f}"
                                           for m in task.metrics))
    metrics = {"task": task.name, "metric": task.metrics[0], "metrics": task.metrics, **runner.data_summary(),
               "pretrain_run_id": pretrain_run, "modes": results, "mode_order": list(results)}
    summary = {f"{mode}/{m}_{stat}": r[f"{m}_{stat}"] for mode, r in results.items() for m in task.metrics
               for stat in ("mean", "std")}
    parent.log_metrics(summary, step=0)
    parent.finalize("success")
    if known:
        log_downstream(parent, pretrain_run, task.name, summary)
    write_outputs(Path(lab.paths.metrics), metrics, runner.outputs())
    return metrics


def write_outputs(folder: Path, metrics: dict, files: dict[str, dict]) -> None:
    """The stage's outputs, each written atomically: the runs' files, then ``finetune.json``."""
    for path, content in files.items():
        write_json(folder / path, content)
    write_json(folder / "finetune.json", metrics)


def log_downstream(logger, pretrain_run: str, task: str, summary: dict[str, float]) -> None:
    """The fine-tuning summary on the pretrain run too (``downstream/<task>/<mode>/<metric>_mean``), so the runs
    table sorted by it says which pretraining won."""
    now = int(time.time() * 1000)
    logger.experiment.log_batch(pretrain_run, metrics=[Metric(f"downstream/{task}/{k}", v, now, 0)
                                                       for k, v in summary.items()])


def start(lab: Lab) -> tuple[Path, str]:
    """The export every run starts from and the pretrain run that made it (``finetune.init_from`` or the stage's)."""
    if lab.finetune.init_from:
        # Any Hugging Face-format BERT folder (weights, config.json, tokenizer files).
        export_dir = Path(lab.finetune.init_from)
        if not (export_dir / "config.json").is_file():
            raise DataError(f"finetune.init_from={export_dir}: no config.json there (expected a BERT folder)")
        return export_dir, f"external:{export_dir}"
    return Path(lab.paths.pretrain) / "hf", read_json(Path(lab.paths.pretrain) / "run.json")["mlflow_run_id"]


def recipe(lab: Lab) -> Recipe:
    ft, runtime = lab.finetune, lab.runtime
    return Recipe(seeds=tuple(ft.seeds), epochs=ft.epochs, feature_epochs=ft.feature_epochs, batch_size=ft.batch_size,
                  lr=ft.lr, feature_lr=ft.feature_lr, weight_decay=ft.weight_decay, warmup_ratio=ft.warmup_ratio,
                  betas=tuple(ft.betas), eps=ft.eps, gradient_clip_val=ft.gradient_clip_val,
                  eval_batch_size=ft.eval_batch_size, feature_eval_batch_size=ft.feature_eval_batch_size,
                  eval_every_epoch=ft.eval_every_epoch, max_seq_length=lab.task.max_seq_length,
                  accelerator=lab.trainer.accelerator, precision=runtime.precision,
                  progress=runtime.progress, fused_optimizer=runtime.fused_optimizer)


def open_run(lab: Lab, task: str, mode: str | None, seed: int | None, input_tags: dict[str, str]):
    """The MLflow run of one (mode, seed), or with ``mode`` None the stage's run, under the pretrain run."""
    k = lab.run.pretrain_seed
    run_name = f"finetune-{lab.run.variant or 'baseline'}{f'-p{k}' if k else ''}-{task}"
    if mode is None:
        return mlflow_logger(lab, run_name=run_name, tags={**input_tags, "kind": "summary"})
    logger = mlflow_logger(lab, run_name=f"{run_name}-{mode}-s{seed}",
                           tags={**input_tags, "mode": mode, "seed": str(seed)})
    logger.log_hyperparams({"finetune.mode": mode, "finetune.seed": seed})
    return logger
