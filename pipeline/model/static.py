"""Static word embeddings (Mikolov et al., 2013): one vector per token, whatever its context.

word2vec learns two tables: the vectors of the words themselves (``embeddings``,
what downstream tasks use) and the vectors words have as context
(``context``). A language-modelling-style task trains them:

* CBOW: the mean of the ``window`` tokens on either side predicts the token between them;
* skip-gram: each token predicts each token within ``window`` of it.

Either prediction is scored by negative sampling: the true token against
``negatives`` tokens drawn from the unigram distribution raised to 3/4, each a
logistic regression on the dot product. Units are WordPiece tokens -- the lab's
one vocabulary, so static vectors plug into the same tokenizer, tasks and heads
as every other model here; a word split into pieces is the mean of its pieces
downstream, as any sentence is.

Shapes: B batch, T sequence length, d embedding size, V vocabulary, K negatives.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.model_config import StaticConfig

def context_windows(real: torch.Tensor, window: int) -> torch.Tensor:
    """(B, T, 2w) bool: for each position, which of the ``window`` tokens before and after it are real tokens.

    Offsets run -w..-1, 1..w; a window stops at the sequence's ends and at padding.
    """
    B, T = real.shape
    offsets = [o for o in range(-window, window + 1) if o]
    out = torch.zeros(B, T, len(offsets), dtype=torch.bool, device=real.device)
    for j, o in enumerate(offsets):
        if o < 0:
            out[:, -o:, j] = real[:, :o]
        else:
            out[:, :-o, j] = real[:, o:]
    return out & real[:, :, None]


def shifted(ids: torch.Tensor, window: int) -> torch.Tensor:
    """(B, T, 2w): the token at each offset -w..-1, 1..w of each position (pad where there is none)."""
    B, T = ids.shape
    offsets = [o for o in range(-window, window + 1) if o]
    out = torch.zeros(B, T, len(offsets), dtype=ids.dtype, device=ids.device)
    for j, o in enumerate(offsets):
        if o < 0:
            out[:, -o:, j] = ids[:, :o]
        else:
            out[:, :-o, j] = ids[:, o:]
    return out


class StaticEmbeddings(nn.Module):
    """word2vec: token vectors and context vectors, trained by CBOW or skip-gram with negative sampling."""

    def __init__(self, config: StaticConfig):
        super().__init__()
        self.config = config
        V, d = config.vocab_size, config.embedding_size
        self.embeddings = nn.Embedding(V, d, padding_idx=config.pad_token_id)  # the word vectors
        self.context = nn.Embedding(V, d, padding_idx=config.pad_token_id)     # the context (output) vectors
        # word2vec's initialisation: small uniform word vectors, zero context vectors
        nn.init.uniform_(self.embeddings.weight, -0.5 / d, 0.5 / d)
        nn.init.zeros_(self.context.weight)
        with torch.no_grad():
            self.embeddings.weight[config.pad_token_id].zero_()

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """(B, T) -> (B, T, d): each token's vector, the same in every context."""
        return self.embeddings(input_ids)

    def layer_states(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                     attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor]:
        """Its one layer for downstream use: (B, T, d), whatever the context."""
        return (self(input_ids),)

    def loss(self, input_ids: torch.Tensor, predict: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """Negative-sampling loss, mean over predictions.

        ``predict`` (B, T) bool marks the tokens that are predicted (CBOW) or
        predict (skip-gram); ``noise`` (B, T, K) holds noise token ids drawn by
        the caller (K for each prediction; skip-gram reuses them for each
        context token of a centre).
        """
        w = self.config.window
        ctx_ok = context_windows(predict, w)  # (B, T, 2w): context tokens are predictable tokens too (no specials)
        ctx_ids = shifted(input_ids, w)                                        # (B, T, 2w)
        if self.config.kind == "cbow":
            vecs = self.embeddings(ctx_ids) * ctx_ok[..., None]                  # (B, T, 2w, d)
            n = ctx_ok.sum(-1, keepdim=True).clamp(min=1)
            h = vecs.sum(2) / n                                                # (B, T, d) mean of the context
            keep = predict & (ctx_ok.sum(-1) > 0)
            pos = (h * self.context(input_ids)).sum(-1)                        # (B, T)
            neg = torch.einsum("btd,btkd->btk", h, self.context(noise))        # (B, T, K)
            losses = -F.logsigmoid(pos) - F.logsigmoid(-neg).sum(-1)
            return losses[keep].mean()
        h = self.embeddings(input_ids)                                         # (B, T, d) centres
        pos = torch.einsum("btd,btjd->btj", h, self.context(ctx_ids))          # (B, T, 2w)
        neg = torch.einsum("btd,btkd->btk", h, self.context(noise))            # (B, T, K)
        losses = -F.logsigmoid(pos) - F.logsigmoid(-neg).sum(-1, keepdim=True)  # (B, T, 2w): per (centre, context)
        return losses[ctx_ok].mean()


def noise_distribution(counts: torch.Tensor, power: float = 0.75) -> torch.Tensor:
    """(V,) probabilities of drawing each token as noise: unigram counts ** 3/4, normalised (word2vec's)."""
    p = counts.double().clamp(min=0) ** power
    return (p / p.sum()).float()
