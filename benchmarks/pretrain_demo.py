"""The demo's pretraining end to end -- the real pretrain stage, through Lightning -- against an earlier version.

    python benchmarks/pretrain_demo.py                        # baseline, 1000 steps, against REFERENCE
    python benchmarks/pretrain_demo.py --variants baseline,mask_ratio_40,layers_4 --steps 400
    python benchmarks/pretrain_demo.py --reference HEAD~3 --repeats 2

Both versions run ``python -m stages.pretrain`` on the same examples (the
demo's: King James Bible, vocabulary 8,000, batch 32 x 128, BERT's masking),
each from its own checkout (a temporary git worktree of ``--reference``),
alternating in one run so that both see the same machine. For each it reports
token slots per second (steps x 32 x 128 per second of training), the peak RSS
of the process, how much the RSS grew from training step ``--flat-from`` (300) to the end,
and the final validation loss (the same seed must give the same curve, within
floating-point noise). The last line is one JSON object with the ratios.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import torch

from pretrain_step import matmul_peak_gflops  # the machine's fp32 peak, measured the same way (benchmarks/)

ROOT = Path(__file__).resolve().parents[1]
# The last commit before the speed and memory work: the code the ratios are taken against.
REFERENCE = "371e7ad"
CACHE = ROOT / ".bench-cache" / "demo"
STEP = re.compile(r"Epoch \d+: .*?\| *(\d+)/\d+")  # the training bar's "123/1000"
# Settings both versions run with, whatever their conf/ says: the same validation and checkpoint schedule.
PINNED = ["trainer.val_check_interval=250", "trainer.checkpoint_every_n_steps=250", "trainer.batch_size=32"]


def demo_data() -> tuple[Path, Path]:
    """The demo's tokenizer and examples (made once with this checkout's data stages, then cached)."""
    tok, pairs = CACHE / "tokenizer", CACHE / "pairs"
    if not (pairs / "train" / "meta.json").exists():
        paths = [f"paths.corpus={CACHE / 'corpus'}", f"paths.tokenizer={tok}", f"paths.pairs={pairs}",
                 f"paths.metrics={CACHE / 'metrics'}", "runtime.progress=false"]
        for stage in ("prepare_corpus", "train_wordpiece", "make_pairs"):
            subprocess.run([sys.executable, "-m", f"stages.{stage}", *paths], cwd=ROOT, check=True)
    return tok, pairs


@contextlib.contextmanager
def reference_checkout(rev: str):
    """A temporary git worktree of ``rev`` (the version a benchmark compares against), removed afterwards."""
    ref = Path(tempfile.mkdtemp(prefix="bench-ref-"))
    subprocess.run(["git", "worktree", "add", "--detach", "-f", str(ref), rev], cwd=ROOT, check=True,
                   capture_output=True)
    try:
        yield ref
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(ref)], cwd=ROOT, capture_output=True)


def _follow_steps(stream, state: dict) -> None:
    """Read the stage's progress bar (tqdm on stdout, updated with carriage returns) and keep its step."""
    line = ""
    for ch in iter(lambda: stream.read(1), ""):
        if ch in "\r\n":
            m = STEP.search(line)
            if m:
                state["step"] = int(m.group(1))
            line = ""
        else:
            line += ch


def run_once(code: Path, variant: str, steps: int, tok: Path, pairs: Path, extra: list[str], flat_from: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-pretrain-") as d:
        out = Path(d)
        args = [sys.executable, "-m", "stages.pretrain", f"variant={variant}", f"trainer.max_steps={steps}",
                f"paths.tokenizer={tok}", f"paths.pairs={pairs}", f"paths.pretrain={out / 'model'}",
                f"paths.metrics={out / 'metrics'}", f"paths.plots={out / 'plots'}",
                f"paths.checkpoints={out / 'ckpt'}", f"paths.variants.models={out / 'models'}",
                f"paths.variants.metrics={out / 'vmetrics'}", f"paths.variants.plots={out / 'vplots'}",
                f"tracking.uri=sqlite:///{out / 'mlflow.db'}", "tracking.log_model=false",
                "runtime.progress=true", *PINNED, *extra]  # the progress bar tells the step the RSS is read at
        if variant == "baseline":
            args.remove("variant=baseline")
        err = tempfile.TemporaryFile(mode="w+")
        proc = subprocess.Popen(args, cwd=code, stdout=subprocess.PIPE, stderr=err, text=True)
        state = {"step": 0}
        threading.Thread(target=_follow_steps, args=(proc.stdout, state), daemon=True).start()
        ps, rss = psutil.Process(proc.pid), []  # (seconds, training step, MB)
        start = time.perf_counter()
        while proc.poll() is None:
            try:
                rss.append((time.perf_counter() - start, state["step"], ps.memory_info().rss / 2**20))
            except psutil.NoSuchProcess:
                break
            time.sleep(0.2)
        if proc.returncode:
            err.seek(0)
            raise SystemExit(f"{code}: pretrain failed:\n{err.read()[-3000:]}")
        metrics_dir = out / ("metrics" if variant == "baseline" else f"vmetrics/{variant}")
        m = json.loads((metrics_dir / "pretrain.json").read_text())
    after = [mb for _, step, mb in rss if step >= flat_from]
    return {"train_s": m["train_seconds"], "steps": m["steps"], "val_loss": m["val/loss"],
            "peak_rss_mb": max(mb for *_, mb in rss),
            "rss_at_flat_from_mb": after[0] if after else None,
            "rss_growth_mb": (max(after) - after[0]) if after else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", default=REFERENCE)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--variants", default="baseline")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--flat-from", type=int, default=300,
                    help="RSS growth is measured from this training step to the end")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for both versions")
    a = ap.parse_args()
    a.flat_from = min(a.flat_from, a.steps // 2)  # a short run: its second half
    tok, pairs = demo_data()
    peak = matmul_peak_gflops()
    print(f"fp32 matmul peak on this machine: {peak:.0f} GFLOP/s; {torch.get_num_threads()} threads", flush=True)
    slots = 32 * 128
    report = {"reference": a.reference, "steps": a.steps, "matmul_peak_gflops": round(peak), "variants": {}}
    with reference_checkout(a.reference) as ref:
        for variant in a.variants.split(","):
            runs = {"reference": [], "current": []}
            for _ in range(a.repeats):
                for name, code in (("reference", ref), ("current", ROOT)):
                    runs[name].append(run_once(code, variant, a.steps, tok, pairs, a.overrides, a.flat_from))
            row = {}
            for name, rs in runs.items():
                row[name] = {"token_slots_per_s": round(statistics.median(r["steps"] * slots / r["train_s"] for r in rs)),
                             "steps_per_s": round(statistics.median(r["steps"] / r["train_s"] for r in rs), 2),
                             "peak_rss_mb": round(max(r["peak_rss_mb"] for r in rs)),
                             "rss_at_flat_from_mb": round(statistics.median(r["rss_at_flat_from_mb"] for r in rs)),
                             "rss_growth_mb": round(max(r["rss_growth_mb"] for r in rs)),
                             "val_loss": rs[0]["val_loss"]}
                print(f"{variant:14s} {name:9s} {row[name]['token_slots_per_s']:7d} token slots/s "
                      f"({row[name]['steps_per_s']:.2f} steps/s), peak RSS {row[name]['peak_rss_mb']} MB, "
                      f"growth from step {a.flat_from} {row[name]['rss_growth_mb']} MB, val loss {row[name]['val_loss']:.4f}",
                      flush=True)
            row["speedup"] = round(row["current"]["token_slots_per_s"] / row["reference"]["token_slots_per_s"], 2)
            row["peak_rss_ratio"] = round(row["current"]["peak_rss_mb"] / row["reference"]["peak_rss_mb"], 2)
            print(f"{variant:14s} speed-up {row['speedup']}x, peak RSS ratio {row['peak_rss_ratio']}", flush=True)
            report["variants"][variant] = row
    print(json.dumps(report))


if __name__ == "__main__":
    main()
