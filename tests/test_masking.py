"""Masked-LM corruption: counts, the 80/10/10 split, specials untouched, reproducible."""
from __future__ import annotations

import torch

from pipeline.masking import IGNORE, MaskingConfig, mask_tokens

MASK, CLS, SEP, V = 4, 2, 3, 1000


def batch(B=512, T=128, pad_from=100):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, V, (B, T), generator=g)
    ids[:, 0], ids[:, 60], ids[:, pad_from - 1] = CLS, SEP, SEP
    ids[B // 2:, pad_from:] = 0  # half the batch is padded
    special = (ids == CLS) | (ids == SEP) | (ids == 0)
    return ids, special


def test_counts_and_proportions():
    ids, special = batch()
    cfg = MaskingConfig()
    corrupted, labels = mask_tokens(ids, special, cfg, mask_id=MASK, vocab_size=V,
                                    generator=torch.Generator().manual_seed(1))
    chosen = labels != IGNORE
    assert not (chosen & special).any()
    assert torch.equal(labels[chosen], ids[chosen])
    lengths = (ids != 0).sum(1)
    expected = torch.clamp(torch.round(lengths * 0.15), 1, 20)
    assert torch.equal(chosen.sum(1), expected.long())
    n = chosen.sum().item()
    masked = (corrupted[chosen] == MASK).float().mean().item()
    same = (corrupted[chosen] == ids[chosen]).float().mean().item()
    # binomial standard error at n ~ 9,000 is ~0.004 (80%) and ~0.003 (10%)
    assert abs(masked - 0.8) < 0.02 and abs(same - (0.1 + 0.1 / V)) < 0.015, (n, masked, same)
    assert torch.equal(corrupted[~chosen], ids[~chosen])


def test_always_mask_procedure_and_cap():
    ids, special = batch()
    cfg = MaskingConfig(mlm_probability=0.5, mask_token_prob=1.0, random_token_prob=0.0, keep_prob=0.0,
                        max_predictions_per_seq=7)
    corrupted, labels = mask_tokens(ids, special, cfg, mask_id=MASK, vocab_size=V,
                                    generator=torch.Generator().manual_seed(2))
    chosen = labels != IGNORE
    assert (chosen.sum(1) == 7).all()
    assert (corrupted[chosen] == MASK).all()


def test_same_generator_seed_same_mask_new_seed_new_mask():
    ids, special = batch(B=8)
    run = lambda s: mask_tokens(ids, special, MaskingConfig(), mask_id=MASK, vocab_size=V,  # noqa: E731
                                generator=torch.Generator().manual_seed(s))
    a, b, c = run(3), run(3), run(4)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[1], c[1])
