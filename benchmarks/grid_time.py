"""How long an ablation grid takes on this machine, from measured training steps.

    python benchmarks/grid_time.py                 # grid=full
    python benchmarks/grid_time.py grid=demo trainer.max_steps=800

For the baseline and every pretraining variant of the grid, the script builds
the pretrain stage's own Lightning module from the variant's settings and times
``--steps=N`` optimiser steps (default 10, after warm-up) in a Lightning Trainer
on real batches of the baseline's examples (run ``dvc repro`` first: it needs
``data/pairs``). Projections:
- pretraining: ``trainer.max_steps`` x the median step time x the overhead
  (validation, logging, checkpoints) measured on the baseline's real run
  (``metrics/pretrain.json``);
- fine-tuning: the baseline's measured fine-tuning time in the grid's modes
  (``metrics/finetune.json``) x the variant's encoder cost per token relative
  to the baseline's (masking and objective variants fine-tune at the same cost);
- the learning-rate sweep (``grid.sweep``): each swept row's pilots, one per rate, each
  ``fraction`` of its steps at its step time and the same overhead;
- the total: each variant's pretraining and fine-tuning x the grid's
  ``seeds.variants``, and every pilot (zero-shot scoring and the probe are not counted).
The last line is one JSON object: per variant the step time and the projected
seconds, and the total.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import lightning.pytorch as L
import torch
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.architectures import architecture  # noqa: E402
from pipeline.config import compose, validate  # noqa: E402
from pipeline.data.datamodule import PairsDataModule  # noqa: E402
from pipeline.data.tokenizer import load_tokenizer  # noqa: E402
from pipeline.variants import apply_variant  # noqa: E402
from pipeline.stages.pretrain import build_module  # noqa: E402


class _StepTimer(L.Callback):
    def __init__(self):
        self.times: list[float] = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self._t = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.times.append(time.perf_counter() - self._t)


def step_seconds(cfg, tok, steps: int, warmup: int = 3) -> float:
    """Median seconds of one optimiser step of the pretrain stage's module (BERT, word2vec or ELMo, built as
    the stage builds it), in a Lightning Trainer."""
    torch.manual_seed(0)
    lab = validate(cfg)
    module = build_module(lab, architecture(lab.model.architecture), tok)
    pairs = ROOT / cfg.paths.pairs
    if not (pairs / "train" / "meta.json").exists():  # a variant's own examples not made yet: same shapes
        pairs = ROOT / "data" / "pairs"
    data = PairsDataModule(pairs, batch_size=cfg.trainer.batch_size, seed=0)
    timer = _StepTimer()
    L.Trainer(max_steps=warmup + steps, logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, limit_val_batches=0, num_sanity_val_steps=0, callbacks=[timer],
              accelerator=cfg.trainer.accelerator, devices=1).fit(module, datamodule=data)
    return statistics.median(timer.times[warmup:])


def encoder_cost(cfg) -> int:
    """Matmul multiply-adds per token of the encoder layers (what fine-tuning pays for)."""
    h, i = cfg.model.hidden_size, cfg.model.intermediate_size
    return cfg.model.num_hidden_layers * (4 * h * h + 2 * h * i)


def main() -> None:
    parser = argparse.ArgumentParser(description="Project an ablation grid's time on this machine from measured "
                                     "training steps (run `dvc repro` first).")
    parser.add_argument("--steps", type=int, default=10, help="optimiser steps timed per variant (default 10)")
    parser.add_argument("overrides", nargs="*", help="Hydra overrides, e.g. grid=depth trainer.max_steps=3200 "
                        "(default grid=full)")
    parsed = parser.parse_args()
    steps, args = parsed.steps, parsed.overrides
    if steps < 1:
        parser.error(f"--steps={steps}: expected a positive number of steps")
    overrides = args if any(a.startswith("grid=") for a in args) else ["grid=full", *args]
    base = compose(overrides)
    os.chdir(ROOT)  # the settings' paths are the repository's, as the stages read them
    for needed in (base.paths.tokenizer, base.paths.pairs, base.paths.eval_set):
        if not Path(needed).exists():
            sys.exit(f"{ROOT / needed}: not found; the timing trains on the baseline's real examples, so run "
                     "`dvc repro` (or at least its data stages) first")
    tok = load_tokenizer(base.paths.tokenizer)
    vocab = tok.get_vocab_size()
    # The baseline's first fine-tuning (every task of the suite): its grid modes' seconds, the choice on dev
    # included (an upper bound for a variant that takes the baseline's choice).
    metrics = ROOT / base.paths.metrics
    ft_files = [metrics / "finetune.json"] if (metrics / "finetune.json").exists() else \
        sorted(metrics.glob("tasks/*/finetune.json"))
    ft_base = None
    if ft_files:
        fts = [json.loads(f.read_text()) for f in ft_files]
        ft_base = sum(ft["modes"][m]["seconds"] for ft in fts for m in base.grid.finetune.modes if m in ft["modes"])
    rows = {}
    base_step = step_seconds(base, tok, steps)
    overhead = 1.0
    pre_file = ROOT / base.paths.metrics / "pretrain.json"
    if pre_file.exists():
        pre = json.loads(pre_file.read_text())
        if pre.get("steps") == base.trainer.max_steps:
            overhead = pre["train_seconds"] / (base.trainer.max_steps * base_step)
    for name in ["baseline", *base.grid.pretrain]:
        cfg = base if name == "baseline" else \
            apply_variant(OmegaConf.merge(base, {"variant": name}), "pretrain", swept=False)
        s = base_step if name == "baseline" else step_seconds(cfg, tok, steps)
        pre = s * cfg.trainer.max_steps * overhead
        fine = None if ft_base is None or name == "baseline" else ft_base * encoder_cost(cfg) / encoder_cost(base)
        sweep = base.grid.get("sweep")
        pilots = pre * sweep.fraction * len(sweep.lrs) if sweep and name in sweep.rows else 0.0
        rows[name] = {"step_s": round(s, 4), "pretrain_s": round(pre), "pilots_s": round(pilots),
                      "finetune_s": None if fine is None else round(fine)}
        print(f"{name:24s} {s * 1000:8.1f} ms/step  pretraining {pre / 60:7.1f} min"
              + (f"  pilots {pilots / 60:6.1f} min" if pilots else "")
              + ("" if fine is None else f"  fine-tuning {fine / 60:6.1f} min"), flush=True)
    seeds = base.grid.seeds.variants  # pretraining runs per variant, each fine-tuned in the grid's modes
    variants = [r for k, r in rows.items() if k != "baseline"]
    total = seeds * sum(r["pretrain_s"] + (r["finetune_s"] or 0) for r in variants) + \
        sum(r["pilots_s"] for r in rows.values())
    print(f"grid {base.grid.name}: {len(variants)} variants x {seeds} pretraining runs, {total / 3600:.2f} h beyond "
          f"the baseline's {base.grid.seeds.baseline} runs, the sweep's pilots included ({vocab} vocabulary, "
          f"{base.trainer.max_steps} steps of "
          f"{base.trainer.batch_size} x {base.pairs.max_seq_length}; zero-shot scoring and the probe not counted)")
    print(json.dumps({"grid": base.grid.name, "max_steps": base.trainer.max_steps, "overhead": round(overhead, 3),
                      "seeds_per_variant": seeds, "variants": rows,
                      "variants_total_s": round(total), "finetune_measured": ft_base is not None}))


if __name__ == "__main__":
    main()
