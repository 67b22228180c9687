"""A tokenized corpus on disk: flat token ids with sentence and document boundaries, memory-mapped.

``encode_corpus`` streams a corpus file (one sentence per line, a blank line
between documents) through the tokenizer in blocks, so memory does not grow
with the corpus; ``EncodedCorpus`` reads the result back without loading it.
"""
from __future__ import annotations

import itertools
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
from tqdm.auto import tqdm

from pipeline.errors import DataError
from pipeline.io import read_versioned
from pipeline.data.shards import token_dtype

CORPUS_VERSION = 1
# Joins a document's sentences so the tokenizer sees one input per document
# (much faster than one per sentence); the corpus reader refuses NUL bytes,
# so it can never occur in the text itself.
_SENTINEL = "\x00"


# --------------------------------------------------------------------------- #
# Encoded corpus
# --------------------------------------------------------------------------- #
class _CorpusWriter:
    """Appends documents to the three flat files of an encoded corpus."""

    def __init__(self, folder: Path, vocab_size: int):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.vocab_size = vocab_size
        self.dtype = token_dtype(vocab_size)
        self._tokens = open(self.folder / "tokens.bin", "wb")
        self._sentences = open(self.folder / "sentences.bin", "wb")
        self._documents = open(self.folder / "documents.bin", "wb")
        self.n_tokens = self.n_sentences = self.n_documents = 0
        self._sentences.write(np.zeros(1, np.int64).tobytes())
        self._documents.write(np.zeros(1, np.int64).tobytes())

    def add(self, ids: np.ndarray, lengths: np.ndarray) -> None:
        """One document: its token ids back to back and its sentences' lengths (empty ones are dropped)."""
        lengths = lengths[lengths > 0]
        if len(lengths) == 0:
            return
        if len(ids) and (int(ids.min()) < 0 or int(ids.max()) >= self.vocab_size):
            bad = int(ids.min()) if int(ids.min()) < 0 else int(ids.max())
            raise DataError(f"token id {bad} is outside the vocabulary [0, {self.vocab_size})")
        self._tokens.write(ids.astype(self.dtype, copy=False).tobytes())
        self._sentences.write((self.n_tokens + np.cumsum(lengths, dtype=np.int64)).tobytes())
        self.n_tokens += int(lengths.sum())
        self.n_sentences += len(lengths)
        self.n_documents += 1
        self._documents.write(np.array([self.n_sentences], np.int64).tobytes())

    def close(self) -> dict:
        for f in (self._tokens, self._sentences, self._documents):
            f.close()
        meta = {"version": CORPUS_VERSION, "token_dtype": self.dtype.name, "vocab_size": self.vocab_size,
                "n_tokens": self.n_tokens, "n_sentences": self.n_sentences, "n_documents": self.n_documents}
        (self.folder / "corpus.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        return meta


class EncodedCorpus:
    """A tokenized corpus on disk, memory-mapped (nothing is read until used).

    ``tokens`` (n_tokens,): ids of all sentences back to back;
    ``sentences`` (n_sentences + 1,) int64: token offset where each sentence starts (last = n_tokens);
    ``documents`` (n_documents + 1,) int64: index of each document's first sentence.
    """

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self.meta = read_versioned(self.folder / "corpus.json", "version", CORPUS_VERSION,
                                   "expected an encoded corpus written by encode_corpus", "re-encode the corpus")
        self.dtype = np.dtype(self.meta["token_dtype"])
        self.vocab_size = int(self.meta["vocab_size"])
        self.n_documents = int(self.meta["n_documents"])
        # Plain ndarray views of the maps: scalar indexing on np.memmap itself is slow.
        self.tokens = self._map("tokens.bin", self.dtype, self.meta["n_tokens"])
        self.sentences = self._map("sentences.bin", np.int64, self.meta["n_sentences"] + 1)
        self.documents = self._map("documents.bin", np.int64, self.n_documents + 1)

    def _map(self, name: str, dtype, n: int) -> np.ndarray:
        path = self.folder / name
        expected = n * np.dtype(dtype).itemsize
        if not path.is_file() or path.stat().st_size != expected:
            size = path.stat().st_size if path.is_file() else "missing"
            raise DataError(f"{path}: expected {expected} bytes, found {size}; re-encode the corpus")
        if n == 0:
            return np.zeros(0, dtype)
        return np.memmap(path, dtype=dtype, mode="r", shape=(n,)).view(np.ndarray)

    def document(self, d: int) -> list[np.ndarray]:
        """The sentences of document ``d`` as arrays of ids (for tests and inspection)."""
        s0, s1 = int(self.documents[d]), int(self.documents[d + 1])
        offs = self.sentences[s0:s1 + 1]
        return [np.asarray(self.tokens[offs[j]:offs[j + 1]]) for j in range(s1 - s0)]

    def document_of_token(self, offset: int) -> int:
        """The document holding the token at flat ``offset``."""
        s = int(np.searchsorted(self.sentences, offset, side="right")) - 1
        return int(np.searchsorted(self.documents, s, side="right")) - 1


def encode_documents_to_corpus(documents: Iterable[Sequence[Sequence[int]]], folder: str | Path,
                               vocab_size: int) -> EncodedCorpus:
    """Store documents already given as token ids (sentences of ids) as an ``EncodedCorpus``."""
    w = _CorpusWriter(Path(folder), vocab_size)
    for doc in documents:
        lengths = np.array([len(s) for s in doc], dtype=np.int64)
        ids = np.fromiter((t for s in doc for t in s), dtype=np.int64, count=int(lengths.sum()))
        w.add(ids, lengths)
    w.close()
    return EncodedCorpus(folder)


_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")  # a line break, then a line of nothing but spaces


def _document_batches(path: Path, batch_chars: int, bar) -> Iterator[list[str]]:
    """Documents of a corpus file (sentences joined by newlines), in batches of about ``batch_chars``.

    Read in large blocks and split on blank lines in C, so the cost per
    sentence stays inside the tokenizer.
    """
    rest = ""
    try:
        with open(path, encoding="utf-8") as f:
            while True:
                block = f.read(batch_chars)
                if "\x00" in block:
                    raise DataError(f"{path}: contains NUL bytes; expected a UTF-8 text file, this looks binary")
                bar.update(len(block))
                if not block:
                    break
                docs = _BLANK_LINE.split(rest + block)
                rest = docs.pop()  # may continue in the next block
                if docs:
                    yield docs
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not valid UTF-8 (byte {e.start} of a block: {e.reason})") from None
    if rest.strip():
        yield [rest]


# ASCII control characters other than tab, newline and carriage return: the
# BERT normalizer deletes them, so text holding them takes the full path.
_ASCII_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class _FastEncoder:
    """Encodes documents to ids, sentence by sentence, in one tokenizer call per batch.

    A document's sentences are joined by a sentinel token the tokenizer splits
    on. With the BERT normalizer, runs of plain-ASCII sentences skip it: on
    ASCII text without control characters it only lowercases (accent
    stripping, CJK spacing and control removal have nothing to act on), so
    ``str.lower`` and the same tokenizer without its normalizer give the same
    ids, at about 60% of the cost. Text that looks like a special token
    (``[MASK]``) is tokenized as text, as the original tokenizer does.
    """

    def __init__(self, tok):
        from tokenizers import AddedToken, Tokenizer

        self.vocab_size = tok.get_vocab_size()
        spec = tok.to_str()
        self.full = Tokenizer.from_str(spec)
        self.full.encode_special_tokens = True
        self.full.add_tokens([AddedToken(_SENTINEL, normalized=False, special=False)])
        self.sentinel = self.full.token_to_id(_SENTINEL)
        norm = json.loads(spec).get("normalizer") or {}
        self.plain = None
        if norm.get("type") == "BertNormalizer" and norm.get("clean_text", True):
            self.lowercase = bool(norm.get("lowercase", True))
            self.plain = Tokenizer.from_str(spec)
            self.plain.normalizer = None
            self.plain.encode_special_tokens = True
            self.plain.add_tokens([AddedToken(_SENTINEL, normalized=False, special=False)])
            if self.plain.token_to_id(_SENTINEL) != self.sentinel:  # both are copies of one tokenizer
                raise RuntimeError("the sentinel token got different ids in the two tokenizer copies")

    def _is_plain(self, sentence: str) -> bool:
        return sentence.isascii() and not _ASCII_CONTROL.search(sentence)

    def prepare(self, docs: list[str]) -> tuple[list[str], list[str], list[list[tuple[bool, int]]]]:
        """Tokenizer inputs for documents (sentences separated by newlines): (full, plain, plan per document).

        A document's plan lists its runs of sentences in order: (plain?, index into that input list).
        """
        if self.plain is None:
            return [d.replace("\n", _SENTINEL) for d in docs], [], [[(False, i)] for i in range(len(docs))]
        inputs: tuple[list[str], list[str]] = ([], [])  # (full, plain)
        plans = []
        for doc in docs:
            plan = []
            for plain, run in itertools.groupby(doc.split("\n"), key=self._is_plain):
                text = _SENTINEL.join(run)
                if plain and self.lowercase:
                    text = text.lower()
                plan.append((plain, len(inputs[plain])))
                inputs[plain].append(text)
            plans.append(plan)
        return inputs[0], inputs[1], plans

    def tokenize(self, full: list[str], plain: list[str]) -> tuple[list, list]:
        """Both tokenizer calls (they release the GIL, so this runs well in a thread)."""
        return (self.full.encode_batch_fast(full, add_special_tokens=False) if full else [],
                self.plain.encode_batch_fast(plain, add_special_tokens=False) if plain else [])

    def store(self, plans: list[list[tuple[bool, int]]], outs: tuple[list, list], w: "_CorpusWriter") -> None:
        for plan in plans:
            parts, lengths = [], []
            for plain, i in plan:
                ids = np.asarray(outs[plain][i].ids, dtype=np.int64)
                bounds = np.concatenate(([-1], np.flatnonzero(ids == self.sentinel), [len(ids)]))
                parts.append(ids[ids != self.sentinel])
                lengths.append(np.diff(bounds) - 1)
            if parts:
                w.add(np.concatenate(parts), np.concatenate(lengths))


def encode_corpus(tok, text_path: str | Path, folder: str | Path, *, progress: bool = True,
                  batch_chars: int = 1 << 20) -> EncodedCorpus:
    """Tokenize a corpus file (one sentence per line, blank line between documents) into ``folder``.

    Streams the file in batches of about ``batch_chars`` characters; the
    tokenizer spreads each batch over all cores while this thread reads the
    file and stores the previous batch. The ids are those of ``tok`` on each
    sentence alone, except that text looking like a special token is text.
    """
    text_path = Path(text_path)
    if not text_path.is_file():
        raise DataError(f"{text_path}: corpus file not found (has prepare_corpus run?)")
    encoder = _FastEncoder(tok)
    w = _CorpusWriter(Path(folder), encoder.vocab_size)
    with tqdm(total=text_path.stat().st_size, desc=f"encode {text_path.name}", unit="B", unit_scale=True,
              disable=not progress, mininterval=1.0) as bar, ThreadPoolExecutor(1) as pool:
        # Three stages in flight: the tokenizer works on batch k in a thread
        # while this one prepares batch k + 1 and stores batch k - 1.
        pending = None
        for batch in _document_batches(text_path, batch_chars, bar):
            full, plain, plans = encoder.prepare(batch)
            job = pool.submit(encoder.tokenize, full, plain)
            if pending is not None:
                encoder.store(pending[0], pending[1].result(), w)
                bar.set_postfix(docs=w.n_documents, tokens=w.n_tokens, refresh=False)
            pending = (plans, job)
        if pending is not None:
            encoder.store(pending[0], pending[1].result(), w)
        bar.set_postfix(docs=w.n_documents, tokens=w.n_tokens)
    w.close()
    return EncodedCorpus(folder)
