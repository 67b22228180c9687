"""What bounds the demo's pretraining step: where its time goes, op by op, and what a speed-up could reach.

    python benchmarks/step_bound.py                                   # the demo's baseline
    python benchmarks/step_bound.py --variants baseline,mask_ratio_40,layers_4
    python benchmarks/step_bound.py --variants baseline,mask_ratio_40 --bf16   # and under bf16-mixed

For each variant the script builds the pretrain stage's own LightningModule
from the variant's settings and feeds it real batches of the demo's examples
(King James Bible, vocabulary 8,000, batch 32 x 128; made once with the data
stages and cached, as ``pretrain_demo.py`` does). It measures, in one process:

- the step as the pretrain stage runs it, in Lightning's Trainer (the stage's
  callbacks, no validation), median over ``--steps``;
- the same step without Lightning (masking, forward, loss, backward,
  gradient clipping, fused AdamW): the arithmetic and the framework below it;
- that plain step under torch's profiler, its self time grouped into matrix
  products, attention, dropout's random masks, the vocabulary softmax and
  loss, the optimiser and everything else (LayerNorm, GELU, copies, sums),
  scaled to the unprofiled plain step;
- the machine's fp32 matmul peak (1024 x 1024, torch's threads);
- with ``--bf16``, the Lightning step again under ``runtime.precision=bf16-mixed``
  (autocast: bf16 matrix products, fp32 weights, softmax and LayerNorm), and the
  bf16 matmul peak: on CPUs with AMX or AVX-512 BF16 a different arithmetic
  that may be faster, and not the one the ceilings speak of.

From these it prints two ceilings on any speed-up at the same fp32 arithmetic:
the Lightning step over the time of its matrix products alone (every other op
free), and over the step's matmul FLOPs at the measured peak. A variant's step
time beside its FLOPs per token says whether it costs more than its extra
arithmetic. The last line is one JSON object.
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import lightning.pytorch as L
import torch
from omegaconf import OmegaConf
from torch.profiler import ProfilerActivity, profile

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pretrain_demo import demo_data  # noqa: E402  (benchmarks/: the demo's cached tokenizer and examples)
from pretrain_step import matmul_peak_gflops  # noqa: E402

from pipeline.architectures import architecture  # noqa: E402
from pipeline.config import compose, validate  # noqa: E402
from pipeline.data.datamodule import PairsDataModule  # noqa: E402
from pipeline.data.tokenizer import load_tokenizer  # noqa: E402
from pipeline.model.bert import pretraining_loss  # noqa: E402
from pipeline.optim import build_optimizer  # noqa: E402
from pipeline.stages.pretrain import build_module as stage_module, build_trainer, cost  # noqa: E402
from pipeline.variants import apply_variant  # noqa: E402

# Profiler op names (self time) -> the group they are reported in; the rest is "other".
GROUPS = {
    "matmul": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"),
    "attention": ("scaled_dot_product",),
    "dropout masks": ("aten::bernoulli_",),
    "softmax + loss": ("log_softmax", "nll_loss", "aten::exp", "aten::amax", "aten::argmax", "aten::gather"),
    "optimiser + clipping": ("_fused_adamw", "linalg_vector_norm", "_foreach_norm", "clamp"),
}


class _StepTimer(L.Callback):
    def __init__(self):
        self.times: list[float] = []
        self._last: float | None = None

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        now = time.perf_counter()
        if self._last is not None:
            self.times.append(now - self._last)  # start to start: the loop's own work included
        self._last = now


def group_of(name: str) -> str:
    for group, keys in GROUPS.items():
        if any(k in name for k in keys):
            return group
    return "other"


def variant_config(variant: str, tok: Path, pairs: Path, steps: int):
    overrides = [f"paths.tokenizer={tok}", f"paths.pairs={pairs}", f"trainer.max_steps={steps}",
                 "trainer.limit_val_batches=0", f"trainer.checkpoint_every_n_steps={steps + 1}",
                 "runtime.progress=false"]
    cfg = compose(overrides)
    if variant != "baseline":
        cfg = apply_variant(OmegaConf.merge(cfg, {"variant": variant}), "pretrain")
    return cfg


def build_module(cfg, tok):
    """The pretrain stage's module for a composed config (checked first, as the stage's start does)."""
    lab = validate(cfg)
    return stage_module(lab, architecture(lab.model.architecture), tok)


def lightning_step(cfg, tok, pairs: Path, steps: int, warmup: int, root: Path) -> float:
    """Median seconds per optimiser step of the stage's module in the stage's Trainer (no logger, no validation)."""
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    module = build_module(cfg, tok)
    data = PairsDataModule(pairs, batch_size=cfg.trainer.batch_size, seed=cfg.seed)
    timer = _StepTimer()
    trainer = build_trainer(validate(cfg), False, root=root, checkpoints=root / "checkpoints")
    trainer.callbacks.append(timer)
    trainer.fit(module, datamodule=data)
    return statistics.median(timer.times[warmup:])


def plain_steps(cfg, tok, pairs: Path, steps: int, warmup: int, profiled: int) -> dict:
    """The same step without Lightning: timed, then profiled; the groups' self times scaled to the timed step."""
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    module = build_module(cfg, tok)
    model = module.model.train()
    opt = build_optimizer(model, OmegaConf.to_container(cfg.optim), steps, fused=cfg.runtime.fused_optimizer)["optimizer"]
    loader = PairsDataModule(pairs, batch_size=cfg.trainer.batch_size, seed=cfg.seed).train_dataloader()
    batches, rows = list(itertools.islice(loader, warmup + steps + profiled)), []
    torch.use_deterministic_algorithms(True)  # as Lightning's deterministic=True

    def step(i: int, b: dict) -> None:
        inputs, positions, targets = module._inputs_and_targets(b, i, "train")
        rows.append(len(positions))
        out = model(inputs, b["token_type_ids"], b["attention_mask"], masked_positions=positions,
                    mlm_targets=targets)  # the stage's LM loss, without (N, V) logits
        loss = pretraining_loss(out, targets, b["next_sentence_label"] if module.nsp else None)[0]
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.optim.gradient_clip_val)
        opt.step()
        opt.zero_grad(set_to_none=True)

    times = []
    for i, b in enumerate(batches[:warmup + steps]):
        t = time.perf_counter()
        step(i, b)
        if i >= warmup:
            times.append(time.perf_counter() - t)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i, b in enumerate(batches[warmup + steps:], start=warmup + steps):
            step(i, b)
    self_us: dict[str, float] = {}
    for e in prof.key_averages():
        self_us[group_of(e.key)] = self_us.get(group_of(e.key), 0.0) + e.self_cpu_time_total
    total = sum(self_us.values())
    median = statistics.median(times)
    return {"step_s": median, "groups_s": {g: median * us / total for g, us in self_us.items()},
            "predicted_rows": statistics.mean(rows), "length": statistics.mean(b["input_ids"].shape[1] for b in batches),
            "real_tokens": statistics.mean(float(b["attention_mask"].float().mean()) for b in batches)}


def step_flops(module_config, batch: int, length: float, rows: float) -> float:
    """Matmul FLOPs of one step (forward + backward): every block at the batch's length, the LM head at its rows."""
    H, I, V, Lyr = (module_config.hidden_size, module_config.intermediate_size, module_config.vocab_size,
                    module_config.num_hidden_layers)
    tokens = batch * length
    blocks = Lyr * (2 * tokens * (4 * H * H + 2 * H * I) + 2 * 2 * batch * length * length * H)
    head = 2 * rows * (H * H + H * V) + 2 * batch * (H * H + 2 * H)  # LM head at predicted rows, pooler + NSP
    return 3 * (blocks + head)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default="baseline")
    ap.add_argument("--steps", type=int, default=40, help="timed steps (after --warmup) per measurement")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--profiled", type=int, default=10, help="profiled steps of the plain loop")
    ap.add_argument("--bf16", action="store_true", help="also time the Lightning step under bf16-mixed")
    a = ap.parse_args()
    tok_dir, pairs = demo_data()
    tok = load_tokenizer(tok_dir)
    peak = matmul_peak_gflops()
    print(f"fp32 matmul peak on this machine: {peak:.0f} GFLOP/s; {torch.get_num_threads()} threads", flush=True)
    report = {"matmul_peak_gflops": round(peak), "threads": torch.get_num_threads(), "variants": {}}
    if a.bf16:
        report["bf16_matmul_peak_gflops"] = round(matmul_peak_gflops(dtype=torch.bfloat16))
        print(f"bf16 matmul peak on this machine: {report['bf16_matmul_peak_gflops']} GFLOP/s", flush=True)
    for variant in a.variants.split(","):
        cfg = variant_config(variant, tok_dir, pairs, a.warmup + a.steps + 1)
        with tempfile.TemporaryDirectory(prefix="step-bound-") as d:
            lit = lightning_step(cfg, tok, pairs, a.warmup + a.steps + 1, a.warmup, Path(d))
        plain = plain_steps(cfg, tok, pairs, a.steps, a.warmup, a.profiled)
        module = build_module(cfg, tok)
        config = module.model.config
        flops = step_flops(config, cfg.trainer.batch_size, plain["length"], plain["predicted_rows"])
        groups = plain["groups_s"]
        mm = groups.get("matmul", 0.0)
        row = {"lightning_step_ms": round(lit * 1000, 1), "plain_step_ms": round(plain["step_s"] * 1000, 1),
               "token_slots_per_s": round(cfg.trainer.batch_size * cfg.pairs.max_seq_length / lit),
               "groups_ms": {g: round(s * 1000, 1) for g, s in sorted(groups.items(), key=lambda kv: -kv[1])},
               "step_gflop": round(flops / 1e9, 2), "matmul_gflops_achieved": round(flops / mm / 1e9) if mm else None,
               "train_flops_per_token": cost(cfg.pairs.max_seq_length, module)["train_flops_per_token"],
               "ceiling_all_but_matmul_free": round(lit / mm, 2) if mm else None,
               "ceiling_at_matmul_peak": round(lit / (flops / (peak * 1e9)), 2),
               "real_token_share": round(plain["real_tokens"], 3)}
        if a.bf16:
            cfg.runtime.precision = "bf16-mixed"
            with tempfile.TemporaryDirectory(prefix="step-bound-") as d:
                bf16 = lightning_step(cfg, tok, pairs, a.warmup + a.steps + 1, a.warmup, Path(d))
            row["lightning_step_ms_bf16_mixed"] = round(bf16 * 1000, 1)
            row["bf16_mixed_speedup"] = round(lit / bf16, 2)
        report["variants"][variant] = row
        print(f"\n{variant}: {row['lightning_step_ms']} ms per step in Lightning ({row['token_slots_per_s']} token "
              f"slots/s), {row['plain_step_ms']} ms without it; {row['step_gflop']} GFLOP of matmuls per step, "
              f"{row['train_flops_per_token'] / 1e6:.2f}M FLOPs per token", flush=True)
        for g, ms in row["groups_ms"].items():
            print(f"  {g:22s} {ms:7.1f} ms  {ms / row['plain_step_ms']:6.1%}", flush=True)
        print(f"  matmuls run at {row['matmul_gflops_achieved']} GFLOP/s ({row['matmul_gflops_achieved'] / peak:.0%} "
              f"of the peak); ceilings at the same arithmetic: {row['ceiling_all_but_matmul_free']}x with every "
              f"other op free, {row['ceiling_at_matmul_peak']}x with that and the matmuls at the peak", flush=True)
        if a.bf16:
            print(f"  under bf16-mixed: {row['lightning_step_ms_bf16_mixed']} ms per step in Lightning "
                  f"({row['bf16_mixed_speedup']}x the fp32 step)", flush=True)
    base = report["variants"].get("baseline")
    if base:
        for name, row in report["variants"].items():
            if name != "baseline":
                row["time_vs_baseline"] = round(row["lightning_step_ms"] / base["lightning_step_ms"], 2)
                row["flops_vs_baseline"] = round(row["train_flops_per_token"] / base["train_flops_per_token"], 2)
                print(f"{name}: {row['time_vs_baseline']}x the baseline's step time for "
                      f"{row['flops_vs_baseline']}x its FLOPs per token", flush=True)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
