"""The demo's fine-tuning stage end to end -- the real finetune stage -- beside another commit's, on one recipe.

    python benchmarks/finetune_demo.py                                # against REFERENCE, the export of `dvc repro`
    python benchmarks/finetune_demo.py --reference HEAD               # an uncommitted change against the last commit
    python benchmarks/finetune_demo.py --export FOLDER --repeats 2 finetune.seeds=[0]
    python benchmarks/finetune_demo.py --pretrain-steps 400           # no export yet: pretrain one here, cached

Both versions run ``python -m stages.finetune`` on one task (``--task``, the
demo's Bible sections by default: 2,000 labelled verses, 3,000 held out) from
the same pretrained export, each from its own checkout (a temporary git
worktree of ``--reference``), alternating in one run so that both see the same
machine. Both get this checkout's fine-tuning recipe (every key of
``conf/finetune/demo.yaml``, pinned by override), whatever their own conf/ says;
a key only one version has (``finetune.lr_bounds`` before grids were extended)
stays with that version and is named in the output, since it is where the two
protocols differ.

The versions are compared as ratios, current over reference: the stage's wall
time, and the seconds per run -- each mode's seconds over the runs it trained
(its candidates on dev, then its other seeds), so a protocol that trains more
runs is not read as slower code. The check asks of every run both versions
trained (the same mode, settings and seed) the same score: each candidate's on
dev and, where both chose the same settings, each seed's on test. On CPU a run
is deterministic, so this fails only where the code computes something else for
the same run -- not because one protocol tried candidates the other did not.
The last line is one JSON object with the ratios and the check.
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
import yaml

from pretrain_demo import CACHE, demo_data, reference_checkout  # benchmarks/: the demo's data
from pretrain_step import matmul_peak_gflops

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from omegaconf import OmegaConf  # noqa: E402

from pipeline.config import compose  # noqa: E402

# The last commit before a choice on a grid's edge extended the grid (finetune.lr_bounds): the same protocol
# otherwise, so every run both versions train must score the same, and the ratios show what the extension costs.
REFERENCE = "6a98049"


def leaves(node: dict, prefix: str = "finetune") -> dict[str, object]:
    """A config node as ``{dotted key: value}`` of its leaves (lists are leaves)."""
    out = {}
    for k, v in node.items():
        out.update(leaves(v, f"{prefix}.{k}") if isinstance(v, dict) else {f"{prefix}.{k}": v})
    return out


def hydra_value(v) -> str:
    if isinstance(v, (list, tuple)):
        return f"[{','.join(hydra_value(x) for x in v)}]"
    return "null" if v is None else str(v).lower() if isinstance(v, bool) else str(v)


def recipe_overrides(mine: dict, theirs: dict, extra: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(overrides for both, for the current version alone, keys the reference has and the current lacks): this
    checkout's recipe, the reference's conf/finetune/demo.yaml keys telling which it can take; ``extra``
    overrides (``key=value``) replace the recipe's for a key both have."""
    given = dict(o.split("=", 1) for o in extra)
    both = {k: given.pop(k, hydra_value(v)) for k, v in mine.items() if k in theirs and k != "finetune.init_from"}
    current = {k: given.pop(k, hydra_value(v)) for k, v in mine.items() if k not in theirs}
    return ([f"{k}={v}" for k, v in {**both, **given}.items()], [f"{k}={v}" for k, v in current.items()],
            [k for k in theirs if k not in mine])


def find_export(given: Path | None, steps: int | None) -> Path:
    """The export both versions start from: ``--export``, or ``--pretrain-steps`` pretrained here (made once, then
    cached), or the one ``dvc repro`` leaves (``paths.pretrain``/hf); none of them: one line saying so."""
    if steps is not None:
        return pretrain_export(steps)
    folder = given or Path(compose([]).paths.pretrain) / "hf"
    folder = folder if folder.is_absolute() else ROOT / folder
    if not (folder / "config.json").is_file():
        print(f"finetune_demo: no pretrained export at {folder} (no config.json): run `dvc repro`, pass --export "
              f"FOLDER, or --pretrain-steps N to pretrain the demo's model here", file=sys.stderr)
        raise SystemExit(2)
    return folder


def pretrain_export(steps: int) -> Path:
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
    """One finetune stage of the checkout at ``code``: its wall time and, per mode, its seconds, the runs it
    trained, and every run's score (candidates on dev, the seeds at the choice on test)."""
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
    metric, modes = m["metric"], {}
    for mode, r in m["modes"].items():
        grid = r["selection"]["grid"]
        modes[mode] = {
            "seconds": r["seconds"], "runs": len(grid) + r["n"] - (1 if grid else 0),  # the winner is a seed's run
            "chosen": r["selection"]["chosen"], "extended": r["selection"].get("extended", []),
            "dev": {json.dumps({k: v for k, v in g.items() if k not in ("dev", "mlflow_run_id")}, sort_keys=True):
                    g["dev"][metric] for g in grid},
            "test": {run["seed"]: run[metric] for run in r["runs"]}}
    return {"wall_s": wall, "metric": metric, "modes": modes}


def same_runs(ref: dict, cur: dict) -> dict[str, dict]:
    """Per mode: the runs both versions trained, and those whose scores differ."""
    out = {}
    for mode, a in ref["modes"].items():
        b = cur["modes"].get(mode)
        if b is None:
            continue
        pairs = [(f"dev {k}", a["dev"][k], b["dev"][k]) for k in a["dev"] if k in b["dev"]]
        if a["chosen"] == b["chosen"]:
            pairs += [(f"test seed {s}", a["test"][s], b["test"][s]) for s in a["test"] if s in b["test"]]
        out[mode] = {"compared": len(pairs), "differ": [f"{what}: {x} -> {y}" for what, x, y in pairs if x != y]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", default=REFERENCE, help=f"the git revision to compare against (default "
                                                           f"{REFERENCE}: before grids were extended)")
    ap.add_argument("--task", default="bible_sections", help="conf/task/<task>.yaml, for both versions")
    ap.add_argument("--export", type=Path, default=None,
                    help="a pretrained export (Hugging Face folder); default: paths.pretrain/hf, as `dvc repro` "
                         "leaves it")
    ap.add_argument("--pretrain-steps", type=int, default=None,
                    help="pretrain the demo's model this many steps here instead (cached under .bench-cache/)")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("overrides", nargs="*", help="Hydra overrides for both versions (a finetune key replaces the "
                                                 "pinned recipe's)")
    a = ap.parse_args()
    export = find_export(a.export, a.pretrain_steps)
    mine = leaves(OmegaConf.to_container(compose([]).finetune, resolve=True))
    peak = matmul_peak_gflops()
    print(f"fp32 matmul peak on this machine: {peak:.0f} GFLOP/s; {torch.get_num_threads()} threads", flush=True)
    runs: dict[str, list[dict]] = {"reference": [], "current": []}
    with reference_checkout(a.reference) as ref:
        theirs = leaves(yaml.safe_load((ref / "conf" / "finetune" / "demo.yaml").read_text()))
        both, current_only, reference_only = recipe_overrides(mine, theirs, a.overrides)
        print(f"recipe: this checkout's conf/finetune/demo.yaml on task {a.task}; current version only: "
              f"{', '.join(current_only) or 'nothing'}; the reference's own: {', '.join(reference_only) or 'nothing'}",
              flush=True)
        task = ["~suite", f"task={a.task}"]
        for _ in range(a.repeats):
            for name, code, extra in (("reference", ref, []), ("current", ROOT, current_only)):
                r = run_once(code, export, task + both + extra)
                runs[name].append(r)
                print(f"{name:9s} stage {r['wall_s']:6.1f} s; " + ", ".join(
                    f"{mode} {m['seconds']:.1f} s / {m['runs']} runs" for mode, m in r["modes"].items()), flush=True)
    versions = {}
    for name, rs in runs.items():
        modes = rs[0]["modes"]
        versions[name] = {
            "stage_s": round(statistics.median(r["wall_s"] for r in rs), 1),
            "runs": {mode: m["runs"] for mode, m in modes.items()},
            "s_per_run": {mode: round(statistics.median(r["modes"][mode]["seconds"] for r in rs) / m["runs"], 2)
                          for mode, m in modes.items()},
            "all_s_per_run": round(statistics.median(sum(m["seconds"] for m in r["modes"].values()) /
                                                     sum(m["runs"] for m in r["modes"].values()) for r in rs), 2)}
    old, cur = versions["reference"], versions["current"]
    check = same_runs(runs["reference"][0], runs["current"][0])
    report = {"reference": a.reference, "task": a.task, "current_only": current_only, "reference_only": reference_only,
              "matmul_peak_gflops": round(peak), "export": str(export), "versions": versions,
              "stage_ratio": round(cur["stage_s"] / old["stage_s"], 2),
              "per_run_ratio": round(cur["all_s_per_run"] / old["all_s_per_run"], 2),
              "same_runs": check, "same_scores": all(not c["differ"] for c in check.values())}
    print(f"stage: {old['stage_s']} -> {cur['stage_s']} s ({report['stage_ratio']}x); per run: "
          f"{old['all_s_per_run']} -> {cur['all_s_per_run']} s ({report['per_run_ratio']}x); every run both trained "
          f"scored the same: {report['same_scores']}", flush=True)
    for mode, c in check.items():
        extended = ", ".join(f"{e['lr']:g}" for e in runs["current"][0]["modes"][mode]["extended"])
        print(f"  {mode:24s} {old['runs'][mode]:3d} -> {cur['runs'][mode]:3d} runs"
              f"{f' (extended to {extended})' if extended else ''}, {old['s_per_run'][mode]:.2f} -> "
              f"{cur['s_per_run'][mode]:.2f} s a run; {c['compared']} runs in common, "
              f"{'same scores' if not c['differ'] else 'differ: ' + '; '.join(c['differ'])}", flush=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
