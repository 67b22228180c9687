"""The demo tasks, built from the corpus offline: which section of the Bible a verse comes from, whether a
verse's words are in their own order, and whether one verse follows another (a sentence-pair task).

``bible_sections`` has seven classes of books (Law, History, Wisdom, Prophets,
Gospels and Acts, Epistles, Revelation). It is largely a question of which words
a verse uses: with every verse's words shuffled it stays learnable (the report's
word-order control says by how much).

``word_order`` asks for reading: half of the verses are as written, the other
half have two pairs of their words swapped (different words, anywhere in the
verse; the punctuation and the case of each position stay where they were, so
only the order of the words tells the two apart). Both classes hold the same
bag of words, so no bag-of-words model can do better than chance; a model has to
know where words go. Which verses are swapped, and which two words, follow from
``split_seed`` and the verse alone: the task is the same on every machine.

``verse_next`` is the sentence-pair one: a verse as A, and as B either the
verse after it or a verse from another chapter of the same book. Both sides
come from one book, so which section or book a verse is from does not tell the
classes apart; how B follows A does. It asks, verse by verse and within a book,
what next-sentence prediction asks of segments across the corpus.

For all three, train verses come from chapters in the corpus train split, and the
held-out verses (``dev_size`` of them) from chapters in the valid split, so no
chapter is in both and no held-out text was seen in pretraining. Every example
carries its chapter as its group: the fine-tuning protocol splits the held-out
verses into dev and test by chapter (``pipeline.finetune.tasks.base.split_heldout``).
"""
from __future__ import annotations

import hashlib
import random
import re

from pipeline.data.corpus import Verse, bible_verses, in_valid_split
from pipeline.errors import DataError
from pipeline.finetune.tasks.base import Example, TaskData, sample

SECTIONS = ("Law", "History", "Wisdom", "Prophets", "Gospels and Acts", "Epistles", "Revelation")
# Index of the first book of each section in canonical order (66 books).
_FIRST_BOOK = {"Genesis": 0, "Joshua": 1, "Job": 2, "Isaiah": 3, "Matthew": 4, "Romans": 5, "Revelation": 6}
WORD_ORDER_LABELS = ("swapped", "original")
VERSE_NEXT_LABELS = ("other chapter", "next")
_WORD = re.compile(r"^(\W*)(\w(?:.*\w)?)(\W*)$")  # leading punctuation, the word, trailing punctuation


def book_sections() -> dict[str, int]:
    section, out = 0, {}
    for v in bible_verses():
        if v.book not in out:
            section = _FIRST_BOOK.get(v.book, section)
            out[v.book] = section
    return out


def _split(valid_fraction: float, split_seed: int) -> tuple[list[Verse], list[Verse]]:
    """(train-chapter verses, held-out-chapter verses), in canonical order."""
    train, held_out = [], []
    for v in bible_verses():
        (held_out if in_valid_split(v.document_id, valid_fraction, split_seed) else train).append(v)
    if not train or not held_out:
        raise DataError(f"valid_fraction={valid_fraction} leaves an empty split of the Bible's chapters")
    return train, held_out


def bible_sections(train_size: int | None, dev_size: int | None, valid_fraction: float,
                   split_seed: int) -> TaskData:
    sections = book_sections()
    train, held_out = _split(valid_fraction, split_seed)

    def examples(verses: list[Verse]) -> list[Example]:
        return [Example(v.text, None, sections[v.book], group=v.document_id) for v in verses]

    return TaskData("bible_sections", list(SECTIONS), sample(examples(train), train_size, split_seed),
                    sample(examples(held_out), dev_size, split_seed + 1))


def _words(text: str) -> tuple[list[str], list[re.Match | None]]:
    tokens = text.split()
    return tokens, [_WORD.match(t) for t in tokens]


def distinct_words(text: str) -> int:
    """How many different words (case aside) a text has: one with ``2 k`` can take ``k`` swaps."""
    _, parts = _words(text)
    return len({m.group(2).lower() for m in parts if m})


def swap_words(text: str, rng: random.Random, swaps: int = 2) -> str | None:
    """``text`` with ``swaps`` pairs of different words trading places (no word moved twice), each position
    keeping its punctuation and the case of its first letter (a word in capitals, such as LORD, keeps its own);
    None if the text has too few different words."""
    tokens, parts = _words(text)
    words = [i for i, m in enumerate(parts) if m]
    rng.shuffle(words)
    pairs, used = [], set()
    for i in words:
        if len(pairs) == swaps:
            break
        if i in used:
            continue
        j = next((j for j in words if j not in used and j != i
                  and parts[j].group(2).lower() != parts[i].group(2).lower()), None)
        if j is not None:
            pairs.append((i, j))
            used.update((i, j))
    if len(pairs) < swaps:
        return None

    def placed(word: str, displaced: str) -> str:
        if len(word) > 1 and word.isupper():
            return word
        first = word[0].upper() if displaced[0].isupper() else word[0].lower()
        return first + word[1:]

    out = list(tokens)
    for i, j in pairs:
        for at, other in ((i, j), (j, i)):
            lead, word, trail = parts[at].groups()
            out[at] = lead + placed(parts[other].group(2), word) + trail
    return " ".join(out)


def _coin(split_seed: int, verse: Verse) -> random.Random:
    """The verse's own random numbers: whether it is swapped, and which two words (independent of every other)."""
    key = f"{split_seed}:{verse.book}:{verse.chapter}:{verse.verse}".encode()
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


def word_order(train_size: int | None, dev_size: int | None, valid_fraction: float, split_seed: int,
               min_words: int = 6, swaps: int = 2) -> TaskData:
    """Is the verse in its own word order (``original``) or were ``swaps`` pairs of its words swapped
    (``swapped``)? Verses of at least ``min_words`` words, and enough different ones for the swaps, each drawn
    to one class with probability 1/2."""
    for key, value, least in (("min_words", min_words, 2), ("swaps", swaps, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise DataError(f"task.data.{key}={value!r} is not allowed: expected an integer >= {least}")
    train, held_out = _long_enough(_split(valid_fraction, split_seed), min_words, swaps)

    def examples(verses: list[Verse]) -> list[Example]:
        out = []
        for v in verses:
            rng = _coin(split_seed, v)
            swapped = swap_words(v.text, rng, swaps) if rng.random() < 0.5 else None
            out.append(Example(swapped or v.text, None, 0 if swapped else 1, group=v.document_id))
        return out

    return TaskData("word_order", list(WORD_ORDER_LABELS), examples(sample(train, train_size, split_seed)),
                    examples(sample(held_out, dev_size, split_seed + 1)))


def _long_enough(sides: tuple[list[Verse], list[Verse]], min_words: int, swaps: int) -> list[list[Verse]]:
    """The train and held-out verses of at least ``min_words`` words with ``2 swaps`` different ones. A setting
    that leaves a side without a verse is refused naming it and the most that side's verses allow: the split is
    not at fault."""
    for key, value, room in (("min_words", min_words, lambda v: len(v.text.split())),
                             ("swaps", swaps, lambda v: distinct_words(v.text) // 2)):
        rooms = [[room(v) for v in verses] for verses in sides]  # once a verse: 31,000 of them
        most, side = min((max(r), side) for side, r in zip(("train", "held-out"), rooms))
        if value > most:
            having = f"{min_words} words" if key == "min_words" else \
                f"{2 * swaps} different words and at least {min_words} words"
            raise DataError(f"task.data.{key}={value} is not allowed: expected at most {most} (no verse of the "
                            f"{side} chapters has {having})")
        sides = tuple([v for v, n in zip(verses, r) if n >= value] for verses, r in zip(sides, rooms))
    return list(sides)


def verse_next(train_size: int | None, dev_size: int | None, valid_fraction: float, split_seed: int) -> TaskData:
    """Is B the verse after A (``next``), or a verse from another chapter of the same book (``other chapter``)?
    Each chapter's verses are paired 1-2, 3-4, ... (no verse is an A twice); each pair is drawn to one class with
    probability 1/2, and an ``other chapter`` B comes from the same split, so held-out pairs hold held-out text
    only. A pair whose book has no other chapter in its split is left out."""
    train, held_out = _split(valid_fraction, split_seed)

    def examples(verses: list[Verse]) -> list[Example]:
        by_book: dict[str, list[Verse]] = {}
        for v in verses:
            by_book.setdefault(v.book, []).append(v)
        out = []
        for a, b in zip(verses[::2], verses[1::2]):  # a chapter's verses are consecutive: both splits keep chapters
            if a.document_id != b.document_id or b.verse != a.verse + 1:
                continue
            rng = _coin(split_seed, a)
            if rng.random() < 0.5:
                out.append(Example(a.text, b.text, 1, group=a.document_id))
                continue
            others = [v for v in by_book[a.book] if v.chapter != a.chapter]
            if others:
                out.append(Example(a.text, rng.choice(others).text, 0, group=a.document_id))
        return out

    return TaskData("verse_next", list(VERSE_NEXT_LABELS), sample(examples(train), train_size, split_seed),
                    sample(examples(held_out), dev_size, split_seed + 1))
