"""What every fine-tuning task provides, and how its predictions are scored."""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Sequence, TypeVar

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


@dataclass
class TaskData:
    name: str
    labels: list[str]
    train: list[Example]
    dev: list[Example]
    metrics: list[str] = field(default_factory=lambda: list(DEFAULT_METRICS))  # the first is the headline metric
    regression: bool = False
    kind: str = "sentence"  # which runner the finetune stage gives it (NerTask: "ner", SquadTask: "span")

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
