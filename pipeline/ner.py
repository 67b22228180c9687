"""Named-entity recognition in the finetune stage: the same modes as sentence tasks, per token.

* ``pretrained`` / ``scratch`` -- ``BertForTokenClassification``: a label per
  token from the last hidden states; each word is labelled (and scored) on its
  first word piece, the other pieces are ignored;
* ``frozen_<features>`` -- the paper's feature-based NER: the frozen encoder's
  per-token states of the chosen layers feed a two-layer BiLSTM and a linear
  layer (the only parts that train);
* ``tfidf`` -- the linear baseline: logistic regression per word on sparse
  word features (the word, lowercased, its prefixes and suffixes, shape, and
  its neighbours).

Scored by entity-level precision, recall and F1 (``seqeval``, CoNLL's rules);
words cut off by ``task.max_seq_length`` count as predicted ``O``.
"""
from __future__ import annotations

import lightning.pytorch as L
import torch
import torch.nn.functional as F
from omegaconf import DictConfig
from torch import nn
from torch.utils.data import DataLoader

from pipeline.data import pad_collate
from pipeline.model.bert import BertForTokenClassification, BertModel
from pipeline.model.hf import config_from_hf, load_hf
from pipeline.io import read_json
from pipeline.optim import build_optimizer
from pipeline.tasks.ner import NerTask, Sentence

IGNORE = -100


def encode_ner(tok, sentences: list[Sentence], max_seq_length: int) -> list[dict]:
    """Word pieces of each sentence with the word's tag on its first piece, ``IGNORE`` elsewhere."""
    tok.enable_truncation(max_seq_length)
    encodings = tok.encode_batch([list(s.words) for s in sentences], is_pretokenized=True)
    out = []
    for i, (enc, s) in enumerate(zip(encodings, sentences)):
        labels, seen = [], set()
        for w in enc.word_ids:
            if w is None or w in seen:
                labels.append(IGNORE)
            else:
                seen.add(w)
                labels.append(s.tags[w])
        out.append({"input_ids": enc.ids, "token_type_ids": enc.type_ids, "labels": labels, "index": i})
    return out


def ner_collate(items: list[dict]) -> dict[str, torch.Tensor]:
    batch = pad_collate([{k: v for k, v in it.items() if k != "labels"} for it in items])
    labels = torch.full(batch["input_ids"].shape, IGNORE, dtype=torch.long)
    for i, it in enumerate(items):
        labels[i, :len(it["labels"])] = torch.tensor(it["labels"])
    batch["labels"] = labels
    return batch


def entity_scores(gold: list[list[str]], pred: list[list[str]]) -> dict[str, float]:
    from seqeval.metrics import f1_score, precision_score, recall_score

    return {"f1": round(float(f1_score(gold, pred)), 6), "precision": round(float(precision_score(gold, pred)), 6),
            "recall": round(float(recall_score(gold, pred)), 6)}


class TokenTagging(L.LightningModule):
    """Loss over labelled word pieces; entity-level scores over each dev pass."""

    def __init__(self, model: nn.Module, task: NerTask, dev: list[Sentence], optim: dict, total_steps: int,
                 fused_optimizer: bool = True):
        super().__init__()
        self.model, self.task, self.dev_sentences = model, task, dev
        self.optim, self.total_steps, self.fused = optim, total_steps, fused_optimizer
        self._gold: list[list[str]] = []
        self._pred: list[list[str]] = []

    def _loss(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])  # (B, T, C)
        keep = batch["labels"] != IGNORE
        return F.cross_entropy(logits[keep], batch["labels"][keep]), logits

    def training_step(self, batch, batch_idx):
        loss, _ = self._loss(batch)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(batch["index"]))
        return loss

    def validation_step(self, batch, batch_idx):
        loss, logits = self._loss(batch)
        self.log("val/loss", loss, on_epoch=True, batch_size=len(batch["index"]))
        pred = logits.argmax(-1)
        names = self.task.labels
        for row, i in enumerate(batch["index"].tolist()):
            gold = [names[t] for t in self.dev_sentences[i].tags]
            tags = [names[t] for t in pred[row][batch["labels"][row] != IGNORE].tolist()]
            self._gold.append(gold)
            self._pred.append(tags + ["O"] * (len(gold) - len(tags)))  # words cut off by truncation

    def on_validation_epoch_end(self) -> None:
        if self._gold:
            for k, v in entity_scores(self._gold, self._pred).items():
                self.log(f"val/{k}", v, prog_bar=k == "f1")
        self._gold, self._pred = [], []

    def configure_optimizers(self):
        return build_optimizer(self.model, self.optim, self.total_steps, fused=self.fused)


class FrozenBiLSTMTagger(nn.Module):
    """The paper's feature-based NER: frozen BERT states -> layer mix -> 2-layer BiLSTM -> tags."""

    def __init__(self, encoder: BertModel, feature_set: str, num_labels: int, lstm_hidden: int | None = None):
        from pipeline.finetune import LayerMix

        super().__init__()
        self.encoder = encoder.eval()
        for p in self.encoder.parameters():
            p.requires_grad_(False)
        cfg = encoder.config
        self.mix = LayerMix(feature_set, cfg.num_hidden_layers + 1, cfg.hidden_size)
        hidden = lstm_hidden or cfg.hidden_size
        self.lstm = nn.LSTM(self.mix.width, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.classifier = nn.Linear(2 * hidden, num_labels)

    def train(self, mode: bool = True):
        super().train(mode)
        self.encoder.eval()  # frozen means no dropout either
        return self

    def forward(self, input_ids, token_type_ids=None, attention_mask=None) -> torch.Tensor:
        with torch.no_grad():
            states = self.encoder(input_ids, token_type_ids, attention_mask, output_hidden_states=True).hidden_states
            states = torch.stack(states, 2)  # (B, T, L+1, H)
        x = self.mix(states)  # (B, T, width)
        lengths = (attention_mask.sum(1) if attention_mask is not None else
                   torch.full((x.shape[0],), x.shape[1])).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        h, _ = self.lstm(packed)
        h, _ = nn.utils.rnn.pad_packed_sequence(h, batch_first=True, total_length=x.shape[1])
        return self.classifier(h)  # (B, T, C)


def ner_run(cfg: DictConfig, task: NerTask, train: list[dict], dev: list[dict], mode: str, seed: int,
            export_dir, logger, trainer_fn, optim_fn) -> dict:
    """One (mode, seed) of a NER task with a neural model; returns the final dev scores."""
    L.seed_everything(seed, workers=True, verbose=False)
    torch.manual_seed(seed)
    ft = cfg.finetune
    if mode == "pretrained":
        model = load_hf(export_dir, BertForTokenClassification, num_labels=task.num_outputs).train()
        lr = ft.lr
    elif mode == "scratch":
        model = BertForTokenClassification(config_from_hf(read_json(export_dir / "config.json")), task.num_outputs)
        lr = ft.lr
    else:
        encoder = load_hf(export_dir, BertModel)
        model = FrozenBiLSTMTagger(encoder, mode[len("frozen_"):], task.num_outputs).train()
        lr = ft.feature_lr
    g = torch.Generator().manual_seed(seed)
    train_loader = DataLoader(train, batch_size=ft.batch_size, shuffle=True, generator=g, collate_fn=ner_collate)
    dev_loader = DataLoader(dev, batch_size=64, collate_fn=ner_collate)
    epochs = ft.feature_epochs if mode.startswith("frozen_") else ft.epochs
    module = TokenTagging(model, task, task.dev, optim_fn(ft, lr), epochs * len(train_loader),
                          cfg.runtime.fused_optimizer)
    trainer = trainer_fn(cfg, logger, epochs)
    trainer.fit(module, train_loader, dev_loader if ft.eval_every_epoch else None)
    final = trainer.validate(module, dev_loader, verbose=False)[0]
    result = {"seed": seed, **{m: round(float(final[f"val/{m}"]), 6) for m in task.metrics},
              "loss": round(float(final["val/loss"]), 6)}
    if mode == "frozen_weighted":
        result["layer_weights"] = model.mix.weights()
    return result


def word_features(words: tuple[str, ...], i: int) -> dict[str, float]:
    w = words[i]
    shape = "".join("X" if c.isupper() else "x" if c.islower() else "d" if c.isdigit() else c for c in w)[:6]
    f = {f"w={w}": 1.0, f"lw={w.lower()}": 1.0, f"p3={w[:3]}": 1.0, f"s3={w[-3:]}": 1.0, f"shape={shape}": 1.0}
    for off in (-1, 1):
        j = i + off
        f[f"w{off:+d}={words[j].lower() if 0 <= j < len(words) else '<s>'}"] = 1.0
    return f


def ner_linear(task: NerTask) -> dict:
    """The linear baseline: logistic regression per word on sparse word features."""
    from sklearn.feature_extraction import DictVectorizer
    from sklearn.linear_model import LogisticRegression

    def feats(sents):
        return [word_features(s.words, i) for s in sents for i in range(len(s.words))]

    vec = DictVectorizer()
    x = vec.fit_transform(feats(task.train))
    y = [t for s in task.train for t in s.tags]
    clf = LogisticRegression(max_iter=2000).fit(x, y)
    flat = clf.predict(vec.transform(feats(task.dev))).tolist()
    gold, pred, k = [], [], 0
    for s in task.dev:
        gold.append([task.labels[t] for t in s.tags])
        pred.append([task.labels[t] for t in flat[k:k + len(s.words)]])
        k += len(s.words)
    return entity_scores(gold, pred)
