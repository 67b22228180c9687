"""GLUE tasks from a data directory in GLUE's standard layout (``<dir>/<TASK>/{train,dev}.tsv``).

The files are read as plain tab-separated lines with CSV quoting off: MRPC's
text holds bare ``"`` characters and its header starts with a byte-order mark.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import DataError
from pipeline.tasks.base import Example, TaskData, sample


@dataclass(frozen=True)
class GlueSpec:
    text_a: str
    text_b: str | None
    label: str
    labels: tuple[str, ...]


GLUE_TASKS = {
    "SST-2": GlueSpec("sentence", None, "label", ("0", "1")),
    "MRPC": GlueSpec("#1 String", "#2 String", "Quality", ("0", "1")),
}


def read_tsv(path: Path, spec: GlueSpec) -> list[Example]:
    if not path.exists():
        raise DataError(f"{path}: file not found")
    with open(path, encoding="utf-8-sig") as f:  # utf-8-sig drops the byte-order mark
        lines = f.read().split("\n")
    header = lines[0].rstrip("\r").split("\t")
    wanted = [spec.text_a, spec.label] + ([spec.text_b] if spec.text_b else [])
    missing = [c for c in wanted if c not in header]
    if missing:
        raise DataError(f"{path}: header has columns {header}; expected {wanted} (missing {missing})")
    col = {c: header.index(c) for c in wanted}
    examples = []
    for n, line in enumerate(lines[1:], start=2):
        line = line.rstrip("\r")
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) != len(header):
            raise DataError(f"{path}:{n}: {len(fields)} tab-separated columns, expected {len(header)} as in the header")
        label = fields[col[spec.label]].strip()
        if label not in spec.labels:
            raise DataError(f"{path}:{n}: label {label!r} is not one of {list(spec.labels)}")
        examples.append(Example(fields[col[spec.text_a]].strip(),
                                fields[col[spec.text_b]].strip() if spec.text_b else None,
                                spec.labels.index(label)))
    if not examples:
        raise DataError(f"{path}: no examples (the split is empty)")
    return examples


def glue(name: str, data_dir: str, train_size: int | None = None, dev_size: int | None = None,
         seed: int = 0) -> TaskData:
    if name not in GLUE_TASKS:
        raise DataError(f"task.data.name={name!r} is not a known GLUE task; known: {', '.join(GLUE_TASKS)}")
    spec = GLUE_TASKS[name]
    folder = Path(data_dir) / name
    if not folder.is_dir():
        raise DataError(f"{folder}: GLUE task folder not found (set task.data.data_dir to your GLUE data directory)")
    train = read_tsv(folder / "train.tsv", spec)
    dev = read_tsv(folder / "dev.tsv", spec)
    return TaskData(name, list(spec.labels), sample(train, train_size, seed), sample(dev, dev_size, seed + 1))
