"""Extractive question answering: SQuAD v1.1 and v2.0, from the official JSON files or Hugging Face ``datasets``.

Every question comes with its passage (``context``) and its gold answers as
(text, character offset into the passage); in v2.0 a question may have no
answer in its passage (``is_impossible``), and a system must say so.

Sources:

* the official JSON format (``data -> paragraphs -> qas``), one file per split;
* with ``hf`` set, a Hugging Face dataset (``squad``, ``squad_v2`` from the Hub
  with a network, a local dataset folder, or a folder written by
  ``save_to_disk``); ``train`` and ``dev`` then name its splits.

Without a dev source (``dev: null``) the train source is split by article
(title), seeded: no passage is in both splits. Scores from such a split are
marked ``comparable: false``: they are not comparable to official dev scores.
"""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.errors import DataError
from pipeline.finetune.tasks.base import sample

VERSIONS = ("1.1", "2.0")
METRICS = {"1.1": ["f1", "exact"], "2.0": ["f1", "exact", "HasAns_f1", "HasAns_exact", "NoAns_exact"]}


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    context: str
    answers: tuple[tuple[str, int], ...]  # (text, answer_start): a character offset into context
    is_impossible: bool = False
    title: str = ""                       # the article: the unit of an article-level split


@dataclass(frozen=True)
class SpanSettings:
    """How passages become model inputs, and which answers may be predicted (BERT's run_squad settings)."""

    max_query_length: int = 64    # question tokens kept (the rest cut off)
    doc_stride: int = 128         # tokens between the starts of two windows over a long passage
    max_answer_length: int = 30   # tokens in a predicted answer, at most
    n_best: int = 20              # start and end candidates per window

    def __post_init__(self):
        for k in ("max_query_length", "doc_stride", "max_answer_length", "n_best"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise DataError(f"task.data.{k}={v!r} is not allowed: expected a positive integer")


@dataclass
class SquadTask:
    name: str
    version: str                     # "1.1" or "2.0" (questions without an answer)
    train: list[Question]
    dev: list[Question]
    span: SpanSettings = field(default_factory=SpanSettings)
    comparable: bool = True          # false: dev is a split of the train source, not the official dev set
    metrics: list[str] = field(default_factory=lambda: list(METRICS["1.1"]))  # the first is the headline
    kind: str = "span"
    test: list[Question] = field(default_factory=list)  # the protocol's split of ``dev`` (tasks.base.split_heldout)

    @property
    def with_no_answer(self) -> bool:
        return self.version == "2.0"


# ----------------------------------------------------------------------------------------- checks


def _answers(raw, where: str, qid: str, context: str) -> tuple[tuple[str, int], ...]:
    if not isinstance(raw, list):
        raise DataError(f"{where}: question {qid}: 'answers' is {type(raw).__name__}; expected a list of "
                        "{text, answer_start}")
    out = []
    for a in raw:
        if not isinstance(a, dict) or not isinstance(a.get("text"), str) or not isinstance(a.get("answer_start"), int):
            raise DataError(f"{where}: question {qid}: answer {a!r} is not {{'text': str, 'answer_start': int}}")
        text, start = a["text"], a["answer_start"]
        if context[start:start + len(text)] != text or start < 0:
            raise DataError(f"{where}: question {qid}: answer_start={start} does not point at its text {text!r} "
                            f"(the context there reads {context[max(start, 0):max(start, 0) + len(text)]!r})")
        out.append((text, start))
    return tuple(out)


def _question(where: str, qa: dict, context: str, title: str, version: str) -> Question:
    qid = qa.get("id", "?")
    if not isinstance(qa.get("question"), str) or "id" not in qa:
        raise DataError(f"{where}: question {qid}: expected 'id' and 'question' fields")
    if "answers" not in qa:
        raise DataError(f"{where}: question {qid}: no 'answers' field (expected a list of {{text, answer_start}})")
    impossible = bool(qa.get("is_impossible", False))
    answers = _answers(qa["answers"], where, str(qid), context)
    if impossible and version == "1.1":
        raise DataError(f"{where}: question {qid} is marked is_impossible: SQuAD 2.0 data (use task=squad_v2)")
    if not impossible and not answers:
        raise DataError(f"{where}: question {qid}: no answer, and not marked is_impossible "
                        "(expected at least one answer)")
    return Question(str(qid), qa["question"], context, () if impossible else answers, impossible, title)


# ---------------------------------------------------------------------------------------- sources


def read_squad_json(path: str | Path, version: str) -> list[Question]:
    """Every question of an official SQuAD JSON file, in file order."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found (an official SQuAD JSON file)")
    try:
        doc = json.loads(path.read_text(encoding="utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: not valid UTF-8 JSON ({e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise DataError(f"{path}: expected SQuAD's format {{'data': [{{'title', 'paragraphs': [...]}}]}}")
    out, marked = [], False
    for a, article in enumerate(doc["data"]):
        title = str(article.get("title", f"article {a}"))
        for p in article.get("paragraphs", []):
            if not isinstance(p.get("context"), str) or not isinstance(p.get("qas"), list):
                raise DataError(f"{path}: article {title!r}: a paragraph without 'context' and 'qas'")
            for qa in p["qas"]:
                marked = marked or "is_impossible" in qa
                out.append(_question(str(path), qa, p["context"], title, version))
    if not out:
        raise DataError(f"{path}: no questions")
    if version == "2.0" and not marked:
        raise DataError(f"{path}: no question has an 'is_impossible' field: SQuAD 1.1 data given to a 2.0 task "
                        "(use task=squad, or a v2.0 file)")
    return out


def _load_hf(path: str):
    import datasets

    if (Path(path) / "dataset_dict.json").exists():
        return datasets.load_from_disk(path)
    try:
        return datasets.load_dataset(path)
    except Exception as e:  # noqa: BLE001 (network, missing dataset: one clear message)
        raise DataError(f"task.data.hf={path!r}: datasets could not load it "
                        f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})") from None


def read_squad_hf(path: str, split: str, version: str) -> list[Question]:
    """Every question of one split of a dataset laid out as Hugging Face's ``squad`` / ``squad_v2``
    (id, title, context, question, answers {text: [...], answer_start: [...]}; in v2.0 no answer = impossible)."""
    ds = _load_hf(path)
    if split not in ds:
        raise DataError(f"task.data.hf={path!r}: no split {split!r}; it has {', '.join(ds)}")
    rows = ds[split]
    missing = {"id", "context", "question", "answers"} - set(rows.column_names)
    if missing:
        raise DataError(f"{path} [{split}]: no column(s) {', '.join(sorted(missing))}; it has "
                        f"{', '.join(rows.column_names)}")
    where, out = f"{path} [{split}]", []
    for row in rows:
        a = row["answers"]
        raw = [{"text": t, "answer_start": s} for t, s in zip(a.get("text", []), a.get("answer_start", []))] \
            if isinstance(a, dict) else a
        qa = {"id": row["id"], "question": row["question"], "answers": raw}
        if version == "2.0":
            qa["is_impossible"] = not raw
        out.append(_question(where, qa, row["context"], str(row.get("title", "")), version))
    if not out:
        raise DataError(f"{where}: no questions")
    if version == "2.0" and not any(q.is_impossible for q in out):
        raise DataError(f"{where}: no question without an answer: SQuAD 1.1 data given to a 2.0 task "
                        "(use task=squad, or squad_v2)")
    return out


def split_by_article(questions: list[Question], dev_fraction: float, seed: int) -> tuple[list[Question],
                                                                                        list[Question]]:
    """(train, dev): whole articles drawn at random (seeded) for dev, at least one on each side."""
    titles = sorted({q.title for q in questions})
    if len(titles) < 2:
        raise DataError(f"an article-level split needs at least two articles; the data has {len(titles)}")
    k = min(len(titles) - 1, max(1, round(dev_fraction * len(titles))))
    dev_titles = set(random.Random(seed).sample(titles, k))
    return [q for q in questions if q.title not in dev_titles], [q for q in questions if q.title in dev_titles]


def squad(name: str, version: str, train: str, dev: str | None = None, *, hf: str | None = None,
          split_fraction: float = 0.2, train_size: int | None = None, dev_size: int | None = None, seed: int = 0,
          max_query_length: int = 64, doc_stride: int = 128, max_answer_length: int = 30,
          n_best: int = 20) -> SquadTask:
    """SQuAD ``version`` ("1.1" or "2.0") from files (or with ``hf``, a dataset's splits); ``dev=None`` splits
    ``train`` by article (``split_fraction`` of the articles to dev, seeded by ``seed``)."""
    version = str(version)
    if version not in VERSIONS:
        raise DataError(f"task.data.version={version!r} is not allowed: expected one of {', '.join(VERSIONS)}")
    span = SpanSettings(max_query_length, doc_stride, max_answer_length, n_best)

    def read(source: str) -> list[Question]:
        return read_squad_hf(hf, source, version) if hf else read_squad_json(source, version)

    if dev is None:
        if not 0 < split_fraction < 1:
            raise DataError(f"task.data.split_fraction={split_fraction!r} is not allowed: expected a number in (0, 1)")
        tr, dv = split_by_article(read(train), split_fraction, seed)
    else:
        tr, dv = read(train), read(dev)
    return SquadTask(name, version, sample(tr, train_size, seed), sample(dv, dev_size, seed + 1), span,
                     comparable=dev is not None, metrics=list(METRICS[version]))
