"""The finetune stage: one task, every configured mode (``pipeline.finetune.modes``), several seeds, under the
protocol of ``pipeline.finetune.protocol``.

The task's held-out examples split into dev and test (``split_heldout``). The
task's kind (``TaskData.kind``) picks its runner (``RUNNERS``, each a
``pipeline.finetune.training.Runner``): a label per text through
``pipeline.finetune.sentence``, a label per word (NER) through
``pipeline.finetune.tokens``, extractive question answering (SQuAD) through
``pipeline.finetune.spans``, whose runs also leave their answers for
``metrics/predictions``; all offer the same three ways to train (fine-tune,
frozen features, the classical baseline). Each mode's settings are chosen on
dev by the run that chooses for this one (``GridRun.chooser``: this run itself,
its variant's first run, or the baseline's first) and every seed is reported
on test. The baseline's first run also runs the word-order control. This
module writes every output. Each candidate and each (mode, seed) is one MLflow
run tagged with the task, mode, seed and the pretrain run it started from,
nested under one run of the stage, which is nested under that pretrain run: in
``mlflow ui`` a pretraining run unfolds into its fine-tuning. The stage's run
and the pretrain run carry the summary (each mode's mean and standard deviation
over seeds of each of the task's test metrics), as ``metrics/finetune.json``
does.
"""
from __future__ import annotations

import logging
import time
from pathlib import Path

from hydra.utils import instantiate
from mlflow.entities import Metric

from pipeline.architectures import open_export
from pipeline.data.tokenizer import load_tokenizer
from pipeline.errors import ConfigError, DataError, MissingFileError
from pipeline.finetune.modes import scratch_seeds
from pipeline.finetune.protocol import Choice, choose, run_mode
from pipeline.finetune.sentence import SentenceRunner
from pipeline.finetune.spans import SpanRunner
from pipeline.finetune.tasks import check_columns
from pipeline.finetune.tasks.base import shuffled_words, split_heldout
from pipeline.finetune.tokens import TokenRunner
from pipeline.finetune.training import Grid, Recipe, Runner, summarize
from pipeline.io import read_json, write_json
from pipeline.settings import Lab
from pipeline.tracking import PARENT, check_tracking, known_run, mlflow_logger, run_tags
from pipeline.variants import BASELINE

log = logging.getLogger(__name__)
RUNNERS: dict[str, type[Runner]] = {r.kind: r for r in (SentenceRunner, TokenRunner, SpanRunner)}


def run(lab: Lab) -> dict:
    """Run every configured mode and seed on ``task`` under the protocol; write ``metrics/finetune.json``."""
    check_tracking(lab.tracking)  # before any compute
    if lab.suite is not None:
        check_columns(lab.suite)
    export_dir, pretrain_run = start(lab)
    inherited, chooser = inherited_choices(lab)  # before any compute: a missing choice stops the stage here
    task = split_heldout(instantiate(lab.task.data, _convert_="all"), lab.finetune.test_fraction, lab.run.seed)
    tok, export = load_tokenizer(export_dir), open_export(export_dir)
    runner = RUNNERS[task.kind](recipe(lab), task, tok, export)
    # Hashed once: every (mode, seed) run starts from the same export.
    k = lab.run.pretrain_seed
    input_tags = run_tags({"pretrained": export_dir}, {"stage": "finetune", "task": task.name,
                                                      "pretrain_run_id": pretrain_run, "pretrain_seed": str(k)})
    known = known_run(lab.tracking, pretrain_run)  # in this tracking store: the stage's run nests under it
    parent = open_run(lab, task.name, None, None, {**input_tags, **({PARENT: pretrain_run} if known else {})})
    input_tags = {**input_tags, PARENT: parent.run_id}
    results = run_modes(lab, runner, lab.finetune.modes, inherited, chooser, input_tags, task.name)
    metrics = {"task": task.name, "metric": task.metrics[0], "metrics": task.metrics, "scored_on": "test",
               **runner.data_summary(), "pretrain_run_id": pretrain_run, "modes": results, "mode_order": list(results)}
    control = lab.finetune.control
    if inherited is None and lab.run.variant in (None, BASELINE) and not k and control.modes:
        metrics["control"] = word_order_control(lab, task, tok, export, results, input_tags)
    summary = {f"{mode}/{m}_{stat}": r[f"{m}_{stat}"] for mode, r in results.items() for m in task.metrics
               for stat in ("mean", "std")}
    parent.log_metrics(summary, step=0)
    parent.finalize("success")
    if known:
        log_downstream(parent, pretrain_run, task.name, summary)
    write_outputs(Path(lab.paths.metrics), metrics, runner.outputs())
    return metrics


def run_modes(lab: Lab, runner: Runner, modes, inherited: dict | None, chooser: str, input_tags: dict, task: str,
              seeds: tuple[int, ...] | None = None) -> dict[str, dict]:
    """Each mode's runs under the protocol: its settings chosen on dev here (``inherited`` None) or taken from
    ``inherited``, then every seed scored on dev and test."""
    own = seeds is None
    seeds = tuple(seeds or lab.finetune.seeds)
    results: dict[str, dict] = {}
    for mode in modes:
        started = time.perf_counter()
        mode_seeds = scratch_seeds(seeds, lab.grid.seeds.baseline if lab.grid else 1) if own and mode == "scratch" \
            else seeds

        def opener(m: str, seed: int, tags: dict):
            return open_run(lab, task, m, seed, {**input_tags, **tags})

        if inherited is None:
            choice, winner = choose(runner, mode, mode_seeds[0], opener, chooser)
        else:
            choice, winner = inherited_choice(inherited, mode, chooser, lab), None
        runs = run_mode(runner, mode, mode_seeds, choice, opener, winner)
        del winner  # the winning network: scored, no longer needed
        runs = [{**r, "pretrain_seed": lab.run.pretrain_seed} for r in runs]
        results[mode] = {**summarize(runs, runner.task.metrics), "selection": choice.as_json(),
                         "seconds": round(time.perf_counter() - started, 1)}
        log.info("%s at %s: test %s", mode, choice.settings, ", ".join(
            f"{m} {results[mode][f'{m}_mean']:.4f} ± {results[mode][f'{m}_std']:.4f}" for m in runner.task.metrics))
    return results


def word_order_control(lab: Lab, task, tok, export, results: dict[str, dict], input_tags: dict) -> dict | None:
    """The control: the task with each text's words shuffled (train, dev and test), fine-tuned in the control's
    modes at the settings each chose on the task itself; None where the task has no such control (SQuAD)."""
    control = lab.finetune.control
    shuffled = shuffled_words(task, lab.run.seed)
    modes = [m for m in control.modes if m in results]
    if shuffled is None or not modes:
        log.info("word-order control: %s", "not defined for this kind of task" if shuffled is None else
                 "none of finetune.control.modes was run")
        return None
    runner = RUNNERS[task.kind](recipe(lab), shuffled, tok, export)
    chosen = {m: {"selection": results[m]["selection"]} for m in modes}
    out = run_modes(lab, runner, modes, chosen, "the task itself", {**input_tags, "control": "words_shuffled"},
                    shuffled.name, tuple(control.seeds))
    return {"what": "each text's words shuffled, in train, dev and test", "seeds": list(control.seeds),
            "modes": out}


def inherited_choices(lab: Lab) -> tuple[dict | None, str]:
    """(each mode's choice, the run that made it) where this run fine-tunes with another run's choices (its
    ``chooser`` in the grid: the baseline's first run, or its variant's), else (None, this run's name)."""
    me = lab.run_name
    run = lab.runs.get(me)
    chooser = run.chooser if run is not None and run.chooser else me
    if chooser == me or lab.finetune.init_from:
        return None, me
    folder = Path(lab.runs[chooser].metrics)
    path = folder / ("finetune.json" if lab.run.suite_task is None else f"tasks/{lab.run.suite_task}/finetune.json")
    if not path.is_file():
        raise MissingFileError(f"{path}: run {me} fine-tunes with the settings run {chooser} chose on dev, and "
                               f"they are not there: run finetune@{chooser}"
                               f"{'' if lab.run.suite_task is None else '-' + lab.run.suite_task} first")
    return read_json(path)["modes"], chooser


def inherited_choice(inherited: dict, mode: str, chooser: str, lab: Lab) -> Choice:
    found = inherited.get(mode, {}).get("selection")
    if found is None:
        raise ConfigError(f"finetune.modes: mode {mode} of run {lab.run_name} was not fine-tuned by run {chooser}, "
                          f"whose choices on dev it takes: expected one of {', '.join(inherited)} (or a grid whose "
                          f"runs share their modes)")
    return Choice(settings=dict(found["chosen"]), by=found["by"], seed=found.get("seed"))


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
    grid = Grid(lrs=tuple(ft.lrs), feature_lrs=tuple(ft.feature_lrs), poolings=tuple(ft.poolings),
                tfidf_c=tuple(ft.tfidf.c), tfidf_ngrams=tuple(ft.tfidf.ngrams), lr_bounds=tuple(ft.lr_bounds),
                c_bounds=tuple(ft.tfidf.c_bounds))
    return Recipe(seeds=tuple(ft.seeds), epochs=ft.epochs, feature_epochs=ft.feature_epochs, batch_size=ft.batch_size,
                  grid=grid, weight_decay=ft.weight_decay, warmup_ratio=ft.warmup_ratio,
                  betas=tuple(ft.betas), eps=ft.eps, gradient_clip_val=ft.gradient_clip_val,
                  eval_batch_size=ft.eval_batch_size, feature_eval_batch_size=ft.feature_eval_batch_size,
                  eval_every_epoch=ft.eval_every_epoch, max_seq_length=lab.task.max_seq_length,
                  length_grouped=ft.length_grouped, accelerator=lab.trainer.accelerator, precision=runtime.precision,
                  progress=runtime.progress, fused_optimizer=runtime.fused_optimizer)


def open_run(lab: Lab, task: str, mode: str | None, seed: int | None, input_tags: dict[str, str]):
    """The MLflow run of one (mode, seed) -- a candidate of the choice (tagged ``candidate``) or a run at the
    chosen settings -- or with ``mode`` None the stage's run, under the pretrain run."""
    k = lab.run.pretrain_seed
    run_name = f"finetune-{lab.run.variant or 'baseline'}{f'-p{k}' if k else ''}-{task}"
    if mode is None:
        return mlflow_logger(lab, run_name=run_name, tags={**input_tags, "kind": "summary"})
    which = f"-c{input_tags['candidate']}" if "candidate" in input_tags else ""
    logger = mlflow_logger(lab, run_name=f"{run_name}-{mode}-s{seed}{which}",
                           tags={**input_tags, "mode": mode, "seed": str(seed)})
    logger.log_hyperparams({"finetune.mode": mode, "finetune.seed": seed})
    return logger
