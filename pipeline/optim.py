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


def make_adamw(params, *, lr: float, betas=(0.9, 0.999), eps: float = 1e-6, weight_decay: float = 0.0,
               fused: bool = True) -> torch.optim.AdamW:
    """torch's AdamW; with ``fused`` its single-kernel form, which torch has for CPU and CUDA
    (several times faster than the per-parameter loop on CPU, same update up to rounding)."""
    return torch.optim.AdamW(params, lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                             fused=bool(fused))


OPTIMIZERS = ("adamw", "lamb")


def build_optimizer(model: nn.Module, optim: dict, total_steps: int, fused: bool = True):
    """The configured optimiser + linear warm-up and linear decay, in Lightning's ``configure_optimizers`` format.

    ``optim["name"]`` is ``adamw`` (torch's, fused where available) or ``lamb``
    (``pytorch_optimizer``'s LAMB: Adam moments, update scaled per tensor by
    the trust ratio ||w|| / ||update||).
    """
    name = optim.get("name", "adamw")
    groups = param_groups(model, optim["weight_decay"])
    if name == "adamw":
        opt = make_adamw(groups, lr=optim["lr"], betas=optim["betas"], eps=optim["eps"], fused=fused)
    elif name == "lamb":
        from pytorch_optimizer import Lamb

        opt = Lamb(groups, lr=optim["lr"], betas=tuple(optim["betas"]), eps=optim["eps"])
    else:
        raise ValueError(f"optim.name={name!r}: expected one of {', '.join(OPTIMIZERS)}")
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_linear(total_steps, optim["warmup_ratio"]))
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}
