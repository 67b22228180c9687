"""Tasks with a label (or a number) per text or text pair: GLUE, the demo task, your own tables.

Each mode trains one network per seed:

* ``pretrained`` / ``scratch`` -- BERT's ``BertForSequenceClassification``, a head on the pooled ``[CLS]``
  (the models BERT grew out of: a head on their top layer's mean, ``pipeline.finetune.encoders``);
* ``frozen_<set>`` -- a small head (``FeatureHead``) on each example's token
  states averaged over its real tokens, at the layers of the feature set. The
  states of every layer come from one pass of the frozen encoder, shared by
  every feature set and seed;
* ``tfidf`` -- TF-IDF word 1-2-grams with logistic regression (ridge for regression), scikit-learn.
"""
from __future__ import annotations

import logging

import numpy as np
import torch
import torch.nn.functional as F
from scipy.sparse import csr_matrix, hstack
from torch.utils.data import DataLoader, TensorDataset

from pipeline.finetune.encoders import Export
from pipeline.finetune.heads import FeatureHead, pooled_states
from pipeline.finetune.modes import is_frozen
from pipeline.finetune.tasks.base import Example, TaskData, score
from pipeline.finetune.training import Recipe, Runner

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
        out = score(self.task.metrics, torch.cat(self._preds), torch.cat(self._targets),
                    max(2, self.task.num_outputs))
        self._preds, self._targets = [], []
        return out


class SentenceRunner(Runner):
    """The runs of one sentence task from one export. A head on frozen features reads each example's pooled
    states (``states``), computed once for every feature set and seed."""

    kind = "sentence"

    def __init__(self, recipe: Recipe, task: TaskData, tok, export: Export):
        super().__init__(recipe, task, export)
        self.train = encode(tok, task.train, recipe.max_seq_length)
        self.dev = encode(tok, task.dev, recipe.max_seq_length)
        self._states: tuple[torch.Tensor, torch.Tensor] | None = None
        log.info("task %s: %d train, %d dev examples, %s", task.name, len(self.train), len(self.dev),
                 "regression" if task.regression else f"{len(task.labels)} labels")

    def objective(self) -> SentenceObjective:
        return SentenceObjective(self.task)

    def frozen_head(self, feature_set: str) -> FeatureHead:
        train_states, _ = self.states()
        return FeatureHead(feature_set, train_states.shape[1], train_states.shape[2], self.task.num_outputs)

    def loaders(self, mode: str, seed: int) -> tuple[DataLoader, DataLoader]:
        if not is_frozen(mode):
            return super().loaders(mode, seed)
        r = self.recipe
        dtype = torch.float32 if self.task.regression else torch.long

        def loader(states, examples, shuffle):
            labels = torch.tensor([e["label"] for e in examples], dtype=dtype)
            collate = lambda items: {"states": torch.stack([s for s, _ in items]),  # noqa: E731
                                     "label": torch.stack([y for _, y in items])}
            return DataLoader(TensorDataset(states, labels), batch_size=r.batch_size if shuffle else
                              r.feature_eval_batch_size, shuffle=shuffle, collate_fn=collate,
                              generator=torch.Generator().manual_seed(seed) if shuffle else None)

        train_states, dev_states = self.states()
        return loader(train_states, self.train, True), loader(dev_states, self.dev, False)

    def inputs(self, mode: str) -> tuple[str, ...]:
        return ("states",) if is_frozen(mode) else super().inputs(mode)

    def states(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(train, dev) pooled states of every layer of the frozen encoder, computed once for every head and seed.
        Computing them draws nothing from the seeded generator: a head starts alike whether or not they were."""
        if self._states is None:
            with torch.random.fork_rng(devices=[]):
                encoder = self.export.frozen_encoder()
                self._states = (pooled_states(encoder, self.train, self.recipe.eval_batch_size),
                                pooled_states(encoder, self.dev, self.recipe.eval_batch_size))
        return self._states

    def classical(self) -> dict:
        return classical(self.task)


def classical(task: TaskData) -> dict:
    """TF-IDF word 1-2-grams + logistic regression (ridge for regression). For a pair, the features also see
    whether the two sides agree: both texts' n-grams, their absolute difference, their product (the shared
    n-grams) and the two sides' cosine similarity -- joined into one bag, a linear model could not."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression, Ridge

    pairs = task.is_pair
    vec = TfidfVectorizer(ngram_range=(1, 2))
    vec.fit([e.text_a if e.text_b is None else f"{e.text_a} {e.text_b}" for e in task.train])

    def features(examples):
        a = vec.transform([e.text_a for e in examples])
        if not pairs:
            return a
        b = vec.transform([e.text_b or "" for e in examples])
        both = a.multiply(b)  # rows are L2-normalised: each row's sum is the cosine of the two sides
        return hstack([a + b, abs(a - b), both, csr_matrix(np.asarray(both.sum(1)))]).tocsr()

    model = Ridge() if task.regression else LogisticRegression(max_iter=2000)
    model.fit(features(task.train), [e.label for e in task.train])
    preds = model.predict(features(task.dev))
    return score(task.metrics, torch.as_tensor(preds), torch.as_tensor([e.label for e in task.dev]),
                 max(2, task.num_outputs))
