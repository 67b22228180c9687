"""The classical baseline of extractive QA: sliding-window word overlap -- no network, no pretraining.

The sliding-window baseline the SQuAD paper (Rajpurkar et al., 2016) carries
over from MCTest (Richardson et al., 2013): an answer sits among the words the
question asks about. Every span of 1 to ``max_answer_length`` words of a
passage that neither starts nor ends with a question word (so is not made only
of them, nor a match padded with an answer) is a candidate; it scores the
IDF-weighted count of question words among the ``window`` words on either
side of it; the best candidate is the answer (the shorter one on a tie). The
IDF comes from the training passages, and the window width is the one of
``WINDOWS`` with the best F1 on (up to ``FIT_QUESTIONS``) training questions.
For SQuAD 2.0 the null odds of a question are its best score negated, so the
no-answer threshold is chosen on dev as for the networks.
"""
from __future__ import annotations

import math
import random
import re

import numpy as np

from pipeline.finetune.answers import question_scores
from pipeline.finetune.tasks.squad import Question

METHOD = "sliding-window word overlap"
WINDOWS = (2, 4, 8, 16)   # words on each side of a span
FIT_QUESTIONS = 500       # training questions the window width is chosen on
_WORD = re.compile(r"\w+", re.UNICODE)


def passage_words(text: str) -> list[tuple[str, int, int]]:
    """(lowercased word, start, end) of each run of word characters."""
    return [(m.group().lower(), m.start(), m.end()) for m in _WORD.finditer(text)]


def idf_table(passages: list[str]) -> tuple[dict[str, float], float]:
    """(IDF of each word over the passages, the IDF of a word they never hold)."""
    df: dict[str, int] = {}
    for p in passages:
        for w in {w for w, _, _ in passage_words(p)}:
            df[w] = df.get(w, 0) + 1
    n = len(passages)
    return {w: math.log((1 + n) / (1 + c)) + 1 for w, c in df.items()}, math.log(1 + n) + 1


def best_span(question: str, context: str, idf: dict[str, float], unseen: float, window: int,
              max_words: int) -> tuple[float, str]:
    """(score, text) of the best candidate span; (-inf, "") for a passage without words."""
    words = passage_words(context)
    n = len(words)
    if not n:
        return -math.inf, ""
    asked = {w for w, _, _ in passage_words(question)}
    in_question = np.array([w in asked for w, _, _ in words])
    weight = np.where(in_question, [idf.get(w, unseen) for w, _, _ in words], 0.0)
    matched = np.concatenate([[0.0], np.cumsum(weight)])                 # (n+1,) prefix sums
    i = np.arange(n)[:, None]                                            # (n, 1) first word
    end = np.minimum(i + np.arange(1, max_words + 1)[None, :], n)        # (n, max_words) one past the last
    left = matched[i] - matched[np.maximum(i - window, 0)]
    right = matched[np.minimum(end + window, n)] - matched[end]
    score = left + right - 1e-6 * (end - i)                              # shorter wins a tie
    ok = (i + np.arange(1, max_words + 1)[None, :] <= n) & ~in_question[i] & ~in_question[end - 1]
    score = np.where(ok, score, -np.inf)
    s, k = np.unravel_index(int(np.argmax(score)), score.shape)
    if not np.isfinite(score[s, k]):
        return -math.inf, ""
    return float(score[s, k]), context[words[s][1]:words[end[s, k] - 1][2]]


def sliding_window_answers(train: list[Question], dev: list[Question], max_words: int
                           ) -> tuple[dict[str, str], dict[str, float], dict]:
    """(each dev question's answer, its null odds, what the method is and its fitted window)."""
    idf, unseen = idf_table(list(dict.fromkeys(q.context for q in train)))
    answerable = [q for q in train if q.answers]
    fit = random.Random(0).sample(answerable, min(FIT_QUESTIONS, len(answerable)))

    def train_f1(window: int) -> float:
        return sum(question_scores(q, best_span(q.question, q.context, idf, unseen, window, max_words)[1])[1]
                   for q in fit) / max(1, len(fit))

    window = max(WINDOWS, key=train_f1)
    texts, odds = {}, {}
    for q in dev:
        score, texts[q.id] = best_span(q.question, q.context, idf, unseen, window, max_words)
        odds[q.id] = -score if math.isfinite(score) else 0.0
    return texts, odds, {"method": METHOD, "window": window}
