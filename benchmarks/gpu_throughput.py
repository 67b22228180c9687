"""Pretraining throughput on one GPU: sequences/s and model-FLOPs utilisation (MFU).

    python benchmarks/gpu_throughput.py                  # BERT-Base and BERT-Large at 128 and 512, bf16
    python benchmarks/gpu_throughput.py --compile        # with torch.compile
    python benchmarks/gpu_throughput.py --device cpu --sizes tiny --seqs 128 --batch 8   # a dry run anywhere

Each case trains our BERT the way the pretrain stage does on a GPU: bf16
autocast, the fused AdamW, attention through scaled-dot-product attention
(flash kernels where the GPU has them), the vocabulary projection only at the
masked positions (15%, at most 20 or 80 per sequence as in the paper's two
phases), its loss without (N, V) logits (``--logits``: with them), MLM + NSP loss. Random token ids stand in for data: the speed of a
step does not depend on which ids it sees. After ``--warmup`` steps, ``--steps``
are timed with the device synchronised.

MFU = achieved model FLOPs / the GPU's peak dense bf16 FLOPs, with model FLOPs
per step = 3 x forward matmul FLOPs (projections, feed-forward, attention
scores and values, the MLM head at the predicted positions, the pooler); the
peak comes from a table of known GPUs or ``--peak-tflops``. The last line is
one JSON object with every case. For reference, NVIDIA's published BERT-Large
phase-1 figure is about 580 sequences/s per A100 in mixed precision.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.model.bert import BertConfig, BertForPreTraining, pretraining_loss  # noqa: E402

SIZES = {  # layers, hidden, heads (intermediate = 4 x hidden)
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
    "tiny": (2, 128, 2),
}
PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "A10G": 70.0, "L4": 121.0,
                    "RTX 4090": 165.0, "RTX 3090": 71.0, "V100": 125.0}  # dense, from the vendors' data sheets
BATCH = {("base", 128): 256, ("base", 512): 64, ("large", 128): 128, ("large", 512): 32, ("tiny", 128): 8,
         ("tiny", 512): 2}


def model_flops(cfg: BertConfig, B: int, T: int, predicted: int) -> float:
    """Matmul FLOPs of one training step (forward + backward = 3 x forward)."""
    H, inner, V, L = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.num_hidden_layers
    per_layer = 2 * B * T * (4 * H * H + 2 * H * inner) + 2 * 2 * B * T * T * H
    head = 2 * B * predicted * (H * H + H * V)
    pooler = 2 * B * (H * H + 2 * H)
    return 3 * (L * per_layer + head + pooler)


def peak_tflops(device: torch.device, override: float | None) -> float | None:
    if override:
        return override
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)


def run_case(size: str, T: int, batch: int, device: torch.device, steps: int, warmup: int, compile: bool,
             logits: bool = False) -> dict:
    layers, hidden, heads = SIZES[size]
    cfg = BertConfig(vocab_size=30522, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                     intermediate_size=4 * hidden, max_position_embeddings=512)
    torch.manual_seed(0)
    model = BertForPreTraining(cfg).to(device).train()
    step_model = torch.compile(model) if compile else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, eps=1e-6, fused=True)
    predicted = min(round(0.15 * T), 20 if T <= 128 else 80)
    g = torch.Generator(device="cpu").manual_seed(0)
    ids = torch.randint(5, cfg.vocab_size, (batch, T), generator=g).to(device)
    types = (torch.arange(T) > T // 2).long().expand(batch, T).to(device)
    mask = torch.ones(batch, T, dtype=torch.long, device=device)
    scores = torch.rand(batch, T, generator=g)
    masked = torch.zeros(batch, T, dtype=torch.bool).scatter_(1, scores.argsort(1)[:, :predicted], True).to(device)
    labels = ids[masked]
    nsp = torch.randint(0, 2, (batch,), generator=g).to(device)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")

    def step() -> None:
        with autocast:
            out = step_model(ids, types, mask, masked_positions=masked, mlm_targets=None if logits else labels)
            loss = pretraining_loss(out, labels, nsp)[0]
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for _ in range(warmup):
        step()
    sync()
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - t)
    s = statistics.median(times)
    flops = model_flops(cfg, batch, T, predicted)
    result = {"size": size, "seq": T, "batch": batch, "step_s": round(s, 5), "seq_per_s": round(batch / s, 1),
              "model_tflops": round(flops / s / 1e12, 2)}
    if device.type == "cuda":
        result["peak_memory_gb"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
        torch.cuda.reset_peak_memory_stats(device)
    del model, step_model, opt
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--sizes", nargs="+", default=["base", "large"], choices=list(SIZES))
    p.add_argument("--seqs", nargs="+", type=int, default=[128, 512])
    p.add_argument("--batch", type=int, help="per case default: 256/64 (base 128/512), 128/32 (large)")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--compile", action="store_true", help="torch.compile the model (longer warm-up)")
    p.add_argument("--logits", action="store_true",
                   help="the LM loss from (N, V) logits (default: the stage's linear_cross_entropy, without them)")
    p.add_argument("--peak-tflops", type=float, help="the GPU's peak dense bf16 TFLOP/s, if not in the table")
    a = p.parse_args()
    device = torch.device(a.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    peak = peak_tflops(device, a.peak_tflops)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    results = []
    for size in a.sizes:
        for T in a.seqs:
            r = run_case(size, T, a.batch or BATCH[(size, T)], device, a.steps, a.warmup, a.compile, a.logits)
            if peak:
                r["mfu"] = round(r["model_tflops"] / peak, 3)
            results.append(r)
            print(f"{size:6s} seq {T:4d} batch {r['batch']:4d}: {r['seq_per_s']:9.1f} sequences/s, "
                  f"{r['model_tflops']:7.1f} TFLOP/s" + (f", MFU {r['mfu']:.1%}" if peak else ""), flush=True)
    print(json.dumps({"device": name, "peak_tflops": peak, "compile": a.compile, "cases": results}))


if __name__ == "__main__":
    main()
