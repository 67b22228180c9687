"""Extractive question answering (SQuAD): the same modes as the other tasks, with an answer span per question.

* ``pretrained`` / ``scratch`` -- ``BertForQuestionAnswering``: a start and an
  end score per token from the last hidden states (the paper's Figure 1c);
* ``frozen_<features>`` -- the frozen encoder's per-token states of the chosen
  layers feed a one-layer BiLSTM and a linear layer to a start and an end score
  (``FrozenBiLSTMTagger`` with two outputs; only it trains);
* ``tfidf`` -- no network: the sliding-window word-overlap baseline
  (``pipeline.finetune.overlap``).

Inputs follow BERT's run_squad: ``[CLS] question [SEP] passage window [SEP]``,
the question cut to ``max_query_length`` tokens, a passage longer than the
rest of ``max_seq_length`` cut into windows ``doc_stride`` tokens apart. A
training window points at the answer's first and last token, or at ``[CLS]``
when the answer is not inside it (or there is none, v2.0); the loss is the mean
of the start and end cross-entropies. On dev every question takes the best span
over all its windows (``n_best`` start and end candidates per window, passage
tokens only, a start only where the window gives the token its most context),
its text cut from the original passage by character offsets, widened to whole
words (a span never starts or ends inside a word, as run_squad's answers). A question whose
passage leaves no token (an empty passage, or no room beside the question) is
skipped and counted; on dev and test it scores 0. So is a training question whose
answers cover no token.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F

from pipeline.data.tokenizer import CLS, SEP
from pipeline.finetune.answers import evaluate, prediction_files
from pipeline.finetune.encoders import Export
from pipeline.finetune.heads import FrozenBiLSTMTagger
from pipeline.finetune.overlap import sliding_window_answers
from pipeline.finetune.tasks.squad import Question, SpanSettings, SquadTask
from pipeline.finetune.training import SPLITS, Recipe, Runner, Trained
from pipeline.names import CLASSICAL

log = logging.getLogger(__name__)

MASKED = -1e4  # the logit of a padding position: outside every softmax, finite in half precision too


@dataclass(frozen=True)
class Window:
    """Where one model input came from: its question, and the passage characters behind each of its tokens."""

    question: int                                   # index into the questions encoded
    offsets: tuple[tuple[int, int] | None, ...]     # per input position: its word's (start, end) in the passage;
                                                    # None outside the passage
    max_context: tuple[bool, ...]                   # per input position: no other window sees more around it


@dataclass
class Encoded:
    features: list[dict]   # model inputs: input_ids, token_type_ids, start, end, index
    windows: list[Window]  # features[i] came from windows[i]
    skipped: int           # questions without a feature


def window_starts(n: int, room: int, stride: int) -> list[int]:
    """First passage token of each window: ``stride`` apart, the last one reaching the passage's end."""
    starts, s = [0], 0
    while s + room < n:
        s += min(room, stride)
        starts.append(s)
    return starts


def answer_tokens(offsets: list[tuple[int, int]], start: int, end: int) -> tuple[int, int] | None:
    """(first, last) passage token overlapping the characters [start, end), or None when no token does."""
    covered = [i for i, (a, b) in enumerate(offsets) if a < end and b > start]
    return (covered[0], covered[-1]) if covered else None


def word_spans(encoding) -> list[tuple[int, int]]:
    """Per token, the characters of the whole word it is a piece of (the pre-tokenizer's words: whitespace and
    punctuation split them), so that a predicted span never starts or ends inside a word, as run_squad's
    answers are whole words."""
    spans = list(encoding.offsets)
    ids = encoding.word_ids
    i = 0
    while i < len(spans):
        j = i
        while j + 1 < len(spans) and ids[j + 1] is not None and ids[j + 1] == ids[i]:
            j += 1
        for k in range(i, j + 1):
            spans[k] = (encoding.offsets[i][0], encoding.offsets[j][1])
        i = j + 1
    return spans


def max_context(starts: list[int], lengths: list[int], n: int) -> list[np.ndarray]:
    """Per window, a flag per passage token: this window gives it the most context on its poorer side
    (ties to the longer window, then the earlier), as run_squad's ``_check_is_max_context`` does."""
    best = np.full(n, -1.0)
    owner = np.zeros(n, dtype=np.int64)
    for w, (s, length) in enumerate(zip(starts, lengths)):
        t = np.arange(s, s + length)
        score = np.minimum(t - s, s + length - 1 - t) + 0.01 * length
        better = score > best[t]
        best[t[better]] = score[better]
        owner[t[better]] = w
    return [owner[s:s + length] == w for w, (s, length) in enumerate(zip(starts, lengths))]


def encode_spans(tok, questions: list[Question], max_seq_length: int, span: SpanSettings,
                 training: bool = False) -> Encoded:
    """Every question as one or more windows (``Window``) and their model inputs. For ``training`` a question
    whose gold answers cover no token (only characters the tokenizer drops) is skipped too: it has no target."""
    tok.no_truncation()
    tok.no_padding()
    cls_id, sep_id = tok.token_to_id(CLS), tok.token_to_id(SEP)
    q_encs = tok.encode_batch([q.question for q in questions], add_special_tokens=False)
    contexts = list(dict.fromkeys(q.context for q in questions))  # each passage tokenised once
    c_encs = dict(zip(contexts, tok.encode_batch(contexts, add_special_tokens=False)))
    c_words = {c: word_spans(e) for c, e in c_encs.items()}
    features, windows, skipped = [], [], 0
    for qi, (q, q_enc) in enumerate(zip(questions, q_encs)):
        q_ids = q_enc.ids[:span.max_query_length]
        doc = c_encs[q.context]
        room = max_seq_length - len(q_ids) - 3  # [CLS], [SEP], [SEP]
        if room < 1 or not doc.ids:
            skipped += 1
            continue
        # The first gold answer that covers a token is the target, as run_squad trains on the first one.
        targets = (answer_tokens(doc.offsets, start, start + len(text)) for text, start in q.answers)
        target = next((t for t in targets if t is not None), None)
        if training and q.answers and target is None:
            skipped += 1
            continue
        n = len(doc.ids)
        starts = window_starts(n, room, span.doc_stride)
        lengths = [min(room, n - s) for s in starts]
        head = len(q_ids) + 2
        words = c_words[q.context]
        for s, length, best in zip(starts, lengths, max_context(starts, lengths, n)):
            first = last = 0  # [CLS]: the answer is not in this window, or there is none
            if target is not None and s <= target[0] and target[1] < s + length:
                first, last = target[0] - s + head, target[1] - s + head
            features.append({"input_ids": [cls_id, *q_ids, sep_id, *doc.ids[s:s + length], sep_id],
                             "token_type_ids": [0] * head + [1] * (length + 1),
                             "start": first, "end": last, "index": len(features)})
            windows.append(Window(qi, (None,) * head + tuple(words[s:s + length]) + (None,),
                                  (False,) * head + tuple(best.tolist()) + (False,)))
    return Encoded(features, windows, skipped)


def best_answers(questions: list[Question], windows: list[Window], logits: dict[int, np.ndarray],
                 span: SpanSettings) -> tuple[dict[str, str], dict[str, float]]:
    """(each question's best span text, its null odds): the best ``start + end`` score over all windows of the
    question, and the no-answer score (``[CLS]`` start + end, the lowest over its windows) minus it."""
    by_question: dict[int, list[int]] = defaultdict(list)
    for i in logits:
        by_question[windows[i].question].append(i)
    texts, odds = {}, {}
    for qi, feats in by_question.items():
        q = questions[qi]
        best_score, best_text, null = -np.inf, "", np.inf
        for i in feats:
            w, lg = windows[i], logits[i]  # lg (T, 2)
            start, end = lg[:, 0], lg[:, 1]
            null = min(null, float(start[0] + end[0]))
            passage = np.array([o is not None for o in w.offsets])
            starts = np.flatnonzero(passage & np.array(w.max_context))
            ends = np.flatnonzero(passage)
            starts = starts[np.argsort(-start[starts], kind="stable")[:span.n_best]]
            ends = ends[np.argsort(-end[ends], kind="stable")[:span.n_best]]
            if not len(starts):
                continue
            score = start[starts][:, None] + end[ends][None, :]           # (n_best, n_best)
            length = ends[None, :] - starts[:, None] + 1
            score = np.where((length >= 1) & (length <= span.max_answer_length), score, -np.inf)
            s, e = np.unravel_index(int(np.argmax(score)), score.shape)
            if score[s, e] > best_score:
                best_score = float(score[s, e])
                best_text = q.context[w.offsets[starts[s]][0]:w.offsets[ends[e]][1]]
        texts[q.id] = best_text
        odds[q.id] = null - best_score if np.isfinite(best_score) else 0.0
    return texts, odds


class SpanObjective:
    """Mean of the start and end cross-entropies per window; SQuAD's scores of the best span per question of a
    split (``questions``, whose windows are ``windows``). v2.0: abstaining above ``threshold``, or where it is
    None (dev) above the threshold best on this split."""

    headline = "f1"

    def __init__(self, task: SquadTask, questions: list[Question], windows: list[Window],
                 threshold: float | None = None):
        self.task, self.questions, self.windows, self.threshold = task, questions, windows, threshold
        self._logits: dict[int, np.ndarray] = {}
        self.answers: dict[str, str] = {}              # the last pass: final answers, null odds, scores
        self.null_odds: dict[str, float] | None = None
        self.metrics: dict[str, float] = {}

    def loss(self, outputs: torch.Tensor, batch: dict) -> torch.Tensor:  # outputs (B, T, 2)
        logits = outputs.float().masked_fill(batch["attention_mask"][..., None] == 0, MASKED)
        return (F.cross_entropy(logits[..., 0], batch["start"]) + F.cross_entropy(logits[..., 1], batch["end"])) / 2

    def batch_size(self, batch: dict) -> int:
        return len(batch["start"])

    def collect(self, outputs: torch.Tensor, batch: dict) -> None:
        out = outputs.detach().float().cpu().numpy()  # (B, T, 2)
        lengths = batch["attention_mask"].sum(1).tolist()
        for row, i in enumerate(batch["index"].tolist()):
            self._logits[i] = out[row, :lengths[row]]

    def scores(self) -> dict[str, float]:
        if not self._logits:
            return {}
        texts, odds = best_answers(self.questions, self.windows, self._logits, self.task.span)
        self._logits = {}
        self.null_odds = odds if self.task.with_no_answer else None
        metrics, self.answers = evaluate(self.questions, texts, self.null_odds, self.threshold)
        self.metrics = {k: float(v) for k, v in metrics.items()}
        return self.metrics


class SpanRunner(Runner):
    """The runs of one SQuAD task from one export: the encoded windows; on frozen features, a BiLSTM span scorer.

    Each run leaves its test answers for ``outputs``: ``predictions/<mode>-s<seed>/predictions.json`` (and for
    v2.0 ``null_odds.json``), the files the official evaluation scripts read. For v2.0 the no-answer threshold
    is chosen on dev and applied on test, like every other choice.
    """

    kind = "span"
    num_outputs = 2  # a start and an end score per token

    def __init__(self, recipe: Recipe, task: SquadTask, tok, export: Export):
        super().__init__(recipe, task, export)
        self.windows: dict[str, list[Window]] = {}
        self.skipped: dict[str, int] = {}
        for split in ("train", *SPLITS):
            enc = encode_spans(tok, getattr(task, split), recipe.max_seq_length, task.span, training=split == "train")
            self.encoded[split], self.windows[split] = enc.features, enc.windows
            self.skipped[f"skipped_{split}_questions"] = enc.skipped
        if any(self.skipped.values()):
            log.warning("task %s: questions skipped (%s): their passage left no token beside the question "
                        "(max_seq_length=%d), or a train answer covers no token", task.name,
                        ", ".join(f"{k} {v}" for k, v in self.skipped.items()), recipe.max_seq_length)
        log.info("task %s (SQuAD %s%s): %d train, %d dev, %d test questions in %d, %d and %d windows", task.name,
                 task.version, "" if task.comparable else ", held-out questions split from the train data",
                 len(task.train), len(task.dev), len(task.test), *(len(self.encoded[s]) for s in ("train", *SPLITS)))

    def objective(self, split: str, run: Trained | None = None) -> SpanObjective:
        threshold = (run.extra or {}).get("null_threshold") if run is not None and split == "test" else None
        return SpanObjective(self.task, getattr(self.task, split), self.windows[split], threshold)

    def frozen_head(self, feature_set: str, pooling: str | None) -> FrozenBiLSTMTagger:
        encoder = self.export.frozen_encoder()
        # One BiLSTM layer, each direction half the encoder's width: the span head stays small beside the encoder.
        return FrozenBiLSTMTagger(encoder, feature_set, self.num_outputs, lstm_hidden=max(1, encoder.hidden_size // 2),
                                  lstm_layers=1)

    def finish(self, run: Trained, split: str, objective: SpanObjective) -> dict:
        if split == "dev":  # v2.0: the threshold chosen here is the one test applies
            if "null_threshold" in objective.metrics:
                run.extra = {**(run.extra or {}), "null_threshold": objective.metrics["null_threshold"]}
            return self._extras(objective.metrics)
        self._keep(run.mode, run.seed, objective.answers, objective.null_odds)
        return self._extras(objective.metrics)

    def classical(self, settings: dict) -> Callable[[str], dict]:
        """The sliding-window word-overlap baseline (no network, no pretraining): split -> its scores (v2.0: the
        threshold chosen on dev)."""
        chosen: dict[str, float] = {}

        def scores(split: str) -> dict:
            questions = getattr(self.task, split)
            texts, odds, method = sliding_window_answers(self.task.train, questions,
                                                         self.task.span.max_answer_length)
            odds = odds if self.task.with_no_answer else None
            if split == "test" and odds is not None and "dev" not in chosen:
                scores("dev")
            metrics, answers = evaluate(questions, texts, odds, chosen.get("dev") if split == "test" else None)
            if split == "dev" and "null_threshold" in metrics:
                chosen["dev"] = metrics["null_threshold"]
            if split == "test":
                self._keep(CLASSICAL, 0, answers, odds)
            return {**{m: metrics[m] for m in self.task.metrics}, **self._extras(metrics), **method}

        return scores

    def data_summary(self) -> dict:
        """Examples are windows; ``comparable`` false: the held-out questions come from the train data."""
        return {**super().data_summary(), **{f"{split}_questions": len(getattr(self.task, split))
                                            for split in ("train", *SPLITS)}, "comparable": self.task.comparable}

    def _extras(self, metrics: dict) -> dict:
        """What a run reports beside the task's metrics: the v2.0 threshold, the questions skipped."""
        extra = {"null_threshold": metrics["null_threshold"]} if "null_threshold" in metrics else {}
        return {**extra, **self.skipped}

    def _keep(self, mode: str, seed: int, answers: dict[str, str], null_odds: dict[str, float] | None) -> None:
        for name, content in prediction_files(answers, null_odds).items():
            self.files[f"predictions/{mode}-s{seed}/{name}"] = content
