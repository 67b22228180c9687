"""BERT's hyperparameters: the model's one config, checked once, without importing torch.

The start-up validator (``pipeline.config``) builds a ``BertConfig`` from the
``model`` settings, and ``pipeline.model.hf`` from a folder's config.json, so
both report a bad value with the same one-line message.
"""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.errors import ConfigError

# Names as Hugging Face spells them in config.json (``pipeline.model.bert.ACTIVATIONS`` maps them to functions).
# "gelu" is the exact erf GELU of the original BERT; "gelu_new" the tanh approximation of GPT.
HIDDEN_ACTS = ("gelu", "relu", "gelu_new", "gelu_pytorch_tanh")
IGNORE_INDEX = -100  # the label of a position that is not predicted (cross-entropy's ignore_index)


def _positive_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


@dataclass
class BertConfig:
    vocab_size: int
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"  # exact erf GELU, as Hugging Face "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    causal: bool = False  # left-to-right (GPT-style) attention for the LTR ablation

    def __post_init__(self) -> None:
        def refuse(key: str, expected: str):
            raise ConfigError(f"model.{key}={getattr(self, key)!r} is not allowed: expected {expected}")

        for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "intermediate_size", "max_position_embeddings", "type_vocab_size"):
            if not _positive_int(getattr(self, key)):
                refuse(key, "a positive integer")
        if self.hidden_size % self.num_attention_heads:
            refuse("hidden_size", f"a multiple of model.num_attention_heads={self.num_attention_heads}")
        for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
            if not (_number(getattr(self, key)) and 0 <= getattr(self, key) < 1):
                refuse(key, "a probability in [0, 1)")
        for key in ("initializer_range", "layer_norm_eps"):
            if not (_number(getattr(self, key)) and getattr(self, key) > 0):
                refuse(key, "a positive number")
        if self.hidden_act not in HIDDEN_ACTS:
            refuse("hidden_act", f"one of {', '.join(HIDDEN_ACTS)}")
        if isinstance(self.pad_token_id, bool) or not isinstance(self.pad_token_id, int) \
                or not 0 <= self.pad_token_id < self.vocab_size:
            refuse("pad_token_id", f"a token id in [0, model.vocab_size={self.vocab_size})")
        if not isinstance(self.causal, bool):
            refuse("causal", "true or false")

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads
