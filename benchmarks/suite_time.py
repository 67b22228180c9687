"""How long a task suite takes per pretraining variant, on this machine and (projected) on one GPU.

    python benchmarks/suite_time.py                          # suite=table5 with the demo model, grid=demo's modes
    python benchmarks/suite_time.py suite=table5 model=base  # BERT-Base, the paper's model
    python benchmarks/suite_time.py --gpu-tflops 300         # the GPU's achieved (not peak) TFLOP/s

For each task of the suite the script times real fine-tuning steps of our BERT
with the task's head (sequence classification; SQuAD's span head; NER's token
head) at ``finetune.batch_size`` x the task's ``max_seq_length`` on this
machine (the median of ``--steps`` after one warm-up), and an evaluation
batch. The projection for one pretraining variant fine-tuned in the grid's
modes (``grid.finetune.modes``) over ``finetune.seeds``, on the task's full
official training set (sizes below) for ``finetune.epochs``:
- ``pretrained`` / ``scratch``: every training step of every epoch, plus one
  pass over dev per run;
- a frozen-feature mode: one forward pass over train and dev (the features are
  computed once per run; the head's own training is small and not counted);
- ``tfidf``: not counted (seconds on a CPU).
SQuAD counts windows, not questions: about 1 per question at BERT's 384
tokens, 4.7 at the demo's 128 with stride 64 (measured on the v1.1 dev file).
The GPU line divides the model FLOPs by ``--gpu-tflops``, an assumed achieved
rate (bf16; ``benchmarks/gpu_throughput.py`` measures it on a real GPU), with
at least ``--gpu-step-ms`` per step (a small model is bound by per-step
overhead, not arithmetic): a projection, not a measurement. The last line is
one JSON object.
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

from pretrain_step import matmul_peak_gflops  # noqa: E402  (this folder)
from pipeline.config import compose  # noqa: E402
from pipeline.finetune.modes import is_frozen  # noqa: E402
from pipeline.model.bert import (BertForQuestionAnswering, BertForSequenceClassification,  # noqa: E402
                                 BertForTokenClassification)
from pipeline.model_config import build_config  # noqa: E402
from pipeline.names import CLASSICAL

# Official training / dev sizes (examples; SQuAD: questions, about one 384-token window each at BERT's settings).
SIZES = {"MNLI-m": (392_702, 9_815), "QNLI": (104_743, 5_463), "MRPC": (3_668, 408), "SST-2": (67_349, 872),
         "SQuAD-v1.1": (87_599, 10_570), "SQuAD-v2.0": (130_319, 11_873), "CoNLL-2003": (14_041, 3_250),
         "QQP": (363_846, 40_430), "RTE": (2_490, 277), "CoLA": (8_551, 1_043), "STS-B": (5_749, 1_500)}


def head_model(task_name: str, cfg) -> torch.nn.Module:
    if task_name.startswith("SQuAD"):
        return BertForQuestionAnswering(cfg)
    if task_name.startswith("CoNLL"):
        return BertForTokenClassification(cfg, num_labels=9)
    return BertForSequenceClassification(cfg, num_labels=3 if task_name.startswith("MNLI") else 2)


def forward(model: torch.nn.Module, batch: dict) -> torch.Tensor:
    out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    return sum(o.float().mean() for o in out) if isinstance(out, tuple) else out.float().mean()


def time_steps(model: torch.nn.Module, B: int, T: int, V: int, steps: int) -> tuple[float, float]:
    """Median seconds of a training step (forward, backward, AdamW) and of an evaluation batch, after warm-up."""
    g = torch.Generator().manual_seed(0)
    batch = {"input_ids": torch.randint(5, V, (B, T), generator=g), "token_type_ids": torch.zeros(B, T, dtype=torch.long),
             "attention_mask": torch.ones(B, T, dtype=torch.long)}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    train, evaluate = [], []
    for i in range(steps + 1):
        t = time.perf_counter()
        model.train()
        forward(model, batch).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        train.append(time.perf_counter() - t)
        t = time.perf_counter()
        model.eval()
        with torch.no_grad():
            forward(model, batch)
        evaluate.append(time.perf_counter() - t)
    return statistics.median(train[1:]), statistics.median(evaluate[1:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--gpu-tflops", type=float, default=100.0,
                    help="achieved bf16 TFLOP/s assumed for the GPU projection (not its peak)")
    ap.add_argument("--gpu-step-ms", type=float, default=10.0,
                    help="the least time a GPU training step takes whatever its FLOPs (launches, optimiser)")
    ap.add_argument("overrides", nargs="*", help="Hydra overrides (default: suite=table5)")
    args = ap.parse_args()
    overrides = args.overrides if any(o.startswith("suite=") for o in args.overrides) else \
        ["suite=table5", *args.overrides]
    cfg = compose(overrides)
    torch.manual_seed(0)
    ft, modes = cfg.finetune, list(cfg.grid.finetune.modes)
    model_cfg = build_config(dict(cfg.model), cfg.tokenizer.vocab_size, "masked")
    seeds, B = len(ft.seeds), ft.batch_size
    peak = matmul_peak_gflops()
    print(f"suite {cfg.suite.name}, model {cfg.model.name} ({model_cfg.num_hidden_layers} x {model_cfg.hidden_size}), "
          f"modes {modes} x {seeds} seeds, {ft.epochs} epochs, batch {B}; "
          f"{torch.get_num_threads()} threads, matmul peak {peak:.0f} GFLOP/s", flush=True)
    tasks, total_cpu, total_gpu = {}, 0.0, 0.0
    for key, task in cfg.suite.tasks.items():
        T = task.max_seq_length
        n_train, n_dev = SIZES.get(task.name, (task.data.get("train_size"), task.data.get("dev_size")))
        if task.name.startswith("SQuAD"):  # windows per question
            n_train, n_dev = (round(n * (1.0 if T >= 384 else 4.7)) for n in (n_train, n_dev))
        step_s, eval_s = time_steps(head_model(task.name, model_cfg), B, T, model_cfg.vocab_size, args.steps)
        train_steps = -(-n_train // B) * ft.epochs
        passes = -(-(n_train + n_dev) // B)
        flops_step = model_cfg.train_flops_per_token(T, 0.0) * B * T
        gpu_step = max(flops_step / (args.gpu_tflops * 1e12), args.gpu_step_ms / 1e3)  # seconds
        gpu_eval = max(flops_step / 3 / (args.gpu_tflops * 1e12), args.gpu_step_ms / 3e3)
        cpu = gpu = 0.0
        for mode in modes:
            if mode == CLASSICAL:
                continue
            if is_frozen(mode):
                cpu += seeds * passes * eval_s
                gpu += seeds * passes * gpu_eval
            else:
                cpu += seeds * (train_steps * step_s + -(-n_dev // B) * eval_s)
                gpu += seeds * (train_steps * gpu_step + -(-n_dev // B) * gpu_eval)
        tasks[key] = {"task": task.name, "train": n_train, "dev": n_dev, "seq": T, "step_s": round(step_s, 4),
                      "eval_batch_s": round(eval_s, 4), "cpu_hours": round(cpu / 3600, 2),
                      "gpu_hours": round(gpu / 3600, 3)}
        total_cpu, total_gpu = total_cpu + cpu, total_gpu + gpu
        print(f"  {task.name}: {n_train:,} train / {n_dev:,} dev at {T} tokens; a training step {step_s:.3f} s here; "
              f"per variant {cpu / 3600:.1f} h on this CPU, {gpu / 3600:.2f} h on a GPU (projected)", flush=True)
    print(f"per variant: {total_cpu / 3600:.1f} h here, {total_gpu / 3600:.2f} h projected on one GPU")
    print(json.dumps({"suite": cfg.suite.name, "model": cfg.model.name, "modes": modes, "seeds": seeds,
                      "epochs": ft.epochs, "matmul_peak_gflops": round(peak), "gpu_tflops_assumed": args.gpu_tflops,
                      "gpu_step_ms_assumed": args.gpu_step_ms,
                      "tasks": tasks, "cpu_hours_per_variant": round(total_cpu / 3600, 2),
                      "gpu_hours_per_variant": round(total_gpu / 3600, 3)}))


if __name__ == "__main__":
    main()
