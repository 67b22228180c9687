"""The demo's fine-tuning stage end to end -- the real finetune stage -- against an earlier version.

    python benchmarks/finetune_demo.py                  # the recipe the demo had when issue 15 was filed
    python benchmarks/finetune_demo.py --recipe current # the demo's recipe as conf/ has it now
    python benchmarks/finetune_demo.py --reference HEAD~3 --repeats 2

Both versions run ``python -m stages.finetune`` on the demo's task (Bible
sections, 2,000 labelled verses, 2,000 dev verses) from the same pretrained
export, each from its own checkout (a temporary git worktree of
``--reference``), alternating in one run so that both see the same machine.
The export is made once by this checkout's data and pretrain stages (the
demo's model, ``--pretrain-steps`` steps) and cached under ``.bench-cache/``.

Both versions get the same recipe, whatever their conf/ says:
``--recipe reference`` (default) pins the demo's fine-tuning as it was at
``REFERENCE`` (nine modes x three seeds, 5 epochs when weights are trained, 20
for heads on frozen features); ``--recipe current`` pins this checkout's
``conf/finetune/demo.yaml``. For each version it reports the stage's wall time,
the seconds of every mode (three seeds together, from ``finetune.json``) and
whether every (mode, seed) score equals the other version's. The last line is
one JSON object with the ratios.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from pretrain_demo import CACHE, REFERENCE, demo_data, reference_checkout  # benchmarks/: the demo's data
from pretrain_step import matmul_peak_gflops

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.config import compose  # noqa: E402

# The demo's fine-tuning recipe at REFERENCE (its conf/finetune/demo.yaml): every mode of BERT's Table 7.
REFERENCE_RECIPE = {
    "modes": ["pretrained", "scratch", "tfidf", "frozen_embeddings", "frozen_last", "frozen_second_to_last",
              "frozen_sum_last_four", "frozen_concat_last_four", "frozen_weighted"],
    "seeds": [0, 1, 2], "epochs": 5, "feature_epochs": 20,
}


def current_recipe() -> dict:
    ft = compose([]).finetune
    return {"modes": list(ft.modes), "seeds": list(ft.seeds), "epochs": ft.epochs, "feature_epochs": ft.feature_epochs}


def recipe_overrides(recipe: dict) -> list[str]:
    return [f"finetune.modes=[{','.join(recipe['modes'])}]", f"finetune.seeds=[{','.join(map(str, recipe['seeds']))}]",
            f"finetune.epochs={recipe['epochs']}", f"finetune.feature_epochs={recipe['feature_epochs']}"]


def demo_export(steps: int) -> Path:
    """The demo model pretrained ``steps`` steps by this checkout's pretrain stage (made once, then cached)."""
    tok, pairs = demo_data()
    out = CACHE / f"pretrain-{steps}"
    if not (out / "hf" / "config.json").exists():
        with tempfile.TemporaryDirectory(prefix="bench-export-") as d:
            subprocess.run([sys.executable, "-m", "stages.pretrain", f"trainer.max_steps={steps}",
                            f"paths.tokenizer={tok}", f"paths.pairs={pairs}", f"paths.pretrain={out}",
                            f"paths.metrics={Path(d) / 'metrics'}", f"paths.plots={Path(d) / 'plots'}",
                            f"paths.checkpoints={Path(d) / 'ckpt'}", f"tracking.uri=sqlite:///{Path(d) / 'mlflow.db'}",
                            "tracking.log_model=false", "runtime.progress=false"], cwd=ROOT, check=True)
    return out / "hf"


def run_once(code: Path, export: Path, overrides: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-finetune-") as d:
        out = Path(d)
        args = [sys.executable, "-m", "stages.finetune", f"finetune.init_from={export}",
                f"paths.metrics={out / 'metrics'}", f"tracking.uri=sqlite:///{out / 'mlflow.db'}",
                "runtime.progress=false", f"hydra.run.dir={out / 'hydra'}", *overrides]
        start = time.perf_counter()
        proc = subprocess.run(args, cwd=code, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode:
            raise SystemExit(f"{code}: finetune failed:\n{proc.stderr[-3000:]}")
        m = json.loads((out / "metrics" / "finetune.json").read_text())
    metric = m["metric"]
    return {"wall_s": wall, "metric": metric,
            "mode_s": {mode: r["seconds"] for mode, r in m["modes"].items()},
            "scores": {mode: [run[metric] for run in r["runs"]] for mode, r in m["modes"].items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", default=REFERENCE)
    ap.add_argument("--recipe", choices=("reference", "current"), default="reference",
                    help="the fine-tuning recipe both versions run: the demo's at REFERENCE, or conf/'s now")
    ap.add_argument("--pretrain-steps", type=int, default=400, help="pretraining steps of the shared export")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("overrides", nargs="*", help="further Hydra overrides for both versions")
    a = ap.parse_args()
    recipe = REFERENCE_RECIPE if a.recipe == "reference" else current_recipe()
    overrides = recipe_overrides(recipe) + a.overrides
    export = demo_export(a.pretrain_steps)
    peak = matmul_peak_gflops()
    print(f"fp32 matmul peak on this machine: {peak:.0f} GFLOP/s; {torch.get_num_threads()} threads", flush=True)
    print(f"recipe ({a.recipe}): {len(recipe['modes'])} modes x {len(recipe['seeds'])} seeds, "
          f"{recipe['epochs']} epochs, {recipe['feature_epochs']} on frozen features", flush=True)
    runs: dict[str, list[dict]] = {"reference": [], "current": []}
    with reference_checkout(a.reference) as ref:
        for _ in range(a.repeats):
            for name, code in (("reference", ref), ("current", ROOT)):
                r = run_once(code, export, overrides)
                runs[name].append(r)
                print(f"{name:9s} stage {r['wall_s']:6.1f} s; modes "
                      + ", ".join(f"{mode} {s:.1f}" for mode, s in r["mode_s"].items()), flush=True)
    report = {"reference": a.reference, "recipe": recipe, "matmul_peak_gflops": round(peak),
              "pretrain_steps": a.pretrain_steps, "versions": {}}
    for name, rs in runs.items():
        modes = rs[0]["mode_s"]
        report["versions"][name] = {
            "stage_s": round(statistics.median(r["wall_s"] for r in rs), 1),
            "modes_s": round(statistics.median(sum(r["mode_s"].values()) for r in rs), 1),
            "mode_s": {mode: round(statistics.median(r["mode_s"][mode] for r in rs), 1) for mode in modes}}
    ref_scores, cur_scores = runs["reference"][0]["scores"], runs["current"][0]["scores"]
    report["identical_scores"] = {mode: ref_scores[mode] == cur_scores.get(mode) for mode in ref_scores}
    report["stage_ratio"] = round(report["versions"]["current"]["stage_s"] / report["versions"]["reference"]["stage_s"], 2)
    cur, old = report["versions"]["current"], report["versions"]["reference"]
    print(f"stage: {old['stage_s']} -> {cur['stage_s']} s ({report['stage_ratio']}x the reference's time); "
          f"identical {runs['current'][0]['metric']} in every (mode, seed): {all(report['identical_scores'].values())}",
          flush=True)
    for mode, same in report["identical_scores"].items():
        print(f"  {mode:24s} {old['mode_s'][mode]:6.1f} -> {cur['mode_s'].get(mode, float('nan')):6.1f} s  "
              f"{'same scores' if same else 'scores differ'}", flush=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
