"""SQuAD's scoring, as the official evaluation scripts (v1.1 and v2.0) define it, and the prediction files.

An answer and a gold answer are compared after SQuAD's normalisation
(lowercase, punctuation removed, the articles a/an/the removed, whitespace
collapsed): exact match, and F1 over their words; a question scores the best
over its gold answers. A question without an answer (v2.0) scores 1 exactly
when the prediction is empty. Scores are in 0-1 (the official scripts print
them x100).

In v2.0 a system abstains when its no-answer score beats its best span by more
than a threshold. Given each question's ``null_odds`` (no-answer score minus
best span score), the threshold is chosen on dev as the official script's
``best_f1_thresh`` does, and every score is reported at it. A question with no
prediction at all (skipped: its passage left no token) counts as wrong.
"""
from __future__ import annotations

import collections
import re
import string
from pathlib import Path
from typing import Mapping, Sequence

from pipeline.finetune.tasks.squad import Question
from pipeline.io import read_json

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(s: str) -> str:
    """Lowercase, drop punctuation, drop articles, collapse whitespace (the official order)."""
    s = "".join(c for c in s.lower() if c not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", s).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not ref:  # an empty answer: right only against an empty gold answer
        return float(pred == ref)
    common = sum((collections.Counter(pred) & collections.Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def question_scores(q: Question, prediction: str) -> tuple[float, float]:
    """(exact, f1) of one prediction, the best over the gold answers ("" when there is none)."""
    golds = [t for t, _ in q.answers if normalize_answer(t)] or [""]
    return max(exact_match(prediction, g) for g in golds), max(f1(prediction, g) for g in golds)


def best_threshold(questions: Sequence[Question], predictions: Mapping[str, str],
                   null_odds: Mapping[str, float]) -> float:
    """The no-answer threshold with the best total F1 (answer iff null odds <= threshold).

    The official ``find_best_thresh``: start from abstaining everywhere, then
    answer questions in order of rising null odds, keeping the point of the
    best total. Questions with equal odds go together, as applying a threshold
    does; abstaining everywhere wins ties and is a threshold below every odds.
    """
    scored = [(null_odds[q.id], q) for q in questions if q.id in predictions]
    if not scored:
        return 0.0
    scored.sort(key=lambda x: x[0])
    total = sum(1.0 for _, q in scored if q.is_impossible)  # abstaining is right on every unanswerable one
    best, threshold = total, scored[0][0] - 1.0
    for i, (odds, q) in enumerate(scored):
        answered_f1 = question_scores(q, predictions[q.id])[1]
        total += answered_f1 - (1.0 if q.is_impossible else 0.0)
        if (i + 1 == len(scored) or scored[i + 1][0] != odds) and total > best:
            best, threshold = total, odds
    return float(threshold)


def apply_threshold(predictions: Mapping[str, str], null_odds: Mapping[str, float],
                    threshold: float) -> dict[str, str]:
    """The final answers: "" where the null odds exceed the threshold."""
    return {qid: text if null_odds[qid] <= threshold else "" for qid, text in predictions.items()}


def evaluate(questions: Sequence[Question], predictions: Mapping[str, str],
             null_odds: Mapping[str, float] | None = None, threshold: float | None = None) -> tuple[dict, dict]:
    """(metrics, final answers). With ``null_odds`` (v2.0) the predictions are each question's best span,
    answered below ``threshold`` (chosen here when None; reported as ``null_threshold``) and abstaining above;
    the metrics then add HasAns_* and NoAns_* (the questions with and without an answer)."""
    out: dict[str, float] = {}
    if null_odds is not None:
        if threshold is None:
            threshold = best_threshold(questions, predictions, null_odds)
        predictions = apply_threshold(predictions, null_odds, threshold)
        out["null_threshold"] = round(threshold, 6)
    per = {q.id: question_scores(q, predictions[q.id]) if q.id in predictions else (0.0, 0.0) for q in questions}

    def mean(qs, i):
        return round(sum(per[q.id][i] for q in qs) / len(qs), 6) if qs else 0.0

    out.update(f1=mean(questions, 1), exact=mean(questions, 0))
    if null_odds is not None:
        has = [q for q in questions if not q.is_impossible]
        no = [q for q in questions if q.is_impossible]
        out.update(HasAns_f1=mean(has, 1), HasAns_exact=mean(has, 0), NoAns_exact=mean(no, 0),
                   HasAns_total=len(has), NoAns_total=len(no))
    out["answered"] = sum(1 for q in questions if q.id in predictions)
    return out, dict(predictions)


def prediction_files(predictions: Mapping[str, str], null_odds: Mapping[str, float] | None) -> dict[str, dict]:
    """The files of a run's answers, by name: ``predictions.json`` ({question id: answer}, the official scripts'
    input) and, for v2.0, ``null_odds.json`` ({question id: no-answer score minus best span score})."""
    files = {"predictions.json": dict(predictions)}
    if null_odds is not None:
        files["null_odds.json"] = {k: round(float(v), 6) for k, v in null_odds.items()}
    return files


def read_predictions(folder: Path) -> tuple[dict[str, str], dict[str, float] | None]:
    """The files of ``prediction_files`` as the finetune stage writes them: (answers, null odds or None)."""
    odds = folder / "null_odds.json"
    return read_json(folder / "predictions.json"), read_json(odds) if odds.is_file() else None
