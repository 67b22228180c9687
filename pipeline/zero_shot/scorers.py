"""A sentence log-likelihood for each neural generation of the lineage, the way that fits it (the registry's
``scorer`` of each architecture, ``pipeline.architectures``; BLiMP is scored with them in ``pipeline.zero_shot.score``).

* BERT (a masked LM): pseudo-log-likelihood (Salazar et al., 2020): mask each
  piece in turn and sum the log-probabilities of the original pieces. With
  ``pll="word"`` the within-word pieces to the right of the scored one are
  masked too (Kauf & Ivanova, 2023, PLL-word-l2r), so a word split into
  pieces is not scored from its own visible remainder ("##ek" giving away
  "der"). Batched as one row per masked position, the vocabulary projection
  only at that position.
* The left-to-right LM (BERT with causal attention, GPT-style): the sum of
  each piece's log-probability given the pieces before it.
* ELMo's biLM: the mean of its forward LM's and its backward LM's sentence
  log-likelihoods (each a proper left-to-right or right-to-left probability;
  their mean is the log of the two probabilities' geometric mean).
* word2vec: no probability of a sentence at all; ``NoSentenceScore`` says so.

Every model scores the same positions: a sentence's text pieces, read as
``[CLS] sentence [SEP]`` (the special pieces are context, never scored).
Sentences are sorted by length before batching, so a batch is padded little;
padding and batch size change no score (beyond float rounding).

Shapes: R rows (masked copies or sentences) in a batch, T its longest, V vocabulary, N scored pieces.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, NamedTuple, Protocol, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from tqdm import tqdm

from pipeline.data.tokenizer import MASK
from pipeline.errors import DataError
from pipeline.model.bert import BertForPreTraining
from pipeline.model.elmo import ElmoLM


class Encoded(NamedTuple):
    """One tokenized sentence: ``ids`` (L,) with [CLS] and [SEP], ``text`` (L,) bool its scored pieces, ``words``
    (L,) each piece's word index (-1 for the special pieces)."""
    ids: np.ndarray
    text: np.ndarray
    words: np.ndarray


def encode(tokenizer: Tokenizer, sentences: Sequence[str]) -> list[Encoded]:
    """``[CLS] sentence [SEP]`` pieces of each sentence, with its word boundaries (the tokenizer's words).

    A tokenizer.json from elsewhere may truncate or pad; a copy without either is used, so a long sentence keeps
    its length (and is left out, counted, if the model cannot read it) instead of being cut silently."""
    if tokenizer.truncation is not None or tokenizer.padding is not None:
        tokenizer = Tokenizer.from_str(tokenizer.to_str())
        tokenizer.no_truncation()
        tokenizer.no_padding()
    return [Encoded(np.asarray(e.ids, np.int64), ~np.asarray(e.special_tokens_mask, bool),
                    np.asarray([-1 if w is None else w for w in e.word_ids], np.int64))
            for e in tokenizer.encode_batch(list(sentences))]


class SentenceScorer(Protocol):
    method: str                 # recorded with the result: pll | pll_word | ltr | bilm | ngram
    max_pieces: int | None      # the longest sentence it reads ([CLS], [SEP] included); None: no limit

    def log_likelihoods(self, sentences: Sequence[Encoded], progress: bool = False) -> np.ndarray:
        """(S,) float64: each sentence's log-likelihood (natural log) over its text pieces."""


@dataclass(frozen=True)
class NoSentenceScore:
    """A model that assigns no probability to a sentence (word2vec): it is reported as such, not scored."""
    kind: str
    reason: str


# -------------------------------------------------------------------------------------------------- batching


def _by_length(sentences: Sequence[Encoded]) -> list[int]:
    return sorted(range(len(sentences)), key=lambda i: len(sentences[i].ids))


class _Rows(NamedTuple):
    owner: np.ndarray      # (n,) the sentence each row belongs to
    ids: list[np.ndarray]  # n rows of pieces, unpadded
    at: np.ndarray         # (n,) the masked position each row scores
    target: np.ndarray     # (n,) the piece to score there


def _pad(rows: Sequence[np.ndarray], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(R, T) ids right-padded with ``pad_id`` and the (R, T) attention mask (1 = a real piece)."""
    T = max(len(r) for r in rows)
    ids = np.full((len(rows), T), pad_id, np.int64)
    mask = np.zeros((len(rows), T), np.int64)
    for i, r in enumerate(rows):
        ids[i, :len(r)] = r
        mask[i, :len(r)] = 1
    return torch.from_numpy(ids), torch.from_numpy(mask)


def _batches(blocks: Iterable[_Rows], batch_size: int) -> Iterator[_Rows]:
    """Blocks of rows regrouped into batches of exactly ``batch_size`` rows (the last one smaller)."""
    buf: list[_Rows] = []
    n = 0
    for block in blocks:
        buf.append(block)
        n += len(block.owner)
        while n >= batch_size:
            take, rest, need = [], [], batch_size
            for b in buf:
                if need >= len(b.owner):
                    take.append(b)
                    need -= len(b.owner)
                elif need > 0:
                    take.append(_Rows(b.owner[:need], b.ids[:need], b.at[:need], b.target[:need]))
                    rest.append(_Rows(b.owner[need:], b.ids[need:], b.at[need:], b.target[need:]))
                    need = 0
                else:
                    rest.append(b)
            yield _join(take)
            buf, n = rest, n - batch_size
    if n:
        yield _join(buf)


def _join(blocks: list[_Rows]) -> _Rows:
    return _Rows(np.concatenate([b.owner for b in blocks]), [r for b in blocks for r in b.ids],
                 np.concatenate([b.at for b in blocks]), np.concatenate([b.target for b in blocks]))


def _device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


# --------------------------------------------------------------------------------------------------- scorers


class PseudoLogLikelihood:
    """A masked LM's PLL: sum over pieces t of log P(piece t | the sentence with t masked).

    With ``word_level`` the pieces after t inside t's word are masked as well (PLL-word-l2r). Each masked copy is
    one row; the LM head runs only at its masked position, so a batch costs R x T encoder positions and R
    vocabulary projections."""

    def __init__(self, model: BertForPreTraining, mask_id: int, *, word_level: bool = False, batch_size: int = 256):
        if model.config.causal:
            raise ValueError("a left-to-right model has no pseudo-log-likelihood: score it with LeftToRight")
        self.model, self.mask_id, self.word_level, self.batch_size = model.eval(), mask_id, word_level, batch_size
        self.method = "pll_word" if word_level else "pll"
        self.max_pieces = model.config.max_position_embeddings

    def masked_copies(self, owner: int, s: Encoded) -> _Rows:
        """One row per text piece of ``s``: the sentence with that piece (and, word-level, its word's later
        pieces) replaced by [MASK]."""
        at = np.flatnonzero(s.text)                                          # (n,)
        L = len(s.ids)
        hide = np.zeros((len(at), L), bool)
        hide[np.arange(len(at)), at] = True
        if self.word_level:
            later = np.arange(L)[None, :] > at[:, None]
            hide |= later & (s.words[None, :] == s.words[at][:, None]) & (s.words[None, :] >= 0)
        rows = np.where(hide, self.mask_id, s.ids[None, :])                # (n, L)
        return _Rows(np.full(len(at), owner), list(rows), at, s.ids[at])

    @torch.inference_mode()
    def log_likelihoods(self, sentences: Sequence[Encoded], progress: bool = False) -> np.ndarray:
        scores = np.zeros(len(sentences))
        device, pad = _device(self.model), self.model.config.pad_token_id
        bar = tqdm(total=sum(int(s.text.sum()) for s in sentences), desc=f"BLiMP {self.method}", unit="row",
                   disable=not progress)
        blocks = (self.masked_copies(i, sentences[i]) for i in _by_length(sentences))
        for b in _batches(blocks, self.batch_size):
            ids, mask = _pad(b.ids, pad)
            T = ids.shape[1]
            rows = torch.from_numpy(np.arange(len(b.at)) * T + b.at)       # (R,) into the flattened (R*T) states
            logits = self.model(ids.to(device), attention_mask=mask.to(device),
                                masked_positions=rows.to(device)).mlm_logits   # (R, V)
            logp = F.log_softmax(logits.float(), -1).gather(1, torch.from_numpy(b.target)[:, None].to(device))
            np.add.at(scores, b.owner, logp.squeeze(1).double().cpu().numpy())
            bar.update(len(b.owner))
        bar.close()
        return scores


@torch.inference_mode()
def _per_sentence(scorer, sentences: Sequence[Encoded], progress: bool) -> np.ndarray:
    """Sum ``scorer.piece_log_probs`` per sentence, reading each sentence once (a row per sentence, sorted by
    length): how the left-to-right LM and ELMo score."""
    scores = np.zeros(len(sentences))
    device = _device(scorer.model)
    order = _by_length(sentences)
    for start in tqdm(range(0, len(order), scorer.batch_size), desc=f"BLiMP {scorer.method}", unit="batch",
                      disable=not progress):
        chunk = order[start:start + scorer.batch_size]
        ids, mask = _pad([sentences[i].ids for i in chunk], scorer.pad_id)
        text = torch.zeros_like(ids, dtype=torch.bool)  # (R, T)
        for r, i in enumerate(chunk):
            text[r, :len(sentences[i].ids)] = torch.from_numpy(sentences[i].text)
        logp = scorer.piece_log_probs(ids.to(device), mask.to(device), text.to(device))  # (N,)
        owner = np.asarray(chunk)[text.nonzero()[:, 0].numpy()]
        np.add.at(scores, owner, logp.double().cpu().numpy())
    return scores


def _next_and_previous(text: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(before, after) (R, T) bool: the positions just before and just after each text piece (row-major order
    is that of the text pieces, so predictions read there line up with ``ids[text]``)."""
    before, after = torch.zeros_like(text), torch.zeros_like(text)
    before[:, :-1], after[:, 1:] = text[:, 1:], text[:, :-1]
    return before, after


def _log_prob_of(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.log_softmax(logits.float(), -1).gather(1, targets[:, None]).squeeze(1)  # float32: see _mlm_loss


class LeftToRight:
    """A left-to-right LM (our BERT with causal attention): sum over pieces of log P(piece | the pieces before)."""
    method = "ltr"

    def __init__(self, model: BertForPreTraining, *, batch_size: int = 256):
        if not model.config.causal:
            raise ValueError("a bidirectional BERT reads the whole sentence: score it with PseudoLogLikelihood")
        self.model, self.pad_id, self.batch_size = model.eval(), model.config.pad_token_id, batch_size
        self.max_pieces = model.config.max_position_embeddings

    def log_likelihoods(self, sentences: Sequence[Encoded], progress: bool = False) -> np.ndarray:
        return _per_sentence(self, sentences, progress)

    def piece_log_probs(self, ids: torch.Tensor, mask: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """(N,) each text piece's log-probability from the state before it; ``ids``, ``mask``, ``text`` (R, T)."""
        h = self.model.bert(ids, attention_mask=mask).last_hidden_state  # (R, T, H)
        before, _ = _next_and_previous(text)
        return _log_prob_of(self.model.cls.predictions(h[before]), ids[text])


class BiLM:
    """ELMo: the mean of the forward LM's and the backward LM's sentence log-likelihoods."""
    method = "bilm"
    max_pieces = None  # no learned positions

    def __init__(self, model: ElmoLM, *, batch_size: int = 256):
        self.model, self.pad_id, self.batch_size = model.eval(), model.config.pad_token_id, batch_size

    def log_likelihoods(self, sentences: Sequence[Encoded], progress: bool = False) -> np.ndarray:
        return _per_sentence(self, sentences, progress)

    def piece_log_probs(self, ids: torch.Tensor, mask: torch.Tensor, text: torch.Tensor) -> torch.Tensor:
        """(N,) the mean of each text piece's log-probability from both directions."""
        _, fwd, bwd = self.model.directions(ids, mask)  # each layer (R, T, h)
        before, after = _next_and_previous(text)
        targets = ids[text]
        forward = _log_prob_of(self.model.softmax(fwd[-1][before]), targets)   # from the pieces before
        backward = _log_prob_of(self.model.softmax(bwd[-1][after]), targets)   # from the pieces after
        return (forward + backward) / 2  # summed per sentence: the mean of the two directions' log-likelihoods


# ------------------------------------------------------------------------------- each architecture's scorer
# The registry's ``scorer`` of each architecture (``pipeline.architectures``): its pretrained network with the
# LM head and its tokenizer -> the sentence scorer that fits it.


def bert_scorer(model: BertForPreTraining, tokenizer: Tokenizer, *, pll: str = "token",
                batch_size: int = 256) -> SentenceScorer:
    """PLL for a masked LM, the left-to-right sum for a causal one (``config.causal``)."""
    if model.config.causal:
        return LeftToRight(model, batch_size=batch_size)
    mask_id = tokenizer.token_to_id(MASK)
    if mask_id is None:
        raise DataError(f"its vocabulary has no {MASK} piece, so no pseudo-log-likelihood")
    return PseudoLogLikelihood(model, mask_id, word_level=pll == "word", batch_size=batch_size)


def elmo_scorer(model: ElmoLM, tokenizer: Tokenizer, *, batch_size: int = 256, **_) -> BiLM:
    return BiLM(model, batch_size=batch_size)


def word2vec_scorer(model: torch.nn.Module, tokenizer: Tokenizer, **_) -> NoSentenceScore:
    return NoSentenceScore("lab-word2vec", "word2vec learns a vector per piece and no probability of a sentence: "
                                           "it has no BLiMP score")
