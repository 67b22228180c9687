"""Classification and regression tasks from Hugging Face ``datasets``: a Hub name (with a network) or a local copy.

``path`` is what ``datasets.load_dataset`` takes (a Hub name such as
``nyu-mll/glue`` with ``config=sst2``, a local dataset folder, or a builder
such as ``csv`` with ``data_files``), or a folder written by ``save_to_disk``.
Columns are mapped as for files; class names come from the label column's
``ClassLabel`` feature when it has one.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.errors import DataError
from pipeline.finetune.tasks.base import METRICS, Example, TaskData, chosen_metrics, sample


def _load(path: str, config: str | None, data_files):
    import datasets

    if Path(path).is_dir() and (Path(path) / "dataset_dict.json").exists():
        return datasets.load_from_disk(path)
    try:
        return datasets.load_dataset(path, config, data_files=data_files)
    except Exception as e:  # noqa: BLE001 (network, missing dataset or config: one clear message)
        raise DataError(f"task.data.path={path!r} (config {config!r}): datasets could not load it "
                        f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None


def hf_dataset(name: str, path: str, *, text_a: str, label: str, text_b: str | None = None, config: str | None = None,
               data_files=None, train_split: str = "train", dev_split: str = "validation",
               labels: list | None = None, regression: bool = False, metrics: list[str] | None = None,
               train_size: int | None = None, dev_size: int | None = None, seed: int = 0) -> TaskData:
    metrics = chosen_metrics(metrics, regression)
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise DataError(f"task.data.metrics: {unknown} not known; known: {', '.join(METRICS)}")
    ds = _load(path, config, data_files)
    for split in (train_split, dev_split):
        if split not in ds:
            raise DataError(f"{path}: no split {split!r}; it has {', '.join(ds)}")
    for col in filter(None, (text_a, text_b, label)):
        if col not in ds[train_split].column_names:
            raise DataError(f"{path}: no column {col!r}; it has {', '.join(ds[train_split].column_names)}")
    feature = ds[train_split].features[label]
    class_names = getattr(feature, "names", None)
    names = [str(x) for x in labels] if labels is not None else class_names

    def convert(split: str) -> list[Example]:
        rows = ds[split]
        out = []
        for i, row in enumerate(rows):
            y = row[label]
            if regression:
                value = float(y)
            else:
                key = class_names[y] if class_names is not None and isinstance(y, int) and y >= 0 else str(y)
                if names is not None and key not in names:
                    raise DataError(f"{path} [{split}] row {i}: label {key!r} is not one of {names}")
                value = key
            out.append(Example(str(row[text_a]), None if text_b is None else str(row[text_b]), value))
        if not out:
            raise DataError(f"{path} [{split}]: no examples (the split is empty)")
        return out

    train, dev = convert(train_split), convert(dev_split)
    if not regression:
        names = names or sorted({e.label for e in train}, key=lambda s: (len(s), s))
        train = [Example(e.text_a, e.text_b, names.index(e.label)) for e in train]
        dev = [Example(e.text_a, e.text_b, names.index(e.label)) for e in dev]
    return TaskData(name, [] if regression else names, sample(train, train_size, seed), sample(dev, dev_size, seed + 1),
                    metrics=metrics, regression=regression)
