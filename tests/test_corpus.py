"""prepare_corpus: the sources, the split by document, and clean errors with no partial output."""
from __future__ import annotations

import json

import pytest

from pipeline.data.corpus import (bible_documents, bible_verses, prepare_corpus, read_documents, text_documents,
                             wikitext_documents)
from pipeline.errors import DataError

from conftest import shared_data


def test_bible_is_1189_chapters_of_31103_verses():
    docs = list(bible_documents())
    assert len(docs) == 1189
    assert sum(len(d.sentences) for d in docs) == len(bible_verses()) == 31103
    assert docs[0].id == "Genesis 1" and docs[0].sentences[0].startswith("In the beginning God created")


def test_split_is_by_document_deterministic_and_complete(tmp_path):
    docs = list(bible_documents())
    stats = prepare_corpus(docs, tmp_path / "a", valid_fraction=0.1, seed=7, progress=False)
    prepare_corpus(docs, tmp_path / "b", valid_fraction=0.1, seed=7, progress=False)
    for split in ("train.txt", "valid.txt"):
        assert (tmp_path / "a" / split).read_bytes() == (tmp_path / "b" / split).read_bytes()
    train, valid = list(read_documents(tmp_path / "a" / "train.txt")), list(read_documents(tmp_path / "a" / "valid.txt"))
    assert len(train) + len(valid) == 1189
    assert 0.07 < len(valid) / 1189 < 0.13
    assert stats["train"]["documents"] == len(train)
    ids = json.loads((tmp_path / "a" / "documents.json").read_text())
    assert not set(ids["train"]) & set(ids["valid"]) and len(ids["train"]) == len(train)
    prepare_corpus(docs, tmp_path / "c", valid_fraction=0.1, seed=8, progress=False)
    assert (tmp_path / "c" / "valid.txt").read_bytes() != (tmp_path / "a" / "valid.txt").read_bytes()


def test_text_files_in_bert_format(tmp_path):
    f = tmp_path / "corpus.txt"
    f.write_text("First sentence.\nSecond sentence.\n\n\nOther doc one.\n  Other doc\ttwo.  \n")
    docs = list(text_documents([str(f)]))
    assert [d.sentences for d in docs] == [["First sentence.", "Second sentence."],
                                           ["Other doc one.", "  Other doc\ttwo.  ".strip()]]


def test_raw_paragraphs_are_sentence_split(tmp_path):
    f = tmp_path / "raw.txt"
    f.write_text("Mr. Smith went to Washington. He arrived at 5 p.m. on Monday. It rained.\n")
    docs = list(text_documents([str(f)], segment=True))
    assert docs[0].sentences == ["Mr. Smith went to Washington.", "He arrived at 5 p.m. on Monday.", "It rained."]


def test_wikitext_articles_become_documents():
    path = shared_data("wikitext-2", "valid.txt")
    docs = list(wikitext_documents([str(path)]))
    assert len(docs) == 60  # top-level articles in WikiText-2 valid
    assert docs[0].id.endswith("Homarus gammarus")
    assert all(not s.startswith(" = ") for d in docs for s in d.sentences)
    assert sum(len(d.sentences) for d in docs) > 5 * len(docs)


@pytest.mark.parametrize("content, message", [
    (b"", "is empty"),
    (b"\n\n   \n", "is empty"),
    (b"one.\n\ntwo.\n\nthree.\n", "every document is one sentence long"),
    (b"caf\xe9 au lait\n", "not valid UTF-8"),
    (b"\x00\x01\x02binary\x00", "looks binary"),
])
def test_bad_corpora_fail_cleanly_without_output(tmp_path, content, message):
    f = tmp_path / "in.txt"
    f.write_bytes(content)
    with pytest.raises(DataError, match=message) as e:
        prepare_corpus(text_documents([str(f)]), tmp_path / "out", valid_fraction=0.1, seed=0, progress=False)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["in.txt"]


def test_missing_file_is_named(tmp_path):
    with pytest.raises(DataError, match="no file matches '.*nope.txt'"):
        list(text_documents([str(tmp_path / "nope.txt")]))


def test_failed_run_keeps_earlier_output(tmp_path):
    good = tmp_path / "good.txt"
    good.write_text("a b.\nc d.\n\ne f.\ng h.\n\ni j.\nk l.\n")
    prepare_corpus(text_documents([str(good)]), tmp_path / "out", valid_fraction=0.3, seed=0, progress=False)
    before = (tmp_path / "out" / "train.txt").read_bytes()
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(DataError):
        prepare_corpus(text_documents([str(empty)]), tmp_path / "out", valid_fraction=0.3, seed=0, progress=False)
    assert (tmp_path / "out" / "train.txt").read_bytes() == before
