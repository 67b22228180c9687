"""Training-step speed of our BERT against Hugging Face's, on identical shapes and data.

    python benchmarks/pretrain_step.py                      # 4 layers, 256 wide, 4 heads
    python benchmarks/pretrain_step.py --layers 2 --hidden 128 --heads 2

Both models start from the same weights (ours loaded from Hugging Face's
``BertForPreTraining``, attention ``sdpa``) and train on the same batches:
sequences of ``--seq`` tokens, 15% of them masked, next-sentence labels, MLM +
NSP loss, backward pass, AdamW step. Steps alternate between the two in one
process. The script prints the median tokens/s of each after warm-up, the
FLOP/s each achieves as a share of this machine's fp32 matrix-multiply peak
(measured here too), the losses of the first step (they must agree), and as its
last line one JSON object with ``ours_tok_s``, ``hf_tok_s`` and ``ratio``.
``--record PATH`` also writes that object, with the run's arguments, date,
torch version and CPU/GPU, to PATH (``docs/measurements/pretrain_step-<case>.json``,
from which ``benchmarks/docs_tables.py`` renders docs/performance.md's table).

Ours runs the way the pretrain stage runs it: the vocabulary projection only
at masked positions, its loss without (N, V) logits (``linear_cross_entropy``),
and the fused AdamW where torch has one. Hugging Face runs
the way its examples do: full logits, then the loss.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.io import write_json  # noqa: E402
from pipeline.model.bert import BertConfig, BertForPreTraining, pretraining_loss  # noqa: E402


def matmul_peak_gflops(n: int = 1024, repeats: int = 20, dtype: torch.dtype = torch.float32) -> float:
    """Best GFLOP/s of an n x n matrix product on this machine (torch's threads), fp32 unless ``dtype``."""
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best / 1e9


def machine() -> dict:
    """The CPU's model name, torch's version and the GPU's name (None without one), for a recorded result."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {"cpu": cpu, "cpu_count": os.cpu_count(), "gpu": gpu, "torch": torch.__version__}


def record(path: str | Path, result: dict, argv: list[str], peak_gflops: float) -> None:
    """Write ``result`` with the fp32 matmul peak, the arguments, the date and the machine atomically to ``path``."""
    write_json(path, {"benchmark": Path(sys.argv[0]).name, "argv": argv,
                      "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                      "matmul_peak_gflops": round(peak_gflops, 1), **machine(), "result": result})


def step_flops(cfg: BertConfig, B: int, T: int, predicted: int) -> float:
    """Matmul FLOPs of one training step (forward + backward = 3 x forward) for ``predicted`` output rows."""
    H, I, V, L = cfg.hidden_size, cfg.intermediate_size, cfg.vocab_size, cfg.num_hidden_layers
    tokens = B * T
    per_layer = 2 * tokens * (4 * H * H + 2 * H * I) + 2 * 2 * B * T * T * H  # projections, FFN, QK^T and AV
    head = 2 * predicted * (H * H + H * V)                                    # transform + vocabulary projection
    pooler = 2 * B * (H * H + 2 * H)
    return 3 * (L * per_layer + head + pooler)


def make_batches(n: int, B: int, T: int, V: int, mask_prob: float, seed: int = 0) -> list[dict]:
    g = torch.Generator().manual_seed(seed)
    n_pred = max(1, round(T * mask_prob))
    batches = []
    for _ in range(n):
        ids = torch.randint(5, V, (B, T), generator=g)
        ids[:, 0], ids[:, T // 2], ids[:, -1] = 2, 3, 3                      # [CLS] A [SEP] B [SEP]
        types = torch.zeros(B, T, dtype=torch.long)
        types[:, T // 2 + 1:] = 1
        scores = torch.rand(B, T, generator=g)
        scores[:, [0, T // 2, T - 1]] = 2.0
        masked = torch.zeros(B, T, dtype=torch.bool).scatter_(1, scores.argsort(1)[:, :n_pred], True)
        labels = torch.where(masked, ids, torch.full_like(ids, -100))
        corrupted = torch.where(masked, torch.full_like(ids, 4), ids)        # [MASK]
        batches.append({"input_ids": corrupted, "token_type_ids": types, "attention_mask": torch.ones_like(ids),
                        "labels": labels, "masked": masked, "nsp": torch.randint(0, 2, (B,), generator=g)})
    return batches


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--intermediate", type=int, help="default: 4 x hidden")
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--mask-prob", type=float, default=0.15)
    p.add_argument("--dropout", type=float, default=0.1, help="hidden and attention dropout (BERT's 0.1)")
    p.add_argument("--steps", type=int, default=8, help="timed steps per model")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    p.add_argument("--record", metavar="PATH", help="also write the result, arguments, date and machine to PATH")
    a = p.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    from transformers import BertConfig as HFConfig
    from transformers import BertForPreTraining as HFBert

    torch.manual_seed(0)
    intermediate = a.intermediate or 4 * a.hidden
    hf_cfg = HFConfig(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers,
                      num_attention_heads=a.heads, intermediate_size=intermediate, max_position_embeddings=max(512, a.seq),
                      hidden_dropout_prob=a.dropout, attention_probs_dropout_prob=a.dropout,
                      attn_implementation="sdpa")
    hf = HFBert(hf_cfg)
    cfg = BertConfig(vocab_size=a.vocab, hidden_size=a.hidden, num_hidden_layers=a.layers, num_attention_heads=a.heads,
                     intermediate_size=intermediate, max_position_embeddings=max(512, a.seq),
                     hidden_dropout_prob=a.dropout, attention_probs_dropout_prob=a.dropout)
    ours = BertForPreTraining(cfg)
    ours.load_state_dict(hf.state_dict(), strict=False)
    ours.tie_weights()

    batches = make_batches(4, a.batch, a.seq, a.vocab, a.mask_prob)
    # The same loss from the same weights and batch (dropout off for the comparison).
    ours.eval(), hf.eval()
    with torch.no_grad():
        b = batches[0]
        out = ours(b["input_ids"], b["token_type_ids"], b["attention_mask"], masked_positions=b["masked"])
        loss_ours = pretraining_loss(out, b["labels"][b["masked"]], b["nsp"])[0].item()
        loss_hf = hf(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"], attention_mask=b["attention_mask"],
                     labels=b["labels"], next_sentence_label=b["nsp"]).loss.item()
    ours.train(), hf.train()

    opt_ours = torch.optim.AdamW(ours.parameters(), lr=1e-4, eps=1e-6, fused=True)
    opt_hf = torch.optim.AdamW(hf.parameters(), lr=1e-4)

    def step_ours(b: dict) -> None:
        targets = b["labels"][b["masked"]]
        out = ours(b["input_ids"], b["token_type_ids"], b["attention_mask"], masked_positions=b["masked"],
                   mlm_targets=targets)
        loss = pretraining_loss(out, targets, b["nsp"])[0]
        loss.backward()
        opt_ours.step()
        opt_ours.zero_grad(set_to_none=True)

    def step_hf(b: dict) -> None:
        loss = hf(input_ids=b["input_ids"], token_type_ids=b["token_type_ids"], attention_mask=b["attention_mask"],
                  labels=b["labels"], next_sentence_label=b["nsp"]).loss
        loss.backward()
        opt_hf.step()
        opt_hf.zero_grad(set_to_none=True)

    times: dict[str, list[float]] = {"ours": [], "hf": []}
    for i in range(a.warmup + a.steps):
        b = batches[i % len(batches)]
        for name, fn in (("ours", step_ours), ("hf", step_hf)):
            t = time.perf_counter()
            fn(b)
            if i >= a.warmup:
                times[name].append(time.perf_counter() - t)
        print(f"step {i + 1}/{a.warmup + a.steps}: ours {times['ours'][-1] if times['ours'] else 0:.3f} s, "
              f"hf {times['hf'][-1] if times['hf'] else 0:.3f} s", file=sys.stderr)

    tokens = a.batch * a.seq
    n_pred = a.batch * max(1, round(a.seq * a.mask_prob))
    peak = matmul_peak_gflops()
    result = {"layers": a.layers, "hidden": a.hidden, "heads": a.heads, "batch": a.batch, "seq": a.seq,
              "vocab": a.vocab, "threads": torch.get_num_threads(), "matmul_peak_gflops": round(peak, 1)}
    for name in ("ours", "hf"):
        med = statistics.median(times[name])
        flops = step_flops(cfg, a.batch, a.seq, n_pred if name == "ours" else tokens)
        result[f"{name}_tok_s"] = round(tokens / med, 1)
        result[f"{name}_step_s"] = round(med, 4)
        result[f"{name}_gflops"] = round(flops / med / 1e9, 1)
        result[f"{name}_peak_fraction"] = round(flops / med / 1e9 / peak, 3)
    result["ratio"] = round(result["ours_tok_s"] / result["hf_tok_s"], 2)
    result["loss_ours"], result["loss_hf"] = round(loss_ours, 6), round(loss_hf, 6)
    print(f"{a.layers} layers x {a.hidden} wide x {a.heads} heads, batch {a.batch} x {a.seq}, vocabulary {a.vocab}, "
          f"{result['threads']} threads; fp32 matmul peak {peak:.0f} GFLOP/s", file=sys.stderr)
    for name, label in (("ours", "ours"), ("hf", "Hugging Face (sdpa)")):
        print(f"  {label:20s} {result[f'{name}_tok_s']:9.0f} tokens/s  {result[f'{name}_gflops']:6.1f} GFLOP/s "
              f"({100 * result[f'{name}_peak_fraction']:.0f}% of peak)", file=sys.stderr)
    print(f"  ratio {result['ratio']:.2f}x; first-step loss ours {loss_ours:.6f}, Hugging Face {loss_hf:.6f}",
          file=sys.stderr)
    if a.record:
        record(a.record, result, sys.argv[1:], peak)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
