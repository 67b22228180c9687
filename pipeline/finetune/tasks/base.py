"""What every fine-tuning task provides, how its held-out examples split into dev and test, its word-order
control, and how its predictions are scored."""
from __future__ import annotations

import dataclasses
import hashlib
import random
from dataclasses import dataclass, field
from typing import Any, Sequence, TypeVar

from pipeline.errors import DataError

T = TypeVar("T")

# Official GLUE metrics and the rest a task may ask for.
METRICS = ("accuracy", "f1", "matthews", "pearson", "spearman")
DEFAULT_METRICS = ("accuracy",)  # a classification task's, unless it says
REGRESSION_METRICS = ("pearson", "spearman")


def chosen_metrics(metrics: Sequence[str] | None, regression: bool) -> list[str]:
    """A table or dataset task's metrics: those it names, else its kind's default."""
    return list(metrics or (REGRESSION_METRICS if regression else DEFAULT_METRICS))


@dataclass(frozen=True)
class Example:
    text_a: str
    text_b: str | None
    label: int | float  # index into TaskData.labels, or the target of a regression task
    group: str | None = None  # examples that share a source (a chapter): split into dev and test together


@dataclass
class TaskData:
    name: str
    labels: list[str]
    train: list[Example]
    dev: list[Example]      # a loader's held-out examples; the protocol splits them into dev and ``test``
    metrics: list[str] = field(default_factory=lambda: list(DEFAULT_METRICS))  # the first is the headline metric
    regression: bool = False
    kind: str = "sentence"  # which runner the finetune stage gives it (NerTask: "ner", SquadTask: "span")
    test: list[Example] = field(default_factory=list)  # set by ``split_heldout``: never read before a choice

    @property
    def is_pair(self) -> bool:
        return any(e.text_b is not None for e in self.train[:10])

    @property
    def num_outputs(self) -> int:
        return 1 if self.regression else len(self.labels)


def sample(items: Sequence[T], n: int | None, seed: int) -> list[T]:
    """``n`` items drawn without replacement (all of them, in order, when ``n`` is None or too large)."""
    if n is None or n >= len(items):
        return list(items)
    return random.Random(seed).sample(list(items), n)


def score(metrics: Sequence[str], predictions, targets, num_classes: int) -> dict[str, float]:
    """The task's metrics (torchmetrics) for predicted classes (or values, for regression) against targets."""
    import torch
    from torchmetrics.functional import (accuracy, f1_score, matthews_corrcoef, pearson_corrcoef,
                                         spearman_corrcoef)

    p, t = torch.as_tensor(predictions), torch.as_tensor(targets)
    out = {}
    for m in metrics:
        if m == "accuracy":
            out[m] = accuracy(p, t, task="multiclass", num_classes=num_classes, average="micro")
        elif m == "f1":  # of the positive class, as GLUE scores MRPC and QQP
            out[m] = f1_score(p, t, task="binary")
        elif m == "matthews":
            out[m] = matthews_corrcoef(p, t, task="multiclass", num_classes=num_classes)
        elif m == "pearson":
            out[m] = pearson_corrcoef(p.float(), t.float())
        elif m == "spearman":
            out[m] = spearman_corrcoef(p.float(), t.float())
        else:
            raise ValueError(f"unknown metric {m!r}; known: {', '.join(METRICS)}")
    return {k: round(float(v), 6) for k, v in out.items()}


def _group(item: Any, index: int) -> str:
    """The unit a held-out example moves with: its group (a Bible chapter), its article (SQuAD), else itself."""
    return getattr(item, "group", None) or getattr(item, "title", None) or f"#{index}"


def split_heldout(task: T, test_fraction: float, seed: int) -> T:
    """``task`` with its held-out examples (a loader's ``dev``) split into ``dev`` (where every choice is made)
    and ``test`` (reported, read only after the choices): whole groups drawn at random (seeded), a share
    ``test_fraction`` of them to test. The draw depends on the groups alone, so every run of a grid, and every
    mode, splits the same way."""
    items = list(task.dev)
    groups = list(dict.fromkeys(_group(x, i) for i, x in enumerate(items)))
    rng = random.Random(int.from_bytes(hashlib.sha256(f"{seed}:{task.name}".encode()).digest()[:8], "big"))
    order = sorted(groups)
    rng.shuffle(order)
    n_test = round(test_fraction * len(order))
    if n_test == 0 or n_test == len(order):
        raise DataError(f"finetune.test_fraction={test_fraction} leaves the {'test' if n_test == 0 else 'dev'} "
                        f"split of task {task.name} empty: its {len(items)} held-out examples form {len(order)} "
                        "groups; expected a share that puts at least one group on each side")
    test_groups = set(order[:n_test])
    dev = [x for i, x in enumerate(items) if _group(x, i) not in test_groups]
    test = [x for i, x in enumerate(items) if _group(x, i) in test_groups]
    return dataclasses.replace(task, dev=dev, test=test)


def shuffle_text(text: str, rng: random.Random) -> str:
    words = text.split()
    rng.shuffle(words)
    return " ".join(words)


def shuffled_words(task: T, seed: int) -> T | None:
    """The word-order control: ``task`` with the words of every text shuffled (whitespace-separated words, each
    text by its own seeded draw), in train, dev and test alike; labels unchanged. A label per word (NER) moves
    with its word. None for a task whose labels point into its text (SQuAD's answer offsets)."""
    def texts(x: Any, rng: random.Random) -> Any:
        if isinstance(x, Example):
            return dataclasses.replace(x, text_a=shuffle_text(x.text_a, rng),
                                       text_b=None if x.text_b is None else shuffle_text(x.text_b, rng))
        if hasattr(x, "words") and hasattr(x, "tags"):
            order = list(range(len(x.words)))
            rng.shuffle(order)
            return dataclasses.replace(x, words=tuple(x.words[i] for i in order), tags=tuple(x.tags[i] for i in order))
        return None

    out = {}
    for split in ("train", "dev", "test"):
        items = []
        for i, x in enumerate(getattr(task, split)):
            y = texts(x, random.Random(f"{seed}:{split}:{i}"))
            if y is None:
                return None
            items.append(y)
        out[split] = items
    return dataclasses.replace(task, name=f"{task.name} (words shuffled)", **out)
