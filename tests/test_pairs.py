"""BERT pair generation: layout, statistics on real text, storage, determinism, errors."""
from __future__ import annotations

import bisect
import math
import pickle
import random
from pathlib import Path

import numpy as np
import pytest

from pipeline import pairs as pairs_mod
from pipeline.pairs import PairsDataset, create_pairs, write_pairs

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikitext-2"
CLS, SEP, FIRST_WORD_ID = 2, 3, 5  # 0 [PAD], 1 [UNK], 4 [MASK] are unused here


# --------------------------------------------------------------------------- #
# Corpora
# --------------------------------------------------------------------------- #
def synthetic_documents(seed: int = 0, n_docs: int = 25) -> list[list[list[int]]]:
    rng = random.Random(seed)
    docs = [
        [[rng.randrange(FIRST_WORD_ID, 1000) for _ in range(rng.randint(1, 40))] for _ in range(rng.randint(1, 30))]
        for _ in range(n_docs)
    ]
    docs[3] = []  # an empty document and an empty sentence are skipped
    docs[5].insert(1, [])
    return docs


def wikitext_documents(split: str) -> list[list[list[int]]]:
    """Articles split on top-level ``= Title =`` lines, sentences on " . ", words to ids."""
    path = DATA / f"{split}.txt"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    vocab: dict[str, int] = {}
    docs: list[list[list[int]]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        text = line.strip()
        if not text or text.startswith("= ="):
            continue
        if text.startswith("= ") and text.endswith(" ="):
            docs.append([])
            continue
        for sentence in text.split(" . "):
            words = sentence.split()
            if words[-1] != ".":
                words.append(".")
            docs[-1].append([vocab.setdefault(w, len(vocab) + FIRST_WORD_ID) for w in words])
    return docs


@pytest.fixture(scope="module")
def wiki():
    return wikitext_documents("valid")


class TokenIndex:
    """The corpus as one string (one character per token, documents separated) for locating segments."""

    def __init__(self, docs):
        parts, self.starts, self.sentence_spans = [], [], []
        pos = 0
        for doc in docs:
            self.starts.append(pos)
            for s in doc:
                self.sentence_spans.append((pos, pos + len(s)))
                pos += len(s)
            parts.append("".join(chr(0x100 + t) for s in doc for t in s) + "\0")
            pos += 1
        self.text = "".join(parts)

    @staticmethod
    def key(tokens) -> str:
        return "".join(chr(0x100 + t) for t in tokens)

    def find(self, tokens) -> list[int]:
        """Start positions of every occurrence of ``tokens``."""
        key, hits, at = self.key(tokens), [], -1
        while (at := self.text.find(key, at + 1)) >= 0:
            hits.append(at)
        return hits

    def doc_of(self, pos: int) -> int:
        return bisect.bisect_right(self.starts, pos) - 1


# --------------------------------------------------------------------------- #
# Layout
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("max_seq_length, short_seq_prob", [(64, 0.1), (5, 1.0)])
def test_every_example_has_bert_layout(tmp_path, max_seq_length, short_seq_prob):
    vocab_size = 1000
    write_pairs(synthetic_documents(), tmp_path / "pairs", cls_id=CLS, sep_id=SEP, vocab_size=vocab_size,
                max_seq_length=max_seq_length, short_seq_prob=short_seq_prob, dupe_factor=2, progress=False)
    ds = PairsDataset(tmp_path / "pairs")
    assert len(ds) > 50
    for i in range(len(ds)):
        item = ds[i]
        ids, types = item["input_ids"], item["token_type_ids"]
        assert ids.dtype == np.int64 and types.dtype == np.int64 and ids.shape == types.shape
        assert len(ids) <= max_seq_length
        assert ids[0] == CLS and ids[-1] == SEP
        seps = np.flatnonzero(ids == SEP)
        assert len(seps) == 2 and np.count_nonzero(ids == CLS) == 1
        first_sep = seps[0]
        assert first_sep > 1 and first_sep < len(ids) - 2  # A and B each have at least one token
        assert (types[: first_sep + 1] == 0).all() and (types[first_sep + 1:] == 1).all()
        assert ids.min() >= 0 and ids.max() < vocab_size
        assert item["next_sentence_label"] in (0, 1)


# --------------------------------------------------------------------------- #
# Statistics on real text
# --------------------------------------------------------------------------- #
def test_random_next_is_half_of_examples(wiki):
    # short_seq_prob=0: with short targets, one-sentence chunks (forced random B)
    # push the rate above one half, as in the original script.
    pairs = create_pairs(wiki, max_seq_length=128, short_seq_prob=0.0, dupe_factor=5, rng=random.Random(1))
    n = len(pairs)
    rate = sum(p.is_random_next for p in pairs) / n
    tol = 4 * math.sqrt(0.25 / n)  # 4 binomial standard errors; n ~ 10k gives ~0.02
    assert abs(rate - 0.5) < tol, (rate, tol)

    biased = create_pairs(wiki, max_seq_length=128, short_seq_prob=0.1, dupe_factor=5, rng=random.Random(1))
    assert sum(p.is_random_next for p in biased) / len(biased) > 0.5 - tol


def test_short_targets_follow_short_seq_prob(wiki, tmp_path):
    max_num_tokens = 128 - 3
    n_docs = len(wiki)

    def below_max(pairs) -> float:
        return sum(len(p.tokens_a) + len(p.tokens_b) < max_num_tokens for p in pairs) / len(pairs)

    full = create_pairs(wiki, max_seq_length=128, short_seq_prob=0.0, dupe_factor=1, rng=random.Random(2))
    assert below_max(full) < 0.05  # only the last chunk of a document can fall short

    all_short = create_pairs(wiki, max_seq_length=128, short_seq_prob=1.0, dupe_factor=1, rng=random.Random(2))
    assert below_max(all_short) > 0.9

    # The target is drawn once per document and pass (as in the original), so
    # short_seq_prob is the rate of short-target *documents*; a short document
    # yields more, shorter examples.
    dupe = 10
    stats = write_pairs(wiki, tmp_path / "p", cls_id=CLS, sep_id=SEP, vocab_size=2**16, short_seq_prob=0.1,
                        dupe_factor=dupe, seed=3, progress=False)
    draws = dupe * n_docs
    assert abs(stats["fraction_short_target_documents"] - 0.1) < 4 * math.sqrt(0.1 * 0.9 / draws)
    ds = PairsDataset(tmp_path / "p")
    lengths = np.array([len(ds[i]["input_ids"]) for i in range(len(ds))])
    observed = float(np.mean(lengths < 128))
    # Short-target examples are nearly all below the max; others only at document ends.
    assert stats["fraction_short_target"] - 0.05 < observed < stats["fraction_short_target"] + 0.05
    assert stats["fraction_short_target"] > stats["fraction_short_target_documents"]


def test_continuations_are_contiguous_and_random_b_comes_from_another_document(wiki):
    index = TokenIndex(wiki)
    pairs = create_pairs(wiki, max_seq_length=128, short_seq_prob=0.1, dupe_factor=1, rng=random.Random(4))
    max_num_tokens = 125
    checked_contiguous = checked_random = 0
    for p in pairs:
        hits_a = index.find(p.tokens_a)
        hits_b = index.find(p.tokens_b)
        assert hits_a and hits_b  # truncation only trims the ends: both stay verbatim
        docs_a = {index.doc_of(h) for h in hits_a}
        docs_b = {index.doc_of(h) for h in hits_b}
        if p.is_random_next:
            if len(docs_a) == 1:
                assert docs_b - docs_a, "random B was drawn from A's own document"
                checked_random += 1
        else:
            assert docs_a & docs_b
            if len(p.tokens_a) + len(p.tokens_b) < max_num_tokens:  # certainly not truncated
                assert index.find(p.tokens_a + p.tokens_b), "continuation is not the text that follows A"
                checked_contiguous += 1
    assert checked_contiguous > 100 and checked_random > 500


def test_no_text_is_wasted(wiki):
    """Sentences left over when B is random are put back, so one pass uses almost every sentence."""
    index = TokenIndex(wiki)
    pairs = create_pairs(wiki, max_seq_length=128, short_seq_prob=0.1, dupe_factor=1, rng=random.Random(5))
    used = np.zeros(len(index.text), dtype=bool)
    for p in pairs:
        for segment in (p.tokens_a, None if p.is_random_next else p.tokens_b):
            hits = index.find(segment) if segment else []
            if len(hits) == 1:
                used[hits[0]:hits[0] + len(segment)] = True
    touched = np.mean([used[a:b].any() for a, b in index.sentence_spans])
    # Without the put-back about a quarter of the sentences would be lost.
    assert touched > 0.95, touched


# --------------------------------------------------------------------------- #
# Storage
# --------------------------------------------------------------------------- #
def _files(folder: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in sorted(folder.iterdir())}


def test_same_seed_gives_identical_files(tmp_path):
    docs = synthetic_documents()
    kw = dict(cls_id=CLS, sep_id=SEP, vocab_size=1000, max_seq_length=64, dupe_factor=2, shard_size=40,
              progress=False)
    write_pairs(docs, tmp_path / "a", seed=7, **kw)
    write_pairs(docs, tmp_path / "b", seed=7, **kw)
    write_pairs(docs, tmp_path / "c", seed=8, **kw)
    a, b, c = _files(tmp_path / "a"), _files(tmp_path / "b"), _files(tmp_path / "c")
    assert a == b
    assert a["shard-00000.tokens.npy"] != c["shard-00000.tokens.npy"]


def test_dataset_round_trips_pairs_across_shards(tmp_path):
    docs = synthetic_documents(seed=1)
    stats = write_pairs(docs, tmp_path / "pairs", cls_id=CLS, sep_id=SEP, vocab_size=1000, max_seq_length=48,
                        short_seq_prob=0.2, dupe_factor=2, seed=11, shard_size=17, progress=False)
    expected = create_pairs(docs, max_seq_length=48, short_seq_prob=0.2, dupe_factor=2, rng=random.Random(11))

    ds = PairsDataset(tmp_path / "pairs")
    meta = ds.meta
    assert len(ds) == len(expected) == stats["n_examples"] == meta["n_examples"]
    assert meta["n_shards"] == math.ceil(len(expected) / 17) >= 3
    assert sum(meta["shard_counts"]) == len(expected)
    assert meta["token_dtype"] == "uint16" and meta["settings"]["seed"] == 11 and meta["stats"] == stats
    assert np.load(tmp_path / "pairs" / "shard-00001.tokens.npy", mmap_mode="r").dtype == np.uint16

    for i, p in enumerate(expected):
        item = ds[i]
        assert item["input_ids"].tolist() == [CLS, *p.tokens_a, SEP, *p.tokens_b, SEP]
        assert item["token_type_ids"].tolist() == [0] * (len(p.tokens_a) + 2) + [1] * (len(p.tokens_b) + 1)
        assert item["next_sentence_label"] == int(p.is_random_next)
    assert ds[-1]["input_ids"].tolist() == ds[len(ds) - 1]["input_ids"].tolist()
    with pytest.raises(IndexError):
        ds[len(ds)]

    n_tokens = sum(len(p.tokens_a) + len(p.tokens_b) + 3 for p in expected)
    assert stats["n_tokens"] == n_tokens and stats["mean_length"] == pytest.approx(n_tokens / len(expected))
    assert stats["n_documents"] == sum(1 for d in docs if any(d))
    assert stats["n_sentences"] == sum(1 for d in docs for s in d if s)
    # Pickled for DataLoader workers without dragging shard contents along.
    assert len(pickle.dumps(ds)) < 10_000


def test_large_vocab_uses_uint32(tmp_path):
    docs = [[[70_000, 70_001], [5, 6]], [[7, 8, 9]], [[10], [11, 12]]]
    write_pairs(docs, tmp_path / "p", cls_id=CLS, sep_id=SEP, vocab_size=80_000, max_seq_length=16, progress=False)
    ds = PairsDataset(tmp_path / "p")
    assert ds.meta["token_dtype"] == "uint32"
    assert max(int(ds[i]["input_ids"].max()) for i in range(len(ds))) >= 70_000


# --------------------------------------------------------------------------- #
# Errors and atomicity
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("docs", [[], [[], []], [[[]], [[], []]]])
def test_empty_input_is_refused(docs, tmp_path):
    with pytest.raises(ValueError, match="empty"):
        create_pairs(docs, max_seq_length=32, short_seq_prob=0.1, dupe_factor=1, rng=random.Random(0))
    with pytest.raises(ValueError, match="empty"):
        write_pairs(docs, tmp_path / "p", cls_id=CLS, sep_id=SEP, vocab_size=100, progress=False)
    assert not (tmp_path / "p").exists()


def test_one_document_is_refused():
    one = [[[5, 6, 7], [8, 9]], [], [[]]]
    with pytest.raises(ValueError, match="two non-empty documents"):
        create_pairs(one, max_seq_length=32, short_seq_prob=0.1, dupe_factor=1, rng=random.Random(0))


def test_out_of_vocabulary_id_is_refused(tmp_path):
    docs = [[[5, 6]], [[7, 500]]]
    with pytest.raises(ValueError, match="500"):
        write_pairs(docs, tmp_path / "p", cls_id=CLS, sep_id=SEP, vocab_size=100, progress=False)
    assert list(tmp_path.iterdir()) == []


def test_failed_write_leaves_no_partial_output(tmp_path, monkeypatch):
    docs = synthetic_documents()
    out = tmp_path / "pairs"
    kw = dict(cls_id=CLS, sep_id=SEP, vocab_size=1000, max_seq_length=64, shard_size=20, progress=False)

    real_save = np.save
    calls = {"n": 0}

    def failing_save(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:  # after the first shard is complete
            raise OSError("disk full")
        return real_save(*args, **kwargs)

    monkeypatch.setattr(pairs_mod.np, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        write_pairs(docs, out, seed=1, **kw)
    assert list(tmp_path.iterdir()) == []

    monkeypatch.setattr(pairs_mod.np, "save", real_save)
    write_pairs(docs, out, seed=1, **kw)
    before = _files(out)
    calls["n"] = 0
    monkeypatch.setattr(pairs_mod.np, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        write_pairs(docs, out, seed=2, **kw)
    assert _files(out) == before  # the earlier complete output is untouched
    assert [p.name for p in tmp_path.iterdir()] == ["pairs"]
