"""Named-entity recognition: the same modes as sentence tasks, with a label per word.

* ``pretrained`` / ``scratch`` -- ``BertForTokenClassification``: a label per
  token from the last hidden states; each word is labelled (and scored) on its
  first word piece, the other pieces are ignored;
* ``frozen_<features>`` -- the paper's feature-based NER: the frozen encoder's
  per-token states of the chosen layers feed a two-layer BiLSTM and a linear
  layer (the only parts that train; ``FrozenBiLSTMTagger``);
* ``tfidf`` -- the linear baseline: logistic regression per word on sparse
  word features (the word, lowercased, its prefixes and suffixes, shape, and
  its neighbours).

Scored by entity-level precision, recall and F1 (``seqeval``, CoNLL's rules);
words cut off by ``task.max_seq_length`` count as predicted ``O``.
"""
from __future__ import annotations

import logging
from typing import Callable

import torch
import torch.nn.functional as F

from pipeline.data.datamodule import pad_collate
from pipeline.finetune.encoders import Export
from pipeline.finetune.heads import FrozenBiLSTMTagger
from pipeline.finetune.tasks.conll import NerTask, Sentence
from pipeline.finetune.training import SPLITS, Recipe, Runner, Trained
from pipeline.names import IGNORE_INDEX

log = logging.getLogger(__name__)


def encode_ner(tok, sentences: list[Sentence], max_seq_length: int) -> list[dict]:
    """Word pieces of each sentence with the word's tag on its first piece, ``IGNORE_INDEX`` elsewhere."""
    tok.enable_truncation(max_seq_length)
    encodings = tok.encode_batch([list(s.words) for s in sentences], is_pretokenized=True)
    out = []
    for i, (enc, s) in enumerate(zip(encodings, sentences)):
        labels, seen = [], set()
        for w in enc.word_ids:
            if w is None or w in seen:
                labels.append(IGNORE_INDEX)
            else:
                seen.add(w)
                labels.append(s.tags[w])
        out.append({"input_ids": enc.ids, "token_type_ids": enc.type_ids, "labels": labels, "index": i})
    return out


def ner_collate(items: list[dict]) -> dict[str, torch.Tensor]:
    batch = pad_collate([{k: v for k, v in it.items() if k != "labels"} for it in items])
    labels = torch.full(batch["input_ids"].shape, IGNORE_INDEX, dtype=torch.long)
    for i, it in enumerate(items):
        labels[i, :len(it["labels"])] = torch.tensor(it["labels"])
    batch["labels"] = labels
    return batch


def entity_scores(gold: list[list[str]], pred: list[list[str]]) -> dict[str, float]:
    from seqeval.metrics import f1_score, precision_score, recall_score

    return {"f1": round(float(f1_score(gold, pred)), 6), "precision": round(float(precision_score(gold, pred)), 6),
            "recall": round(float(recall_score(gold, pred)), 6)}


class TaggingObjective:
    """Cross-entropy over labelled word pieces; entity-level scores of the whole sentences of a split."""

    headline = "f1"

    def __init__(self, task: NerTask, sentences: list[Sentence]):
        self.task, self.sentences = task, sentences  # the split scored (batch["index"] points into it)
        self._gold: list[list[str]] = []
        self._pred: list[list[str]] = []

    def loss(self, logits: torch.Tensor, batch: dict) -> torch.Tensor:  # logits (B, T, C)
        keep = batch["labels"] != IGNORE_INDEX
        return F.cross_entropy(logits[keep], batch["labels"][keep])

    def batch_size(self, batch: dict) -> int:
        return len(batch["index"])

    def collect(self, logits: torch.Tensor, batch: dict) -> None:
        pred = logits.argmax(-1)
        names = self.task.labels
        for row, i in enumerate(batch["index"].tolist()):
            gold = [names[t] for t in self.sentences[i].tags]
            tags = [names[t] for t in pred[row][batch["labels"][row] != IGNORE_INDEX].tolist()]
            self._gold.append(gold)
            self._pred.append(tags + ["O"] * (len(gold) - len(tags)))  # words cut off by truncation

    def scores(self) -> dict[str, float]:
        if not self._gold:
            return {}
        out = entity_scores(self._gold, self._pred)
        self._gold, self._pred = [], []
        return out


class TokenRunner(Runner):
    """The runs of one NER task from one export: the encoded sentences; on frozen features, a BiLSTM tagger."""

    kind = "ner"
    collate = staticmethod(ner_collate)

    def __init__(self, recipe: Recipe, task: NerTask, tok, export: Export):
        super().__init__(recipe, task, export)
        self.encoded = {split: encode_ner(tok, getattr(task, split), recipe.max_seq_length)
                        for split in ("train", *SPLITS)}
        log.info("task %s: %d train, %d dev, %d test sentences, %d tags", task.name, len(task.train), len(task.dev),
                 len(task.test), len(task.labels))

    def objective(self, split: str, run: Trained | None = None) -> TaggingObjective:
        return TaggingObjective(self.task, getattr(self.task, split))

    def frozen_head(self, feature_set: str, pooling: str | None) -> FrozenBiLSTMTagger:
        """The paper's feature-based NER: a two-layer BiLSTM tagger on the frozen encoder's states."""
        return FrozenBiLSTMTagger(self.export.frozen_encoder(), feature_set, self.task.num_outputs)

    def classical(self, settings: dict) -> Callable[[str], dict]:
        return linear_baseline(self.task)


def word_features(words: tuple[str, ...], i: int) -> dict[str, float]:
    w = words[i]
    shape = "".join("X" if c.isupper() else "x" if c.islower() else "d" if c.isdigit() else c for c in w)[:6]
    f = {f"w={w}": 1.0, f"lw={w.lower()}": 1.0, f"p3={w[:3]}": 1.0, f"s3={w[-3:]}": 1.0, f"shape={shape}": 1.0}
    for off in (-1, 1):
        j = i + off
        f[f"w{off:+d}={words[j].lower() if 0 <= j < len(words) else '<s>'}"] = 1.0
    return f


def linear_baseline(task: NerTask) -> Callable[[str], dict]:
    """The linear baseline: logistic regression per word on sparse word features, fitted on train: split -> its
    scores."""
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression

    def feats(sents):
        return [word_features(s.words, i) for s in sents for i in range(len(s.words))]

    vec = DictVectorizer()
    x = vec.fit_transform(feats(task.train))
    y = [t for s in task.train for t in s.tags]
    clf = LogisticRegression(max_iter=2000).fit(x, y)

    def scores(split: str) -> dict:
        sentences = getattr(task, split)
        flat = clf.predict(vec.transform(feats(sentences))).tolist()
        gold, pred, k = [], [], 0
        for s in sentences:
            gold.append([task.labels[t] for t in s.tags])
            pred.append([task.labels[t] for t in flat[k:k + len(s.words)]])
            k += len(s.words)
        return entity_scores(gold, pred)

    return scores
