"""Optimisers and schedules shared by pretraining and fine-tuning (``optim.name``, ``optim.schedule``: their names
are ``pipeline.names.OPTIMIZERS`` and ``SCHEDULES``)."""
from __future__ import annotations

def param_groups(model, weight_decay: float) -> list[dict]:
    """BERT's rule: no weight decay on LayerNorm weights and biases (1-D parameters)."""
    decay, no_decay = [], []
    for _, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if p.ndim < 2 else decay).append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def warmup_linear(total_steps: int, warmup_ratio: float, schedule: str = "linear", decay_ratio: float = 1.0):
    """The learning rate's multiplier at each step: a linear warm-up over ``warmup_ratio`` of the steps, then

    * ``linear`` (BERT's): a linear decay to 0 over all the remaining steps;
    * ``wsd`` (warm-up, stable, decay): the peak held, then a linear decay to 0 over the last ``decay_ratio``
      of the steps -- more of the budget at the peak, where a small model leaves its plateau.
    """
    warmup = max(1, int(total_steps * warmup_ratio))
    decay_from = warmup if schedule == "linear" else max(warmup, total_steps - int(total_steps * decay_ratio))

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if step < decay_from:
            return 1.0
        return max(0.0, (total_steps - step) / max(1, total_steps - decay_from))

    return factor


def build_optimizer(model, optim: dict, total_steps: int, fused: bool = True):
    """The configured optimiser + linear warm-up and linear decay, in Lightning's ``configure_optimizers`` format.

    ``optim`` holds ``name``, ``lr``, ``betas``, ``eps``, ``weight_decay``,
    ``warmup_ratio``, ``schedule`` and ``decay_ratio`` (``warmup_linear``; ``linear`` and 1.0: BERT's
    linear decay over every step after the warm-up). ``adamw`` is torch's AdamW, with ``fused`` its
    single-kernel form (CPU and CUDA; several times faster than the
    per-parameter loop on CPU, the same update up to rounding); ``lamb`` is
    ``pytorch_optimizer``'s LAMB (Adam moments, each tensor's update scaled by
    the trust ratio ||w|| / ||update||).
    """
    import torch

    groups = param_groups(model, optim["weight_decay"])
    betas = tuple(optim["betas"])
    if optim["name"] == "lamb":
        from pytorch_optimizer import Lamb

        opt = Lamb(groups, lr=optim["lr"], betas=betas, eps=optim["eps"])
    else:
        opt = torch.optim.AdamW(groups, lr=optim["lr"], betas=betas, eps=optim["eps"], fused=bool(fused))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, warmup_linear(total_steps, optim["warmup_ratio"],
                                                                 optim["schedule"], optim["decay_ratio"]))
    return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def clip_gradients(module, optimizer, clip_val, algorithm) -> None:
    """Lightning's gradient clipping, also for a fused optimiser under bf16 (each module's
    ``configure_gradient_clipping``).

    Lightning's mixed-precision plugin refuses to clip for any optimiser that
    unscales gradients inside its step, such as fused AdamW. That matters only
    with a gradient scaler (``16-mixed``, refused with a fused optimiser by the
    validator): under ``bf16-mixed`` there is none, the gradients are the true
    ones, and they are clipped as in fp32.
    """
    from lightning.pytorch.plugins.precision import MixedPrecision, Precision
    from lightning.pytorch.utilities import GradClipAlgorithmType

    plugin = module.trainer.precision_plugin
    if isinstance(plugin, MixedPrecision) and plugin.scaler is None:
        Precision.clip_gradients(plugin, optimizer, clip_val or 0.0, algorithm or GradClipAlgorithmType.NORM)
    else:
        module.clip_gradients(optimizer, gradient_clip_val=clip_val, gradient_clip_algorithm=algorithm)
