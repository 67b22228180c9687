"""Each config group's settings: a frozen dataclass that reads the group's node, checks it, and is what the
code uses.

One pattern for every group (``Settings``). Each field names the kinds of value it may take
(``pipeline.values``: NaN and infinities are never numbers); building the object checks every field and
then ``check``, the rules between the group's own settings. ``read(node, key)`` builds it from the composed
node and refuses, in one line naming the full key, a key the group does not have and one that is missing.
No field has a default: every value comes from conf/. The rules that span groups (the position table, the
pair format NSP needs, a grid's variants, the model against its objective and vocabulary) are
``pipeline.config.validate``'s, which builds every group's settings at the start of each stage and in the
check_conf stage, before any compute. Torch-free.
"""
from __future__ import annotations

from dataclasses import InitVar, asdict, dataclass, field, fields
from typing import Any, ClassVar, Mapping

from omegaconf import OmegaConf

from pipeline.errors import ConfigError
from pipeline.model_config import LM_OBJECTIVES, config_class
from pipeline.names import FORMATS, MODES, OPTIMIZERS, POOLINGS, SCHEDULES, SPECIAL_TOKENS, check_families
from pipeline.values import (BETAS, BOOL, DURATION, FINITE, MAPPING, NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE,
                             POSITIVE_INT, PROBABILITY, TEXT, Distinct, Kind, distinct, integer, is_int, list_of, number,
                             one_of, shown)

# Lightning's precision names (lightning.fabric.connector._PRECISION_INPUT; a test keeps them the same).
PRECISIONS = ("transformer-engine", "transformer-engine-float16", "16-true", "16-mixed", "bf16-true", "bf16-mixed",
              "32-true", "64-true", "64", "32", "16", "bf16")
CONFIDENCE = number(0, 1, low_open=True, high_open=True, expected="a number in (0, 1), e.g. 0.95")
MODE_LIST = list_of(one_of(MODES), f"a non-empty list of: {', '.join(MODES)}")
DISTINCT_MODES = distinct("modes (each is fine-tuned once per seed)")
WORDS = Kind(lambda v: isinstance(v, (tuple, list)) and all(TEXT.allows(w) for w in v), "a list of words")


def setting(*kinds: Kind, optional: bool = False) -> Any:
    """A field holding one value of ``kinds``; ``optional``: the key may be left out of the node (None)."""
    if optional:
        return field(default=None, metadata={"kinds": kinds, "optional": True})
    return field(metadata={"kinds": kinds})


def group(cls: type[Settings], each: bool = False, nullable: bool = False) -> Any:
    """A field holding a nested group of settings (``each``: a mapping or list of them); ``nullable``: or null
    (None)."""
    return field(metadata={"each" if each else "group": cls, "nullable": nullable})


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


def _plain(value: Any) -> Any:
    """A composed node as plain values: interpolations resolved, lists as tuples (the settings are frozen)."""
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value, resolve=True)
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, kw_only=True)
class Settings:
    """A group's settings; ``KEY`` is where the group sits in the composed config (``key=``: elsewhere, such as
    a task inside a suite, for the messages)."""
    KEY: ClassVar[str]
    OPEN: ClassVar[bool] = False  # True: the node holds other owners' keys too (the root)
    key: InitVar[str | None] = None

    def __post_init__(self, key: str | None) -> None:
        at = self.KEY if key is None else key
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.metadata.get("optional"):
                continue
            for kind in f.metadata.get("kinds", ()):
                kind.check(_join(at, f.name), value)
        self.check(at)

    def check(self, key: str) -> None:
        """The rules between the group's own settings (``key``: where the group sits, for messages)."""

    @classmethod
    def read(cls, node: Mapping[str, Any], key: str | None = None) -> Settings:
        """The settings of ``node`` (a composed config node or a plain mapping) at ``key`` (default ``KEY``)."""
        at = cls.KEY if key is None else key
        declared = {f.name: f for f in fields(cls)}
        if cls.OPEN:
            node = {k: node[k] for k in declared if k in node}
        node = _plain(node)
        if not isinstance(node, dict):
            raise ConfigError(f"{at}={shown(node)!r} is not allowed: expected a mapping of settings")
        unknown = [k for k in node if k not in declared]
        if unknown:
            raise ConfigError(f"{_join(at, unknown[0])} is not a setting: expected one of {', '.join(declared)}")
        values = {}
        for name, f in declared.items():
            if name in node:
                values[name] = _nested(f, node[name], _join(at, name))
            elif not f.metadata.get("optional"):
                kinds = f.metadata.get("kinds")
                raise ConfigError(f"{_join(at, name)} is missing: expected "
                                  f"{kinds[0].expected if kinds else 'a mapping of settings'}")
        return cls(**values, key=at)


def _nested(f, value: Any, key: str) -> Any:
    if value is None and f.metadata.get("nullable"):
        return None
    if "group" in f.metadata:
        return f.metadata["group"].read(value, key)
    if "each" in f.metadata:
        cls = f.metadata["each"]
        if isinstance(value, dict):
            return {k: cls.read(v, f"{key}.{k}") for k, v in value.items()}
        if isinstance(value, tuple):
            return tuple(cls.read(v, f"{key}[{i}]") for i, v in enumerate(value))
        raise ConfigError(f"{key}={shown(value)!r} is not allowed: expected a mapping or list of settings")
    return value


# --------------------------------------------------------------------------------------------------- data


@dataclass(frozen=True, kw_only=True)
class ProbeWords(Settings):
    KEY = "corpus.probe"
    words: tuple[str, ...] = setting(list_of(TEXT, "a non-empty list of words"))
    senses: tuple[str, ...] = setting(WORDS)


@dataclass(frozen=True, kw_only=True)
class CorpusSettings(Settings):
    KEY = "corpus"
    name: str = setting(TEXT)
    valid_fraction: float = setting(number(0, 1, low_open=True, high_open=True))
    source: dict = setting(MAPPING.saying("a mapping with the documents' _target_"))
    probe: ProbeWords = group(ProbeWords)

    def check(self, key: str) -> None:
        TEXT.check(f"{key}.source._target_", self.source.get("_target_"))


@dataclass(frozen=True, kw_only=True)
class TokenizerSettings(Settings):
    KEY = "tokenizer"
    vocab_size: int = setting(integer(len(SPECIAL_TOKENS) + 27, expected=(
        f"an integer large enough for the {len(SPECIAL_TOKENS)} special tokens and an alphabet "
        f"(> {len(SPECIAL_TOKENS) + 26})")))
    min_frequency: int = setting(integer(1))
    limit_alphabet: int = setting(POSITIVE_INT)
    lowercase: bool = setting(BOOL)
    strip_accents: bool | None = setting(BOOL.or_null(" (follow tokenizer.lowercase)"))
    from_folder: str | None = setting(TEXT.or_null(" (train a vocabulary)"))


@dataclass(frozen=True, kw_only=True)
class PairsSettings(Settings):
    KEY = "pairs"
    format: str = setting(one_of(FORMATS))
    max_seq_length: int = setting(integer(5, expected="an integer >= 5 ([CLS], two [SEP] and at least one token "
                                                      "of A and of B)"))
    short_seq_prob: float = setting(PROBABILITY)
    dupe_factor: int = setting(integer(1))
    shard_tokens: int = setting(integer(1))


@dataclass(frozen=True, kw_only=True)
class Corruption(Settings):
    """What a position chosen for prediction becomes: ``[MASK]``, a random piece, or itself (shares of 1)."""
    mask_token_prob: float = setting(PROBABILITY)
    random_token_prob: float = setting(PROBABILITY)
    keep_prob: float = setting(PROBABILITY)

    def check(self, key: str) -> None:
        total = self.mask_token_prob + self.random_token_prob + self.keep_prob
        if abs(total - 1) > 1e-6:
            raise ConfigError(
                f"{key}.mask_token_prob + random_token_prob + keep_prob = {total:g} is not allowed: expected 1 "
                f"(got {self.mask_token_prob}, {self.random_token_prob}, {self.keep_prob})")


@dataclass(frozen=True, kw_only=True)
class MaskingSettings(Corruption):
    KEY = "masking"
    mlm_probability: float = setting(number(0, 1, low_open=True, high_open=True,
                                            expected="a probability in (0, 1)"))
    max_predictions_per_seq: int | None = setting(integer(1).or_null(" (optional: no cap beyond the ratio)"))
    whole_word: bool = setting(BOOL)
    static: bool = setting(BOOL)


@dataclass(frozen=True, kw_only=True)
class LayoutSettings(Settings):
    """The layout probe (``pipeline.data.layout``): single segments of each length, and natural sentence pairs."""
    KEY = "eval_set.layout"
    lengths: tuple[int, ...] = setting(list_of(integer(4), "a non-empty list of lengths >= 4 ([CLS], two pieces, "
                                                          "[SEP])"))
    rows: int = setting(POSITIVE_INT)
    along_rows: int = setting(NON_NEGATIVE_INT)

    def check(self, key: str) -> None:
        distinct("lengths (each is a cell of the probe)").check(f"{key}.lengths", self.lengths)
        if self.along_rows > self.rows:
            raise ConfigError(f"{key}.along_rows={self.along_rows} is not allowed: expected at most {key}.rows="
                              f"{self.rows} (the rows along pretraining are the first of each cell)")


@dataclass(frozen=True, kw_only=True)
class EvalSetSettings(Corruption):
    KEY = "eval_set"
    max_seq_length: int = setting(integer(5, expected="an integer >= 5 ([CLS], two [SEP] and a piece of A and of "
                                                      "B)"))
    short_seq_prob: float = setting(PROBABILITY)
    mlm_probability: float = setting(number(0, 1, low_open=True, high_open=True, expected="a share in (0, 1)"))
    max_sequences: int | None = setting(POSITIVE_INT.or_null(" (optional: all valid examples)"))
    layout: LayoutSettings = group(LayoutSettings)

    def check(self, key: str) -> None:
        super().check(key)
        number(0, low_open=True, expected="more than 0 (the headline scores the positions shown as [MASK])").check(
            f"{key}.mask_token_prob", self.mask_token_prob)


# ---------------------------------------------------------------------------------------------- pretraining


@dataclass(frozen=True, kw_only=True)
class ObjectiveSettings(Settings):
    KEY = "objective"
    name: str = setting(TEXT)
    lm: str = setting(one_of(LM_OBJECTIVES))
    nsp: bool = setting(BOOL)
    nsp_weight: float | None = setting(POSITIVE.or_null(" (no NSP loss)"))  # the NSP loss's weight in the total

    def check(self, key: str) -> None:
        if self.lm == "left_to_right" and self.nsp:
            raise ConfigError(f"{key}.nsp=true is not allowed with {key}.lm=left_to_right: expected false "
                              "(a left-to-right model has no bidirectional [CLS] to classify pairs with)")
        if not self.nsp and self.nsp_weight is not None:
            raise ConfigError(f"{key}.nsp_weight={self.nsp_weight} is not allowed with {key}.nsp=false: expected null "
                              f"(objective {self.name} has no NSP loss to weigh)")
        if self.nsp and self.nsp_weight is None:
            raise ConfigError(f"{key}.nsp_weight=null is not allowed with {key}.nsp=true: expected a positive number "
                              "(BERT's: 1.0, the two losses summed)")


@dataclass(frozen=True, kw_only=True)
class ModelSettings(Settings):
    """The keys every architecture has; ``shape`` holds the architecture's own (its config class's fields,
    whose values that class checks: ``pipeline.model_config``, built by the validator with the vocabulary
    and the objective)."""
    KEY = "model"
    name: str = setting(TEXT)
    architecture: str = setting(TEXT)
    init_from: str | None = setting(TEXT.or_null(" (fresh weights)"))
    max_position_embeddings: int = setting(POSITIVE_INT)  # the examples' length limit (a position table for BERT)
    shape: dict = setting(MAPPING)

    COMMON: ClassVar[tuple[str, ...]] = ("name", "architecture", "init_from", "max_position_embeddings")

    @classmethod
    def read(cls, node: Mapping[str, Any], key: str | None = None) -> ModelSettings:
        at = cls.KEY if key is None else key
        node = _plain(node)
        missing = [k for k in cls.COMMON if k not in node]
        if missing:
            raise ConfigError(f"{at}.{missing[0]} is missing: expected a setting of every model")
        config = config_class(node["architecture"])
        own = {f.name for f in fields(config)} - {"vocab_size", *config.objective_fields(next(iter(config.objectives)))}
        unknown = [k for k in node if k not in (*cls.COMMON, *own)]
        if unknown:
            raise ConfigError(f"{at}.{unknown[0]} is not a setting of model.architecture={node['architecture']}: "
                              f"expected one of {', '.join(sorted((*cls.COMMON, *own)))}")
        return cls(**{k: node[k] for k in cls.COMMON}, shape={k: v for k, v in node.items() if k not in cls.COMMON},
                   key=at)

    def check(self, key: str) -> None:
        for name, value in self.shape.items():  # their ranges are the architecture's config's to check
            if isinstance(value, float):
                FINITE.check(f"{key}.{name}", value)

    def values(self) -> dict:
        """The settings as the model's config takes them (``pipeline.model_config.build_config``)."""
        return {"architecture": self.architecture, "max_position_embeddings": self.max_position_embeddings,
                **self.shape}


@dataclass(frozen=True, kw_only=True)
class OptimSettings(Settings):
    KEY = "optim"
    name: str = setting(one_of(OPTIMIZERS))
    lr: float = setting(POSITIVE)
    betas: tuple[float, float] = setting(BETAS)
    eps: float = setting(POSITIVE)
    weight_decay: float = setting(NON_NEGATIVE)
    warmup_ratio: float = setting(number(0, 1, high_open=True))
    schedule: str = setting(one_of(SCHEDULES))
    decay_ratio: float = setting(number(0, 1, low_open=True, expected="a share of the steps in (0, 1]"))
    gradient_clip_val: float = setting(POSITIVE)

    def check(self, key: str) -> None:
        if self.schedule == "wsd" and self.warmup_ratio + self.decay_ratio > 1:
            raise ConfigError(f"{key}.warmup_ratio + {key}.decay_ratio = {self.warmup_ratio + self.decay_ratio:g} "
                              f"is not allowed with {key}.schedule=wsd: expected at most 1 (warm-up and decay share "
                              "the steps)")


DEVICES = Kind(lambda v: v == "auto" or (is_int(v) and (v >= 1 or v == -1)) or
               (isinstance(v, (tuple, list)) and len(v) > 0 and all(is_int(d) and d >= 0 for d in v)),
               '"auto", a count of devices (-1: all), or a list of device ids')


@dataclass(frozen=True, kw_only=True)
class TrainerSettings(Settings):
    KEY = "trainer"
    max_steps: int = setting(POSITIVE_INT)
    max_time: str | None = setting(DURATION.or_null(" (optional)"))
    batch_size: int = setting(POSITIVE_INT)
    accumulate_grad_batches: int = setting(POSITIVE_INT)
    length_grouped: bool = setting(BOOL)
    val_check_interval: int = setting(POSITIVE_INT)
    checkpoint_every_n_steps: int = setting(POSITIVE_INT)
    limit_val_batches: int = setting(POSITIVE_INT)
    log_every_n_steps: int = setting(POSITIVE_INT)
    accelerator: str = setting(TEXT)
    devices: Any = setting(DEVICES)
    strategy: str = setting(TEXT)
    num_nodes: int = setting(POSITIVE_INT)

    def devices_per_node(self) -> int | None:
        """Processes per node, or None where only the machine knows (``devices=auto`` or -1 on GPUs)."""
        if isinstance(self.devices, tuple):
            return len(self.devices)
        if is_int(self.devices) and self.devices >= 1:
            return self.devices
        return 1 if self.accelerator == "cpu" else None

    def device_batch_size(self, found: int | None = None, key: str = KEY) -> int:
        """Sequences per device per forward pass: ``batch_size`` split over devices x nodes x accumulation.

        ``found``: the devices the machine has, where ``devices`` leaves the count to it (``auto``, -1 on GPUs);
        unknown (None) at start-up, when the split over the nodes and accumulation is checked alone."""
        per_node = self.devices_per_node() or found
        parts = (per_node or 1) * self.num_nodes * self.accumulate_grad_batches
        if self.batch_size % parts:
            factors = "devices x nodes x accumulate_grad_batches" if per_node else \
                f"nodes x accumulate_grad_batches (and of the devices {key}.devices={self.devices} finds)"
            raise ConfigError(f"{key}.batch_size={self.batch_size} is not allowed: expected a multiple of "
                              f"{factors} = {parts}")
        return self.batch_size // parts

    def check(self, key: str) -> None:
        self.device_batch_size(key=key)


# ----------------------------------------------------------------------------------------------- fine-tuning


def grid_of(what: str) -> tuple[Kind, Distinct]:
    """A tuning grid of positive numbers: each value is one candidate run, so a repeat is refused."""
    return (list_of(POSITIVE, f"a non-empty list of positive numbers ({what})"),
            distinct(f"values ({what}: each is one candidate run)"))


# How far the protocol may extend a learning-rate grid whose choice falls on its edge (pipeline.finetune.protocol).
LR_BOUNDS = Kind(lambda v: isinstance(v, (tuple, list)) and len(v) == 2 and all(POSITIVE.allows(b) for b in v)
                 and v[0] < v[1], "two positive numbers [low, high] with low < high (the lowest and highest peak "
                                  "learning rate a grid may be extended to)")


@dataclass(frozen=True, kw_only=True)
class TfidfGrid(Settings):
    """TF-IDF's grid, chosen on dev like every other arm's settings."""
    KEY = "finetune.tfidf"
    c: tuple[float, ...] = setting(*grid_of("the logistic regression's inverse regularisation; ridge's alpha is 1/c"))
    ngrams: tuple[int, ...] = setting(list_of(POSITIVE_INT, "a non-empty list of positive integers (the longest "
                                                            "word n-gram)"),
                                      distinct("values (ngrams: each is one candidate run)"))


@dataclass(frozen=True, kw_only=True)
class ControlSettings(Settings):
    """The word-order control: the task again with every text's words shuffled, in train, dev and test."""
    KEY = "finetune.control"
    modes: tuple[str, ...] = setting(WORDS.saying("a list of fine-tuning modes (empty: no control)"), DISTINCT_MODES)
    seeds: tuple[int, ...] = setting(list_of(integer(), "a non-empty list of integers"),
                                     distinct("seeds (each is one run; a repeat would count the same run twice)"))

    def check(self, key: str) -> None:
        for i, mode in enumerate(self.modes):
            one_of(MODES).check(f"{key}.modes[{i}]", mode)


@dataclass(frozen=True, kw_only=True)
class FinetuneSettings(Settings):
    KEY = "finetune"
    init_from: str | None = setting(TEXT.or_null(" (the pretrain stage's export)"))
    modes: tuple[str, ...] = setting(MODE_LIST, DISTINCT_MODES)
    seeds: tuple[int, ...] = setting(list_of(integer(), "a non-empty list of integers"),
                                     distinct("seeds (each is one run; a repeat would count the same run twice)"))
    epochs: int = setting(POSITIVE_INT)
    feature_epochs: int = setting(POSITIVE_INT)
    eval_every_epoch: bool = setting(BOOL)
    batch_size: int = setting(POSITIVE_INT)
    length_grouped: bool = setting(BOOL)
    lrs: tuple[float, ...] = setting(*grid_of("peak learning rates, fine-tuned and from scratch"))
    feature_lrs: tuple[float, ...] = setting(*grid_of("peak learning rates of the heads on frozen features"))
    lr_bounds: tuple[float, float] = setting(LR_BOUNDS)
    poolings: tuple[str, ...] = setting(list_of(one_of(POOLINGS), f"a non-empty list of: {', '.join(POOLINGS)}"),
                                        distinct("poolings (each is one candidate run)"))
    tfidf: TfidfGrid = group(TfidfGrid)
    test_fraction: float = setting(number(0, 1, low_open=True, high_open=True, expected=(
        "a share in (0, 1) of the held-out examples kept for test (the rest is dev)")))
    control: ControlSettings = group(ControlSettings)
    weight_decay: float = setting(NON_NEGATIVE)
    betas: tuple[float, float] = setting(BETAS)
    eps: float = setting(POSITIVE)
    gradient_clip_val: float = setting(POSITIVE)
    warmup_ratio: float = setting(number(0, 1, high_open=True))
    eval_batch_size: int = setting(POSITIVE_INT)
    feature_eval_batch_size: int = setting(POSITIVE_INT)

    def check(self, key: str) -> None:
        # A bound inside a grid would cut off a rate the grid itself asks for: the bounds say how far past the
        # grid's edges the protocol may extend it, never which of its own rates to train.
        low, high = self.lr_bounds
        for name, rates in (("lrs", self.lrs), ("feature_lrs", self.feature_lrs)):
            if low > min(rates) or high < max(rates):
                raise ConfigError(f"{key}.lr_bounds={shown(self.lr_bounds)} is not allowed: the bounds must enclose "
                                  f"{key}.{name} ({min(rates):g} to {max(rates):g})")


@dataclass(frozen=True, kw_only=True)
class TaskSettings(Settings):
    """A task; ``data`` holds its loader (``_target_``) and that loader's own arguments."""
    KEY = "task"
    name: str = setting(TEXT)
    max_seq_length: int = setting(integer(4))
    data: dict = setting(MAPPING.saying("a mapping with the task loader's _target_"))

    def check(self, key: str) -> None:
        TEXT.check(f"{key}.data._target_", self.data.get("_target_"))
        for k in ("train_size", "dev_size"):
            if k in self.data:
                POSITIVE_INT.or_null(" (optional)").check(f"{key}.data.{k}", self.data[k])


@dataclass(frozen=True, kw_only=True)
class ColumnSettings(Settings):
    """A report column of a suite: a task, its metric (default: the task's first), a mode, the paper's column."""
    KEY = "suite.columns"
    task: str = setting(TEXT)
    metric: str | None = setting(TEXT, optional=True)
    mode: str | None = setting(one_of(MODES), optional=True)
    paper: str | None = setting(TEXT, optional=True)


@dataclass(frozen=True, kw_only=True)
class SuiteSettings(Settings):
    KEY = "suite"
    name: str = setting(TEXT)
    glue_dir: str = setting(TEXT)
    tasks: dict[str, TaskSettings] = group(TaskSettings, each=True)
    modes: dict = setting(MAPPING)
    columns: tuple[ColumnSettings, ...] = group(ColumnSettings, each=True)

    def check(self, key: str) -> None:
        if not self.tasks:
            raise ConfigError(f"{key}.tasks of suite {self.name!r} is empty: expected at least one task "
                              "(e.g. /task@suite.tasks.mrpc: mrpc in its defaults)")
        for task, modes in self.modes.items():
            if task not in self.tasks:
                raise ConfigError(f"{key}.modes.{task}: not a task of the suite: expected one of "
                                  f"{', '.join(self.tasks)}")
            for kind in (MODE_LIST, DISTINCT_MODES):
                kind.check(f"{key}.modes.{task}", modes)
        for i, col in enumerate(self.columns):
            one_of(tuple(self.tasks)).saying(f"one of the suite's tasks ({', '.join(self.tasks)})").check(
                f"{key}.columns[{i}].task", col.task)


# ------------------------------------------------------------------------------------------ grid and report


@dataclass(frozen=True, kw_only=True)
class GridSeeds(Settings):
    KEY = "grid.seeds"
    baseline: int = setting(POSITIVE_INT.saying("a positive integer (pretraining runs)"))
    variants: int = setting(POSITIVE_INT.saying("a positive integer (pretraining runs)"))


CHOOSERS = ("model", "variant")  # grid.finetune.choose


@dataclass(frozen=True, kw_only=True)
class GridFinetune(Settings):
    KEY = "grid.finetune"
    modes: tuple[str, ...] = setting(MODE_LIST, DISTINCT_MODES)
    choose: str = setting(one_of(CHOOSERS))


@dataclass(frozen=True, kw_only=True)
class SweepSettings(Settings):
    """The learning-rate sweep of a grid (``pipeline.sweep``): each row of ``rows`` piloted at every peak rate of
    ``lrs`` for ``fraction`` of the budget, and pretrained in full at the rate whose pilot scored best."""
    KEY = "grid.sweep"
    rows: tuple[str, ...] = setting(list_of(TEXT, "a non-empty list of row names (baseline, or the grid's variants)"),
                                    distinct("row names (each row is piloted once per rate)"))
    lrs: tuple[float, ...] = setting(*grid_of("peak learning rates: each is one pilot per row"))
    fraction: float = setting(number(0, 1, low_open=True, expected="a share of trainer.max_steps in (0, 1]"))

    def check(self, key: str) -> None:
        if len(self.lrs) < 2:
            raise ConfigError(f"{key}.lrs={list(self.lrs)} is not allowed: expected at least 2 rates (one rate "
                              "chooses nothing)")


@dataclass(frozen=True, kw_only=True)
class GridSettings(Settings):
    KEY = "grid"
    name: str = setting(TEXT)
    families: tuple[str, ...] = setting(list_of(TEXT, "a non-empty list of family names (the report's sections)"),
                                        distinct("families (each is one section of the report)"))
    pretrain: tuple[str, ...] = setting(WORDS.saying("a list of variant names"),
                                        distinct("variant names (each is one row of pretraining runs)"))
    seeds: GridSeeds = group(GridSeeds)
    finetune: GridFinetune = group(GridFinetune)
    sweep: SweepSettings | None = group(SweepSettings, nullable=True)  # null: every row at optim.lr

    def check(self, key: str) -> None:
        check_families(list(self.families))  # the report's tables (pipeline/report/families)
        if self.sweep is not None:
            known = ("baseline", *self.pretrain)
            for row in self.sweep.rows:
                if row not in known:
                    raise ConfigError(f"{key}.sweep.rows: {row!r} is not a row of this grid: expected baseline or "
                                      f"one of {key}.pretrain ({', '.join(self.pretrain) or 'none'})")


@dataclass(frozen=True, kw_only=True)
class ReportSettings(Settings):
    KEY = "report"
    confidence: float = setting(CONFIDENCE)


@dataclass(frozen=True, kw_only=True)
class ProbeSettings(Settings):
    KEY = "probe"
    occurrences: int = setting(POSITIVE_INT)
    min_occurrences: int = setting(POSITIVE_INT)
    neighbours: int = setting(POSITIVE_INT)
    random_pairs: int = setting(POSITIVE_INT)


PLL_KINDS = ("token", "word")  # zero_shot.pll: Salazar et al.'s PLL, or Kauf & Ivanova's PLL-word-l2r


@dataclass(frozen=True, kw_only=True)
class AlongSettings(Settings):
    """BLiMP scored along the baseline's pretraining, at every validation (``fixed/blimp``): its own data setting,
    so pointing ``zero_shot.data`` at BLiMP scores the exports without rerunning pretraining."""
    KEY = "zero_shot.along"
    data: str | None = setting(TEXT.or_null(" (not scored along pretraining)"))
    pairs: int = setting(POSITIVE_INT)


@dataclass(frozen=True, kw_only=True)
class ZeroShotSettings(Settings):
    """BLiMP scored zero-shot (``pipeline.zero_shot``); ``data`` null: not configured, the stages score nothing."""
    KEY = "zero_shot"
    data: str | None = setting(TEXT.or_null(" (not configured: nothing is scored)"))
    published: str | None = setting(TEXT.or_null(" (no published numbers beside ours)"))
    paradigms: tuple[str, ...] | None = setting(
        list_of(TEXT, "a non-empty list of paradigm names (UIDs)").or_null(" (all in zero_shot.data)"))
    pairs: int | None = setting(POSITIVE_INT.or_null(" (all of each paradigm)"))
    pll: str = setting(one_of(PLL_KINDS))
    max_pieces: int | None = setting(integer(3, expected="an integer >= 3 ([CLS], one piece, [SEP])").or_null(
        " (the model's positions)"))
    ngram_order: int = setting(POSITIVE_INT)
    batch_size: int = setting(POSITIVE_INT)
    along: AlongSettings = group(AlongSettings)


@dataclass(frozen=True, kw_only=True)
class TrackingSettings(Settings):
    KEY = "tracking"
    uri: str | None = setting(TEXT.or_null(" ($MLFLOW_TRACKING_URI, else the local store)"))
    experiment: str = setting(TEXT)
    log_model: bool = setting(BOOL)


# --------------------------------------------------------------------------------------------- speed and run


@dataclass(frozen=True, kw_only=True)
class RuntimeSettings(Settings):
    KEY = "runtime"
    num_threads: int | None = setting(POSITIVE_INT.or_null(" (optional)"))
    num_workers: int | None = setting(POSITIVE_INT.or_null(" (optional: all cores)"))
    parts: int = setting(POSITIVE_INT.saying("a positive integer (machines)"))
    part: int | None = setting(NON_NEGATIVE_INT.or_null(" (join the parts)"))
    loader_workers: int = setting(integer(0))
    precision: Any = setting(Kind(lambda v: str(v) in PRECISIONS, f"one of {', '.join(PRECISIONS)}"))
    compile: bool = setting(BOOL)
    fused_optimizer: bool = setting(BOOL)
    progress: bool = setting(BOOL)

    def check(self, key: str) -> None:
        if self.part is not None and self.part >= self.parts:
            raise ConfigError(f"{key}.part={self.part!r} is not allowed: expected an integer in "
                              f"[0, {key}.parts={self.parts})")
        if str(self.precision) in ("16", "16-mixed") and self.fused_optimizer:
            # fp16's gradient scaler: a fused AdamW unscales inside its step, after gradients were clipped
            raise ConfigError(f"{key}.precision={self.precision} with {key}.fused_optimizer=true is not allowed: "
                              f"expected {key}.fused_optimizer=false (fp16's scaled gradients are clipped before a "
                              f"fused AdamW unscales them), or {key}.precision=bf16-mixed")


@dataclass(frozen=True, kw_only=True)
class RunSettings(Settings):
    """The top-level keys that say which run this is (conf/config.yaml)."""
    KEY = ""
    OPEN = True
    seed: int = setting(NON_NEGATIVE_INT)
    pretrain_seed: int = setting(NON_NEGATIVE_INT)
    variant: str | None = setting(TEXT.or_null(" (the baseline)"))
    pilot_lr: float | None = setting(POSITIVE.or_null(" (a full run, not a pilot of the learning-rate sweep)"))
    suite_task: str | None = setting(TEXT.or_null(" (no suite task)"))

    @property
    def training_seed(self) -> int:
        """The seed of this run's training randomness: ``seed``, plus ``pretrain_seed`` for a variant's further
        runs (weights, data order, masks, dropout; the examples stay the first run's)."""
        return self.seed + self.pretrain_seed


@dataclass(frozen=True, kw_only=True)
class VariantFolders(Settings):
    KEY = "paths.variants"
    data: str = setting(TEXT)
    models: str = setting(TEXT)
    metrics: str = setting(TEXT)
    plots: str = setting(TEXT)


@dataclass(frozen=True, kw_only=True)
class PathsSettings(Settings):
    """Where the stages read and write (a variant's run and a sweep's job have their own, set before the check)."""
    KEY = "paths"
    corpus: str = setting(TEXT)
    tokenizer: str = setting(TEXT)
    pairs: str = setting(TEXT)
    eval_set: str = setting(TEXT)
    pretrain: str = setting(TEXT)
    metrics: str = setting(TEXT)
    plots: str = setting(TEXT)
    reports: str = setting(TEXT)
    checkpoints: str = setting(TEXT)
    variants: VariantFolders = group(VariantFolders)


@dataclass(frozen=True, kw_only=True)
class GridRun(Settings):
    """One pretraining run of the grid (``runs``, generated from ``grid`` and ``family``): its variant and seed,
    the settings it changes, the modes it is fine-tuned in, the run that chooses its fine-tuning settings, and
    its folders."""
    KEY = "runs"
    variant: str = setting(TEXT)
    pretrain_seed: int = setting(NON_NEGATIVE_INT)
    set: tuple[str, ...] = setting(WORDS.saying("a list of overrides"))
    modes: tuple[str, ...] = setting(WORDS.saying("a list of fine-tuning modes"))
    chooser: str = setting(TEXT)   # the run whose fine-tuning chose this run's settings on dev (itself, or another)
    rate_from: str = setting(TEXT)  # its row's pilots (pipeline.sweep), or, not swept, its examples again
    pairs: str = setting(TEXT)
    pretrain: str = setting(TEXT)
    metrics: str = setting(TEXT)
    plots: str = setting(TEXT)


def as_plain(settings: Settings) -> dict:
    """A group's settings as the plain mapping they were read from (lists, not tuples), for code that takes JSON."""
    return shown(asdict(settings))


# Every group with settings, in the order the validator reads them ("run": the top-level keys).
GROUPS: dict[str, type[Settings]] = {
    "run": RunSettings, "paths": PathsSettings, "corpus": CorpusSettings, "tokenizer": TokenizerSettings,
    "pairs": PairsSettings, "eval_set": EvalSetSettings, "masking": MaskingSettings, "objective": ObjectiveSettings,
    "model": ModelSettings, "optim": OptimSettings, "trainer": TrainerSettings, "finetune": FinetuneSettings,
    "task": TaskSettings, "suite": SuiteSettings, "grid": GridSettings, "report": ReportSettings,
    "probe": ProbeSettings, "zero_shot": ZeroShotSettings, "tracking": TrackingSettings, "runtime": RuntimeSettings}


@dataclass(frozen=True)
class Lab:
    """A stage's settings once checked: what every stage's ``run`` receives and hands down.

    One attribute per group of ``GROUPS`` (None where the composed config has none: a null suite, or a test's
    partial config); ``runs``, the grid's pretraining runs by name; ``resolved``, the run's resolved settings as
    plain values (no catalogue, no secrets), which the tracker records and nothing reads a setting from."""
    run: RunSettings | None = None
    paths: PathsSettings | None = None
    corpus: CorpusSettings | None = None
    tokenizer: TokenizerSettings | None = None
    pairs: PairsSettings | None = None
    eval_set: EvalSetSettings | None = None
    masking: MaskingSettings | None = None
    objective: ObjectiveSettings | None = None
    model: ModelSettings | None = None
    optim: OptimSettings | None = None
    trainer: TrainerSettings | None = None
    finetune: FinetuneSettings | None = None
    task: TaskSettings | None = None
    suite: SuiteSettings | None = None
    grid: GridSettings | None = None
    report: ReportSettings | None = None
    probe: ProbeSettings | None = None
    zero_shot: ZeroShotSettings | None = None
    tracking: TrackingSettings | None = None
    runtime: RuntimeSettings | None = None
    runs: dict[str, GridRun] = field(default_factory=dict)
    resolved: dict = field(default_factory=dict)

    def get(self, group: str) -> Settings | None:
        return getattr(self, group)

    @property
    def run_name(self) -> str:
        """This run's name in the grid: ``baseline``, ``<variant>``, ``<variant>-s<k>`` for its further runs."""
        k = self.run.pretrain_seed
        return f"{self.run.variant or 'baseline'}{f'-s{k}' if k else ''}"


def read_groups(cfg: Mapping[str, Any], resolved: dict | None = None) -> Lab:
    """The settings of every group ``cfg`` has (a null suite is none), each checked on its own; the grid's runs;
    ``resolved``: what the tracker records (``Lab.resolved``)."""
    out = {}
    for name, cls in GROUPS.items():
        node = cfg if name == "run" else cfg.get(name)
        if node is not None and (name != "run" or "seed" in cfg):
            out[name] = cls.read(node)
    runs = cfg.get("runs")
    runs = {} if runs is None else {name: GridRun.read(spec, f"runs.{name}") for name, spec in _plain(runs).items()}
    return Lab(**out, runs=runs, resolved=resolved or {})
