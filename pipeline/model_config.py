"""The models' hyperparameters, each checked once, without importing torch.

``BertConfig`` for BERT (and the left-to-right GPT-style model, ``causal``),
``StaticConfig`` for word2vec, ``ElmoConfig`` for ELMo's biLM. Each names its
architecture (``model.architecture``, the one setting that decides it) and the
objectives it trains (``objective.lm``, each with the prefix of its metrics).
The start-up validator (``pipeline.config``) builds the config of
``model.architecture`` from the ``model`` settings, and a model folder's loader
from its config.json, so both report a bad value with the same one-line
message. The rest of an architecture (its pretraining, export, downstream use)
is registered in ``pipeline.architectures``.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar, NamedTuple

from pipeline.errors import ConfigError
from pipeline.values import is_number

# Names as Hugging Face spells them in config.json (``pipeline.model.bert.ACTIVATIONS`` maps them to functions).
# "gelu" is the exact erf GELU of the original BERT; "gelu_new" the tanh approximation of GPT.
HIDDEN_ACTS = ("gelu", "relu", "gelu_new", "gelu_pytorch_tanh")
ATTENTION_INITS = ("normal", "local")  # BertConfig.attention_init
LAYER_NORMS = ("post", "pre")  # BertConfig.layer_norm: BERT's post-LayerNorm blocks, or pre-LayerNorm ones
LOCAL_FREQUENCIES = 16  # the local initialisation's position code: sine/cosine pairs (2 x 16 dimensions)


def _positive_int(v) -> bool:
    return isinstance(v, int) and is_number(v) and v > 0


_number = is_number  # the lab's one test of a number: NaN and infinities are refused (pipeline.values)


def _refuse(key: str, value, expected: str):
    raise ConfigError(f"model.{key}={value!r} is not allowed: expected {expected}")


class LMKind(NamedTuple):
    """How the report names a kind of language model (by its metric prefix): in a table cell, and in a legend."""
    short: str
    long: str


class ModelConfig:
    """What every architecture's config declares. Its subclasses here are the architectures ``model.architecture``
    may name (``config_classes``)."""

    architecture: ClassVar[str]       # model.architecture
    objectives: ClassVar[dict[str, str]]  # objective.lm it trains -> the prefix of its metrics (val/<prefix>_acc)
    kinds: ClassVar[dict[str, LMKind]]    # each metric prefix -> its names in the report

    @staticmethod
    def objective_fields(lm: str) -> dict:
        """The config fields an objective decides (left to right: causal attention; word2vec: its kind)."""
        return {}

    @property
    def objective(self) -> str:
        """The ``objective.lm`` this config trains."""
        return next(iter(self.objectives))

    @property
    def metric_prefix(self) -> str:
        return self.objectives[self.objective]


@dataclass
class BertConfig(ModelConfig):
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
    attention_init: str = "normal"  # fresh weights: "normal" (BERT's) or "local" (first-layer heads read their
                                    # neighbours from the start: pipeline.model.init.local_attention_init)
    layer_norm: str = "post"  # where each block normalises: "post" (BERT's: after each residual sum) or "pre"
                              # (before each sub-layer, one more LayerNorm after the stack: RoBERTa-PreLayerNorm's)

    architecture: ClassVar[str] = "bert"
    objectives: ClassVar[dict[str, str]] = {"masked": "mlm", "left_to_right": "ltr"}
    kinds: ClassVar[dict[str, LMKind]] = {"mlm": LMKind("MLM", "masked LM"), "ltr": LMKind("LTR", "left-to-right LM")}

    @staticmethod
    def objective_fields(lm: str) -> dict:
        return {"causal": lm == "left_to_right"}

    @property
    def objective(self) -> str:
        return "left_to_right" if self.causal else "masked"

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
        if self.layer_norm not in LAYER_NORMS:
            refuse("layer_norm", f"one of {', '.join(LAYER_NORMS)}")
        if self.attention_init not in ATTENTION_INITS:
            refuse("attention_init", f"one of {', '.join(ATTENTION_INITS)}")
        if self.attention_init == "local" and self.head_size < 2 * LOCAL_FREQUENCIES:
            refuse("attention_init", f"normal with heads of {self.head_size} dimensions (local needs heads of at "
                                     f"least {2 * LOCAL_FREQUENCIES})")
        if isinstance(self.pad_token_id, bool) or not isinstance(self.pad_token_id, int) \
                or not 0 <= self.pad_token_id < self.vocab_size:
            refuse("pad_token_id", f"a token id in [0, model.vocab_size={self.vocab_size})")
        if not isinstance(self.causal, bool):
            refuse("causal", "true or false")

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def train_flops_per_token(self, seq_length: int, predicted: float) -> float:
        """Matmul FLOPs of a training step per input token (forward + backward = 3 x forward): every block, and the
        LM head at the ``predicted`` share of the tokens (0.15 masked; about 1 left to right)."""
        H, I, V = self.hidden_size, self.intermediate_size, self.vocab_size
        block = 2 * (4 * H * H + 2 * H * I) + 2 * 2 * seq_length * H  # projections and FFN, QK^T and AV
        return 3 * (self.num_hidden_layers * block + predicted * 2 * (H * H + H * V))


@dataclass
class StaticConfig(ModelConfig):
    vocab_size: int
    embedding_size: int = 128
    kind: str = "cbow"           # cbow | skipgram (objective.lm)
    window: int = 5              # context tokens on each side
    negatives: int = 5           # noise tokens per prediction
    pad_token_id: int = 0

    architecture: ClassVar[str] = "word2vec"
    objectives: ClassVar[dict[str, str]] = {"cbow": "w2v", "skipgram": "w2v"}
    kinds: ClassVar[dict[str, LMKind]] = {"w2v": LMKind("w2v", "word2vec")}

    @staticmethod
    def objective_fields(lm: str) -> dict:
        return {"kind": lm}

    @property
    def objective(self) -> str:
        return self.kind

    def __post_init__(self) -> None:
        for key in ("vocab_size", "embedding_size", "window", "negatives"):
            if not _positive_int(getattr(self, key)):
                _refuse(key, getattr(self, key), "a positive integer")
        _check_objective(type(self), self.kind)

    @property
    def hidden_size(self) -> int:  # what a head on its features sees
        return self.embedding_size

    def train_flops_per_token(self, seq_length: int, predicted: float = 1.0) -> float:
        """FLOPs of a training step per token: CBOW averages 2 x window vectors and scores 1 + negatives;
        skip-gram scores 1 + negatives for each of its 2 x window context tokens."""
        d, pairs = self.embedding_size, 2 * self.window
        forward = 2 * (pairs * d + (1 + self.negatives) * d) if self.kind == "cbow" else \
            2 * pairs * (2 + self.negatives) * d
        return 3 * forward

    @property
    def num_hidden_layers(self) -> int:  # no layers above the embeddings
        return 0


@dataclass
class ElmoConfig(ModelConfig):
    vocab_size: int
    embedding_size: int = 128
    lstm_size: int = 128             # cells per direction and layer
    num_layers: int = 2
    dropout: float = 0.1
    predict_fraction: float = 0.15   # share of positions whose next (previous) token is scored in pretraining
    pad_token_id: int = 0

    architecture: ClassVar[str] = "elmo"
    objectives: ClassVar[dict[str, str]] = {"bilm": "bilm"}
    kinds: ClassVar[dict[str, LMKind]] = {"bilm": LMKind("biLM", "two directional LMs")}

    def __post_init__(self) -> None:
        for key in ("vocab_size", "embedding_size", "lstm_size", "num_layers"):
            if not _positive_int(getattr(self, key)):
                _refuse(key, getattr(self, key), "a positive integer")
        if self.embedding_size != self.lstm_size:  # the layers are mixed downstream, so they share one width
            _refuse("embedding_size", self.embedding_size,
                    f"model.lstm_size={self.lstm_size} (ELMo's layers are mixed, so they share a width)")
        if not (_number(self.dropout) and 0 <= self.dropout < 1):
            _refuse("dropout", self.dropout, "a probability in [0, 1)")
        if not (_number(self.predict_fraction) and 0 < self.predict_fraction <= 1):
            _refuse("predict_fraction", self.predict_fraction, "a share in (0, 1]")

    @property
    def hidden_size(self) -> int:  # a layer's width downstream: both directions
        return 2 * self.lstm_size

    def train_flops_per_token(self, seq_length: int = 0, predicted: float | None = None) -> float:
        """Matmul FLOPs of a training step per token: 4 gates of every LSTM layer in both directions, and
        the softmax at ``predict_fraction`` of the tokens in both directions."""
        h, d = self.lstm_size, self.embedding_size
        share = self.predict_fraction if predicted is None else predicted
        lstm = sum(2 * 4 * ((d if i == 0 else h) + h) * h for i in range(self.num_layers))
        return 3 * (2 * lstm + share * 2 * 2 * h * self.vocab_size)

    @property
    def num_hidden_layers(self) -> int:
        return self.num_layers




def config_classes() -> dict[str, type[ModelConfig]]:
    """Every architecture's config class by its name: the ``ModelConfig`` subclasses above, in order."""
    return {c.architecture: c for c in ModelConfig.__subclasses__()}


def config_class(architecture: str) -> type[ModelConfig]:
    """The config class of ``model.architecture``."""
    classes = config_classes()
    if architecture not in classes:
        _refuse("architecture", architecture, f"one of {', '.join(classes)}")
    return classes[architecture]


def _check_objective(cls: type[ModelConfig], lm: str) -> None:
    if lm not in cls.objectives:
        trainer = next((c.architecture for c in config_classes().values() if lm in c.objectives), None)
        raise ConfigError(f"objective.lm={lm} is not allowed with model.architecture={cls.architecture}: expected "
                          f"one of {', '.join(cls.objectives)}"
                          + (f" ({lm} is trained by model.architecture={trainer})" if trainer else ""))


def build_config(settings: dict, vocab_size: int, lm: str | None) -> ModelConfig:
    """The config of the ``model`` settings' architecture (``name``, ``init_from`` and ``architecture`` are not the
    model's own; the examples' length limit only where the model has a position table). ``lm`` is
    ``objective.lm``: one the architecture trains, and it decides the fields of ``objective_fields``
    (None: the architecture's first, when the objective is checked elsewhere)."""
    cls = config_class(settings["architecture"])
    lm = next(iter(cls.objectives)) if lm is None else lm
    _check_objective(cls, lm)
    own = {f.name for f in fields(cls)}
    values = {k: v for k, v in settings.items() if k not in ("name", "init_from", "architecture")
              and (k != "max_position_embeddings" or k in own)}
    return cls(vocab_size=vocab_size, **values, **cls.objective_fields(lm))


# objective.lm: every objective some architecture trains, and the prefix of its metrics (val/<prefix>_acc)
METRIC_PREFIX = {lm: prefix for c in config_classes().values() for lm, prefix in c.objectives.items()}
LM_OBJECTIVES = tuple(METRIC_PREFIX)
LM_KINDS = {prefix: kind for c in config_classes().values() for prefix, kind in c.kinds.items()}


def metric_prefix(lm: str) -> str:
    """The prefix of the LM's metrics: ``mlm`` (``val/mlm_acc``), ``ltr``, ``w2v`` or ``bilm``."""
    return METRIC_PREFIX[lm]
