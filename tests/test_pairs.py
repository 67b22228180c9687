"""Pretraining examples: BERT's recipe checked statistically on real text, storage, determinism, errors."""
from __future__ import annotations

import dataclasses
import json
import math
import pickle
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

from conftest import ROOT
from pipeline.data import pairs as pairs_mod
from pipeline.errors import ConfigError, DataError, LabError
from pipeline.data.encoded import EncodedCorpus, encode_corpus, encode_documents_to_corpus
from pipeline.data.pairs import (make_examples, packed_examples, pair_examples, plan_shards, shard_rng, trim_counts,
                            write_examples)
from pipeline.data.shards import PairsDataset
from pipeline.names import IGNORE_INDEX
from pipeline.settings import PairsSettings

CLS, SEP, FIRST_WORD_ID = 2, 3, 5  # 0 [PAD], 1 [UNK], 4 [MASK] are unused in synthetic corpora
BERT = PairsSettings.read(yaml.safe_load((ROOT / "conf" / "pairs" / "bert.yaml").read_text(encoding="utf-8")))


def pairs(**changes) -> PairsSettings:
    """BERT's recipe as conf/pairs/bert.yaml sets it, with ``changes`` (one pass unless a test asks for more)."""
    return dataclasses.replace(BERT, **{"dupe_factor": 1, **changes})


def synthetic_corpus(folder: Path, seed: int = 0, n_docs: int = 25, vocab_size: int = 1000) -> EncodedCorpus:
    rng = random.Random(seed)
    docs = [
        [[rng.randrange(FIRST_WORD_ID, vocab_size) for _ in range(rng.randint(1, 40))]
         for _ in range(rng.randint(1, 30))]
        for _ in range(n_docs)
    ]
    docs[3] = []  # an empty document and an empty sentence are skipped
    docs[5].insert(1, [])
    return encode_documents_to_corpus(docs, folder, vocab_size)


def _files(folder: Path) -> dict[str, bytes]:
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def _doc_of(corpus: EncodedCorpus, start: int, length: int) -> int:
    """The document of a span, asserting it does not cross a document boundary."""
    d = corpus.document_of_token(start)
    assert corpus.document_of_token(start + length - 1) == d, "a segment crosses a document boundary"
    return d


# --------------------------------------------------------------------------- #
# Encoding
# --------------------------------------------------------------------------- #
def test_encoding_matches_the_tokenizer_sentence_by_sentence(wikitext):
    lines = [line for line in wikitext.text.read_text(encoding="utf-8").splitlines() if line]
    corpus = wikitext.corpus
    assert corpus.meta["n_sentences"] == len(lines)
    expected = [e.ids for e in wikitext.tok.encode_batch(lines, add_special_tokens=False)]
    assert np.array_equal(np.diff(corpus.sentences), [len(x) for x in expected])
    assert np.array_equal(corpus.tokens, np.concatenate([np.asarray(x) for x in expected]))
    assert corpus.dtype == np.uint16


def test_text_that_looks_like_special_tokens_is_encoded_as_text(wikitext, tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("Use [MASK] and [SEP] here .\nSecond line .\n\nAnother [CLS] document .\n", encoding="utf-8")
    corpus = encode_corpus(wikitext.tok, f, tmp_path / "enc", progress=False)
    assert corpus.n_documents == 2 and corpus.meta["n_sentences"] == 3
    assert not np.isin(corpus.tokens, list(wikitext.ids.values())[:5]).any()  # no special id from text


@pytest.mark.parametrize("lowercase", [True, False])
def test_encoding_of_odd_text_matches_the_tokenizer(tmp_path, lowercase):
    """Plain-ASCII runs skip the normalizer; everything else must come out as the tokenizer makes it."""
    from pipeline.data.tokenizer import load_tokenizer
    from pipeline.data.wordpiece import train_wordpiece

    sentences = ["The Café served crème brûlée .", "Plain ASCII words , UPPER and lower .",
                 "Tabs\tand\x0bvertical\x0cfeeds here .", "Bell\x07and escape\x1b inside words .",
                 "中文字符 mixed with English .", "ＦＵＬＬ width and ﬁ ligatures .", "Use [MASK] or [SEP] literally .",
                 "DEL\x7fchar and \u200b zero width .", "ÀÉÎÕÜ accents upper .", "last plain sentence ."]
    train_wordpiece(sentences * 20, tmp_path / "tok", vocab_size=300, lowercase=lowercase, progress=False)
    tok = load_tokenizer(tmp_path / "tok")
    docs = [sentences[:4], sentences[4:7], sentences[7:]]
    f = tmp_path / "c.txt"
    f.write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")
    corpus = encode_corpus(tok, f, tmp_path / "enc", progress=False)
    tok.encode_special_tokens = True  # literal "[MASK]" is text, as for the original tokenizer
    expected = [tok.encode(s, add_special_tokens=False).ids for s in sentences]
    assert corpus.n_documents == 3
    got = [corpus.document(d) for d in range(3)]
    assert [x.tolist() for doc in got for x in doc] == [e for e in expected if e]


# --------------------------------------------------------------------------- #
# The recipe, on real text
# --------------------------------------------------------------------------- #
def test_trim_counts_equal_trimming_one_token_at_a_time():
    for max_num in (2, 5, 9, 125):
        for la in range(1, 140):
            for lb in range(1, 140):
                a, b, ta, tb = la, lb, 0, 0
                while a + b > max_num:  # the original's loop: the longer side, B on a tie
                    if a > b:
                        a, ta = a - 1, ta + 1
                    else:
                        b, tb = b - 1, tb + 1
                assert trim_counts(la, lb, max_num) == (ta, tb), (la, lb, max_num)


def test_trims_fall_on_the_front_and_the_back_alike(wikitext):
    corpus = wikitext.corpus
    ex = pair_examples(corpus, (0, corpus.n_documents), max_seq_length=64, short_seq_prob=0.0, dupe_factor=2,
                       rng=random.Random(0))
    sentence_starts = set(corpus.sentences.tolist())
    counts = {"front": 0, "back": 0}
    for e in ex:
        for start, n in e.segments:  # untrimmed segments start and end on sentence boundaries
            counts["front"] += start not in sentence_starts
            counts["back"] += start + n not in sentence_starts
    total = counts["front"] + counts["back"]
    assert total > 2000
    assert abs(counts["front"] - counts["back"]) < 4 * math.sqrt(total), counts


def test_random_next_is_half_and_never_from_a_documents_own_text(wikitext):
    corpus = wikitext.corpus
    ex = pair_examples(corpus, (0, corpus.n_documents), max_seq_length=128, short_seq_prob=0.0, dupe_factor=5,
                       rng=random.Random(1))
    n = len(ex)
    assert n > 5000
    rate = sum(e.is_random_next for e in ex) / n
    # One-sentence chunks (the last sentence of a document) always take a random
    # B, as in the original, which lifts the rate slightly above one half.
    assert 0.5 - 4 * math.sqrt(0.25 / n) < rate < 0.56, rate
    checked = 0
    for e in ex:
        (a0, la), (b0, lb) = e.segments
        doc_a, doc_b = _doc_of(corpus, a0, la), _doc_of(corpus, b0, lb)
        assert doc_a == e.document
        if e.is_random_next:
            assert doc_b != doc_a
            checked += 1
        else:
            assert doc_b == doc_a and b0 >= a0 + la  # B continues A in the same document
    assert checked > 2000


def test_continuations_are_the_text_that_follows(wikitext):
    corpus = wikitext.corpus
    ex = pair_examples(corpus, (0, corpus.n_documents), max_seq_length=128, short_seq_prob=0.1, dupe_factor=5,
                       rng=random.Random(4))
    untrimmed = [e for e in ex if not e.is_random_next and sum(n for _, n in e.segments) < 125]
    assert len(untrimmed) > 100
    sentence_starts = set(corpus.sentences.tolist())
    for e in untrimmed:
        (a0, la), (b0, lb) = e.segments
        assert b0 == a0 + la  # nothing between A and B
        assert a0 in sentence_starts and b0 in sentence_starts and b0 + lb in sentence_starts  # whole sentences


def test_short_targets_follow_short_seq_prob(wikitext):
    corpus = wikitext.corpus
    p, passes = 0.1, 60
    ex = pair_examples(corpus, (0, corpus.n_documents), max_seq_length=128, short_seq_prob=p, dupe_factor=passes,
                       rng=random.Random(2))
    # Unshuffled, each (pass, document) is one run of examples: the target is drawn once per run.
    runs = [ex[0].short_target]
    for prev, e in zip(ex, ex[1:]):
        if e.document != prev.document:
            runs.append(e.short_target)
    draws = passes * corpus.n_documents
    assert len(runs) == draws
    share = sum(runs) / draws
    assert abs(share - p) < 4 * math.sqrt(p * (1 - p) / draws), share
    # Under a full target only a document's last chunk can fall short; a short
    # target is uniform on [2, 125], so most of its examples are well below.
    lengths = {flag: np.array([sum(n for _, n in e.segments) for e in ex if e.short_target == flag])
               for flag in (False, True)}
    assert np.mean(lengths[False] < 125) < 0.15
    assert np.mean(lengths[True] < 125) > 0.75
    assert lengths[True].mean() < lengths[False].mean() - 30


def test_no_text_is_wasted(wikitext):
    """Sentences left over when B is random are put back, so one pass uses almost every sentence."""
    corpus = wikitext.corpus
    ex = pair_examples(corpus, (0, corpus.n_documents), max_seq_length=128, short_seq_prob=0.1, dupe_factor=1,
                       rng=random.Random(5))
    used = np.zeros(corpus.meta["n_tokens"], dtype=bool)
    for e in ex:
        (a0, la), (b0, lb) = e.segments
        used[a0:a0 + la] = True
        if not e.is_random_next:
            used[b0:b0 + lb] = True
    touched = np.logical_or.reduceat(used, corpus.sentences[:-1]).mean()
    # Without the put-back about a quarter of the sentences would be lost.
    assert touched > 0.95, touched


# --------------------------------------------------------------------------- #
# Packing without pairs (NSP-off)
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("cross", [False, True])
def test_packing_uses_all_text_once_per_pass(wikitext, cross):
    corpus = wikitext.corpus
    L = 64
    ex = packed_examples(corpus, (0, corpus.n_documents), max_seq_length=L, cross_documents=cross, dupe_factor=2)
    one_pass = ex[:len(ex) // 2]
    assert ex[len(ex) // 2:] == one_pass
    spans = [s for e in one_pass for s in e.segments]
    # In order, the segments tile the whole corpus exactly.
    assert spans[0][0] == 0 and sum(n for _, n in spans) == corpus.meta["n_tokens"]
    assert all(s0 + n0 == s1 for (s0, n0), (s1, _) in zip(spans, spans[1:]))
    lengths = [1 + sum(n + 1 for _, n in e.segments) for e in one_pass]
    assert max(lengths) <= L and np.mean(lengths) > 0.7 * L  # whole ~30-token sentences leave gaps
    sentence_starts = set(corpus.sentences.tolist())
    for e in one_pass:
        docs = [_doc_of(corpus, s, n) for s, n in e.segments]
        assert docs == sorted(set(docs)) and docs[0] == e.document  # one segment per document, in order
        if not cross:
            assert len(docs) == 1
        assert e.is_random_next == -1
        # Whole sentences, except pieces of a sentence longer than a sequence.
        start = e.segments[0][0]
        sentence_start = int(corpus.sentences[np.searchsorted(corpus.sentences, start, side="right") - 1])
        assert (start - sentence_start) % (L - 2) == 0
    assert np.mean([e.segments[0][0] in sentence_starts for e in one_pass]) > 0.8
    if cross:
        assert any(len(e.segments) > 1 for e in one_pass)


def test_packed_examples_have_one_segment_and_no_nsp_label(wikitext, tmp_path):
    write_examples(wikitext.corpus, tmp_path / "p", pairs(format="full_sentences", max_seq_length=64), seed=1234,
                   cls_id=wikitext.ids["cls"], sep_id=wikitext.ids["sep"], progress=False)
    ds = PairsDataset(tmp_path / "p")
    assert ds.format == "full_sentences"
    for i in range(0, len(ds), 37):
        item = ds[i]
        assert item["next_sentence_label"] == IGNORE_INDEX and not item["token_type_ids"].any()
        ids = item["input_ids"]
        assert ids[0] == wikitext.ids["cls"] and ids[-1] == wikitext.ids["sep"] and len(ids) <= 64


# --------------------------------------------------------------------------- #
# Layout and storage
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("max_seq_length, short_seq_prob", [(64, 0.1), (5, 1.0)])
def test_every_example_has_bert_layout(tmp_path, max_seq_length, short_seq_prob):
    corpus = synthetic_corpus(tmp_path / "c")
    write_examples(corpus, tmp_path / "pairs", pairs(max_seq_length=max_seq_length, short_seq_prob=short_seq_prob,
                                                     dupe_factor=2, shard_tokens=300),
                   seed=1234, cls_id=CLS, sep_id=SEP, progress=False)
    ds = PairsDataset(tmp_path / "pairs")
    assert len(ds) > 50 and ds.meta["n_shards"] > 3
    for i in range(len(ds)):
        item = ds[i]
        ids, types = item["input_ids"], item["token_type_ids"]
        assert ids.dtype == np.int64 and types.dtype == np.int64 and ids.shape == types.shape
        assert len(ids) <= max_seq_length and item["index"] == i
        assert ids[0] == CLS and ids[-1] == SEP
        seps = np.flatnonzero(ids == SEP)
        assert len(seps) == 2 and np.count_nonzero(ids == CLS) == 1
        first_sep = seps[0]
        len_a, len_b = first_sep - 1, len(ids) - first_sep - 2  # [CLS] A [SEP] B [SEP]
        assert len_a >= 1 and len_b >= 1
        assert (types[: first_sep + 1] == 0).all() and (types[first_sep + 1:] == 1).all()
        assert ids.min() >= 0 and ids.max() < 1000
        assert item["next_sentence_label"] in (0, 1)


def test_dataset_round_trips_examples_across_shards(tmp_path):
    corpus = synthetic_corpus(tmp_path / "c", seed=1)
    stats = write_examples(corpus, tmp_path / "pairs", pairs(max_seq_length=48, short_seq_prob=0.2, dupe_factor=2,
                                                             shard_tokens=200), seed=11, cls_id=CLS, sep_id=SEP,
                           progress=False)
    shards = plan_shards(corpus, 200)
    expected = []
    for k, docs in enumerate(shards):
        rng = shard_rng(11, k)
        ex = pair_examples(corpus, docs, max_seq_length=48, short_seq_prob=0.2, dupe_factor=2, rng=rng)
        rng.shuffle(ex)
        expected.extend(ex)

    ds = PairsDataset(tmp_path / "pairs")
    meta = ds.meta
    assert len(ds) == len(expected) == stats["n_examples"] == meta["n_examples"]
    assert meta["n_shards"] == len(shards) >= 3 and sum(meta["shard_counts"]) == len(expected)
    assert meta["token_dtype"] == "uint16" and meta["settings"]["seed"] == 11 and meta["stats"] == stats
    tokens = corpus.tokens
    for i, e in enumerate(expected):
        (a0, la), (b0, lb) = e.segments
        item = ds[i]
        assert item["input_ids"].tolist() == [CLS, *tokens[a0:a0 + la], SEP, *tokens[b0:b0 + lb], SEP]
        assert item["token_type_ids"].tolist() == [0] * (la + 2) + [1] * (lb + 1)
        assert item["next_sentence_label"] == e.is_random_next
    assert ds[-1]["input_ids"].tolist() == ds[len(ds) - 1]["input_ids"].tolist()
    with pytest.raises(IndexError):
        ds[len(ds)]
    n_tokens = sum(sum(n for _, n in e.segments) + 3 for e in expected)
    assert stats["n_tokens"] == n_tokens and stats["mean_length"] == pytest.approx(n_tokens / len(expected))
    assert stats["n_documents"] == corpus.n_documents == 24
    # Items are read from memory maps; the dataset pickles without shard contents.
    assert isinstance(ds._shard(0)[0], np.memmap)
    assert len(pickle.dumps(ds)) < 10_000


@pytest.mark.parametrize("vocab_size, dtype", [(200, "uint8"), (30_522, "uint16"), (80_000, "uint32")])
def test_token_ids_use_the_smallest_type(tmp_path, vocab_size, dtype):
    docs = [[[vocab_size - 1, 5], [6, 7]], [[8, 9, 10]], [[11], [12, 13]]]
    corpus = encode_documents_to_corpus(docs, tmp_path / "c", vocab_size)
    write_examples(corpus, tmp_path / "p", pairs(max_seq_length=16), seed=1234, cls_id=CLS, sep_id=SEP, progress=False)
    ds = PairsDataset(tmp_path / "p")
    assert ds.meta["token_dtype"] == dtype and corpus.dtype == dtype
    assert max(int(ds[i]["input_ids"].max()) for i in range(len(ds))) == vocab_size - 1


# --------------------------------------------------------------------------- #
# Determinism and parallelism
# --------------------------------------------------------------------------- #
def test_output_is_byte_identical_for_any_worker_count(wikitext, tmp_path):
    kw = dict(pairs=pairs(dupe_factor=2, shard_tokens=20_000), cls_id=wikitext.ids["cls"], sep_id=wikitext.ids["sep"],
              seed=7, progress=False)
    make_examples(wikitext.tok, wikitext.text, tmp_path / "w1", num_workers=1, **kw)
    make_examples(wikitext.tok, wikitext.text, tmp_path / "w2", num_workers=2, **kw)
    one, two = _files(tmp_path / "w1"), _files(tmp_path / "w2")
    assert json.loads(one["meta.json"])["n_shards"] >= 10
    assert one == two
    make_examples(wikitext.tok, wikitext.text, tmp_path / "s8", num_workers=2, **{**kw, "seed": 8})
    assert _files(tmp_path / "s8")["shard-00000.tokens.npy"] != one["shard-00000.tokens.npy"]


def test_peak_memory_does_not_grow_with_the_corpus(wikitext, tmp_path):
    """Streaming: a 16x larger corpus costs about the same peak memory."""
    text = wikitext.text.read_text(encoding="utf-8").rstrip("\n")
    script = textwrap.dedent("""
        import json, resource, sys
        from pipeline.data.pairs import make_examples
        from pipeline.data.tokenizer import load_tokenizer
        from pipeline.settings import PairsSettings
        tok = load_tokenizer(sys.argv[1])
        info = {}
        pairs = PairsSettings(format="nsp_pairs", max_seq_length=128, short_seq_prob=0.1, dupe_factor=2,
                              shard_tokens=100_000)
        make_examples(tok, sys.argv[2], sys.argv[3], pairs, seed=1234, cls_id=2, sep_id=3,
                      num_workers=2, progress=False, run_info=info)
        main = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({"main": main, "workers": max(info["worker_peak_rss_mb"].values())}))
    """)
    peaks = {}
    for copies in (1, 16):
        f = tmp_path / f"x{copies}.txt"
        f.write_text("\n\n".join([text] * copies) + "\n", encoding="utf-8")
        out = subprocess.run([sys.executable, "-c", script, str(wikitext.root / "tok"), str(f), str(tmp_path / f"p{copies}")],
                             capture_output=True, text=True, check=True)
        peaks[copies] = json.loads(out.stdout.strip().splitlines()[-1])
    # 15 extra copies are ~3.9M more tokens. Holding them in memory as Python
    # lists would cost over 36 bytes each (140 MB); here they stay on disk. The
    # slack covers the tokenizer's own allocations, which vary with the vocabulary.
    assert peaks[16]["main"] - peaks[1]["main"] < 80, peaks
    assert peaks[16]["workers"] - peaks[1]["workers"] < 25, peaks


# --------------------------------------------------------------------------- #
# Errors and atomicity
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("text", ["", "\n\n\n", "   \n\t\n"])
def test_empty_corpus_is_refused(wikitext, tmp_path, text):
    f = tmp_path / "c.txt"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(DataError, match="empty"):
        make_examples(wikitext.tok, f, tmp_path / "p", pairs(), seed=1234, cls_id=2, sep_id=3, progress=False)
    assert [p.name for p in tmp_path.iterdir()] == ["c.txt"]


def test_one_document_is_refused_for_pairs_but_packs(wikitext, tmp_path):
    f = tmp_path / "c.txt"
    f.write_text("One sentence here .\nAnd another one .\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"c\.txt: at least two non-empty documents"):
        make_examples(wikitext.tok, f, tmp_path / "p", pairs(), seed=1234, cls_id=2, sep_id=3, progress=False)
    stats = make_examples(wikitext.tok, f, tmp_path / "p", pairs(format="doc_sentences"), seed=1234, cls_id=2,
                          sep_id=3, progress=False)
    assert stats["n_examples"] == 1


@pytest.mark.parametrize("change, message", [
    ({"format": "pairs"}, "pairs.format='pairs' is not allowed: expected one of nsp_pairs"),
    ({"max_seq_length": 4}, "pairs.max_seq_length=4 is not allowed: expected an integer >= 5"),
    ({"short_seq_prob": float("nan")}, "pairs.short_seq_prob=nan is not allowed: expected a probability in [0, 1]"),
    ({"dupe_factor": 0}, "pairs.dupe_factor=0 is not allowed: expected an integer >= 1"),
])
def test_bad_settings_cannot_be_made(change, message):
    """The settings check themselves when made, so make_examples never sees bad ones."""
    with pytest.raises(ConfigError) as e:
        pairs(**change)
    assert str(e.value).startswith(message), e.value


def test_bad_special_ids_are_refused_before_any_work(wikitext, tmp_path):
    with pytest.raises(LabError, match="cls_id=9000"):
        make_examples(wikitext.tok, wikitext.text, tmp_path / "p", pairs(), seed=1234, cls_id=9000, sep_id=3,
                      progress=False)
    assert list(tmp_path.iterdir()) == []


def test_out_of_vocabulary_id_is_refused(tmp_path):
    with pytest.raises(DataError, match="500"):
        encode_documents_to_corpus([[[5, 6]], [[7, 500]]], tmp_path / "c", 100)


def test_failed_write_leaves_no_partial_output(tmp_path, monkeypatch):
    corpus = synthetic_corpus(tmp_path / "c")
    out = tmp_path / "pairs"
    kw = dict(pairs=pairs(max_seq_length=64, shard_tokens=300), cls_id=CLS, sep_id=SEP, progress=False)

    real_save = np.save
    calls = {"n": 0}

    def failing_save(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:  # after the first shard is complete
            raise OSError("disk full")
        return real_save(*args, **kwargs)

    monkeypatch.setattr(pairs_mod.np, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        write_examples(corpus, out, seed=1, **kw)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]

    monkeypatch.setattr(pairs_mod.np, "save", real_save)
    write_examples(corpus, out, seed=1, **kw)
    before = _files(out)
    calls["n"] = 0
    monkeypatch.setattr(pairs_mod.np, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        write_examples(corpus, out, seed=2, **kw)
    assert _files(out) == before  # the earlier complete output is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "pairs"]
