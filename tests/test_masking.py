"""Masked-LM corruption: counts, the 80/10/10 split, specials untouched, reproducible."""
from __future__ import annotations

import math

import pytest
import torch

from pipeline.data.masking import MaskingConfig, continuation_table, example_seed, mask_examples, mask_tokens
from pipeline.names import IGNORE_INDEX

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
    chosen = labels != IGNORE_INDEX
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
    chosen = labels != IGNORE_INDEX
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
    chosen = labels != IGNORE_INDEX
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
    chosen = labels != IGNORE_INDEX
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


# --------------------------------------------------------------------------- #
# On real text: every example of WikiText-2 valid (~250k word pieces)
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def wiki_batch(wikitext, tmp_path_factory):
    from pipeline.data.datamodule import pad_collate
    from pipeline.data.pairs import write_examples
    from pipeline.data.shards import PairsDataset
    from pipeline.settings import PairsSettings

    ids = wikitext.ids
    out = tmp_path_factory.mktemp("wiki_pairs") / "p"
    pairs = PairsSettings(format="nsp_pairs", max_seq_length=128, short_seq_prob=0.1, dupe_factor=1,
                          shard_tokens=250_000)
    write_examples(wikitext.corpus, out, pairs, seed=12345, cls_id=ids["cls"], sep_id=ids["sep"], progress=False)
    ds = PairsDataset(out)
    batch = pad_collate([ds[i] for i in range(len(ds))])
    input_ids = batch["input_ids"]
    special = (batch["attention_mask"] == 0) | (input_ids == ids["cls"]) | (input_ids == ids["sep"])
    assert int(batch["attention_mask"].sum()) >= 100_000
    return input_ids, special, ids, continuation_table(wikitext.vocab)


@pytest.mark.parametrize("mask, same, rnd", PROCEDURES)
def test_masking_procedures_on_real_text(wiki_batch, mask, same, rnd):
    input_ids, special, ids, _ = wiki_batch
    V_real = len(wiki_batch[3])
    # A cap that never binds, so the chosen share is masked_lm_prob itself.
    cfg = MaskingConfig(mask_token_prob=mask, keep_prob=same, random_token_prob=rnd, max_predictions_per_seq=128)
    corrupted, labels = mask_tokens(input_ids, special, cfg, mask_id=ids["mask"], vocab_size=V_real,
                                    generator=torch.Generator().manual_seed(11))
    chosen = labels != IGNORE_INDEX
    assert not (chosen & special).any()  # [CLS], [SEP] and padding are never chosen
    assert torch.equal(corrupted[~chosen], input_ids[~chosen])
    lengths = (input_ids != 0).sum(1)  # counts [CLS] and [SEP], as the original does
    assert torch.equal(chosen.sum(1), torch.clamp(torch.round(lengths * 0.15), min=1).long())
    assert abs(chosen.sum().item() / lengths.sum().item() - 0.15) < 0.002
    n = chosen.sum().item()
    got = {
        "mask": (corrupted[chosen] == ids["mask"]).float().mean().item(),
        "same": (corrupted[chosen] == input_ids[chosen]).float().mean().item(),
    }
    got["rnd"] = 1 - got["mask"] - got["same"]
    for name, want in (("mask", mask), ("same", same), ("rnd", rnd)):
        tol = 4 * math.sqrt(max(want * (1 - want), 1e-4) / n) + 2 / V_real  # a random token may hit [MASK] or itself
        assert abs(got[name] - want) < tol, (name, got, n)


def test_whole_word_masking_never_splits_a_real_word(wiki_batch):
    input_ids, special, ids, table = wiki_batch
    assert table[input_ids].float().mean() > 0.05  # real text has plenty of ## pieces
    cfg = MaskingConfig(whole_word=True)
    corrupted, labels = mask_tokens(input_ids, special, cfg, mask_id=ids["mask"], vocab_size=len(table),
                                    continuation=table, generator=torch.Generator().manual_seed(12))
    chosen = labels != IGNORE_INDEX
    assert not (chosen & special).any()
    continues = table[input_ids] & ~special
    # A continuation piece is chosen exactly when the piece before it is (same word).
    prev_chosen = torch.zeros_like(chosen)
    prev_chosen[:, 1:] = chosen[:, :-1]
    assert torch.equal(chosen[continues], prev_chosen[continues])
    words_chosen = (chosen & ~continues).sum().item()
    assert words_chosen > 1000
    lengths = (input_ids != 0).sum(1)
    assert (chosen.sum(1) <= torch.clamp(torch.round(lengths * 0.15), 1, 20)).all()


def test_static_masks_depend_on_the_example_not_the_batch(wiki_batch):
    input_ids, special, ids, table = wiki_batch
    rows = input_ids[:16]
    cfg = MaskingConfig(static=True)
    kw = dict(mask_id=ids["mask"], vocab_size=len(table))
    seeds = [example_seed(1234, i) for i in range(16)]
    a, la = mask_examples(rows, special[:16], seeds, cfg, **kw)
    # The same examples in another order, padded further: each keeps its mask.
    order = list(reversed(range(16)))
    padded = torch.nn.functional.pad(rows[order], (0, 7))
    padded_special = torch.nn.functional.pad(special[:16][order], (0, 7), value=True)
    b, lb = mask_examples(padded, padded_special, [seeds[i] for i in order], cfg, **kw)
    assert torch.equal(b[:, :rows.shape[1]], a[order]) and torch.equal(lb[:, :rows.shape[1]], la[order])
    assert (lb[:, rows.shape[1]:] == IGNORE_INDEX).all()
    # Another seed (another stored copy of the example) gets another mask.
    c, lc = mask_examples(rows, special[:16], [example_seed(1234, i + 16) for i in range(16)], cfg, **kw)
    assert not torch.equal(lc, la)
