"""BERT (Devlin et al., 2019) in plain PyTorch, top to bottom as the paper describes it.

Token, position and segment embeddings are summed and normalised; a stack of
post-LayerNorm Transformer encoder blocks follows; a masked-LM head (tied to the
token embeddings) and a next-sentence head sit on top. With ``layer_norm="pre"``
each block normalises the input of its two sub-layers instead and the stack ends
in one more LayerNorm (Xiong et al., 2020): a deep stack then trains at a small
model's learning rate. Its parameters are named as ``transformers``'
``RobertaPreLayerNorm*`` name theirs (``attention.LayerNorm``,
``intermediate.LayerNorm``, the model's ``LayerNorm``); ``pipeline.model.hf``
exports it as such a folder.

Parameter names are *identical* to ``transformers.BertForPreTraining`` /
``BertForSequenceClassification`` / ``BertForTokenClassification`` /
``BertForQuestionAnswering``, so state dicts move between the two without
renaming (``tests/test_model_parity.py`` proves the outputs agree). Keep them so:
odd names such as ``LayerNorm`` and ``attention.self`` are that contract, not taste.

Shapes: B batch, T sequence length, H hidden size, V vocabulary, N masked tokens,
nh heads, hd = H / nh head size.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from pipeline.model_config import HIDDEN_ACTS, BertConfig

from pipeline.model.init import init_weights, local_attention_init
from pipeline.model.lm_loss import linear_cross_entropy
from pipeline.names import IGNORE_INDEX


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


# The activation of each name in config.json (within 1e-7 of Hugging Face's own).
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = dict(
    zip(HIDDEN_ACTS, (F.gelu, F.relu, _gelu_tanh, _gelu_tanh)))


class EncoderOutput(NamedTuple):
    last_hidden_state: torch.Tensor  # (B, T, H)
    pooler_output: torch.Tensor | None  # (B, H): tanh(dense([CLS])); None without a pooler
    hidden_states: tuple[torch.Tensor, ...] | None  # L+1 x (B, T, H): embeddings, then each block


class PreTrainingOutput(NamedTuple):
    mlm_logits: torch.Tensor | None  # (N, V) at masked_positions, else (B, T, V); None with mlm_targets
    nsp_logits: torch.Tensor  # (B, 2): 0 = B follows A, 1 = B is random (HF's convention)
    hidden: torch.Tensor  # (B, T, H) last hidden state
    mlm_loss: torch.Tensor | None = None  # with mlm_targets: mean cross-entropy over the scored rows
    mlm_predictions: torch.Tensor | None = None  # with mlm_targets and return_predictions: (N,) argmax per row


# ------------------------------------------------------------------------ embeddings


class BertEmbeddings(nn.Module):
    """Learned token + segment + position embeddings, summed, then LayerNorm (post-sum)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None) -> torch.Tensor:
        T = input_ids.shape[1]
        if T > self.position_embeddings.num_embeddings:
            raise ValueError(
                f"sequence length {T} exceeds model.max_position_embeddings={self.position_embeddings.num_embeddings}"
            )
        x = self.word_embeddings(input_ids)  # (B, T, H)
        # Summed in Hugging Face's order (token, segment, position) so float rounding matches too.
        if token_type_ids is None:
            x = x + self.token_type_embeddings.weight[0]  # every token in segment A, without a gather
        else:
            x = x + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings.weight[:T]  # (T, H) broadcast over the batch
        return self.dropout(self.LayerNorm(x))


# ------------------------------------------------------------------------- attention


def sdpa_mask(attention_mask: torch.Tensor | None, T: int, causal: bool) -> tuple[torch.Tensor | None, bool]:
    """The (mask, is_causal) pair for scaled_dot_product_attention.

    attention_mask is (B, T), 1 for real tokens and 0 for padding. Without padding no mask
    is passed at all, so SDPA can pick its fastest (flash / memory-efficient) kernel.
    Only keys are masked: a padded query still attends to the real tokens, as in
    Hugging Face, and its output is simply never used.
    """
    if attention_mask is None or bool(attention_mask.all()):
        return None, causal
    keep = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, T)
    if causal:
        # Right padding assumed: with left padding a causal query could see no key at all.
        later = torch.ones(T, T, dtype=torch.bool, device=keep.device).tril()  # (T, T)
        keep = keep & later  # (B, 1, T, T)
    return keep, False


class BertSelfAttention(nn.Module):
    """Multi-head scaled dot-product attention; all heads in one SDPA call."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.head_size = config.head_size
        self.query = nn.Linear(config.hidden_size, config.hidden_size)
        self.key = nn.Linear(config.hidden_size, config.hidden_size)
        self.value = nn.Linear(config.hidden_size, config.hidden_size)
        # Attention dropout lives inside SDPA; a plain float keeps no extra module in the state dict.
        self.dropout_p = config.attention_probs_dropout_prob

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, is_causal: bool) -> torch.Tensor:
        B, T, H = x.shape
        # (B, T, H) -> (B, nh, T, hd)
        q = self.query(x).view(B, T, self.num_heads, self.head_size).transpose(1, 2)
        k = self.key(x).view(B, T, self.num_heads, self.head_size).transpose(1, 2)
        v = self.value(x).view(B, T, self.num_heads, self.head_size).transpose(1, 2)
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=is_causal, dropout_p=self.dropout_p if self.training else 0.0
        )  # (B, nh, T, hd)
        return y.transpose(1, 2).reshape(B, T, H)


def _post_norm(config: BertConfig) -> nn.Module:
    """The LayerNorm after a residual sum: BERT's; none in a pre-LayerNorm block."""
    if config.layer_norm == "post":
        return nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
    return nn.Identity()


def _pre_norm(config: BertConfig) -> nn.Module:
    """The LayerNorm before a sub-layer: a pre-LayerNorm block's; none in BERT's."""
    if config.layer_norm == "pre":
        return nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
    return nn.Identity()


class BertSelfOutput(nn.Module):
    """Project the heads back, dropout, then residual + LayerNorm (post-LN, as in BERT; the sum alone pre-LN)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.LayerNorm = _post_norm(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, y: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(y)) + residual)


class BertAttention(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.LayerNorm = _pre_norm(config)
        self.self = BertSelfAttention(config)
        self.output = BertSelfOutput(config)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, is_causal: bool) -> torch.Tensor:
        return self.output(self.self(self.LayerNorm(x), mask, is_causal), x)


# ----------------------------------------------------------------------------- block


class BertIntermediate(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.LayerNorm = _pre_norm(config)
        self.dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.act = ACTIVATIONS[config.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.dense(self.LayerNorm(x)))  # (B, T, intermediate_size)


class BertOutput(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.LayerNorm = _post_norm(config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, h: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class BertLayer(nn.Module):
    """One Transformer encoder block: attention sub-layer, then feed-forward sub-layer."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = BertAttention(config)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, is_causal: bool) -> torch.Tensor:
        a = self.attention(x, mask, is_causal)  # (B, T, H)
        return self.output(self.intermediate(a), a)  # (B, T, H)


# --------------------------------------------------------------------------- encoder


class BertEncoder(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None, is_causal: bool, output_hidden_states: bool = False
    ) -> tuple[torch.Tensor, tuple[torch.Tensor, ...] | None]:
        states = [x] if output_hidden_states else None
        for block in self.layer:
            x = block(x, mask, is_causal)
            if states is not None:
                states.append(x)
        return x, tuple(states) if states is not None else None


class BertPooler(nn.Module):
    """Sentence representation for NSP and classification: tanh(dense(h_[CLS])).

    A left-to-right model pools its last real token instead: in it [CLS] sees
    only itself, while the last token has read the whole input (as GPT classifies).
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.causal = config.causal

    def forward(self, h: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.causal:
            B, T, _ = h.shape
            last = attention_mask.sum(1) - 1 if attention_mask is not None else torch.full((B,), T - 1)
            first = h[torch.arange(B, device=h.device), last.to(h.device)]  # (B, H)
        else:
            first = h[:, 0]  # (B, H)
        return torch.tanh(self.dense(first))


class BertModel(nn.Module):
    """Embeddings + encoder stack (+ pooler): the part every downstream task shares."""

    def __init__(self, config: BertConfig, add_pooling_layer: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = BertEmbeddings(config)
        self.encoder = BertEncoder(config)
        if config.layer_norm == "pre":  # the pre-LayerNorm stack's last block ends in a residual sum: normalised here
            self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.pooler = BertPooler(config) if add_pooling_layer else None
        self.apply(lambda m: init_weights(m, config.initializer_range))
        if config.attention_init == "local":
            local_attention_init(self)

    def forward(
        self,
        input_ids: torch.Tensor,  # (B, T)
        token_type_ids: torch.Tensor | None = None,  # (B, T) segment 0 = A, 1 = B
        attention_mask: torch.Tensor | None = None,  # (B, T) 1 = real token, 0 = padding
        output_hidden_states: bool = False,
    ) -> EncoderOutput:
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, H)
        mask, is_causal = sdpa_mask(attention_mask, input_ids.shape[1], self.config.causal)
        x, states = self.encoder(x, mask, is_causal, output_hidden_states)
        if self.config.layer_norm == "pre":
            x = self.LayerNorm(x)  # (the hidden states stay each block's own output, as in transformers)
        pooled = self.pooler(x, attention_mask) if self.pooler is not None else None
        return EncoderOutput(x, pooled, states)

    def layer_states(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                     attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        """The states downstream features are made of: L+1 x (B, T, H), the embeddings first."""
        return self(input_ids, token_type_ids, attention_mask, output_hidden_states=True).hidden_states


# ----------------------------------------------------------------------------- heads


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.act = ACTIVATIONS[config.hidden_act]
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.act(self.dense(h)))


class BertLMPredictionHead(nn.Module):
    """Masked-LM head. The decoder's weight is the token embedding matrix and its bias is
    ``bias``, both tied by the owning model, so ``decoder.*`` appear in the state dict just
    as they do in Hugging Face's."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.transform = BertPredictionHeadTransform(config)
        self.decoder = nn.Linear(config.hidden_size, config.vocab_size)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.transform(h))  # (..., H) -> (..., V)


class BertPreTrainingHeads(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.predictions = BertLMPredictionHead(config)
        self.seq_relationship = nn.Linear(config.hidden_size, 2)


class BertForPreTraining(nn.Module):
    """BERT with its two pre-training heads: masked LM (or left-to-right LM when
    ``config.causal``) and next-sentence prediction."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.cls = BertPreTrainingHeads(config)
        self.cls.apply(lambda m: init_weights(m, config.initializer_range))
        nn.init.zeros_(self.cls.predictions.bias)
        self.tie_weights()

    def tie_weights(self) -> None:
        """Share the output projection with the input embeddings (Press & Wolf, 2017), as BERT does.

        ``load_state_dict`` copies in place and keeps the tie; call this again after anything
        that replaces Parameter objects (``load_state_dict(assign=True)``, resizing the vocabulary).
        """
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight
        self.cls.predictions.decoder.bias = self.cls.predictions.bias

    def forward(
        self,
        input_ids: torch.Tensor,  # (B, T)
        token_type_ids: torch.Tensor | None = None,  # (B, T)
        attention_mask: torch.Tensor | None = None,  # (B, T) 1 = real token
        masked_positions: torch.Tensor | None = None,  # (B, T) bool, or (N,) indices into the B*T positions
        mlm_targets: torch.Tensor | None = None,  # (N,) the tokens to predict there (IGNORE_INDEX: none)
        return_predictions: bool = False,  # with mlm_targets: also the argmax at each of the N positions
    ) -> PreTrainingOutput:
        """With ``masked_positions`` the vocabulary projection, by far the largest matmul for
        small models, runs only at the N masked tokens (about 15% of them) instead of all B*T.
        They are a (B, T) bool mask, or N indices of rows of the flattened (B*T, H) states (which
        may repeat a row: the pretraining module pads N so that few distinct shapes occur).

        With ``mlm_targets`` as well, the LM loss comes from ``linear_cross_entropy`` (the same number
        and gradients, without (N, V) logits): ``mlm_logits`` is None, ``mlm_loss`` the loss and
        ``mlm_predictions`` the argmax if ``return_predictions``. ``pretraining_loss`` takes either."""
        out = self.bert(input_ids, token_type_ids, attention_mask)
        h = out.last_hidden_state  # (B, T, H)
        if masked_positions is not None:
            if masked_positions.dtype == torch.bool and masked_positions.shape == input_ids.shape:
                picked = h[masked_positions]  # (N, H), row-major order
            elif masked_positions.dtype == torch.long and masked_positions.dim() == 1:
                picked = h.reshape(-1, h.shape[-1]).index_select(0, masked_positions)  # (N, H)
            else:
                raise ValueError(
                    f"masked_positions must be a bool tensor shaped like input_ids {tuple(input_ids.shape)} "
                    f"or a 1-D long tensor of row indices, got {masked_positions.dtype} "
                    f"{tuple(masked_positions.shape)}"
                )
        elif mlm_targets is not None:
            raise ValueError("mlm_targets needs masked_positions (the rows they are the targets of)")
        mlm_logits = mlm_loss = predictions = None
        if mlm_targets is not None:
            head = self.cls.predictions
            mlm_loss, predictions = linear_cross_entropy(head.transform(picked), head.decoder.weight,
                                                         head.decoder.bias, mlm_targets, return_predictions)
        else:
            mlm_logits = self.cls.predictions(h if masked_positions is None else picked)  # (B, T, V) or (N, V)
        nsp_logits = self.cls.seq_relationship(out.pooler_output)  # (B, 2)
        return PreTrainingOutput(mlm_logits, nsp_logits, h, mlm_loss, predictions)


def pretraining_loss(
    out: PreTrainingOutput, mlm_labels: torch.Tensor, nsp_labels: torch.Tensor | None = None,
    nsp_weight: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(total, mlm_loss, nsp_loss): mean cross-entropies, total = mlm + nsp as in Hugging Face (``nsp_weight``:
    mlm + nsp_weight x nsp).

    ``mlm_labels`` must match ``out.mlm_logits``:
      * full logits (B, T, V): labels (B, T), -100 where no prediction is scored
        (exactly HF's ``labels``; also the shape for a shifted left-to-right LM);
      * gathered logits (N, V) from ``masked_positions``: labels (N,) are the original
        tokens at those positions, i.e. ``labels[masked_positions]``.
    Either way the MLM loss is the mean over scored tokens, so both give the same number; an output made
    with ``mlm_targets`` carries that loss already (``mlm_labels`` must then be those targets).
    ``nsp_labels`` (B,) uses 0 = IsNext, 1 = NotNext; without it nsp_loss is None and
    total is the MLM loss alone (the "No NSP" ablation).
    """
    if out.mlm_loss is not None:
        mlm_loss = out.mlm_loss
    else:
        mlm_loss = _mlm_loss(out.mlm_logits, mlm_labels)
    if nsp_labels is None:
        return mlm_loss, mlm_loss, None
    nsp_loss = F.cross_entropy(out.nsp_logits.float(), nsp_labels.reshape(-1))
    return mlm_loss + (nsp_loss if nsp_weight == 1.0 else nsp_weight * nsp_loss), mlm_loss, nsp_loss


def _mlm_loss(logits: torch.Tensor, mlm_labels: torch.Tensor) -> torch.Tensor:
    if logits.shape[:-1] != mlm_labels.shape:
        raise ValueError(
            f"mlm_labels shape {tuple(mlm_labels.shape)} does not match mlm_logits {tuple(logits.shape)} "
            "(gathered logits need gathered labels)"
        )
    # float(): a bf16 log-softmax over a whole vocabulary loses too much precision.
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), mlm_labels.reshape(-1),
                           ignore_index=IGNORE_INDEX)


def _init_classifier(model: nn.Module, config: BertConfig, num_labels: int, add_pooling_layer: bool) -> None:
    """The parts every BERT classifier has, under Hugging Face's names: ``bert``, ``dropout``, ``classifier``."""
    if isinstance(num_labels, bool) or not isinstance(num_labels, int) or num_labels < 1:
        raise ValueError(f"num_labels={num_labels!r} must be a positive integer (1 for regression)")
    model.config = config
    model.num_labels = num_labels
    model.bert = BertModel(config, add_pooling_layer=add_pooling_layer)
    model.dropout = nn.Dropout(config.hidden_dropout_prob)
    model.classifier = nn.Linear(config.hidden_size, num_labels)
    init_weights(model.classifier, config.initializer_range)


class BertForSequenceClassification(nn.Module):
    """GLUE-style head on a summary of the text; ``num_labels=1`` means regression.

    ``pooling="token"``: the pooled [CLS] vector (a left-to-right model's last real token), as Hugging Face's;
    ``"mean"``: the mean of the last hidden states over the real tokens (the pooler is kept, unused, so the
    weights stay those of Hugging Face's class)."""

    POOLINGS = ("token", "mean")

    def __init__(self, config: BertConfig, num_labels: int = 2, pooling: str = "token"):
        super().__init__()
        if pooling not in self.POOLINGS:
            raise ValueError(f"pooling={pooling!r}: expected one of {', '.join(self.POOLINGS)}")
        _init_classifier(self, config, num_labels, add_pooling_layer=True)
        self.pooling = pooling

    def forward(
        self,
        input_ids: torch.Tensor,  # (B, T)
        token_type_ids: torch.Tensor | None = None,  # (B, T)
        attention_mask: torch.Tensor | None = None,  # (B, T)
    ) -> torch.Tensor:
        out = self.bert(input_ids, token_type_ids, attention_mask)
        if self.pooling == "token":
            pooled = out.pooler_output  # (B, H)
        else:
            m = (attention_mask if attention_mask is not None else torch.ones_like(input_ids))[..., None]
            m = m.to(out.last_hidden_state.dtype)                             # (B, T, 1)
            pooled = (out.last_hidden_state * m).sum(1) / m.sum(1)           # (B, H)
        return self.classifier(self.dropout(pooled))  # (B, num_labels)


class BertForTokenClassification(nn.Module):
    """A label per token (NER) from the last hidden states; no pooler, as in Hugging Face's."""

    def __init__(self, config: BertConfig, num_labels: int = 2):
        super().__init__()
        _init_classifier(self, config, num_labels, add_pooling_layer=False)

    def forward(
        self,
        input_ids: torch.Tensor,  # (B, T)
        token_type_ids: torch.Tensor | None = None,  # (B, T)
        attention_mask: torch.Tensor | None = None,  # (B, T)
    ) -> torch.Tensor:
        h = self.bert(input_ids, token_type_ids, attention_mask).last_hidden_state  # (B, T, H)
        return self.classifier(self.dropout(h))  # (B, T, num_labels)


class BertForQuestionAnswering(nn.Module):
    """Extractive QA (SQuAD): a start and an end score per token from the last hidden states, as in the
    paper's Figure 1c. Hugging Face's parts and names (``bert`` without a pooler, ``qa_outputs``), no dropout
    before the head either."""

    def __init__(self, config: BertConfig, num_labels: int = 2):  # a start and an end score (HF's config.num_labels)
        super().__init__()
        self.config = config
        self.bert = BertModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, num_labels)
        init_weights(self.qa_outputs, config.initializer_range)

    def forward(
        self,
        input_ids: torch.Tensor,  # (B, T)
        token_type_ids: torch.Tensor | None = None,  # (B, T) 0 = question, 1 = passage
        attention_mask: torch.Tensor | None = None,  # (B, T)
    ) -> torch.Tensor:
        """(B, T, 2): ``[..., 0]`` the start logits, ``[..., 1]`` the end logits (Hugging Face splits them so)."""
        h = self.bert(input_ids, token_type_ids, attention_mask).last_hidden_state  # (B, T, H)
        return self.qa_outputs(h)  # (B, T, 2)


def num_parameters(model: nn.Module) -> int:
    """Trainable parameters, the tied embedding counted once (BERT-Base: about 110M)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


__all__ = [
    "ACTIVATIONS", "BertConfig", "EncoderOutput", "PreTrainingOutput", "BertEmbeddings", "BertSelfAttention",
    "BertLayer", "BertEncoder", "BertModel", "BertForPreTraining", "BertForSequenceClassification",
    "BertForTokenClassification", "BertForQuestionAnswering",
    "pretraining_loss", "init_weights", "sdpa_mask", "num_parameters",
]
