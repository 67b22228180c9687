"""Faults injected for real: SIGKILL in every stage, a write that fails part-way, an unreachable
tracking server, corrupted checkpoints and exports, secrets kept out of MLflow."""
from __future__ import annotations

import json
import os
import random
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT

STAGES = ("prepare_corpus", "train_wordpiece", "make_pairs", "eval_set", "pretrain", "finetune", "report")
# The folder or file whose temporary sibling appears once a stage is writing (its work has started).
WORK_STARTED = {"prepare_corpus": "corpus", "train_wordpiece": "tokenizer", "make_pairs": "pairs", "eval_set": "eval_set",
                "pretrain": "checkpoints", "finetune": "metrics", "report": "reports"}
DATA = ("corpus", "tokenizer", "pairs", "eval_set")
SECRET = "hunter2-do-not-log"


def _paths(root: Path) -> list[str]:
    return [f"paths.{k}={root / k}" for k in ("corpus", "tokenizer", "pairs", "eval_set", "pretrain", "metrics",
                                              "plots", "reports", "checkpoints")]


def _args(stage: str, root: Path, *extra: str) -> list[str]:
    # No ablation variants, one pretraining run, one task: the report covers the baseline's own families.
    return [sys.executable, "-m", f"stages.{stage}", "experiment=tiny", "~suite", "runtime.progress=false", "grid=baseline",
            "grid.seeds.baseline=1", "trainer.max_steps=40", "trainer.checkpoint_every_n_steps=5", "trainer.val_check_interval=20",
            *_paths(root), *extra]


def _env(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_")}
    # Credentials in the environment, as on a real machine: they must never reach MLflow.
    return dict(env, MLFLOW_TRACKING_URI=f"sqlite:///{root.parent / 'mlflow.db'}", AWS_SECRET_ACCESS_KEY=SECRET,
                MLFLOW_TRACKING_PASSWORD=SECRET)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _scores(root: Path) -> dict:
    ft = json.loads((root / "metrics" / "finetune.json").read_text())
    return {m: [r["accuracy"] for r in v["runs"]] for m, v in ft["modes"].items()}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The tiny pipeline run once without faults; each stage's wall time recorded."""
    root = tmp_path_factory.mktemp("faults") / "reference"
    seconds = {}
    for stage in STAGES:
        start = time.perf_counter()
        r = subprocess.run(_args(stage, root), cwd=ROOT, env=_env(root), capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        seconds[stage] = time.perf_counter() - start
    return root, seconds


def _kill_once(args: list[str], env: dict, root: Path, stage: str, wait: float, delay: float | None,
               rng: random.Random) -> tuple[bool, float]:
    """Start the stage and SIGKILL it; returns (it had finished first, seconds it ran).

    Without `delay` the kill comes a random while after the stage's first temporary output appears (its
    work has started); with `delay`, that many seconds after the start."""
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    target = WORK_STARTED[stage]
    started = time.perf_counter()
    if delay is None:
        while proc.poll() is None and time.perf_counter() - started < wait * 3:
            busy = list(root.glob(f".{target}.tmp-*")) + list((root / target).glob(".*.tmp-*")) \
                if (root / target).exists() or root.exists() else []
            if busy or (stage == "pretrain" and list((root / "checkpoints").glob("*/last.ckpt"))):
                break
            time.sleep(0.01)
        delay = time.perf_counter() - started + rng.uniform(0, 0.5) * max(0.0, wait - (time.perf_counter() - started))
    while proc.poll() is None and time.perf_counter() - started < delay:
        time.sleep(0.01)
    finished_first = proc.poll() is not None
    ran = time.perf_counter() - started
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return finished_first, ran


@pytest.mark.slow  # minutes: every stage killed and rerun (CI runs the slow marker too)
def test_sigkill_in_every_stage_then_rerun_completes_with_the_same_results(reference):
    """Each stage is killed at a random point of its work; a rerun finishes and matches the uninterrupted run.

    A kill that lands after the stage already finished (a short stage on a fast or idle machine) is tried
    again, earlier in the run it just timed, up to three times, so the check does not rest on timing."""
    ref, seconds = reference
    root = ref.parent / "killed"
    rng = random.Random(7)
    kills = []
    for stage in STAGES:
        args, env = _args(stage, root), _env(root)
        delay = None
        for attempt in range(4):
            finished_first, ran = _kill_once(args, env, root, stage, seconds[stage], delay, rng)
            # Nothing half-written where DVC would look: each output is absent or complete.
            for d in DATA:
                if (root / d).exists() and not finished_first and stage in ("prepare_corpus", "train_wordpiece",
                                                                             "make_pairs", "eval_set"):
                    assert _files(root / d) == _files(ref / d), (stage, d, attempt)
            if not finished_first:
                break
            delay = ran * rng.uniform(0.9 - 0.2 * attempt, 0.95 - 0.2 * attempt)  # earlier each time
        kills.append((stage, finished_first))
        print(f"{stage}: killed {'after it finished' if finished_first else 'mid-work'} (attempt {attempt + 1})")
        r = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, (stage, r.stderr[-3000:])
    assert sum(not f for _, f in kills) >= 4, kills  # most kills landed mid-work
    for d in DATA:  # data stages: byte-identical to the uninterrupted run
        assert _files(root / d) == _files(ref / d), d
    for name in ("corpus", "tokenizer", "pairs"):
        assert (root / "metrics" / f"{name}.json").read_bytes() == (ref / "metrics" / f"{name}.json").read_bytes()
    pre, pre_ref = (json.loads((r / "metrics" / "pretrain.json").read_text()) for r in (root, ref))
    for key in ("val/loss", "val/mlm_acc", "val/nsp_acc", "steps"):
        assert pre[key] == pre_ref[key], key  # resumed (or restarted) pretraining ends bit for bit the same
    assert _scores(root) == _scores(ref)
    assert (root / "reports" / "index.html").exists()
    leftovers = [p for p in root.rglob(".*tmp-*")]
    assert leftovers == [], leftovers  # temporaries of killed runs are cleaned up by the reruns


@pytest.mark.slow  # the reference pipeline run behind these takes a minute (CI runs the slow marker too)
def test_a_write_that_fails_part_way_names_the_path_and_keeps_the_old_output(reference, tmp_path):
    """A file-size limit (the kernel refuses writes past it, as on a full disk) hits prepare_corpus mid-file."""
    ref, _ = reference
    shutil.copytree(ref / "corpus", tmp_path / "corpus")
    before = _files(tmp_path / "corpus")

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))  # bytes; the corpus is ~4 MB

    r = subprocess.run(_args("prepare_corpus", tmp_path), cwd=ROOT, env=_env(tmp_path), capture_output=True,
                       text=True, timeout=600, preexec_fn=limit)
    assert r.returncode == 2, r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: prepare_corpus: {tmp_path / 'corpus'}: could not be written (File too large")
    assert "nothing was replaced" in last and "Traceback" not in r.stderr
    assert _files(tmp_path / "corpus") == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # the reference pipeline run behind these takes a minute (CI runs the slow marker too)
@pytest.mark.parametrize("stage", ["pretrain", "finetune"])
def test_an_unreachable_tracking_server_fails_before_any_compute(reference, tmp_path, stage):
    ref, _ = reference
    for d in DATA + ("pretrain",):
        os.symlink(ref / d, tmp_path / d)
    uri = f"http://admin:{SECRET}@127.0.0.1:{_free_port()}"
    start = time.perf_counter()
    r = subprocess.run(_args(stage, tmp_path, f"tracking.uri={uri}"), cwd=ROOT, env=_env(tmp_path),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: {stage}: tracking.uri=http://***@127.0.0.1:"), last
    assert "the MLflow server does not answer" in last and "nothing was computed" in last
    assert SECRET not in r.stderr + r.stdout and "Traceback" not in r.stderr
    assert not (tmp_path / "metrics").exists() and not (tmp_path / "checkpoints").exists()
    assert time.perf_counter() - start < 60


@pytest.mark.slow  # the reference pipeline run behind these takes a minute (CI runs the slow marker too)
def test_a_corrupted_checkpoint_is_named_not_a_torch_traceback(reference, tmp_path):
    ref, _ = reference
    for d in DATA:
        os.symlink(ref / d, tmp_path / d)
    from pipeline.config import compose, validate
    from pipeline.stages.pretrain import checkpoint_key

    overrides = _args("pretrain", tmp_path)[3:]
    key = checkpoint_key(validate(compose(overrides)))
    ckpt = tmp_path / "checkpoints" / key / "last.ckpt"
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes((ref / "pretrain" / "checkpoints" / "last.ckpt").read_bytes()[:5000])  # truncated
    r = subprocess.run(_args("pretrain", tmp_path), cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: pretrain: {ckpt}: checkpoint cannot be read"), last
    assert "delete it to start this run over" in last and "Traceback" not in r.stderr
    assert ckpt.exists()  # nothing deleted behind the user's back


@pytest.mark.slow  # the reference pipeline run behind these takes a minute (CI runs the slow marker too)
def test_a_corrupted_export_is_named(reference, tmp_path):
    ref, _ = reference
    shutil.copytree(ref / "pretrain", tmp_path / "pretrain")
    weights = tmp_path / "pretrain" / "hf" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    r = subprocess.run(_args("finetune", tmp_path), cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: finetune: {weights} is unreadable"), last
    assert "Traceback" not in r.stderr and not (tmp_path / "metrics").exists()


@pytest.mark.slow  # the reference pipeline run behind these takes a minute (CI runs the slow marker too)
def test_no_environment_variable_or_credential_reaches_mlflow(reference):
    ref, _ = reference
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{ref.parent / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("bert-lab").experiment_id])
    assert len(runs) >= 5
    for run in runs:
        recorded = json.dumps({**run.data.params, **run.data.tags})
        assert SECRET not in recorded and "tracking.uri" not in run.data.params
        assert not any(k.startswith(("env.", "AWS_", "MLFLOW_")) for k in run.data.params)


@pytest.mark.slow  # the reference pipeline run behind these takes a minute (CI runs the slow marker too)
def test_fine_tuning_runs_nest_under_their_pretraining_run_with_the_summary(reference):
    """In MLflow: pretrain run > the finetune stage's run (the summary) > one run per (mode, seed); the pretrain
    run carries the downstream scores; the experiment opens on its runs (MLflow 3's experiment kind)."""
    ref, _ = reference
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{ref.parent / 'mlflow.db'}")
    exp = client.get_experiment_by_name("bert-lab")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"
    ft = json.loads((ref / "metrics" / "finetune.json").read_text())
    ours = {x["mlflow_run_id"] for m in ft["modes"].values() for x in m["runs"]}
    parents = {client.get_run(r).data.tags["mlflow.parentRunId"] for r in ours}
    assert len(parents) == 1  # one stage run holds them all
    summary = client.get_run(parents.pop())
    assert summary.data.tags["kind"] == "summary" and summary.data.tags["mlflow.parentRunId"] == ft["pretrain_run_id"]
    for mode, r in ft["modes"].items():
        assert summary.data.metrics[f"{mode}/accuracy_mean"] == pytest.approx(r["accuracy_mean"])
        history = client.get_metric_history(ft["pretrain_run_id"], f"downstream/{ft['task']}/{mode}/accuracy_mean")
        assert any(m.value == pytest.approx(r["accuracy_mean"]) for m in history)


def test_servers_in_the_docs_listen_on_localhost():
    """Every command in the docs' code blocks that starts an MLflow server or UI binds 127.0.0.1."""
    docs = [ROOT / "README.md", *ROOT.glob("docs/**/*.md")]
    blocks = [b for f in docs for b in re.findall(r"```(?:bash|sh)?\n(.*?)```", f.read_text(encoding="utf-8"), re.S)]
    commands = [line for b in blocks for line in b.splitlines() if re.search(r"\bmlflow (ui|server)\b", line)]
    assert commands, "the README shows how to open the MLflow UI"
    for line in commands:
        assert "--host 127.0.0.1" in line, line
