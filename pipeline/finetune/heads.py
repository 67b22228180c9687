"""Heads on a frozen encoder (any generation's, ``Encoder``): the paper's feature sets (Table 7), mixed from
the states of every layer.

``LayerMix`` picks, adds, concatenates or (ELMo's way) learns a mix of the
layers' states; ``FeatureHead`` classifies a text from its pooled states;
``FrozenBiLSTMTagger`` tags words from per-token states with a two-layer
BiLSTM, as the paper's feature-based NER does.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader

from pipeline.data.datamodule import pad_collate
from pipeline.model.downstream import Encoder
from pipeline.names import FEATURE_SETS


class LayerMix(nn.Module):
    """The paper's feature sets: pick, add, concatenate or (ELMo) mix the states of the layers.

    A model with fewer than four layers uses all of its states (embeddings included) for "last four".
    Input (..., L+1, H), embeddings first; output (..., width).
    """

    def __init__(self, feature_set: str, n_states: int, hidden: int):
        super().__init__()
        if feature_set not in FEATURE_SETS:
            raise ValueError(f"feature set {feature_set!r}: expected one of {', '.join(FEATURE_SETS)}")
        self.feature_set, self.last_k = feature_set, min(4, n_states)
        if feature_set == "weighted":
            self.layer_logits = nn.Parameter(torch.zeros(n_states))  # softmax -> layer weights
            self.scale = nn.Parameter(torch.ones(()))                # ELMo's gamma
        self.width = hidden * self.last_k if feature_set == "concat_last_four" else hidden

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        f = self.feature_set
        if f == "embeddings":
            return states[..., 0, :]
        if f == "last":
            return states[..., -1, :]
        if f == "second_to_last":
            return states[..., -2, :]
        if f == "sum_last_four":
            return states[..., -self.last_k:, :].sum(-2)
        if f == "concat_last_four":
            return states[..., -self.last_k:, :].flatten(-2)
        weights = torch.softmax(self.layer_logits, 0)
        return self.scale * (weights[:, None] * states).sum(-2)

    def weights(self) -> list[float] | None:
        return [round(w, 4) for w in torch.softmax(self.layer_logits, 0).tolist()] if self.feature_set == "weighted" \
            else None


class FeatureHead(nn.Module):
    """A small classifier on frozen sentence features: mix the layers, then dense-tanh-dropout-dense."""

    def __init__(self, feature_set: str, n_states: int, hidden: int, num_outputs: int, dropout: float = 0.1):
        super().__init__()
        self.mix = LayerMix(feature_set, n_states, hidden)
        self.mlp = nn.Sequential(nn.Linear(self.mix.width, hidden), nn.Tanh(), nn.Dropout(dropout),
                                 nn.Linear(hidden, num_outputs))

    @property
    def layer_logits(self) -> torch.Tensor:
        return self.mix.layer_logits

    def features(self, states: torch.Tensor) -> torch.Tensor:
        """(B, L+1, H) pooled states of every layer -> (B, width)."""
        return self.mix(states)

    def forward(self, states: torch.Tensor) -> torch.Tensor:
        return self.mlp(self.mix(states))


@torch.no_grad()
def pooled_states(encoder: Encoder, data: list[dict], batch_size: int = 64,
                  causal: bool = False) -> dict[str, torch.Tensor]:
    """Each example's summary at every layer, the token layer first, by pooling (``pipeline.names.POOLINGS``):
    ``mean``, the mean state over its real tokens; ``token``, the state of its summary token ([CLS], or in a
    left-to-right model the last real token). Each (N, L+1, H); one pass of the encoder for both."""
    encoder.eval()
    means, tokens = [], []
    for batch in DataLoader(data, batch_size=batch_size, collate_fn=pad_collate):
        mask = batch["attention_mask"]
        states = torch.stack(encoder(batch["input_ids"], batch["token_type_ids"], mask), 1)  # (B, L+1, T, H)
        m = mask[:, None, :, None].to(states.dtype)                                         # (B, 1, T, 1)
        means.append((states * m).sum(2) / m.sum(2))                                        # (B, L+1, H)
        at = mask.sum(1) - 1 if causal else torch.zeros(len(mask), dtype=torch.long)       # (B,)
        tokens.append(states[torch.arange(len(mask)), :, at])                               # (B, L+1, H)
    return {"mean": torch.cat(means), "token": torch.cat(tokens)}


class FrozenBiLSTMTagger(nn.Module):
    """The paper's feature-based NER: frozen BERT states -> layer mix -> 2-layer BiLSTM -> tags (per token
    scores of any kind: SQuAD's span head is one with a start and an end score and a single, narrower layer)."""

    def __init__(self, encoder: Encoder, feature_set: str, num_labels: int, lstm_hidden: int | None = None,
                 lstm_layers: int = 2):
        super().__init__()
        self.encoder = encoder.eval()
        for p in self.encoder.parameters():
            p.requires_grad_(False)
        self.mix = LayerMix(feature_set, encoder.n_states, encoder.hidden_size)
        hidden = lstm_hidden or encoder.hidden_size
        self.lstm = nn.LSTM(self.mix.width, hidden, num_layers=lstm_layers, bidirectional=True, batch_first=True)
        self.classifier = nn.Linear(2 * hidden, num_labels)

    def train(self, mode: bool = True):
        super().train(mode)
        self.encoder.eval()  # frozen means no dropout either
        return self

    def forward(self, input_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        with torch.no_grad():
            states = torch.stack(self.encoder(input_ids, token_type_ids, attention_mask), 2)  # (B, T, L+1, H)
        x = self.mix(states)  # (B, T, width)
        lengths = (attention_mask.sum(1) if attention_mask is not None else
                   torch.full((x.shape[0],), x.shape[1])).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=x.shape[1])
        return self.classifier(h)  # (B, T, C)
