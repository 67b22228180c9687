"""Every GLUE task from a data directory in GLUE's standard layout (``<dir>/<TASK>/{train,dev}.tsv``).

Each task with its official metric: Matthews correlation for CoLA, F1 and
accuracy for MRPC and QQP, Pearson and Spearman correlation for STS-B,
accuracy elsewhere. Files are read with quoting off (MRPC's text holds bare
``"`` characters) and a byte-order mark dropped (MRPC's header starts with one).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import DataError
from pipeline.finetune.tasks.base import TaskData, sample
from pipeline.finetune.tasks.table import read_examples


@dataclass(frozen=True)
class GlueSpec:
    folder: str
    text_a: str | int
    text_b: str | int | None
    label: str | int
    labels: tuple[str, ...]          # empty for regression
    metrics: tuple[str, ...]
    header: bool = True
    dev_file: str = "dev.tsv"


_NLI = ("entailment", "not_entailment")
GLUE_TASKS = {
    "CoLA": GlueSpec("CoLA", 3, None, 1, ("0", "1"), ("matthews",), header=False),
    "SST-2": GlueSpec("SST-2", "sentence", None, "label", ("0", "1"), ("accuracy",)),
    "MRPC": GlueSpec("MRPC", "#1 String", "#2 String", "Quality", ("0", "1"), ("f1", "accuracy")),
    "STS-B": GlueSpec("STS-B", "sentence1", "sentence2", "score", (), ("pearson", "spearman")),
    "QQP": GlueSpec("QQP", "question1", "question2", "is_duplicate", ("0", "1"), ("f1", "accuracy")),
    "MNLI-m": GlueSpec("MNLI", "sentence1", "sentence2", "gold_label", ("contradiction", "entailment", "neutral"),
                       ("accuracy",), dev_file="dev_matched.tsv"),
    "MNLI-mm": GlueSpec("MNLI", "sentence1", "sentence2", "gold_label", ("contradiction", "entailment", "neutral"),
                        ("accuracy",), dev_file="dev_mismatched.tsv"),
    "QNLI": GlueSpec("QNLI", "question", "sentence", "label", _NLI, ("accuracy",)),
    "RTE": GlueSpec("RTE", "sentence1", "sentence2", "label", _NLI, ("accuracy",)),
    "WNLI": GlueSpec("WNLI", "sentence1", "sentence2", "label", ("0", "1"), ("accuracy",)),
}


def glue(name: str, data_dir: str, train_size: int | None = None, dev_size: int | None = None,
         seed: int = 0) -> TaskData:
    if name not in GLUE_TASKS:
        raise DataError(f"task.data.name={name!r} is not a GLUE task; the tasks are: {', '.join(GLUE_TASKS)}")
    spec = GLUE_TASKS[name]
    folder = Path(data_dir) / spec.folder
    if not folder.is_dir():
        raise DataError(f"{folder}: GLUE task folder not found (set task.data.data_dir to your GLUE data directory)")
    regression = not spec.labels
    labels = list(spec.labels) or None
    kw = dict(text_a=spec.text_a, text_b=spec.text_b, label=spec.label, labels=labels, regression=regression,
              fmt="tsv", header=spec.header)
    train = read_examples(folder / "train.tsv", **kw)
    dev = read_examples(folder / spec.dev_file, **kw)
    if not regression:
        train = [type(e)(e.text_a, e.text_b, labels.index(e.label)) for e in train]
        dev = [type(e)(e.text_a, e.text_b, labels.index(e.label)) for e in dev]
    return TaskData(name, list(spec.labels), sample(train, train_size, seed), sample(dev, dev_size, seed + 1),
                    metrics=list(spec.metrics), regression=regression)
