"""The demo task: which section of the Bible a verse comes from.

Seven classes of books (Law, History, Wisdom, Prophets, Gospels and Acts,
Epistles, Revelation). Train verses come from chapters in the corpus train
split and dev verses from chapters in the valid split, so no chapter is in both
and the dev text was never seen in pretraining.
"""
from __future__ import annotations

from pipeline.data.corpus import bible_verses, in_valid_split
from pipeline.errors import DataError
from pipeline.finetune.tasks.base import Example, TaskData, sample

SECTIONS = ("Law", "History", "Wisdom", "Prophets", "Gospels and Acts", "Epistles", "Revelation")
# Index of the first book of each section in canonical order (66 books).
_FIRST_BOOK = {"Genesis": 0, "Joshua": 1, "Job": 2, "Isaiah": 3, "Matthew": 4, "Romans": 5, "Revelation": 6}


def book_sections() -> dict[str, int]:
    section, out = 0, {}
    for v in bible_verses():
        if v.book not in out:
            section = _FIRST_BOOK.get(v.book, section)
            out[v.book] = section
    return out


def bible_sections(train_size: int | None, dev_size: int | None, valid_fraction: float,
                   split_seed: int) -> TaskData:
    sections = book_sections()
    train, dev = [], []
    for v in bible_verses():
        ex = Example(v.text, None, sections[v.book])
        (dev if in_valid_split(v.document_id, valid_fraction, split_seed) else train).append(ex)
    if not train or not dev:
        raise DataError(f"bible_sections: valid_fraction={valid_fraction} leaves an empty split")
    return TaskData("bible_sections", list(SECTIONS), sample(train, train_size, split_seed),
                    sample(dev, dev_size, split_seed + 1))
