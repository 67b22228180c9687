"""Tasks with a label (or a number) per text or text pair: GLUE, the demo task, your own tables.

Each mode trains one network per seed:

* ``pretrained`` / ``scratch`` -- BERT's ``BertForSequenceClassification``, a head on the pooled ``[CLS]``
  or on the mean of the top layer's states (the candidate's ``pooling``; the models BERT grew out of: a
  head on their top layer's mean, ``pipeline.finetune.encoders``);
* ``frozen_<set>`` -- a small head (``FeatureHead``) on each example's token
  states averaged over its real tokens (or its summary token's), at the layers of
  the feature set. The states of every layer come from one pass of the frozen
  encoder, shared by every feature set, pooling and seed;
* ``tfidf`` -- TF-IDF word n-grams with logistic regression (ridge for regression), scikit-learn, its
  regularisation and n-gram range chosen like every other arm's settings.
"""
from __future__ import annotations

import logging
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from scipy.sparse import csr_matrix, hstack
from torch.utils.data import DataLoader, TensorDataset

from pipeline.finetune.encoders import Export
from pipeline.finetune.heads import FeatureHead, pooled_states
from pipeline.finetune.modes import is_frozen
from pipeline.finetune.tasks.base import Example, TaskData, score
from pipeline.finetune.training import SPLITS, Recipe, Runner

log = logging.getLogger(__name__)


def encode(tok, examples: list[Example], max_seq_length: int) -> list[dict]:
    """Token ids with BERT's ``[CLS] A [SEP] (B [SEP])`` template, truncated longest-first."""
    tok.enable_truncation(max_seq_length)
    pairs = [(e.text_a, e.text_b) if e.text_b is not None else e.text_a for e in examples]
    encodings = tok.encode_batch(pairs)
    return [{"input_ids": enc.ids, "token_type_ids": enc.type_ids, "label": e.label}
            for enc, e in zip(encodings, examples)]


class SentenceObjective:
    """Cross-entropy (or MSE for regression) per text; the task's metrics over predicted classes (or values)."""

    def __init__(self, task: TaskData):
        self.task = task
        self.headline = task.metrics[0]
        self._preds: list[torch.Tensor] = []
        self._targets: list[torch.Tensor] = []
        self.correct: torch.Tensor | None = None  # per example, in the loader's order, from the last ``scores``

    def loss(self, outputs: torch.Tensor, batch: dict) -> torch.Tensor:
        if self.task.regression:
            return F.mse_loss(outputs.squeeze(-1).float(), batch["label"].float())
        return F.cross_entropy(outputs, batch["label"])

    def batch_size(self, batch: dict) -> int:
        return len(batch["label"])

    def collect(self, outputs: torch.Tensor, batch: dict) -> None:
        preds = outputs.squeeze(-1).float() if self.task.regression else outputs.argmax(-1)
        self._preds.append(preds.cpu())
        self._targets.append(batch["label"].cpu())

    def scores(self) -> dict[str, float]:
        if not self._preds:
            return {}
        preds, targets = torch.cat(self._preds), torch.cat(self._targets)
        out = score(self.task.metrics, preds, targets, max(2, self.task.num_outputs))
        self.correct = None if self.task.regression else preds == targets
        self._preds, self._targets = [], []
        return out


class SentenceRunner(Runner):
    """The runs of one sentence task from one export. A head on frozen features reads each example's pooled
    states (``states``), computed once for every feature set, pooling and seed."""

    kind = "sentence"

    def __init__(self, recipe: Recipe, task: TaskData, tok, export: Export):
        super().__init__(recipe, task, export)
        self.encoded = {split: encode(tok, getattr(task, split), recipe.max_seq_length)
                        for split in ("train", *SPLITS)}
        self._states: dict[str, dict[str, torch.Tensor]] | None = None
        log.info("task %s: %d train, %d dev, %d test examples, %s", task.name, len(task.train), len(task.dev),
                 len(task.test), "regression" if task.regression else f"{len(task.labels)} labels")

    def poolings(self) -> list[str | None]:
        offered = self.export.poolings
        return [p for p in self.recipe.grid.poolings if p in offered] or [offered[0]]

    def objective(self, split: str, run=None) -> SentenceObjective:
        return SentenceObjective(self.task)

    def frozen_head(self, feature_set: str, pooling: str | None) -> FeatureHead:
        train_states = self.states()["train"][pooling]
        return FeatureHead(feature_set, train_states.shape[1], train_states.shape[2], self.task.num_outputs)

    def train_loader(self, mode: str, settings: dict, seed: int) -> DataLoader:
        if not is_frozen(mode):
            return super().train_loader(mode, settings, seed)
        return self._feature_loader("train", settings["pooling"], seed)

    def eval_loader(self, mode: str, settings: dict, split: str) -> DataLoader:
        if not is_frozen(mode):
            return super().eval_loader(mode, settings, split)
        return self._feature_loader(split, settings["pooling"], None)

    def _feature_loader(self, split: str, pooling: str, seed: int | None) -> DataLoader:
        """Batches of a split's precomputed states (train: shuffled by ``seed``)."""
        r = self.recipe
        dtype = torch.float32 if self.task.regression else torch.long
        labels = torch.tensor([e["label"] for e in self.encoded[split]], dtype=dtype)
        collate = lambda items: {"states": torch.stack([s for s, _ in items]),  # noqa: E731
                                 "label": torch.stack([y for _, y in items])}
        shuffle = seed is not None
        return DataLoader(TensorDataset(self.states()[split][pooling], labels),
                          batch_size=r.batch_size if shuffle else r.feature_eval_batch_size, shuffle=shuffle,
                          collate_fn=collate, generator=torch.Generator().manual_seed(seed) if shuffle else None)

    def inputs(self, mode: str) -> tuple[str, ...]:
        return ("states",) if is_frozen(mode) else super().inputs(mode)

    def finish(self, run, split: str, objective: SentenceObjective) -> dict:
        """On test, a classifier's ``outcomes``: "1" where it was right and "0" where wrong, one character per
        test example in the split's own order, so that runs scored on the same split can be compared example by
        example (the report's test sampling of a difference, ``pipeline.report.noise``)."""
        if split != "test" or objective.correct is None:
            return {}
        correct = objective.correct.tolist()
        if not is_frozen(run.mode):  # the loader's order, shortest first: back to the split's
            in_order = [False] * len(correct)
            for at, i in enumerate(self.eval_order(split)):
                in_order[i] = correct[at]
            correct = in_order
        return {"outcomes": "".join("1" if c else "0" for c in correct)}

    def states(self) -> dict[str, dict[str, torch.Tensor]]:
        """Each split's pooled states of every layer of the frozen encoder (``pooled_states``), computed once for
        every head, pooling and seed. Computing them draws nothing from the seeded generator: a head starts
        alike whether or not they were."""
        if self._states is None:
            with torch.random.fork_rng(devices=[]):
                encoder = self.export.frozen_encoder()
                causal = self.export.causal
                self._states = {split: pooled_states(encoder, data, self.recipe.eval_batch_size, causal)
                                for split, data in self.encoded.items()}
        return self._states

    def data_summary(self) -> dict:
        """The splits' sizes, and ``chance``: the test score of always predicting train's most common label (a
        regression's: 0, no correlation)."""
        out = super().data_summary()
        if self.task.regression:
            return {**out, "chance": 0.0}
        labels = [e.label for e in self.task.train]
        common = max(sorted(set(labels)), key=labels.count)
        targets = [e.label for e in self.task.test]
        chance = score(self.task.metrics, torch.full((len(targets),), common), torch.as_tensor(targets),
                       max(2, self.task.num_outputs))
        return {**out, "chance": chance[self.task.metrics[0]]}

    def classical_candidates(self) -> list[dict]:
        g = self.recipe.grid
        return [{"ngrams": n, "c": c} for n in g.tfidf_ngrams for c in g.tfidf_c]

    def classical(self, settings: dict) -> Callable[[str], dict]:
        return classical(self.task, settings["ngrams"], settings["c"])


def classical(task: TaskData, ngrams: int, c: float) -> Callable[[str], dict]:
    """TF-IDF word n-grams up to ``ngrams`` + logistic regression (ridge for regression), inverse regularisation
    ``c``, fitted on train: split -> its scores. For a pair, the features also see whether the two sides agree:
    both texts' n-grams, their absolute difference, their product (the shared n-grams) and the two sides' cosine
    similarity -- joined into one bag, a linear model could not."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression, Ridge

    pairs = task.is_pair
    vec = TfidfVectorizer(ngram_range=(1, ngrams), sublinear_tf=True)
    vec.fit([e.text_a if e.text_b is None else f"{e.text_a} {e.text_b}" for e in task.train])

    def features(examples):
        a = vec.transform([e.text_a for e in examples])
        if not pairs:
            return a
        b = vec.transform([e.text_b or "" for e in examples])
        both = a.multiply(b)  # rows are L2-normalised: each row's sum is the cosine of the two sides
        return hstack([a + b, abs(a - b), both, csr_matrix(np.asarray(both.sum(1)))]).tocsr()

    model = Ridge(alpha=1.0 / c) if task.regression else LogisticRegression(C=c, max_iter=2000)
    model.fit(features(task.train), [e.label for e in task.train])

    def scores(split: str) -> dict:
        examples = getattr(task, split)
        preds = model.predict(features(examples))
        return score(task.metrics, torch.as_tensor(preds), torch.as_tensor([e.label for e in examples]),
                     max(2, task.num_outputs))

    return scores
