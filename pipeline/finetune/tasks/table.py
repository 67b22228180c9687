"""Classification and regression tasks from TSV, CSV or JSONL files, configured by column mapping.

Columns are named (files with a header row, and JSONL keys) or numbered from 0
(files without a header). Labels are names or numbers, read as text and mapped
to classes in the order given (or sorted, when not given); with
``regression=true`` the label is a number.

TSV is read as plain tab-separated lines with quoting off (GLUE's files hold
bare ``"`` characters), CSV with the ``csv`` module's standard quoting; a
UTF-8 byte-order mark is dropped either way.
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Iterator

from pipeline.errors import DataError
from pipeline.finetune.tasks.base import METRICS, Example, TaskData, chosen_metrics, sample

FORMATS = ("tsv", "csv", "jsonl")


def _format_of(path: Path, fmt: str | None) -> str:
    fmt = fmt or path.suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise DataError(f"{path}: format {fmt!r} is not one of {', '.join(FORMATS)} (set task.data.format)")
    return fmt


def read_rows(path: str | Path, fmt: str | None = None, header: bool = True) -> Iterator[tuple[int, dict | list]]:
    """(line number, row) pairs: a dict with a header or for JSONL, a list of fields without a header."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    fmt = _format_of(path, fmt)
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            if fmt == "jsonl":
                for n, line in enumerate(f, start=1):
                    if line.strip():
                        try:
                            row = json.loads(line)
                        except json.JSONDecodeError as e:
                            raise DataError(f"{path}:{n}: not valid JSON ({e.msg})") from None
                        if not isinstance(row, dict):
                            raise DataError(f"{path}:{n}: expected a JSON object per line")
                        yield n, row
                return
            if fmt == "csv":
                lines = ((n, fields) for n, fields in enumerate(csv.reader(f), start=1))
            else:
                lines = ((n, line.rstrip("\r\n").split("\t")) for n, line in enumerate(f, start=1))
            names = None
            for n, fields in lines:
                if not fields or fields == [""]:
                    continue
                if header and names is None:
                    names = [c.strip() for c in fields]
                    continue
                width = len(names) if names is not None else None
                if width is not None and len(fields) != width:
                    raise DataError(f"{path}:{n}: {len(fields)} columns, expected {width} as in the header")
                yield n, dict(zip(names, fields)) if names is not None else fields
    except UnicodeDecodeError as e:
        raise DataError(f"{path}: not valid UTF-8 (byte {e.start}: {e.reason})") from None


def _get(row: dict | list, column, path: Path, n: int):
    try:
        return row[int(column)] if isinstance(row, list) else row[column]
    except (KeyError, IndexError, ValueError):
        have = list(row) if isinstance(row, dict) else f"{len(row)} columns"
        raise DataError(f"{path}:{n}: no column {column!r} (the row has {have})") from None


def read_examples(path: str | Path, *, text_a, text_b=None, label, labels: list[str] | None,
                  regression: bool = False, fmt: str | None = None, header: bool = True) -> list[Example]:
    path = Path(path)
    examples = []
    for n, row in read_rows(path, fmt, header):
        a = _get(row, text_a, path, n)
        b = _get(row, text_b, path, n) if text_b is not None else None
        raw = _get(row, label, path, n)
        if regression:
            try:
                value = float(raw)
            except (TypeError, ValueError):
                raise DataError(f"{path}:{n}: label {raw!r} is not a number (regression task)") from None
        else:
            key = str(raw).strip()
            if labels is not None and key not in labels:
                raise DataError(f"{path}:{n}: label {key!r} is not one of {labels}")
            value = key
        examples.append(Example(str(a).strip(), None if b is None else str(b).strip(), value))
    if not examples:
        raise DataError(f"{path}: no examples (the split is empty)")
    return examples


def table(name: str, train: str, dev: str, *, text_a, label, text_b=None, labels: list | None = None,
          regression: bool = False, metrics: list[str] | None = None, format: str | None = None,
          header: bool = True, train_size: int | None = None, dev_size: int | None = None,
          seed: int = 0) -> TaskData:
    """A task from a train file and a dev file with the same layout."""
    metrics = chosen_metrics(metrics, regression)
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise DataError(f"task.data.metrics: {unknown} not known; known: {', '.join(METRICS)}")
    names = None if labels is None else [str(x).strip() for x in labels]
    kw = dict(text_a=text_a, text_b=text_b, label=label, regression=regression, fmt=format, header=header)
    tr = read_examples(train, labels=names, **kw)
    if names is None and not regression:
        names = sorted({e.label for e in tr}, key=lambda s: (len(s), s))  # "2" before "10"
    dv = read_examples(dev, labels=names, **kw)
    if not regression:
        tr = [Example(e.text_a, e.text_b, names.index(e.label)) for e in tr]
        dv = [Example(e.text_a, e.text_b, names.index(e.label)) for e in dv]
    return TaskData(name, [] if regression else names, sample(tr, train_size, seed), sample(dv, dev_size, seed + 1),
                    metrics=metrics, regression=regression)
