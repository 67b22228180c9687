"""How noisy is fine-tuning on the demo's tasks, and what cuts it: a recipe measured over pretraining runs and seeds.

    python benchmarks/finetune_noise.py --exports models/pretrain/hf models/variants/baseline-s1/hf \\
        --task word_order --train-size 2000 8000 --epochs 3 1 --lr 3e-4 1e-3 --pooling token --seeds 0 1 2 \\
        --set finetune.batch_size=16

Each combination of (training examples, epochs, learning rate) fine-tunes every export with every seed on the
task as the finetune stage builds it (``conf/task/<task>.yaml``, its held-out verses split into dev and test by
``finetune.test_fraction``), at the demo's fine-tuning recipe otherwise (``conf/finetune/demo.yaml``, with
``--set``'s overrides). For each combination it prints the mean test score, the fine-tuning sd (pooled within
each export's seeds), the pretraining sd (between the exports' means, less what fine-tuning luck puts there:
one-way ANOVA), the binomial sd of the test split at that score, and the seconds per run. ``--out`` writes every
run as JSON: the measurements behind docs/results.md's fine-tuning noise table.
"""
from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hydra.utils import instantiate  # noqa: E402

from pipeline.architectures import open_export  # noqa: E402
from pipeline.config import compose, validate  # noqa: E402
from pipeline.data.tokenizer import load_tokenizer  # noqa: E402
from pipeline.finetune.sentence import SentenceRunner  # noqa: E402
from pipeline.finetune.tasks.base import split_heldout  # noqa: E402
from pipeline.report.stats import variance_components  # noqa: E402
from pipeline.stages.finetune import recipe  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--exports", nargs="+", required=True, help="export folders, one per pretraining run")
    ap.add_argument("--task", default="word_order")
    ap.add_argument("--train-size", nargs="+", type=int, default=[2000])
    ap.add_argument("--dev-size", default=None, help="held-out verses (default: the task's; null: every one)")
    ap.add_argument("--epochs", nargs="+", type=int, default=[3])
    ap.add_argument("--lr", nargs="+", type=float, default=[3e-4])
    ap.add_argument("--pooling", default="token")
    ap.add_argument("--mode", default="pretrained", choices=["pretrained", "scratch"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                    help="settings overrides for every combination, e.g. finetune.batch_size=16")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    for folder in args.exports:
        if not (Path(folder) / "config.json").exists():
            sys.exit(f"--exports: {folder} is not an export folder (no config.json); run `dvc repro` first")

    runs, rows = [], []
    for size, epochs, lr in itertools.product(args.train_size, args.epochs, args.lr):
        overrides = [f"task={args.task}", f"task.data.train_size={size}", *args.set]
        if args.dev_size is not None:
            overrides.append(f"task.data.dev_size={args.dev_size}")
        lab = validate(compose(overrides))
        task = split_heldout(instantiate(lab.task.data, _convert_="all"), lab.finetune.test_fraction,
                             lab.run.seed)
        rec = dataclasses.replace(recipe(lab), epochs=epochs, progress=False)
        groups, seconds = [], []
        for folder in args.exports:
            runner = SentenceRunner(rec, task, load_tokenizer(folder), open_export(folder))
            scores = []
            for seed in args.seeds:
                started = time.perf_counter()
                run = runner.train(args.mode, {"lr": lr, "pooling": args.pooling}, seed, None)
                dev, test = runner.score(run, "dev"), runner.score(run, "test")
                seconds.append(time.perf_counter() - started)
                scores.append(test["accuracy"])
                runs.append({"export": folder, "train_size": size, "epochs": epochs, "lr": lr, "seed": seed,
                             "dev": dev["accuracy"], "test": test["accuracy"], "seconds": round(seconds[-1], 1)})
                print(json.dumps(runs[-1]), flush=True)
            groups.append(scores)
        sd_p, sd_f = variance_components(groups)
        mean = sum(map(sum, groups)) / sum(map(len, groups))
        n_test = len(task.test)
        rows.append({"train_size": size, "epochs": epochs, "lr": lr, "settings": args.set, "mean": mean,
                     "sd_finetune": sd_f, "sd_pretrain": sd_p, "sd_test": math.sqrt(mean * (1 - mean) / n_test),
                     "n_test": n_test, "seconds_per_run": sum(seconds) / len(seconds),
                     "runs": [[round(s, 4) for s in g] for g in groups]})
    print("| train examples | epochs | lr | mean | fine-tuning sd | pretraining sd | test sampling sd | s/run |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['train_size']} | {r['epochs']} | {r['lr']:g} | {100 * r['mean']:.1f} | "
              f"{100 * r['sd_finetune']:.1f} | {100 * r['sd_pretrain']:.1f} | {100 * r['sd_test']:.1f} "
              f"(n {r['n_test']}) | {r['seconds_per_run']:.0f} |")
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "runs": runs}, indent=1))


if __name__ == "__main__":
    main()
