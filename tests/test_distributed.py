"""Data-parallel pretraining with 2 CPU processes (gloo), against 1 process at the same global batch."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, run_stage

pytestmark = pytest.mark.slow  # several multi-process runs: `python -m pytest -m slow`

COMMON = ["experiment=tiny", "runtime.progress=false", "runtime.num_threads=1", "trainer.batch_size=16",
          "trainer.max_steps=40", "trainer.val_check_interval=20", "trainer.limit_val_batches=4",
          "trainer.checkpoint_every_n_steps=10"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("ddp")
    paths = [f"paths.{k}={root / k}" for k in ("corpus", "tokenizer", "pairs", "eval_set")]
    for stage in ("prepare_corpus", "train_wordpiece", "make_pairs", "eval_set"):
        r = run_stage(stage, "experiment=tiny", "runtime.progress=false", *paths, f"paths.metrics={root / 'metrics'}")
        assert r.returncode == 0, r.stderr[-2000:]
    return root, paths


def _args(root: Path, paths: list[str], name: str, devices: int, *extra: str) -> list[str]:
    strategy = ["trainer.strategy=ddp", f"trainer.devices={devices}"] if devices > 1 else ["trainer.devices=1"]
    return [sys.executable, "-m", "stages.pretrain", *COMMON, *paths, *strategy,
            f"paths.pretrain={root / name / 'out'}", f"paths.metrics={root / name / 'metrics'}",
            f"paths.plots={root / name / 'plots'}", f"paths.checkpoints={root / name / 'ckpt'}", *extra]


def _env(root: Path, name: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "LOCAL_RANK", "WORLD_SIZE"))}
    return dict(env, MLFLOW_TRACKING_URI=f"sqlite:///{root / (name + '.db')}")


def _runs(root: Path, name: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{root / (name + '.db')}")
    return client.search_runs([client.get_experiment_by_name("bert-lab").experiment_id])


def test_two_processes_match_one_at_the_same_global_batch(data):
    root, paths = data
    metrics = {}
    for name, devices in (("one", 1), ("two", 2)):
        r = subprocess.run(_args(root, paths, name, devices), cwd=ROOT, env=_env(root, name), capture_output=True,
                           text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        metrics[name] = json.loads((root / name / "metrics" / "pretrain.json").read_text())
    one, two = metrics["one"], metrics["two"]
    print(f"1 process: val loss {one['val/loss']}, {one['train_seconds']} s; "
          f"2 processes: val loss {two['val/loss']}, {two['train_seconds']} s")
    assert one["steps"] == two["steps"] == 40
    # Different processes see different (equally random) batches; the same global batch and schedule
    # must land on the same loss.
    assert abs(two["val/loss"] - one["val/loss"]) < 0.05 * one["val/loss"], (one, two)
    runs = _runs(root, "two")
    assert len(runs) == 1 and runs[0].info.run_id == two["mlflow_run_id"]  # rank 0 logs, alone
    assert runs[0].data.params["trainer.devices"] == "2"
    assert (root / "two" / "out" / "hf" / "model.safetensors").exists()
    assert [p.name for p in (root / "two").iterdir() if p.name.startswith(".")] == []


def test_a_checkpoint_from_two_processes_resumes_on_one(data):
    root, paths = data
    args = _args(root, paths, "switch", 2)
    env = _env(root, "switch")
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 600
    while not list((root / "switch" / "ckpt").glob("*/last.ckpt")) and proc.poll() is None:
        assert time.time() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # both processes, mid-run, with a checkpoint on disk
    proc.wait()
    assert not (root / "switch" / "out").exists()
    r = subprocess.run(_args(root, paths, "switch", 1), cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "checkpoint written by 2 processes, resuming on 1" in r.stdout + r.stderr
    m = json.loads((root / "switch" / "metrics" / "pretrain.json").read_text())
    assert m["resumed_from_step"] >= 10 and m["steps"] == 40
    runs = _runs(root, "switch")
    assert len(runs) == 1 and runs[0].info.run_id == m["mlflow_run_id"]  # the resumed run continued it


def test_length_grouped_batches_under_two_processes(data):
    """Sequence-length-aware batches split over processes by the sampler itself (not Lightning's)."""
    root, paths = data
    r = subprocess.run(_args(root, paths, "grouped", 2, "trainer.length_grouped=true", "trainer.max_steps=20"),
                       cwd=ROOT, env=_env(root, "grouped"), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    m = json.loads((root / "grouped" / "metrics" / "pretrain.json").read_text())
    assert m["steps"] == 20 and len(_runs(root, "grouped")) == 1


def test_each_process_reads_only_its_share_of_the_examples(data):
    """The distributed sampler splits the example indices; a memory-mapped shard is read only where indexed."""
    from torch.utils.data import DistributedSampler

    from pipeline.data.shards import PairsDataset

    root, _ = data
    ds = PairsDataset(root / "pairs" / "train")
    shares = [set(DistributedSampler(ds, num_replicas=2, rank=r, shuffle=True, seed=0)) for r in range(2)]
    assert not shares[0] & shares[1] and len(shares[0] | shares[1]) >= len(ds) - 1
    ds[next(iter(shares[0]))]
    opened = [s for s in ds._shards if s is not None]
    assert len(opened) == 1  # one shard mapped, not the data set loaded


def test_make_pairs_split_across_machines_gives_the_same_bytes(data, tmp_path):
    """Each "machine" writes the shards k % 3 == i; the join equals a single run, byte for byte."""
    root, paths = data
    common = ["experiment=tiny", "runtime.progress=false", "pairs.shard_tokens=20000",
              f"paths.corpus={root / 'corpus'}", f"paths.tokenizer={root / 'tokenizer'}"]
    whole = [*common, f"paths.pairs={tmp_path / 'whole'}", f"paths.metrics={tmp_path / 'm1'}"]
    r = run_stage("make_pairs", *whole)
    assert r.returncode == 0, r.stderr[-2000:]
    split = [*common, f"paths.pairs={tmp_path / 'split'}", f"paths.metrics={tmp_path / 'm2'}", "runtime.parts=3"]
    for i in (2, 0, 1):  # in any order, as machines finish
        r = run_stage("make_pairs", *split, f"runtime.part={i}")
        assert r.returncode == 0, r.stderr[-2000:]
        assert not (tmp_path / "split").exists()
    r = run_stage("make_pairs", *split)
    assert r.returncode == 0, r.stderr[-2000:]

    def files(d):
        return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}

    a, b = files(tmp_path / "whole"), files(tmp_path / "split")
    assert sum(k.endswith(".tokens.npy") for k in a) >= 3 and a == b
    assert (tmp_path / "m1" / "pairs.json").read_bytes() == (tmp_path / "m2" / "pairs.json").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m1", "m2", "split", "whole"]


def test_joining_before_every_machine_finished_names_the_missing_part(data, tmp_path):
    root, _ = data
    common = ["experiment=tiny", "runtime.progress=false", f"paths.corpus={root / 'corpus'}",
              f"paths.tokenizer={root / 'tokenizer'}", f"paths.pairs={tmp_path / 'p'}", "runtime.parts=2",
              f"paths.metrics={tmp_path / 'metrics'}"]
    assert run_stage("make_pairs", *common, "runtime.part=0").returncode == 0
    r = run_stage("make_pairs", *common)
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: make_pairs: {tmp_path / 'p.part-1-of-2' / 'train' / 'part.json'}: not found: "
                           "part 1 of 2 has not finished"), last
