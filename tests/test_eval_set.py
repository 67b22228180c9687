"""The fixed evaluation set and the count-based floors: hand-made examples with known answers, and the
set's invariants (the same positions whatever the batching, only text scored, 80/10/10 corruption)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pipeline.data.encoded import encode_documents_to_corpus
from pipeline.data.eval_set import EvalSetConfig, build, score_floors, score_probe_floors, write
from pipeline.data.scored import KINDS, NOT_SCORED, EvalSet, row_batches
from pipeline.data.layout import WHERE, build as build_probe
from pipeline.data.ngram import FLOORS, FLOORS_OF, NgramTables
from pipeline.data.shards import FORMAT_VERSION, PairsDataset
from pipeline.errors import DataError
from pipeline.model_config import metric_prefix

PAD, CLS, SEP, MASK = 0, 2, 3, 4
VOCAB = 1000  # the held-out split's pieces are their own positions


def write_pairs(folder: Path, examples: list[list[int]], type1: list[int] | None = None) -> PairsDataset:
    """A one-shard examples folder in make_pairs' format from token lists ([CLS] ... [SEP] each)."""
    folder.mkdir(parents=True)
    lengths = np.array([len(e) for e in examples])
    offsets = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    type1 = type1 or list(lengths)
    np.save(folder / "shard-00000.tokens.npy", np.concatenate([np.array(e, np.uint16) for e in examples]))
    np.save(folder / "shard-00000.index.npy", np.stack([offsets, lengths, type1], 1).astype(np.int64))
    np.save(folder / "shard-00000.nsp.npy", np.zeros(len(examples), np.int8))
    (folder / "meta.json").write_text(json.dumps({
        "format_version": FORMAT_VERSION, "n_examples": len(examples), "n_shards": 1,
        "shard_counts": [len(examples)], "settings": {"format": "nsp_pairs"}}))
    return PairsDataset(folder)


def test_tables_predict_the_most_frequent_piece_and_back_off(tmp_path):
    # 10 after 7 twice, 11 after 7 once; between 7 and 20: 11 (once) beats nothing else; 12 is the most frequent
    train = write_pairs(tmp_path / "train", [[CLS, 7, 10, 12, SEP], [CLS, 7, 10, 12, SEP], [CLS, 7, 11, 20, SEP],
                                             [CLS, 12, 12, 13, SEP]])
    t = NgramTables.count(train, 30, special=[PAD, CLS, SEP, MASK])
    assert t.majority == 12 and t.n_counted == 12
    ctx = np.array([[CLS, 7, MASK, 20, SEP], [CLS, 7, MASK, 5, SEP], [CLS, MASK, MASK, 20, SEP],
                    [CLS, 9, MASK, 9, SEP]])
    rows, cols = np.arange(4), np.full(4, 2)
    usable = ctx != MASK

    def predict(p):
        return t.predict(p, ctx, rows, cols, usable).tolist()

    assert predict("majority") == [12, 12, 12, 12]
    assert predict("left") == [10, 10, 12, 12]         # a masked left neighbour is not read; 9 never seen
    assert predict("left_right") == [11, 10, 11, 12]   # (7, 20) seen; (7, 5) not: left; masked left: right (11 20)
    assert predict("right") == [11, 12, 11, 12]
    # two left neighbours (trigram), backing off to one; before an example's start the context is padding
    ctx2 = np.array([[CLS, 7, 10, 12, SEP], [CLS, 12, 12, 13, SEP]])
    assert t.predict("left2", ctx2, np.array([0, 1, 0]), np.array([3, 3, 1]), ctx2 != MASK).tolist() == [12, 13, 7]


def test_ties_go_to_the_smallest_piece(tmp_path):
    train = write_pairs(tmp_path / "train", [[CLS, 8, 6, SEP], [CLS, 8, 5, SEP]])
    t = NgramTables.count(train, 10, special=[PAD, CLS, SEP, MASK])
    assert t.predict("left", np.array([[CLS, 8, MASK, SEP]]), np.array([0]), np.array([2]),
                     np.ones((1, 4), bool)).tolist() == [5]


@pytest.fixture(scope="module")
def valid(tmp_path_factory):
    rng = np.random.default_rng(0)
    examples = [[CLS, *rng.integers(5, 60, n).tolist(), SEP] for n in rng.integers(10, 40, 300)]
    return write_pairs(tmp_path_factory.mktemp("valid") / "valid", examples)


def test_the_set_scores_text_only_in_the_recipe_s_shares_and_does_not_depend_on_its_size(valid):
    a = build(valid, EvalSetConfig(seed=1), mask_id=MASK, cls_id=CLS, sep_id=SEP, vocab_size=60)
    kind, ids = a["kind"], a["input_ids"]
    scored = kind != NOT_SCORED
    assert not scored[np.isin(ids, [PAD, CLS, SEP])].any()
    per_row = scored.sum(1)
    text = (~np.isin(ids, [PAD, CLS, SEP])).sum(1)
    assert (per_row == np.maximum(1, np.round(a["lengths"] * 0.15))).all() and (per_row <= text).all()
    shares = np.bincount(kind[scored], minlength=3) / scored.sum()
    assert shares[0] == pytest.approx(0.8, abs=0.04) and shares[2] > 0.06  # [MASK], then random and unchanged
    assert (a["corrupted"][kind == 0] == MASK).all() and (a["corrupted"][kind == 2] == ids[kind == 2]).all()
    assert (a["corrupted"][~scored] == ids[~scored]).all()
    # the first 50 sequences get the same positions when the set is cut to 50 (one seed per sequence)
    b = build(valid, EvalSetConfig(seed=1, max_sequences=50), mask_id=MASK, cls_id=CLS, sep_id=SEP, vocab_size=60)
    T = b["kind"].shape[1]
    assert (b["kind"] == a["kind"][:50, :T]).all() and (b["corrupted"] == a["corrupted"][:50, :T]).all()
    c = build(valid, EvalSetConfig(seed=2), mask_id=MASK, cls_id=CLS, sep_id=SEP, vocab_size=60)
    assert (c["kind"] != a["kind"]).any()


@pytest.fixture(scope="module")
def held_out(tmp_path_factory):
    """An encoded held-out split: 12 documents of 2-9 sentences of 3-14 pieces, each piece its own position in
    the corpus plus 5 (clear of the special ids), so a row's text tells where it was cut."""
    rng = np.random.default_rng(1)
    docs, t = [], 0
    for _ in range(12):
        doc = []
        for n in rng.integers(3, 15, int(rng.integers(2, 10))):
            doc.append([5 + t + i for i in range(n)])
            t += n
        docs.append(doc)
    return encode_documents_to_corpus(docs, tmp_path_factory.mktemp("held_out") / "corpus", VOCAB)


@pytest.fixture(scope="module")
def held_out_small(held_out, tmp_path_factory):
    """The held-out split's documents in a vocabulary of 60 (each piece's position modulo 50, plus 5)."""
    docs = [[[5 + (int(t) - 5) % 50 for t in s] for s in held_out.document(d)] for d in range(held_out.n_documents)]
    return encode_documents_to_corpus(docs, tmp_path_factory.mktemp("held_out_small") / "corpus", 60)


def probe_of(corpus, lengths=(8, 16), rows=10, seed=0):
    return build_probe(corpus, lengths=lengths, rows=rows, seed=seed, cls_id=CLS, sep_id=SEP, mask_id=MASK,
                       source="held-out")


def write_set(folder: Path, arrays, probe, floors=None, probe_floors=None):
    return write(folder, arrays, probe, EvalSetConfig(seed=3), {"lengths": [8, 16], "rows": 10},
                 floors if floors is not None else {}, probe_floors or {}, 5, SEP)


def test_the_layout_probe_hides_one_piece_of_consecutive_text_in_each_layout(held_out):
    probe = probe_of(held_out)
    a, cells = probe.arrays, probe.cells
    assert [c.name for c in cells] == ["single8_early", "single8_middle", "single8_late", "single16_early",
                                       "single16_middle", "single16_late", "pair_A", "pair_B"]
    starts = set(np.asarray(held_out.sentences[:-1]).tolist())
    windows = {}
    for r in range(len(a["lengths"])):
        cell, n = cells[a["cell"][r]], int(a["lengths"][r])
        ids, hidden = a["input_ids"][r, :n], np.nonzero(a["kind"][r] == 0)[0]
        assert len(hidden) == 1 and (a["kind"][r] >= 0).sum() == 1             # one question a row
        assert a["corrupted"][r, hidden[0]] == MASK and ids[hidden[0]] not in (CLS, SEP)
        assert (np.delete(a["corrupted"][r, :n], hidden) == np.delete(ids, hidden)).all()  # the rest is clean
        assert ids[0] == CLS and ids[-1] == SEP
        if cell.layout == "single":
            assert n == cell.length and (a["token_type_ids"][r, :n] == 0).all() and (ids[1:-1] != SEP).all()
            start = int(ids[1]) - 5
            assert (ids[1:-1] == np.arange(start, start + n - 2) + 5).all()   # consecutive text
            assert start in starts                                            # from a sentence start
            assert held_out.document_of_token(start) == held_out.document_of_token(start + n - 3)  # one document
            assert hidden[0] == 1 + int((n - 2) * WHERE[cell.where])
            windows.setdefault(cell.length, []).append(tuple(ids[1:-1]))
        else:
            seps = np.nonzero(ids == SEP)[0]
            la, lb = seps[0] - 1, n - seps[0] - 2
            assert len(seps) == 2 and (a["token_type_ids"][r, :n] == (np.arange(n) > seps[0])).all()
            assert hidden[0] == (1 + la // 2 if cell.where == "A" else seps[0] + 1 + lb // 2)
            assert ids[seps[0] + 1] == ids[seps[0] - 1] + 1                  # B follows A in the corpus
            assert ids[1] - 5 in starts and ids[seps[0] + 1] - 5 in starts   # whole sentences
            assert held_out.document_of_token(int(ids[1]) - 5) == held_out.document_of_token(int(ids[-2]) - 5)
    for n, ws in windows.items():   # the three offsets of a length read the same windows
        assert ws[0::3] == ws[1::3] == ws[2::3] and len(set(ws)) == len(ws) // 3
    # drawn once from the seed: the same rows again, others from another seed
    assert all((probe_of(held_out).arrays[k] == a[k]).all() for k in a)
    assert not (probe_of(held_out, seed=1).arrays["input_ids"].shape == a["input_ids"].shape and
                (probe_of(held_out, seed=1).arrays["input_ids"] == a["input_ids"]).all())


def test_a_length_the_held_out_text_cannot_fill_is_refused_naming_the_key(held_out):
    with pytest.raises(DataError, match=r"held-out: .*eval_set\.layout\.lengths cannot hold 400"):
        probe_of(held_out, lengths=(8, 400))


def test_the_floors_are_scored_on_the_probe_s_positions(held_out, tmp_path):
    probe = probe_of(held_out)
    # the tables of the held-out text itself: after each piece always the next one, so the bigram is never wrong
    # where it can read its left neighbour ([CLS] before a segment: the table saw it before the first piece)
    docs = [[np.asarray(s).tolist() for s in held_out.document(d)] for d in range(held_out.n_documents)]
    train = write_pairs(tmp_path / "train", [[CLS, *[t for s in doc for t in s], SEP] for doc in docs])
    floors = score_probe_floors(NgramTables.count(train, VOCAB, special=[PAD, CLS, SEP, MASK]), probe, MASK)
    assert set(floors) == set(FLOORS) and set(floors["left"]) == {c.name for c in probe.cells}
    assert floors["left"]["single16_middle"] == 1.0 and floors["clean_left_right"]["pair_B"] == 1.0
    assert floors["majority"]["single16_middle"] < 0.5


def test_a_written_set_reads_back_in_batches_of_any_size(valid, held_out, tmp_path):
    arrays = build(valid, EvalSetConfig(seed=3), mask_id=MASK, cls_id=CLS, sep_id=SEP, vocab_size=60)
    probe = probe_of(held_out)
    write_set(tmp_path / "set", arrays, probe, {"majority": {"masked": 0.1}}, {"majority": {"pair_A": 0.2}})
    es = EvalSet(tmp_path / "set")
    assert len(es) == 300 and es.floors == {"majority": {"masked": 0.1}}
    assert es.probe.cells == probe.cells and all((es.probe.arrays[k] == probe.arrays[k]).all() for k in probe.arrays)
    assert es.meta["layout"]["floors"] == {"majority": {"pair_A": 0.2}}
    assert [c["rows"] for c in es.meta["layout"]["cells"]] == [10] * 8
    assert es.meta["stats"]["sequences"] == 300 and 0 <= es.meta["stats"]["actual_next"] <= 1
    for size in (7, 300):
        batches = list(es.batches(size))
        kinds = torch.cat([b["kind"][b["kind"] >= 0] for b in batches])
        assert kinds.tolist() == arrays["kind"][arrays["kind"] >= 0].tolist()  # row-major, whatever the batching
        assert all((b["attention_mask"].sum(1) == torch.from_numpy(arrays["lengths"][i * size:(i + 1) * size]))
                   .all() for i, b in enumerate(batches))


def test_floors_score_each_view_on_the_set_s_positions(tmp_path):
    # text is 7 8 9 7 8 9 ...: after 7 always 8, between 7 and 9 always 8
    seq = [CLS, *([7, 8, 9] * 5), SEP]
    train = write_pairs(tmp_path / "train", [seq] * 4)
    valid = write_pairs(tmp_path / "valid", [seq] * 40)
    t = NgramTables.count(train, 12, special=[PAD, CLS, SEP, MASK])
    arrays = build(valid, EvalSetConfig(seed=0), mask_id=MASK, cls_id=CLS, sep_id=SEP, vocab_size=12)
    floors = score_floors(t, arrays, MASK)
    assert set(floors) == set(FLOORS) and set(floors["left"]) == {*KINDS, "all"}
    assert floors["clean_left_right"]["masked"] == 1.0 and floors["clean_left"]["masked"] == 1.0
    assert floors["majority"]["masked"] == pytest.approx(1 / 3, abs=0.15)
    # reading the corrupted sequence, a neighbour that is itself masked leaves the table a weaker guess
    assert floors["left"]["masked"] < 1.0


def test_every_kind_of_language_model_has_its_floors():
    for lm in ("masked", "left_to_right", "bilm", "cbow", "skipgram"):
        names = FLOORS_OF[metric_prefix(lm)]
        assert names[0] == "majority" and all(n in FLOORS for n in names)
        assert {FLOORS[n].view for n in names[1:]} == ({"masked"} if lm == "masked" else {"clean"})


# --------------------------------------------------------------------------- #
# Each kind of model scored on the set: what it reads, one position at a time
# --------------------------------------------------------------------------- #
def _modules(tmp_path, valid, probe):
    from pipeline.data.masking import MaskingConfig
    from pipeline.model_config import BertConfig, ElmoConfig, StaticConfig
    from pipeline.pretrain.lineage import BiLMPretraining, StaticPretraining
    from pipeline.pretrain.module import BertPretraining

    arrays = build(valid, EvalSetConfig(seed=5, max_sequences=40), mask_id=MASK, cls_id=CLS, sep_id=SEP,
                   vocab_size=60)
    write_set(tmp_path / "set", arrays, probe)
    es = EvalSet(tmp_path / "set")
    common = dict(optim={}, max_steps=1, seed=0, cls_id=CLS, sep_id=SEP, eval_set=es)
    bert = dict(vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                max_position_embeddings=64)
    torch.manual_seed(0)
    return es, {
        "mlm": BertPretraining(BertConfig(**bert), MaskingConfig(), nsp=True, mask_id=MASK, **common),
        "ltr": BertPretraining(BertConfig(**bert, causal=True), MaskingConfig(), nsp=False, mask_id=MASK, **common),
        "bilm": BiLMPretraining(ElmoConfig(vocab_size=60, embedding_size=16, lstm_size=16), **common),
        "cbow": StaticPretraining(StaticConfig(vocab_size=60, embedding_size=16, window=2, kind="cbow"),
                                  torch.ones(60) / 60, **common),
        "skipgram": StaticPretraining(StaticConfig(vocab_size=60, embedding_size=16, window=2, kind="skipgram"),
                                      torch.ones(60) / 60, **common)}


def _reference_logprobs(kind: str, module, clean: torch.Tensor, corrupted: torch.Tensor, c: int) -> torch.Tensor:
    """(V,) the model's log-probabilities for the piece at position c of one unpadded sequence, reading only what
    that kind of model reads, computed from scratch."""
    m = module.model
    if kind == "mlm":
        h = m.bert(corrupted[None]).last_hidden_state[0, c]
        return F.log_softmax(m.cls.predictions(h), -1)
    if kind == "ltr":  # the prefix alone: a causal model cannot see further anyway
        h = m.bert(clean[None, :c]).last_hidden_state[0, -1]
        return F.log_softmax(m.cls.predictions(h), -1)
    if kind == "bilm":
        _, fwd, _ = m.directions(clean[None, :c])
        _, _, bwd = m.directions(clean[None, c + 1:])
        return F.log_softmax(F.log_softmax(m.softmax(fwd[-1][0, -1]), -1) + F.log_softmax(m.softmax(bwd[-1][0, 0]), -1),
                             -1)
    w = m.config.window
    ctx = [int(clean[j]) for j in range(c - w, c + w + 1)
           if j != c and 0 <= j < len(clean) and int(clean[j]) not in (PAD, CLS, SEP)]
    if kind == "cbow":
        return F.log_softmax(m.context.weight @ m.embeddings.weight[ctx].mean(0), -1)
    return F.log_softmax(m.embeddings.weight @ m.context.weight[ctx].sum(0), -1)


@pytest.mark.parametrize("kind", ["mlm", "ltr", "bilm", "cbow", "skipgram"])
def test_each_kind_of_model_is_scored_on_what_it_reads(valid, held_out_small, tmp_path, kind):
    es, modules = _modules(tmp_path, valid, probe_of(held_out_small))
    module = modules[kind].eval()
    a = es.arrays
    with torch.no_grad():
        batch = batch_fixed = next(es.batches(len(es)))
        pred, nll = module.fixed_scores(batch)
        k = 0
        for r in range(len(es)):
            n = int(a["lengths"][r])
            clean = torch.from_numpy(a["input_ids"][r, :n].astype(np.int64))
            corrupted = torch.from_numpy(a["corrupted"][r, :n].astype(np.int64))
            for c in np.nonzero(a["kind"][r] >= 0)[0]:
                ref = _reference_logprobs(kind, module, clean, corrupted, int(c))
                assert float(nll[k]) == pytest.approx(-float(ref[clean[c]]), abs=1e-4)
                assert int(pred[k]) == int(ref.argmax())
                k += 1
        assert k == len(pred)
        # the set's metrics do not depend on how many sequences go through at once (padding changes nothing)
        module.FIXED_BATCH = 7
        small = module.fixed_metrics()
        module.FIXED_BATCH = 64
        assert module.fixed_metrics() == pytest.approx(small, abs=1e-6)
        # the layout probe: each cell's share of the rows whose hidden piece the model predicts, the same whatever
        # the batching
        batch = next(row_batches(es.probe.arrays, len(es.probe.arrays["lengths"])))
        p, _ = module.fixed_scores(batch)
        hits = (p == batch["input_ids"][batch["kind"] >= 0]).numpy()
        expected = {**{f"layout/{k}": v for k, v in es.probe.accuracy(hits).items()}, "layout/rows": 10.0}
        assert module.probe_metrics() == pytest.approx(expected, abs=1e-9)
        module.FIXED_BATCH = 3
        assert module.probe_metrics() == pytest.approx(expected, abs=1e-9)
        first = np.concatenate([np.nonzero(es.probe.arrays["cell"] == i)[0][:2] for i in range(len(es.probe.cells))])
        head = es.probe.head(2)  # along pretraining: the first two rows of each cell
        assert (head.arrays["input_ids"] == es.probe.arrays["input_ids"][np.sort(first)]).all()
        assert module.probe_metrics(rows=2) == pytest.approx(
            {**{f"layout/{k}": v for k, v in head.accuracy(hits[np.sort(first)]).items()}, "layout/rows": 2.0},
            abs=1e-9)
        if kind == "mlm":  # NSP on the fixed set's clean pairs, at every validation beside the masked LM's scores
            out = module.model.bert(batch_fixed["input_ids"], batch_fixed["token_type_ids"],
                                    batch_fixed["attention_mask"]).pooler_output
            right = (module.model.cls.seq_relationship(out).argmax(-1) == batch_fixed["next_sentence_label"])
            assert module.nsp_metrics() == {"fixed/nsp_acc": pytest.approx(float(right.float().mean()))}
            assert module.fixed_metrics()["fixed/nsp_acc"] == pytest.approx(float(right.float().mean()))
        else:
            assert "fixed/nsp_acc" not in module.fixed_metrics()
