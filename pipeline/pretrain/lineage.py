"""Pretraining the models BERT grew out of, on the same examples: static word embeddings and ELMo's biLM.

Both are ``PretrainingModule``s, so the pretrain stage trains, checkpoints,
resumes and records them exactly as it does BERT. They read the same
memory-mapped examples; the ``[CLS] A [SEP] B [SEP]`` pairs are just text to
them ([CLS], [SEP] and padding are never predicted or used as context).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from pipeline.data.scored import EvalSet
from pipeline.data.shards import PairsDataset
from pipeline.model.elmo import ElmoConfig, ElmoLM
from pipeline.model.static import StaticConfig, StaticEmbeddings, context_windows, noise_distribution, shifted
from pipeline.pretrain.module import PretrainingModule, PretrainSetup, batch_seed

torch.serialization.add_safe_globals([StaticConfig, ElmoConfig, *((c, f"pipeline.model.config.{c.__name__}")
                                                                   for c in (StaticConfig, ElmoConfig))])  # old name


def _text(batch: dict, cls_id: int, sep_id: int) -> torch.Tensor:
    """(B, T) bool: the positions that hold text (not [CLS], [SEP] or padding)."""
    ids = batch["input_ids"]
    return batch["attention_mask"].bool() & (ids != cls_id) & (ids != sep_id)


class StaticPretraining(PretrainingModule):
    """word2vec (CBOW or skip-gram, negative sampling) over the pretraining examples."""

    def __init__(self, config: StaticConfig, noise: torch.Tensor, *, optim: dict, max_steps: int, seed: int,
                 cls_id: int, sep_id: int, fused_optimizer: bool = True, eval_set: EvalSet | None = None):
        super().__init__(optim=optim, max_steps=max_steps, fused_optimizer=fused_optimizer, eval_set=eval_set)
        self.save_hyperparameters(ignore=["noise", "seed", "eval_set"])
        self.model = StaticEmbeddings(config)
        self.lm = config.metric_prefix
        self.register_buffer("noise", noise, persistent=False)  # (V,) unigram ** 3/4
        self.seed, self.cls_id, self.sep_id = seed, cls_id, sep_id

    @classmethod
    def from_setup(cls, config: StaticConfig, setup: PretrainSetup) -> "StaticPretraining":
        """Noise drawn by the training examples' token counts; special tokens are never drawn."""
        counts = PairsDataset(setup.pairs / "train").token_counts(config.vocab_size)
        counts[[setup.special[k] for k in ("pad", "cls", "sep", "mask", "unk")]] = 0
        return cls(config, noise_distribution(torch.from_numpy(counts)), **setup.common())

    def step(self, batch: dict, batch_idx: int, split: str) -> torch.Tensor:
        ids = batch["input_ids"]
        predict = _text(batch, self.cls_id, self.sep_id)
        g = torch.Generator().manual_seed(batch_seed(self.seed, self.current_epoch if split == "train" else -1,
                                                     batch_idx))
        B, T = ids.shape
        noise = torch.multinomial(self.noise.cpu(), B * T * self.model.config.negatives, replacement=True,
                                  generator=g).view(B, T, -1).to(ids.device)
        loss = self.model.loss(ids, predict, noise)
        self.check_finite(loss, split)
        if split == "train":
            self.log("train/loss", loss, prog_bar=True, batch_size=B)
            self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"], batch_size=B)
        else:
            self.log("val/loss", loss, on_epoch=True, prog_bar=True, batch_size=B)
        return loss

    def fixed_scores(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """The hidden piece from its clean window, as each kind was trained: CBOW scores each piece's context
        vector against the mean of the window's word vectors; skip-gram each piece's word vector against the
        window's context vectors (the mean of the log-odds it was trained on). Negative sampling trains those
        log-odds towards log p(piece | window) / (k q(piece)), q the noise distribution, so log q is added back:
        without it a piece never seen in training (log-odds 0, never pushed down as noise) outranks every real
        one. A softmax over the scores gives the loss; it is not what word2vec optimised, so only the accuracy
        compares."""
        m, ids, w = self.model, batch["input_ids"], self.model.config.window
        ok = context_windows(_text(batch, self.cls_id, self.sep_id), w)[..., None]    # (B, T, 2w, 1)
        n = ok.sum(2).clamp(min=1)                                                       # (B, T, 1)
        scored = batch["kind"] >= 0
        if m.config.kind == "cbow":
            h = (m.embeddings(shifted(ids, w)) * ok).sum(2) / n                          # (B, T, d)
            logits = h[scored] @ m.context.weight.T
        else:
            logits = ((m.context(shifted(ids, w)) * ok).sum(2) / n)[scored] @ m.embeddings.weight.T
        log_q = self.noise.to(logits.device).clamp(min=1e-30).log()                      # never drawn: ~ -69
        return self.scored_from_logits(logits + log_q, ids[scored])
        return self.scored_from_logits(logits, ids[scored])


class BiLMPretraining(PretrainingModule):
    """ELMo's two language models, each predicting its next token at a random share of the positions."""

    def __init__(self, config: ElmoConfig, *, optim: dict, max_steps: int, seed: int, cls_id: int, sep_id: int,
                 fused_optimizer: bool = True, eval_set: EvalSet | None = None):
        super().__init__(optim=optim, max_steps=max_steps, fused_optimizer=fused_optimizer, eval_set=eval_set)
        self.save_hyperparameters(ignore=["seed", "eval_set"])
        self.model = ElmoLM(config)
        self.lm = config.metric_prefix
        self.seed, self.cls_id, self.sep_id = seed, cls_id, sep_id

    @classmethod
    def from_setup(cls, config: ElmoConfig, setup: PretrainSetup) -> "BiLMPretraining":
        return cls(config, **setup.common())

    def step(self, batch: dict, batch_idx: int, split: str) -> torch.Tensor:
        ids = batch["input_ids"]
        text = _text(batch, self.cls_id, self.sep_id)
        g = torch.Generator().manual_seed(batch_seed(self.seed, self.current_epoch if split == "train" else -1,
                                                     batch_idx))
        predict = (torch.rand(ids.shape, generator=g) < self.model.config.predict_fraction).to(ids.device) & text
        # the pairs' [CLS] and [SEP] stay in the sequence as text boundaries; only text is predicted
        loss, acc, n = self.model.lm_loss(ids, batch["attention_mask"], predict & text, text)
        self.check_finite(loss, split)
        B = ids.shape[0]
        if split == "train":
            self.log("train/loss", loss, prog_bar=True, batch_size=B)
            self.log(f"train/{self.lm}_acc", acc, batch_size=B)
            self.log("train/lr", self.trainer.optimizers[0].param_groups[0]["lr"], batch_size=B)
        else:
            self.log("val/loss", loss, on_epoch=True, prog_bar=True, batch_size=B)
            self.log(f"val/{self.lm}_acc", acc, on_epoch=True, prog_bar=True, batch_size=B)
            self.val_lm_loss.update(loss.detach(), weight=n)
        return loss

    def fixed_scores(self, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """The hidden piece from both directions of the clean sequence: the forward LM's prediction from the
        position before it and the backward LM's from the position after it, combined as a product of experts
        (their log-probabilities summed, then renormalised). Neither LM reads the other side, as in pretraining."""
        scored = batch["kind"] >= 0
        before, after = torch.zeros_like(scored), torch.zeros_like(scored)
        before[:, :-1], after[:, 1:] = scored[:, 1:], scored[:, :-1]  # row-major order is that of the scored ones
        _, fwd, bwd = self.model.directions(batch["input_ids"], batch["attention_mask"])
        logp = F.log_softmax(self.model.softmax(fwd[-1][before]).float(), -1) + \
            F.log_softmax(self.model.softmax(bwd[-1][after]).float(), -1)
        return self.scored_from_logits(logp, batch["input_ids"][scored])
