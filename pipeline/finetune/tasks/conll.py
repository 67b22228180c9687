"""Named-entity recognition from CoNLL-2003-format files.

One token per line with its tags in columns (the word first, the NER tag in
the last column by default), a blank line between sentences, ``-DOCSTART-``
lines between documents. Tags are IOB1 (CoNLL-2003 as released: ``I-`` opens
an entity unless it continues one of the same type) or IOB2 (every entity
opens with ``B-``); either way they are converted to IOB2, and scored by
entity-level F1 (``seqeval``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import DataError
from pipeline.finetune.tasks.base import sample

SCHEMES = ("iob1", "iob2")


@dataclass(frozen=True)
class Sentence:
    words: tuple[str, ...]
    tags: tuple[int, ...]  # indices into NerTask.labels (IOB2)


NER_METRICS = ("f1", "precision", "recall")  # entity level


@dataclass
class NerTask:
    name: str
    labels: list[str]        # IOB2 tags, "O" first
    train: list[Sentence]
    dev: list[Sentence]
    metrics: list[str] = field(default_factory=lambda: list(NER_METRICS))
    regression: bool = False
    kind: str = "ner"
    test: list[Sentence] = field(default_factory=list)  # the protocol's split of ``dev`` (tasks.base.split_heldout)

    @property
    def num_outputs(self) -> int:
        return len(self.labels)


def to_iob2(tags: list[str]) -> list[str]:
    """IOB1 -> IOB2: an ``I-X`` that does not continue an ``X`` entity opens one (``B-X``)."""
    out = []
    for i, t in enumerate(tags):
        if t.startswith("I-") and (i == 0 or out[i - 1] == "O" or out[i - 1][2:] != t[2:]):
            t = "B-" + t[2:]
        out.append(t)
    return out


def read_conll(path: str | Path, *, tag_column: int = -1) -> list[tuple[list[str], list[str]]]:
    """Sentences as (words, tags) with the tags as written."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    sentences, words, tags = [], [], []
    try:
        with open(path, encoding="utf-8-sig") as f:
            for n, line in enumerate(f, start=1):
                line = line.strip()
                if not line or line.startswith("-DOCSTART-"):
                    if words:
                        sentences.append((words, tags))
                    words, tags = [], []
                    continue
                cols = line.split()
                if len(cols) < 2:
                    raise DataError(f"{path}:{n}: {line!r} has {len(cols)} column; expected a word and its tag(s)")
                try:
                    tag = cols[tag_column]
                except IndexError:
                    raise DataError(f"{path}:{n}: no tag column {tag_column} in {len(cols)} columns") from None
                if tag != "O" and not (tag[:2] in ("B-", "I-") and len(tag) > 2):
                    raise DataError(f"{path}:{n}: tag {tag!r} is not O, B-<type> or I-<type>")
                words.append(cols[0])
                tags.append(tag)
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not valid UTF-8 (byte {e.start}: {e.reason})") from None
    if words:
        sentences.append((words, tags))
    if not sentences:
        raise DataError(f"{path}: no sentences (the split is empty)")
    return sentences


def conll(name: str, train: str, dev: str, *, scheme: str = "iob1", tag_column: int = -1,
          train_size: int | None = None, dev_size: int | None = None, seed: int = 0) -> NerTask:
    if scheme not in SCHEMES:
        raise DataError(f"task.data.scheme={scheme!r}: expected one of {', '.join(SCHEMES)}")
    splits = []
    for path in (train, dev):
        sents = read_conll(path, tag_column=tag_column)
        splits.append([(w, to_iob2(t) if scheme == "iob1" else t) for w, t in sents])
    types = sorted({t[2:] for _, tags in splits[0] for t in tags if t != "O"})
    labels = ["O"] + [f"{p}-{x}" for x in types for p in ("B", "I")]
    index = {t: i for i, t in enumerate(labels)}
    out = []
    for path, sents in zip((train, dev), splits):
        converted = []
        for words, tags in sents:
            unknown = [t for t in tags if t not in index]
            if unknown:
                raise DataError(f"{path}: tag {unknown[0]!r} does not occur in the train split "
                                f"(its entity types: {', '.join(types) or 'none'})")
            converted.append(Sentence(tuple(words), tuple(index[t] for t in tags)))
        out.append(converted)
    return NerTask(name, labels, sample(out[0], train_size, seed), sample(out[1], dev_size, seed + 1))
