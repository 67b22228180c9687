"""The lineage BERT grew out of: word2vec's and ELMo's models and losses, their use downstream, and the probe."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pipeline.config import compose, validate
from pipeline.errors import ConfigError
from pipeline.model_config import ElmoConfig, StaticConfig, build_config
from pipeline.model.elmo import ElmoLM, reverse_padded
from pipeline.model.static import StaticEmbeddings, context_windows, noise_distribution, shifted
from pipeline.report.probe import anisotropy, frequent_words, occurrences, self_similarity, window


def _reference_w2v_loss(model: StaticEmbeddings, ids: torch.Tensor, predict: torch.Tensor, noise: torch.Tensor):
    """word2vec's negative-sampling loss, one prediction at a time, as the papers write it."""
    W, C, w = model.embeddings.weight, model.context.weight, model.config.window
    losses = []
    B, T = ids.shape
    for b in range(B):
        for t in range(T):
            if not predict[b, t]:
                continue
            ctx = [ids[b, t + o] for o in range(-w, w + 1) if o and 0 <= t + o < T and predict[b, t + o]]
            if not ctx:
                continue
            if model.config.kind == "cbow":
                h = torch.stack([W[c] for c in ctx]).mean(0)
                losses.append(-F.logsigmoid(h @ C[ids[b, t]]) - sum(F.logsigmoid(-(h @ C[n])) for n in noise[b, t]))
            else:
                for c in ctx:
                    losses.append(-F.logsigmoid(W[ids[b, t]] @ C[c])
                                  - sum(F.logsigmoid(-(W[ids[b, t]] @ C[n])) for n in noise[b, t]))
    return torch.stack(losses).mean()


@pytest.mark.parametrize("kind", ["cbow", "skipgram"])
def test_word2vec_loss_is_the_reference_computation(kind):
    torch.manual_seed(0)
    model = StaticEmbeddings(StaticConfig(vocab_size=30, embedding_size=8, kind=kind, window=2, negatives=3))
    torch.nn.init.normal_(model.context.weight, std=0.3)  # word2vec starts it at zero: make the test see it
    ids = torch.randint(5, 30, (2, 9))
    predict = torch.ones_like(ids, dtype=torch.bool)
    predict[0, 0] = predict[1, 7:] = False  # [CLS], padding: never predicted, never context
    noise = torch.randint(5, 30, (2, 9, 3))
    torch.testing.assert_close(model.loss(ids, predict, noise), _reference_w2v_loss(model, ids, predict, noise))


def test_context_windows_stop_at_the_edges_and_at_what_is_not_text():
    real = torch.tensor([[True, True, True, False]])
    win = context_windows(real, 1)  # offsets -1, +1
    assert win[0].tolist() == [[False, True], [True, True], [True, False], [False, False]]
    assert shifted(torch.tensor([[1, 2, 3]]), 1)[0].tolist() == [[0, 2], [1, 3], [2, 0]]


def test_noise_follows_the_unigram_distribution_to_the_three_quarters():
    p = noise_distribution(torch.tensor([0, 16, 81]))
    assert p.tolist() == pytest.approx([0, 8 / 35, 27 / 35])


def test_elmo_forward_lm_never_sees_the_future_nor_the_backward_lm_the_past():
    torch.manual_seed(0)
    model = ElmoLM(ElmoConfig(vocab_size=40, embedding_size=16, lstm_size=16, dropout=0.0)).eval()
    ids = torch.randint(5, 40, (2, 12))
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0
    _, fwd, bwd = model.directions(ids, mask)
    t = 5
    changed = ids.clone()
    changed[:, t + 1:] = torch.randint(5, 40, (2, 12 - t - 1))  # the future of position t
    _, fwd2, bwd2 = model.directions(changed, mask)
    for a, b in zip(fwd, fwd2):
        torch.testing.assert_close(a[:, :t + 1], b[:, :t + 1])  # the forward LM up to t: unchanged
    assert not torch.allclose(bwd[-1][:, :t + 1], bwd2[-1][:, :t + 1])  # the backward LM reads the future
    changed = ids.clone()
    changed[:, :t] = torch.randint(5, 40, (2, t))  # the past of position t
    _, fwd3, bwd3 = model.directions(changed, mask)
    for a, b in zip(bwd, bwd3):
        torch.testing.assert_close(a[0, t:], b[0, t:])  # the backward LM from t on: unchanged
        torch.testing.assert_close(a[1, t:9], b[1, t:9])  # (within the second sequence's length)
    assert not torch.allclose(fwd[-1][:, t:], fwd3[-1][:, t:])


def test_elmo_lm_loss_is_the_reference_computation():
    torch.manual_seed(0)
    model = ElmoLM(ElmoConfig(vocab_size=30, embedding_size=8, lstm_size=8, dropout=0.0)).eval()
    ids = torch.randint(5, 30, (2, 7))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    predict = torch.zeros_like(ids, dtype=torch.bool)
    predict[0, [1, 3]] = predict[1, [0, 4]] = True
    loss, _, n = model.lm_loss(ids, mask, predict)
    _, fwd, bwd = model.directions(ids, mask)
    terms = []
    for b, t in ((0, 1), (0, 3), (1, 0), (1, 4)):
        if t + 1 < 7 and mask[b, t + 1]:
            terms.append(F.cross_entropy(model.softmax(fwd[-1][b, t])[None], ids[b, t + 1][None]))
        if t >= 1:
            terms.append(F.cross_entropy(model.softmax(bwd[-1][b, t])[None], ids[b, t - 1][None]))
    assert n == len(terms)
    torch.testing.assert_close(loss, torch.stack(terms).mean())


def test_reverse_padded_reverses_each_sequence_within_its_length():
    x = torch.tensor([[1, 2, 3, 0], [4, 5, 0, 0]])
    assert reverse_padded(x, torch.tensor([3, 2])).tolist() == [[3, 2, 1, 0], [5, 4, 0, 0]]


def test_a_static_model_s_self_similarity_is_exactly_one():
    vector = np.random.default_rng(0).normal(size=(1, 1, 16))
    states = np.repeat(vector, 7, axis=0)  # one vector for every occurrence, whatever the sentence
    assert self_similarity(states) == pytest.approx([1.0])
    contextual = np.random.default_rng(1).normal(size=(7, 2, 16))
    assert self_similarity(contextual)[0] < 0.5
    per_word = {"a": np.ones((3, 1, 4)), "b": -np.ones((3, 1, 4))}
    assert anisotropy(per_word, 10, 0) == pytest.approx([-1.0])


def test_occurrences_find_whole_words_in_any_case_and_mark_capitals():
    found = occurrences(["Lot dwelt in the cities.", "They cast lots; the lot fell.", "A pilot."], "lot", 10, 0)
    assert sorted((s[:4], capital) for s, _, capital in found) == [("Lot ", True), ("They", False)]


def test_the_probe_s_frequent_words_are_counted_by_rule_beside_the_listed_ones():
    """Whole words in any case, the most frequent first and ties alphabetical; stop words, words under three
    letters, numbers and the words already listed are left out."""
    sentences = ["The Lord said unto Moses: go.", "And the LORD spake; Moses went.", "Aaron went, and Aaron said.",
                 "In 1611 the king said so."]
    assert frequent_words(sentences, 3) == ["said", "aaron", "lord"]
    assert frequent_words(sentences, 3, besides=["Lord"]) == ["said", "aaron", "moses"]
    assert frequent_words(sentences, 0) == []
    assert frequent_words(sentences, 100)[3:] == ["moses", "went", "king", "spake", "unto"]
    with pytest.raises(ConfigError, match=r"corpus\.probe\.most_frequent=-1 is not allowed"):
        validate(compose(["corpus.probe.most_frequent=-1"]))


def test_a_sentence_longer_than_the_model_s_positions_is_read_as_the_window_around_the_word():
    ids = list(range(200))
    assert window(ids, [3, 4], 128) == (ids[:128], [3, 4])  # near the start: the first 128 pieces
    cut, at = window(ids, [100, 101], 128)
    assert len(cut) == 128 and [cut[p] for p in at] == [100, 101] and cut[0] == 37  # centred on the word
    cut, at = window(ids, [198, 199], 128)
    assert cut == ids[72:] and at == [126, 127]  # near the end: the last 128
    assert window(ids[:50], [10], 128) == (ids[:50], [10]) and window(ids, [150], None) == (ids, [150])


def test_objectives_need_their_architecture_and_the_lineage_family_composes():
    validate(compose(["objective=cbow", "model=word2vec"]))
    validate(compose(["objective=elmo", "model=elmo"]))
    with pytest.raises(ConfigError, match="objective.lm=cbow is not allowed with model.architecture=bert"):
        validate(compose(["objective=cbow"]))
    with pytest.raises(ConfigError, match="model.embedding_size=64 is not allowed: expected model.lstm_size=128"):
        validate(compose(["objective=elmo", "model=elmo", "model.embedding_size=64"]))
    cfg = compose(["grid=lineage", "experiment=tiny"])
    assert list(cfg.grid.pretrain) == ["cbow", "skipgram", "elmo", "ltr"] and "lineage" in cfg.grid.families
    assert isinstance(build_config({"architecture": "word2vec", "embedding_size": 8}, 100, "skipgram"), StaticConfig)


def test_train_flops_per_token_count_each_generation_s_arithmetic():
    bert = build_config(dict(compose().model), 8000, "masked")
    elmo = build_config(dict(compose(["model=elmo"]).model), 8000, "bilm")
    w2v = build_config(dict(compose(["model=word2vec"]).model), 8000, "cbow")
    assert w2v.train_flops_per_token(128) < bert.train_flops_per_token(128, 0.15) / 50
    assert 0.5 < elmo.train_flops_per_token(128) / bert.train_flops_per_token(128, 0.15) < 2  # comparable budgets
    assert math.isclose(bert.train_flops_per_token(128, 0.0),
                        3 * 2 * (2 * (4 * 128 * 128 + 2 * 128 * 512) + 2 * 2 * 128 * 128))
