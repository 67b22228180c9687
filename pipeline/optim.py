"""Optimisers and schedules shared by pretraining and fine-tuning."""
from __future__ import annotations

import torch
from torch import nn


def param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """BERT's rule: no weight decay on LayerNorm weights and biases (1-D parameters)."""
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if p.ndim < 2 else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def warmup_linear(total_steps: int, warmup_ratio: float):
    warmup = max(1, int(total_steps * warmup_ratio))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return factor


def build_optimizer(model: nn.Module, optim: dict, total_steps: int):
    """AdamW + linear warm-up and linear decay, in Lightning's ``configure_optimizers`` format."""
    opt = torch.optim.AdamW(param_groups(model, optim["weight_decay"]), lr=optim["lr"],
                            betas=tuple(optim["betas"]), eps=optim["eps"])
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_linear(total_steps, optim["warmup_ratio"]))
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
