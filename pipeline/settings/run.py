"""The settings that say which run this is (the top-level keys), where it reads and writes (paths, and each
of the grid's runs), and how fast it runs (runtime: never what it computes)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline.errors import ConfigError
from pipeline.settings.base import WORDS, Settings, group, setting
from pipeline.values import BOOL, NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, TEXT, Kind, integer

# Lightning's precision names (lightning.fabric.connector._PRECISION_INPUT; a test keeps them the same).
PRECISIONS = ("transformer-engine", "transformer-engine-float16", "16-true", "16-mixed", "bf16-true", "bf16-mixed",
              "32-true", "64-true", "64", "32", "16", "bf16")


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
