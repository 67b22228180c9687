"""ELMo's language model (Peters et al., 2018): two LSTM language models, one reading left to right, one right
to left, sharing only their token embedding and their softmax.

Each direction is a two-layer LSTM with a residual connection around the second
layer. The forward LM predicts each next token from what precedes it; the
backward LM each previous token from what follows it; the two are trained
jointly but never see each other's states (unlike BERT's one bidirectional
encoder). Downstream, a token's representation is a learned mix of three
layers, each the concatenation of both directions: the token embedding (the
same vector twice), the first LSTM layer, the second.

The original uses character convolutions for tokens and 4096-cell LSTMs; here
tokens are the lab's WordPiece vocabulary and the sizes are the demo's, so the
pretraining cost compares with the demo Transformer's. To keep the softmax
comparable too, the loss is taken at a random ``predict_fraction`` of the
positions (an unbiased estimate of the full LM loss), as a masked LM predicts 15%.

Shapes: B batch, T sequence length, d embedding size, h LSTM size, V vocabulary.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.model_config import ElmoConfig


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each sequence of ``x`` (B, T, ...) within its length, padding left in place at the end."""
    B, T = x.shape[:2]
    pos = torch.arange(T, device=x.device).expand(B, T)
    idx = torch.where(pos < lengths[:, None], lengths[:, None] - 1 - pos, pos)  # (B, T)
    return x.gather(1, idx.view(B, T, *([1] * (x.dim() - 2))).expand_as(x))


class DirectionalLM(nn.Module):
    """One direction: LSTM layers over the (already ordered) embeddings, a residual connection after the first."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.LSTM(config.embedding_size if i == 0 else config.lstm_size, config.lstm_size, batch_first=True)
            for i in range(config.num_layers))
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> list[torch.Tensor]:
        """(B, T, d) in reading order -> each layer's states (B, T, h); state t has read tokens 0..t only."""
        states = []
        for i, lstm in enumerate(self.layers):
            h, _ = lstm(self.dropout(x))
            x = h + x if i > 0 else h  # residual around every layer after the first
            states.append(x)
        return states


class ElmoLM(nn.Module):
    """The biLM: a shared embedding, a forward and a backward ``DirectionalLM``, a shared softmax."""

    def __init__(self, config: ElmoConfig):
        super().__init__()
        self.config = config
        self.embeddings = nn.Embedding(config.vocab_size, config.embedding_size, padding_idx=config.pad_token_id)
        self.forward_lm = DirectionalLM(config)
        self.backward_lm = DirectionalLM(config)
        self.softmax = nn.Linear(config.lstm_size, config.vocab_size)
        nn.init.normal_(self.embeddings.weight, std=0.02)
        with torch.no_grad():
            self.embeddings.weight[config.pad_token_id].zero_()

    def directions(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None):
        """(embeddings (B, T, d), forward states, backward states): lists of (B, T, h), position-aligned.

        Forward state t has read tokens 0..t; backward state t has read tokens t..end.
        """
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        lengths = attention_mask.sum(1)
        e = self.embeddings(input_ids)
        fwd = self.forward_lm(e)
        bwd = [reverse_padded(s, lengths) for s in self.backward_lm(reverse_padded(e, lengths))]
        return e, fwd, bwd

    def layer_states(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                     attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        """ELMo's layers for downstream use: L+1 x (B, T, 2h), the token layer first (its vector twice).
        Segments mean nothing to it."""
        e, fwd, bwd = self.directions(input_ids, attention_mask)
        return (torch.cat([e, e], -1), *(torch.cat([f, b], -1) for f, b in zip(fwd, bwd)))

    def lm_loss(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, predict: torch.Tensor,
                target_ok: torch.Tensor | None = None):
        """(loss, accuracy, predictions) of both LMs at the positions ``predict`` (B, T) bool marks.

        At a marked position t the forward LM predicts token t+1 and the backward LM token t-1, when
        that token exists and ``target_ok`` (default: every real token) allows it as a target. The loss
        is the mean over both directions' predictions.
        """
        _, fwd, bwd = self.directions(input_ids, attention_mask)
        ok = attention_mask.bool() if target_ok is None else target_ok
        nxt = torch.zeros_like(ok)
        nxt[:, :-1] = ok[:, 1:]
        prv = torch.zeros_like(ok)
        prv[:, 1:] = ok[:, :-1]
        fwd_at, bwd_at = predict & nxt, predict & prv
        logits = torch.cat([self.softmax(fwd[-1][fwd_at]), self.softmax(bwd[-1][bwd_at])])   # (N, V)
        targets = torch.cat([input_ids[:, 1:][fwd_at[:, :-1]], input_ids[:, :-1][bwd_at[:, 1:]]])
        loss = F.cross_entropy(logits.float(), targets)
        return loss, (logits.argmax(-1) == targets).float().mean(), targets.numel()
