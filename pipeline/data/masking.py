"""Masked-LM corruption: BERT's 15% with 80/10/10, vectorised over a batch.

Used at batch time, one function for both regimes: dynamic masking (a fresh
mask every time a batch is drawn: ``mask_tokens`` with a per-batch generator)
and static masking (the same mask for an example every time it is drawn, as
if it had been stored with the data: ``mask_examples``, one generator per
example, seeded by the example's index).
Follows the original recipe: per sequence, ``round(len * mlm_probability)``
positions (at least 1, at most ``max_predictions_per_seq``) are chosen among
the non-special tokens; each chosen token becomes ``[MASK]`` with probability
``mask_token_prob``, a random vocabulary token with ``random_token_prob``, and
stays unchanged otherwise. Labels hold the original id at chosen positions and
``IGNORE_INDEX`` elsewhere. With whole-word masking the ``##`` pieces of a word are
chosen together (the 80/10/10 decision stays per piece, as in the original).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from pipeline.names import IGNORE_INDEX



@dataclass(frozen=True)
class MaskingConfig:
    mlm_probability: float = 0.15
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    keep_prob: float = 0.1
    max_predictions_per_seq: int | None = 20   # None: no cap beyond round(len * mlm_probability)
    whole_word: bool = False
    static: bool = False


def continuation_table(vocab: list[str]) -> torch.Tensor:
    """(V,) bool: True for word pieces that continue a word (``##...``), for whole-word masking."""
    return torch.tensor([t.startswith("##") for t in vocab], dtype=torch.bool)


def _choose_whole_words(scores: torch.Tensor, candidates: torch.Tensor, continues: torch.Tensor,
                        n_pred: torch.Tensor) -> torch.Tensor:
    """Choose whole words in random order while their pieces fit in ``n_pred`` (B,).

    Selection stops at the first word that would overflow the budget (the original
    skips it and tries the next, so it sometimes fills the budget a little better).
    Pieces cut from their word's start by truncation are never chosen.
    """
    B, T = scores.shape
    starts = candidates & ~continues                                   # first piece of each word
    pos = torch.arange(T).expand(B, T)
    start_of = torch.cummax(torch.where(continues, torch.zeros_like(pos), pos), dim=1).values  # (B, T)
    word_len = torch.zeros(B, T, dtype=torch.long).scatter_add_(1, start_of, candidates.long())
    scores = scores.masked_fill(~starts, 2.0)
    order = scores.argsort(dim=1)                                      # word starts first, shuffled
    fits = (word_len.gather(1, order).cumsum(1) <= n_pred[:, None]) & (scores.gather(1, order) < 2.0)
    chosen_start = torch.zeros(B, T, dtype=torch.bool).scatter_(1, order, fits)
    return chosen_start.gather(1, start_of) & candidates


def mask_tokens(input_ids: torch.Tensor, special: torch.Tensor, cfg: MaskingConfig, *, mask_id: int,
                vocab_size: int, generator: torch.Generator, pad_id: int = 0,
                continuation: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Corrupt ``input_ids`` (B, T) for masked LM.

    ``special`` (B, T) is True at [CLS], [SEP] and padding, which are never chosen.
    ``continuation`` (V,) marks ``##`` pieces; it is required when ``cfg.whole_word``.
    Returns ``(corrupted (B, T), labels (B, T))``. All randomness comes from
    ``generator`` (a CPU generator), so a batch's mask depends only on its seed.
    """
    B, T = input_ids.shape
    device = input_ids.device
    cpu_ids, cpu_special = input_ids.cpu(), special.cpu()
    # Sequence length counts [CLS]/[SEP] (as the original does) but not padding.
    lengths = (cpu_ids != pad_id).sum(1)
    candidates = ~cpu_special
    n_pred = torch.clamp(torch.round(lengths.float() * cfg.mlm_probability).long(), min=1,
                         max=cfg.max_predictions_per_seq)
    n_pred = torch.minimum(n_pred, candidates.sum(1))

    scores = torch.rand((B, T), generator=generator)
    if cfg.whole_word:
        if continuation is None:
            raise ValueError("whole-word masking needs the vocabulary's continuation table")
        chosen = _choose_whole_words(scores, candidates, continuation[cpu_ids] & candidates, n_pred)
    else:
        # A random ranking of the candidates; the first n_pred of each row are chosen.
        scores[~candidates] = 2.0
        ranks = scores.argsort(dim=1).argsort(dim=1)
        chosen = ranks < n_pred[:, None]  # (B, T)

    action = torch.rand((B, T), generator=generator)
    to_mask = chosen & (action < cfg.mask_token_prob)
    to_random = chosen & (action >= cfg.mask_token_prob) & (action < cfg.mask_token_prob + cfg.random_token_prob)
    random_ids = torch.randint(vocab_size, (B, T), generator=generator)

    corrupted = cpu_ids.clone()
    corrupted[to_mask] = mask_id
    corrupted[to_random] = random_ids[to_random]
    labels = torch.where(chosen, cpu_ids, torch.full_like(cpu_ids, IGNORE_INDEX))
    return corrupted.to(device), labels.to(device)


def example_seed(seed: int, index: int) -> int:
    """The mask seed of stored example ``index`` under static masking (stable across processes)."""
    return ((seed * 1_000_003 + 7) * 2_000_003 + index) % (2**63 - 1)


def mask_examples(input_ids: torch.Tensor, special: torch.Tensor, seeds: list[int], cfg: MaskingConfig, *,
                  mask_id: int, vocab_size: int, pad_id: int = 0,
                  continuation: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``mask_tokens`` row by row, each row with its own seed and without its padding.

    A row's mask then depends on its seed and its tokens only -- not on the batch
    it lands in or how far that batch is padded -- which is what static masking needs.
    """
    corrupted = input_ids.clone()
    labels = torch.full_like(input_ids, IGNORE_INDEX)
    lengths = (input_ids != pad_id).sum(1).tolist()
    for b, (n, seed) in enumerate(zip(lengths, seeds)):
        g = torch.Generator().manual_seed(int(seed))
        c, lab = mask_tokens(input_ids[b:b + 1, :n], special[b:b + 1, :n], cfg, mask_id=mask_id,
                             vocab_size=vocab_size, generator=g, pad_id=pad_id, continuation=continuation)
        corrupted[b, :n], labels[b, :n] = c[0], lab[0]
    return corrupted, labels
