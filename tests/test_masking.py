"""Masked-LM corruption: counts, the 80/10/10 split, specials untouched, reproducible."""
from __future__ import annotations

import torch

import pytest

from pipeline.masking import IGNORE, MaskingConfig, continuation_table, mask_tokens

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


# The masking procedures of BERT's Table 8 as (MASK, SAME, RND) shares of the chosen tokens.
PROCEDURES = [(0.8, 0.1, 0.1), (1.0, 0.0, 0.0), (0.8, 0.0, 0.2), (0.8, 0.2, 0.0), (0.0, 0.2, 0.8), (0.0, 0.0, 1.0)]


@pytest.mark.parametrize("mask, same, rnd", PROCEDURES)
def test_every_masking_procedure_of_the_paper(mask, same, rnd):
    ids, special = batch()
    cfg = MaskingConfig(mask_token_prob=mask, keep_prob=same, random_token_prob=rnd)
    corrupted, labels = mask_tokens(ids, special, cfg, mask_id=MASK, vocab_size=V,
                                    generator=torch.Generator().manual_seed(5))
    chosen = labels != IGNORE
    got_mask = (corrupted[chosen] == MASK).float().mean().item()
    got_same = (corrupted[chosen] == ids[chosen]).float().mean().item()
    # a random token equals the original (or [MASK]) with probability ~1/V
    assert abs(got_mask - mask - rnd / V) < 0.02 and abs(got_same - same - rnd / V) < 0.02
    assert abs((1 - got_mask - got_same) - rnd) < 0.02


def test_whole_word_masking_takes_all_pieces_of_a_word():
    vocab = [f"w{i}" for i in range(V)]
    for i in range(500, V):  # half the vocabulary continues a word
        vocab[i] = f"##p{i}"
    table = continuation_table(vocab)
    ids, special = batch()
    cfg = MaskingConfig(whole_word=True, max_predictions_per_seq=40)
    corrupted, labels = mask_tokens(ids, special, cfg, mask_id=MASK, vocab_size=V, continuation=table,
                                    generator=torch.Generator().manual_seed(6))
    chosen = labels != IGNORE
    for row in range(0, ids.shape[0], 7):
        word = -1
        words: dict[int, set[bool]] = {}
        for t in range(ids.shape[1]):
            if special[row, t]:
                word = -1
                continue
            if not table[ids[row, t]] or word == -1:
                word = t
            words.setdefault(word, set()).add(bool(chosen[row, t]))
        assert all(len(flags) == 1 for flags in words.values()), row  # all pieces chosen, or none
    lengths = (ids != 0).sum(1)
    assert (chosen.sum(1) <= torch.clamp(torch.round(lengths * 0.15), 1, 40)).all()
    assert chosen.sum(1).float().mean() > 0.8 * torch.round(lengths * 0.15).float().mean()
