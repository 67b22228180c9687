"""The masked LM's loss without its (N, V) logits: the vocabulary projection and cross-entropy chunk by chunk.

``linear_cross_entropy(x, weight, bias, targets)`` is ``F.cross_entropy(F.linear(x, weight, bias).float(),
targets, ignore_index=IGNORE_INDEX)`` with the same value and gradients (tested to 1e-12 in float64, and
against Hugging Face's gradients through ``BertForPreTraining(..., mlm_targets=)``), computed a chunk of
rows at a time with the gradient taken in the forward pass.
"""
from __future__ import annotations

import torch

from pipeline.names import IGNORE_INDEX

LOGIT_CHUNK_BYTES = 8 << 20  # fp32 logits per chunk: below glibc's largest mmap threshold (32 MB), and in cache


class _LinearCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of ``x @ weight.T + bias`` against ``targets`` (rows with IGNORE_INDEX not scored),
    computed ``rows`` rows at a time, its gradient with it (the loss is a scalar, so backward only scales it).

    What it saves: the (N, V) logits, their log-softmax and its gradient are never held at once -- three
    tensors of 20 MB at the demo's masking, 52 MB at 40%, 625 MB for BERT-Base at batch 256 -- and a chunk of
    fixed size is reused from the heap instead of fresh pages from the kernel every step. The matmuls run in
    ``dtype`` (autocast's, as ``F.linear`` would under it) and the softmax in fp32, as ``pretraining_loss``."""

    @staticmethod
    def forward(ctx, x, weight, bias, targets, rows: int, dtype: torch.dtype, predict: bool):
        acc = torch.promote_types(dtype, torch.float32)  # the softmax's and the sums' dtype: fp32 at least
        scored = targets != IGNORE_INDEX
        scale = 1.0 / scored.sum().to(acc)  # inf when no row is scored: a nan loss, as F.cross_entropy
        grads = any(ctx.needs_input_grad[:3])
        xw, w = x.to(dtype), weight.to(dtype)
        if grads:
            dx = torch.empty(x.shape, dtype=dtype, device=x.device)
            dw = torch.zeros(weight.shape, dtype=acc, device=x.device)
            db = torch.zeros(bias.shape, dtype=acc, device=x.device)
        total = torch.zeros((), dtype=acc, device=x.device)
        predictions = torch.empty(len(targets), dtype=torch.long, device=x.device) if predict else None
        for start in range(0, len(targets), rows):
            end = min(start + rows, len(targets))
            target, keep = targets[start:end].clamp_min(0), scored[start:end]
            logits = (xw[start:end] @ w.t()).to(acc).add_(bias)  # (c, V)
            if predict:
                predictions[start:end] = logits.argmax(1)
            picked = logits.gather(1, target[:, None]).squeeze(1)
            top = logits.amax(1, keepdim=True)
            e = logits.sub_(top).exp_()  # in place: exp(logits - max)
            z = e.sum(1, keepdim=True)
            total += torch.where(keep, (top + z.log()).squeeze(1) - picked, 0.0).sum()
            if grads:
                g = e.div_(z)  # softmax
                g[torch.arange(end - start, device=x.device), target] -= 1.0
                g.mul_(keep.to(g.dtype)[:, None] * scale)  # d(mean loss)/d(logits); unscored rows 0
                db += g.sum(0)
                g = g.to(dtype)
                dx[start:end] = g @ w
                if dtype == acc:
                    dw.addmm_(g.t(), xw[start:end])
                else:  # the product in autocast's dtype, the sum over chunks in fp32
                    dw += (g.t() @ xw[start:end]).to(acc)
        if grads:
            ctx.save_for_backward(dx.to(x.dtype), dw.to(weight.dtype), db.to(bias.dtype))
        if predict:
            ctx.mark_non_differentiable(predictions)
        return total * scale, predictions

    @staticmethod
    def backward(ctx, grad_loss, _grad_predictions):
        dx, dw, db = ctx.saved_tensors
        return dx * grad_loss, dw * grad_loss, db * grad_loss, None, None, None, None


def linear_cross_entropy(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, targets: torch.Tensor,
                         predict: bool = False, rows: int | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``(F.cross_entropy(F.linear(x, weight, bias).float(), targets, ignore_index=IGNORE_INDEX), argmax or
    None)`` for x (N, H), weight (V, H), bias (V,), targets (N,), without the (N, V) logits.

    ``rows`` per chunk: on a GPU all of them at once (kernel launches cost more than memory there); on a CPU
    as many as keep a chunk's logits within ``LOGIT_CHUNK_BYTES``. ``predict``: also each row's argmax
    (what accuracy needs), at the price of one more pass over each chunk."""
    if rows is None:
        rows = len(targets) if x.device.type == "cuda" else max(16, LOGIT_CHUNK_BYTES // (4 * weight.shape[0]))
    device = x.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else x.dtype
    with torch.autocast(device, enabled=False):
        return _LinearCrossEntropy.apply(x, weight, bias, targets, max(1, rows), dtype, predict)
