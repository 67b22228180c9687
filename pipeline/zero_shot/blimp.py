"""BLiMP (Warstadt et al., 2020): 67 paradigms of 1,000 minimal pairs, and how a model's verdicts are summarised.

Each paradigm is one file ``<UID>.jsonl``, one pair a line: ``sentence_good``,
``sentence_bad`` (the same sentence with one grammatical violation), ``field``
(morphology, syntax, semantics, syntax_semantics), ``linguistics_term`` (the
phenomenon, 13 of them), ``UID`` (the paradigm) and ``pairID``. A model is
right on a pair when it scores the good sentence higher; its accuracy is
reported per paradigm, per phenomenon, per field and overall, each group the
*mean over its paradigms* (the paper's overall figure is the mean over the 67
paradigms, not over the 67,000 pairs; with every paradigm at 1,000 pairs the
two agree, but a paradigm that loses pairs to the length limit keeps its weight).

Torch-free.
"""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, NamedTuple, Sequence

import numpy as np

from pipeline.errors import ConfigError, DataError, MissingFileError

KEYS = ("sentence_good", "sentence_bad", "field", "linguistics_term", "UID", "pairID")
SHARED = ("UID", "field", "linguistics_term")  # the same on every line of one paradigm
# The paper's overall figures (Warstadt et al., 2020, Table 3: the mean over the 67 paradigms, %), shown beside ours
# when the authors' per-paradigm files are not configured (zero_shot.published).
PAPER_OVERALL = {"5-gram": 61.2, "LSTM": 69.8, "Transformer-XL": 69.6, "GPT-2": 83.0, "human": 88.6}
PUBLISHED_MODELS = ("ngram", "lstm", "txl", "gpt2")  # the columns of the authors' models_summary.jsonl


def normalise_field(name: str) -> str:
    """BLiMP spells one field ``syntax_semantics`` in 13 files and ``syntax/semantics`` in one: one name for both."""
    return name.replace("/", "_")


# -------------------------------------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Paradigm:
    """One paradigm's pairs, in file order."""
    uid: str
    field: str        # normalised (``normalise_field``)
    phenomenon: str   # the file's ``linguistics_term``
    good: tuple[str, ...]
    bad: tuple[str, ...]
    pair_ids: tuple[str, ...]
    path: Path

    def __len__(self) -> int:
        return len(self.good)


def paradigm_files(folder: str | Path) -> dict[str, Path]:
    """Each paradigm's file, by UID (the file name without ``.jsonl``), sorted by name."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MissingFileError(f"{folder}: BLiMP folder not found (zero_shot.data: the folder of <UID>.jsonl files)")
    files = {p.stem: p for p in sorted(folder.glob("*.jsonl"))}
    if not files:
        raise DataError(f"{folder}: no paradigm files (<UID>.jsonl) in it; expected BLiMP's data/ folder")
    return files


def _line_error(path: Path, n: int, what: str) -> DataError:
    return DataError(f"{path}:{n}: {what}")


def _json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each non-blank line of a JSON-lines file; a line that is not JSON is refused."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield n, json.loads(line)
            except json.JSONDecodeError as e:
                raise _line_error(path, n, f"not valid JSON ({e.msg} at column {e.colno})") from None


def read_paradigm(path: str | Path, pairs: int | None = None) -> Paradigm:
    """One ``<UID>.jsonl`` file; every line is checked, the first ``pairs`` are kept (all with None).

    A line that is not a JSON object, lacks a key, has an empty sentence, or names another
    paradigm, field or phenomenon than the file's first line is refused, naming the file and line.
    """
    path = Path(path)
    rows: list[dict] = []
    first: dict | None = None
    for n, row in _json_lines(path):
        if not isinstance(row, dict):
            raise _line_error(path, n, f"expected a JSON object, found {type(row).__name__}")
        missing = [k for k in KEYS if k not in row]
        if missing:
            raise _line_error(path, n, f"lacks {', '.join(missing)}")
        for k in ("sentence_good", "sentence_bad", *SHARED):
            if not isinstance(row[k], str) or not row[k].strip():
                raise _line_error(path, n, f"{k}={row[k]!r}: expected a non-empty string")
        if first is None:
            first = {**row, "line": n}
            if row["UID"] != path.stem:
                raise _line_error(path, n, f"UID={row['UID']!r} differs from the file's name {path.stem!r}")
        for k in SHARED:
            a, b = (first[k], row[k]) if k != "field" else (normalise_field(first[k]), normalise_field(row[k]))
            if a != b:
                raise _line_error(path, n, f"{k}={row[k]!r} differs from line {first['line']}'s {first[k]!r}: "
                                           "one paradigm per file")
        rows.append(row)
    if first is None:
        raise DataError(f"{path}: no pairs in it")
    rows = rows[:pairs] if pairs is not None else rows
    return Paradigm(uid=first["UID"], field=normalise_field(first["field"]), phenomenon=first["linguistics_term"],
                    good=tuple(r["sentence_good"] for r in rows), bad=tuple(r["sentence_bad"] for r in rows),
                    pair_ids=tuple(str(r["pairID"]) for r in rows), path=path)


def load(folder: str | Path, paradigms: Sequence[str] | None = None, pairs: int | None = None) -> list[Paradigm]:
    """The paradigms of ``folder`` (a subset by UID, in the order given; None: all, by name), ``pairs`` each."""
    files = paradigm_files(folder)
    if paradigms is not None:
        unknown = [p for p in paradigms if p not in files]
        if unknown:
            raise ConfigError(f"zero_shot.paradigms: {', '.join(map(repr, unknown))} not in {folder}; "
                              f"known: {', '.join(files)}")
    return [read_paradigm(files[uid], pairs) for uid in (paradigms if paradigms is not None else files)]


# ----------------------------------------------------------------------------------------------------- results


class Group(NamedTuple):
    field: str
    phenomenon: str


def groups_of(paradigms: Sequence[Paradigm]) -> dict[str, Group]:
    return {p.uid: Group(p.field, p.phenomenon) for p in paradigms}


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def summarise(accuracy: Mapping[str, float | None], groups: Mapping[str, Group]) -> dict[str, Any]:
    """The paper's summaries of per-paradigm accuracies: ``overall`` (the mean over paradigms), ``field`` and
    ``phenomenon`` (the mean over each group's paradigms) and ``paradigm`` itself. A paradigm with no scored
    pair (None) is left out of every mean and listed under ``unscored``."""
    scored = {uid: a for uid, a in accuracy.items() if a is not None}

    def by(part: str) -> dict[str, float | None]:
        names = sorted({getattr(groups[uid], part) for uid in accuracy})
        return {g: _mean([a for uid, a in scored.items() if getattr(groups[uid], part) == g]) for g in names}

    return {"overall": _mean(list(scored.values())), "field": by("field"), "phenomenon": by("phenomenon"),
            "paradigm": dict(accuracy), "unscored": sorted(set(accuracy) - set(scored))}


@dataclass
class ParadigmResult:
    """One paradigm's sentence scores (log-likelihoods, natural log; NaN where the pair was left out)."""
    uid: str
    field: str
    phenomenon: str
    good: np.ndarray  # (P,)
    bad: np.ndarray   # (P,)

    @property
    def excluded(self) -> int:
        """Pairs left out: a sentence of them longer than the model reads."""
        return int(np.isnan(self.good).sum())

    @property
    def scored(self) -> int:
        return len(self.good) - self.excluded

    @property
    def right(self) -> np.ndarray:
        """(P,) bool: the good sentence scored strictly higher (False where left out)."""
        with np.errstate(invalid="ignore"):
            return self.good > self.bad

    @property
    def accuracy(self) -> float | None:
        return float(self.right.sum() / self.scored) if self.scored else None


@dataclass
class BlimpResult:
    """A model's BLiMP result: how it scored sentences (``method``) and each paradigm's scores, or why it has none."""
    method: str | None                 # pll | pll_word | ltr | bilm | ngram; None: no sentence probability
    paradigms: list[ParadigmResult] = field(default_factory=list)
    reason: str | None = None          # with method None: why the model has no score

    def summary(self) -> dict[str, Any]:
        """JSON-ready: the method, accuracies (``summarise``), and pairs scored and left out per paradigm."""
        if self.method is None:
            return {"method": None, "scored": False, "reason": self.reason, "overall": None}
        accuracy = {p.uid: p.accuracy for p in self.paradigms}
        groups = {p.uid: Group(p.field, p.phenomenon) for p in self.paradigms}
        return {"method": self.method, "scored": True, **summarise(accuracy, groups),
                "pairs": {p.uid: p.scored for p in self.paradigms},
                "excluded": {p.uid: p.excluded for p in self.paradigms},
                "excluded_total": sum(p.excluded for p in self.paradigms)}


# --------------------------------------------------------------------------------------------- published numbers


@dataclass
class Published:
    """The authors' numbers: per-paradigm accuracy (fractions) of each baseline and of humans, the summary's own
    per-phenomenon and overall lines, and the human-validated paradigms that were dropped from the release.

    The summary groups paradigms by an older phenomenon list than the data files: its ``argument_structure``
    holds the two paradigms the files call ``s-selection`` (12 phenomena there, 13 in the files), so
    ``terms`` keeps its own grouping for reproducing its lines."""
    accuracy: dict[str, dict[str, float]]     # model (ngram, lstm, txl, gpt2, human) -> UID -> accuracy
    phenomenon: dict[str, dict[str, float]]   # model -> linguistics_term -> the summary's own mean
    overall: dict[str, float]                 # model -> the summary's own overall line
    terms: dict[str, str]                     # UID -> linguistics_term, as the summary groups them
    dropped: tuple[str, ...]                  # rows of the human validation with no paradigm in the release


def read_published(folder: str | Path) -> Published:
    """``models_summary.jsonl`` (67 paradigm lines, 13 ``UID: overall`` lines per phenomenon) and
    ``human_validation_summary.csv`` (``total_mean`` per paradigm; 69 rows, two of them dropped paradigms)."""
    folder = Path(folder)
    models, humans = folder / "models_summary.jsonl", folder / "human_validation_summary.csv"
    for f in (models, humans):
        if not f.is_file():
            raise MissingFileError(f"{f}: not found (zero_shot.published: BLiMP's results folder, or null)")
    accuracy: dict[str, dict[str, float]] = {m: {} for m in (*PUBLISHED_MODELS, "human")}
    phenomenon: dict[str, dict[str, float]] = {m: {} for m in PUBLISHED_MODELS}
    overall: dict[str, float] = {}
    terms: dict[str, str] = {}
    for n, row in _json_lines(models):
        try:
            uid, term = row["UID"], row["linguistics_term"]
            for m in PUBLISHED_MODELS:
                if uid == "overall" and term == "overall":
                    overall[m] = float(row[m])
                elif uid == "overall":
                    phenomenon[m][term] = float(row[m])
                else:
                    accuracy[m][uid] = float(row[m])
            if uid != "overall":
                terms[uid] = term
        except (KeyError, TypeError, ValueError) as e:
            raise _line_error(models, n, f"not a summary line ({type(e).__name__}: {e})") from None
    released = set(accuracy["ngram"])
    dropped = []
    with open(humans, encoding="utf-8", newline="") as f:
        for n, row in enumerate(csv.DictReader(f), 2):
            try:
                uid, value = row["Condition"], float(row["total_mean"])
            except (KeyError, TypeError, ValueError) as e:
                raise _line_error(humans, n, f"not a validation row ({type(e).__name__}: {e})") from None
            if uid in released:
                accuracy["human"][uid] = value
            else:
                dropped.append(uid)
    return Published(accuracy, phenomenon, overall, terms, tuple(dropped))


def percent(x: float | None) -> float | None:
    """An accuracy as the paper prints it: a percentage to one decimal."""
    return None if x is None or math.isnan(x) else round(100 * x, 1)
