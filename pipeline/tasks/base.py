from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Example:
    text_a: str
    text_b: str | None
    label: int  # index into TaskData.labels


@dataclass
class TaskData:
    name: str
    labels: list[str]
    train: list[Example]
    dev: list[Example]

    @property
    def is_pair(self) -> bool:
        return any(e.text_b is not None for e in self.train[:10])


def sample(items: Sequence[T], n: int | None, seed: int) -> list[T]:
    """``n`` items drawn without replacement (all of them, in order, when ``n`` is None or too large)."""
    if n is None or n >= len(items):
        return list(items)
    return random.Random(seed).sample(list(items), n)
