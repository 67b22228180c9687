"""SQuAD v1.1 on a slice of the official dev set, split by article: every kind of mode, timed, one seed.

    python benchmarks/squad_demo.py --export /tmp/demo1/models/pretrain/hf
    python benchmarks/squad_demo.py --export <folder> --train-size 2000 --dev-size 500 --epochs 2 \\
        --modes pretrained scratch frozen_last tfidf

Offline only the v1.1 dev set exists (``../shared/data/squad/v1.1``): its 48
articles are split by article (``--split-fraction`` held out, seeded), then
``--train-size`` and ``--dev-size`` questions are drawn; the held-out questions
split by article into dev and test, as the fine-tuning protocol splits them. The
scores are therefore NOT comparable to official SQuAD dev scores. Each mode runs
through ``SpanRunner`` as the finetune stage runs it, at ``--lr`` (no choice on
dev, no MLflow); the last line is one JSON object with each mode's test scores
(and dev's) and wall time in seconds.

Measured 2026-11-30, before the held-out questions were split into dev and test (the scores below are theirs
together) on the demo export (BERT 2 x 128, 8,000-piece vocabulary,
pretrained on the Bible), 2 shared CPU cores under a load of about 6, with
``--train-size 500 --dev-size 200 --epochs 2 --feature-epochs 2 --threads 2``
(1,754 train and 708 dev windows of 128 tokens; seed 0; not comparable to
official scores): pretrained EM 0.015 F1 0.066 (132 s), scratch EM 0.020
F1 0.095 (163 s), frozen_last EM 0.030 F1 0.088 (504 s: the BiLSTM runs
token by token on a CPU), tfidf (sliding-window overlap) EM 0.015 F1 0.136
(1 s). A model pretrained on the Bible, with its vocabulary, reads Wikipedia
poorly; one seed on 200 questions cannot tell these modes apart.
"""
from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import torch

from pipeline.architectures import open_export
from pipeline.data.tokenizer import load_tokenizer
from pipeline.finetune.spans import SpanRunner
from pipeline.finetune.tasks.base import split_heldout
from pipeline.finetune.tasks.squad import squad
from pipeline.finetune.training import Grid, Recipe
from pipeline.io import write_json

ROOT = Path(__file__).resolve().parents[1]
DEV = ROOT.parent / "shared" / "data" / "squad" / "v1.1" / "dev-v1.1.json"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--export", type=Path, required=True, help="a Hugging Face-format BERT folder (the pretrain export)")
    p.add_argument("--data", type=Path, default=DEV, help="an official SQuAD v1.1 JSON file, split by article")
    p.add_argument("--modes", nargs="+", default=["pretrained", "scratch", "frozen_last", CLASSICAL])
    p.add_argument("--train-size", type=int, default=2000)
    p.add_argument("--dev-size", type=int, default=500)
    p.add_argument("--split-fraction", type=float, default=0.2)
    p.add_argument("--max-seq-length", type=int, default=128)
    p.add_argument("--doc-stride", type=int, default=64)
    p.add_argument("--max-query-length", type=int, default=32)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--feature-epochs", type=int, default=2)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--predictions", type=Path, default=None, help="write each run's predictions.json here")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)

    task = squad("SQuAD-v1.1-split", "1.1", str(args.data), None, split_fraction=args.split_fraction,
                 train_size=args.train_size, dev_size=args.dev_size, seed=args.seed,
                 max_query_length=args.max_query_length, doc_stride=args.doc_stride)
    task = split_heldout(task, 0.5, args.seed)  # the held-out questions: dev (the v2.0 threshold) and test, by article
    grid = Grid(lrs=(args.lr,), feature_lrs=(args.lr,), poolings=("mean",), tfidf_c=(1.0,), tfidf_ngrams=(1,))
    recipe = Recipe(seeds=(args.seed,), epochs=args.epochs, feature_epochs=args.feature_epochs,
                    batch_size=args.batch_size, grid=grid, weight_decay=0.01, warmup_ratio=0.1,
                    betas=(0.9, 0.999), eps=1e-6, gradient_clip_val=1.0, eval_batch_size=64,
                    feature_eval_batch_size=256, eval_every_epoch=False, max_seq_length=args.max_seq_length)
    started = time.perf_counter()
    runner = SpanRunner(recipe, task, load_tokenizer(args.export), open_export(args.export))
    out = {"data": str(args.data), "comparable": task.comparable, "train_questions": len(task.train),
           "dev_questions": len(task.dev), "test_questions": len(task.test),
           **{f"{split}_windows": len(runner.encoded[split]) for split in ("train", "dev", "test")},
           "encode_seconds": round(time.perf_counter() - started, 1), "settings": vars(args) | {
               "export": str(args.export), "data": str(args.data), "predictions": str(args.predictions)},
           "modes": {}}
    for mode in args.modes:
        started = time.perf_counter()
        run = runner.train(mode, runner.candidates(mode)[0], args.seed, None)
        dev = runner.score(run, "dev")
        result = {**runner.score(run, "test"), "dev": dev}
        out["modes"][mode] = {**result, "seconds": round(time.perf_counter() - started, 1)}
        logging.info("%s: test EM %.4f F1 %.4f in %.0f s", mode, result["exact"], result["f1"],
                     out["modes"][mode]["seconds"])
    if args.predictions is not None:  # the runs' predictions/<mode>-s<seed>/ folders, as the stage writes them
        for path, content in runner.outputs().items():
            write_json(args.predictions / Path(path).relative_to("predictions"), content)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
