"""The fine-tuning groups' settings: the protocol every task is fine-tuned by (finetune: modes, seeds, the
grids chosen on dev, TF-IDF's grid, the word-order control), a task, and a suite of tasks with its report
columns."""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.errors import ConfigError
from pipeline.names import MODES, POOLINGS
from pipeline.settings.base import WORDS, Settings, grid_of, group, setting
from pipeline.values import (BETAS, BOOL, MAPPING, NON_NEGATIVE, POSITIVE, POSITIVE_INT, TEXT, Kind, distinct, integer,
                             list_of, number, one_of, shown)

MODE_LIST = list_of(one_of(MODES), f"a non-empty list of: {', '.join(MODES)}")
DISTINCT_MODES = distinct("modes (each is fine-tuned once per seed)")


def bounds(what: str) -> Kind:
    """How far the protocol may extend a grid whose choice falls on its edge (pipeline.finetune.protocol)."""
    return Kind(lambda v: isinstance(v, (tuple, list)) and len(v) == 2 and all(POSITIVE.allows(b) for b in v)
                and v[0] < v[1], f"two positive numbers [low, high] with low < high (the lowest and highest {what} "
                                 "a grid may be extended to)")


def enclose(key: str, name: str, limits: tuple[float, float], values: tuple[float, ...], grid: str) -> None:
    """A bound inside a grid would cut off a value the grid itself asks for: the bounds say how far past the
    grid's edges the protocol may extend it, never which of its own values to train."""
    if limits[0] > min(values) or limits[1] < max(values):
        raise ConfigError(f"{key}.{name}={shown(limits)} is not allowed: the bounds must enclose {grid} "
                          f"({min(values):g} to {max(values):g})")


@dataclass(frozen=True, kw_only=True)
class TfidfGrid(Settings):
    """TF-IDF's grid, chosen on dev like every other arm's settings."""
    KEY = "finetune.tfidf"
    c: tuple[float, ...] = setting(*grid_of("the logistic regression's inverse regularisation; ridge's alpha is 1/c"))
    c_bounds: tuple[float, float] = setting(bounds("C"))
    ngrams: tuple[int, ...] = setting(list_of(POSITIVE_INT, "a non-empty list of positive integers (the longest "
                                                            "word n-gram)"),
                                      distinct("values (ngrams: each is one candidate run)"))

    def check(self, key: str) -> None:
        enclose(key, "c_bounds", self.c_bounds, self.c, f"{key}.c")


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
    lr_bounds: tuple[float, float] = setting(bounds("peak learning rate"))
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
        for name, rates in (("lrs", self.lrs), ("feature_lrs", self.feature_lrs)):
            enclose(key, "lr_bounds", self.lr_bounds, rates, f"{key}.{name}")


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
