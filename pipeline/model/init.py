"""BERT's initialisations: Hugging Face's (``init_weights``: N(0, std) weights, zero biases, identity LayerNorm),
and the local one (``attention_init=local``, ``local_attention_init``), whose first layers read each piece's
neighbours from the first step. ``pipeline.model.bert`` applies them as it builds a network.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from pipeline.model_config import LOCAL_FREQUENCIES


def init_weights(module: nn.Module, std: float) -> None:
    """Hugging Face's BERT initialisation: N(0, std) weights, zero biases, identity LayerNorm."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=std)
        if module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


# The local initialisation: which neighbour each head of the first layers reads; a left-to-right model's heads
# read the pieces before (a later one is masked from them).
LOCAL_HEADS = ((-1, 1), (-2, 2))
LOCAL_HEADS_CAUSAL = ((-1, -2), (-3, -4))
LOCAL_AMPLITUDE = 0.08  # the position code's amplitude in the position table (token embeddings: N(0, 0.02))
LOCAL_SHARPNESS = 0.5   # attention logit per unit of the code's kernel: at init the neighbour's logit is 8, the next
                        # ones' about 5, the rest's about 0


def position_code(positions: int, frequencies: int = LOCAL_FREQUENCIES) -> tuple[torch.Tensor, torch.Tensor]:
    """(positions, 2F) sine/cosine pairs at F frequencies from pi down to pi / positions, and the (F,) frequencies.
    The dot product of the codes of positions i and j, sum_f cos(w_f (i - j)), is F = 16 at i = j, 10 to 11 at
    |i - j| = 1 and at most that elsewhere (0.4 on average) for 128 and for 512 positions."""
    w = math.pi * torch.logspace(0, -math.log10(positions), frequencies, dtype=torch.float64)  # (F,)
    angles = torch.arange(positions, dtype=torch.float64)[:, None] * w  # (P, F)
    return torch.stack((angles.cos(), angles.sin()), dim=-1).reshape(positions, 2 * frequencies), w


def _shift(w: torch.Tensor, delta: int) -> torch.Tensor:
    """(2F, 2F) block-diagonal rotation taking the code of position i to that of i + delta."""
    F_ = len(w)
    c, s = (w * delta).cos(), (w * delta).sin()
    R = torch.zeros(2 * F_, 2 * F_, dtype=torch.float64)
    for f in range(F_):
        R[2 * f:2 * f + 2, 2 * f:2 * f + 2] = torch.stack((torch.stack((c[f], -s[f])), torch.stack((s[f], c[f]))))
    return R


@torch.no_grad()
def local_attention_init(model: nn.Module) -> None:
    """Fresh weights whose first layers read each piece's neighbours from the first step (``attention_init=local``).

    Why: a masked LM learns to predict from its neighbours only once its attention has found them through the
    learned position table. On 128-position sequences a small model's attention is spread over 128 keys and
    each of the 128 rows of the table gets a small share of the data, so on a CPU budget it never finds them
    and stays at the unigram plateau (docs/recipe.md). Here the position table starts as a code (``position_code``)
    in the last 2F dimensions of the hidden state, where token and segment embeddings start at zero, and in
    each of the first ``len(LOCAL_HEADS)`` layers the first heads' queries and keys read that code so that a
    head attends to the piece ``delta`` positions away (``LOCAL_HEADS``; ``LOCAL_HEADS_CAUSAL`` left to right) (the logit of key j for query i is ``LOCAL_SHARPNESS *
    sum_f cos(w_f (i + delta - j))``, after the embeddings' LayerNorm) at every position and length; their other
    dimensions, and everything else, keep BERT's initialisation. Every weight stays trainable, and the network
    is a plain BERT (learned absolute positions) that Hugging Face loads unchanged.
    """
    config = model.config
    emb = model.embeddings
    P, H, hd = config.max_position_embeddings, config.hidden_size, config.head_size
    code, w = position_code(P)
    S = slice(H - code.shape[1], H)  # the code's dimensions
    emb.word_embeddings.weight[:, S] = 0
    emb.token_type_embeddings.weight[:, S] = 0
    emb.position_embeddings.weight.zero_()
    emb.position_embeddings.weight[:, S] = (LOCAL_AMPLITUDE * code).float()
    # After the embeddings' LayerNorm the code is multiplied by amplitude / std of the summed embedding.
    var = (emb.word_embeddings.weight.pow(2).mean() + emb.token_type_embeddings.weight.pow(2).mean()).item()
    gain = LOCAL_AMPLITUDE / math.sqrt(var + LOCAL_AMPLITUDE ** 2 * code.pow(2).sum(1).mean().item() / H)
    b = math.sqrt(LOCAL_SHARPNESS * math.sqrt(hd)) / gain  # q.k / sqrt(hd) = b^2 gain^2 code_i R^T code_j / sqrt(hd)
    for layer, deltas in zip(model.encoder.layer, LOCAL_HEADS_CAUSAL if config.causal else LOCAL_HEADS):
        attention = layer.attention.self
        for head, delta in enumerate(deltas[:config.num_attention_heads]):
            rows = slice(head * hd, head * hd + code.shape[1])
            attention.query.weight[rows] = 0
            attention.key.weight[rows] = 0
            attention.query.weight[rows, S] = (b * _shift(w, delta)).float()
            attention.key.weight[rows, S] = b * torch.eye(code.shape[1])
