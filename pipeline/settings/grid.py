"""The settings of what is compared and how it is read: the grid of pretraining variants (with its
learning-rate sweep), the report, the probes of an export (probe, zero_shot), and where runs are recorded
(tracking)."""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.errors import ConfigError
from pipeline.names import check_families
from pipeline.settings.base import WORDS, Settings, grid_of, group, setting
from pipeline.settings.finetune import DISTINCT_MODES, MODE_LIST
from pipeline.values import BOOL, MAPPING, POSITIVE_INT, TEXT, distinct, integer, list_of, number, one_of

CONFIDENCE = number(0, 1, low_open=True, high_open=True, expected="a number in (0, 1), e.g. 0.95")
DETECT = number(0, 100, low_open=True, expected="points in (0, 100], e.g. 10")


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
    detect: float = setting(DETECT)
    detect_tasks: dict = setting(MAPPING.saying("a mapping of task names to points, e.g. {bible_sections: 5}"))

    def check(self, key: str) -> None:
        for task, points in self.detect_tasks.items():
            DETECT.check(f"{key}.detect_tasks.{task}", points)

    def target(self, task: str | None) -> float:
        """The difference ``task``'s comparisons should detect with 80% power, in the metric's units (a share)."""
        return self.detect_tasks.get(task, self.detect) / 100


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
