"""How long an ablation grid takes on this machine, from measured training steps.

    python benchmarks/grid_time.py                 # grid=full
    python benchmarks/grid_time.py grid=demo trainer.max_steps=800

For the baseline and every pretraining variant of the grid, the script builds
the pretrain stage's own Lightning module from the variant's settings and times
``--steps`` optimiser steps (after warm-up) on real batches of the baseline's
examples (``data/pairs``; random ids of the same shape when it is absent). It
projects each variant's pretraining as ``trainer.max_steps`` x the median step
time, and its fine-tuning as the baseline's measured fine-tuning time
(``metrics/finetune.json``, the grid's modes) scaled by the variant's step-time
ratio to the baseline. The last line is one JSON object: per variant the
step time and the projected seconds, and the totals.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import torch
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.config import compose  # noqa: E402
from pipeline.grid import apply_variant  # noqa: E402
from pipeline.masking import MaskingConfig  # noqa: E402
from pipeline.pretrain import BertPretraining, model_config  # noqa: E402


def batches(cfg, n: int, vocab: int) -> list[dict]:
    B, T = cfg.trainer.batch_size, cfg.pairs.max_seq_length
    pairs = ROOT / cfg.paths.pairs / "train"
    if pairs.exists():
        from pipeline.data import pad_collate
        from pipeline.shards import PairsDataset

        ds = PairsDataset(pairs)
        return [pad_collate([ds[(i * B + j) % len(ds)] for j in range(B)]) for i in range(n)]
    g = torch.Generator().manual_seed(0)
    ids = [torch.randint(5, vocab, (B, T), generator=g) for _ in range(n)]
    for x in ids:
        x[:, 0], x[:, T // 2], x[:, -1] = 2, 3, 3
    return [{"input_ids": x, "token_type_ids": (torch.arange(T) > T // 2).long().expand(B, T),
             "attention_mask": torch.ones_like(x), "next_sentence_label": torch.randint(0, 2, (B,), generator=g),
             "index": torch.arange(B)} for x in ids]


def step_seconds(cfg, vocab: int, steps: int, warmup: int = 3) -> float:
    torch.manual_seed(0)
    module = BertPretraining(model_config(cfg, vocab), MaskingConfig(**cfg.masking), nsp=cfg.objective.nsp,
                             optim=OmegaConf.to_container(cfg.optim), max_steps=cfg.trainer.max_steps, seed=0,
                             mask_id=4, cls_id=2, sep_id=3, fused_optimizer=cfg.runtime.fused_optimizer)
    module.log = lambda *a, **k: None  # no Lightning trainer here: metrics are not logged
    optimizer = module.configure_optimizers()["optimizer"]
    times = []
    for i, batch in enumerate(batches(cfg, warmup + steps, vocab)):
        t = time.perf_counter()
        loss = module.step(batch, i, "train")
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if i >= warmup:
            times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    args = sys.argv[1:]
    steps = 10
    if args and args[0].startswith("--steps="):
        steps, args = int(args[0].split("=")[1]), args[1:]
    overrides = args if any(a.startswith("grid=") for a in args) else ["grid=full", *args]
    base = compose(overrides)
    tok = ROOT / base.paths.tokenizer / "vocab.txt"
    vocab = sum(1 for _ in open(tok, encoding="utf-8")) if tok.exists() else base.tokenizer.vocab_size
    ft_file = ROOT / base.paths.metrics / "finetune.json"
    ft_base = None
    if ft_file.exists():
        ft = json.loads(ft_file.read_text())
        ft_base = sum(ft["modes"][m]["seconds"] for m in base.grid.finetune.modes if m in ft["modes"])
    rows = {}
    base_step = step_seconds(base, vocab, steps)
    for name in ["baseline", *base.grid.pretrain]:
        cfg = base if name == "baseline" else apply_variant(OmegaConf.merge(base, {"variant": name}), "pretrain")
        s = base_step if name == "baseline" else step_seconds(cfg, vocab, steps)
        pre = s * cfg.trainer.max_steps
        fine = None if ft_base is None or name == "baseline" else ft_base * s / base_step
        rows[name] = {"step_s": round(s, 4), "pretrain_s": round(pre), "finetune_s": None if fine is None else round(fine)}
        print(f"{name:24s} {s * 1000:8.1f} ms/step  pretraining {pre / 60:7.1f} min"
              + ("" if fine is None else f"  fine-tuning {fine / 60:6.1f} min"), flush=True)
    variants = [r for k, r in rows.items() if k != "baseline"]
    total = sum(r["pretrain_s"] + (r["finetune_s"] or 0) for r in variants)
    print(f"grid {base.grid.name}: {len(variants)} variants, {total / 3600:.2f} h beyond the baseline "
          f"({vocab} vocabulary, {base.trainer.max_steps} steps of {base.trainer.batch_size} x "
          f"{base.pairs.max_seq_length})")
    print(json.dumps({"grid": base.grid.name, "max_steps": base.trainer.max_steps, "variants": rows,
                      "variants_total_s": round(total), "finetune_measured": ft_base is not None}))


if __name__ == "__main__":
    main()
