"""The report's results as types: what ``pipeline.report.results`` computes, the report renders and
``reports/ablations.json`` holds.

Scores are fractions (accuracy 0.61, not 61%; the report prints accuracy, F1 and exact match as percentages) or
correlations, in the units of the metric they come from. ``to_json`` writes each type as ``ablations.json`` has
always had it: a field that does not apply to a record is left out of its JSON, not written as null.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, ClassVar


def to_json(value: Any) -> Any:
    """``value`` with every record in it (however deep) as the mapping ``ablations.json`` holds."""
    if is_dataclass(value):
        return {f.name: to_json(getattr(value, f.name)) for f in fields(value) if f.name not in value.omitted()}
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value


class Record:
    """A record of the results: ``OMIT_NONE`` names the fields its JSON leaves out while they are None."""

    OMIT_NONE: ClassVar[tuple[str, ...]] = ()

    def omitted(self) -> set[str]:
        return {name for name in self.OMIT_NONE if getattr(self, name) is None}

    def to_json(self) -> dict:
        return to_json(self)


@dataclass
class Comparison(Record):
    """One side against another by a test of ``pipeline.report.stats``: the difference of the means and the verdict."""

    diff: float  # mean of the first side less the other's, in the metric's units (a fraction for accuracy)
    n_pretrain: list[int]  # the units behind each side (pretraining runs; fine-tuning runs without pretraining)
    n_finetune: list[int] | None  # the fine-tuning runs behind each side, for the record (None: not given)
    test: str  # the test, in words (``stats.TESTS``)
    confidence: float  # of the interval, a fraction (0.95)
    verdict: str  # better, worse, level (with a margin: inside it by TOST), inconclusive, or why there is none
                  # ("inconclusive (one run each)")
    low: float | None = None  # the interval of the difference; None where no test could be made
    high: float | None = None
    p: float | None = None  # two-sided p-value
    df: float | None = None  # the test's degrees of freedom (left out of the JSON where no test was made, and
                             # where the binomial floor made it a normal approximation)
    borderline: bool = False  # p (or, with a margin, the TOST p) within a fifth to twice the threshold: another
                              # machine may move the verdict
    seeds_needed: int | None = None  # inconclusive: about how many pretraining runs per side would decide it
    # with a practical margin only (``stats.with_margin``; left out of the JSON without one)
    margin: float | None = None  # the claim's margin, in the metric's units (0.02: two points of accuracy)
    tost_p: float | None = None  # two one-sided tests against -margin and +margin: the larger p
    tost_low: float | None = None  # the (1 - 2 alpha) interval (90% at 95%): level where inside the margin
    tost_high: float | None = None
    seeds_needed_level: int | None = None  # inconclusive: runs per side to show it level (the difference as seen)

    OMIT_NONE = ("df", "margin", "tost_p", "tost_low", "tost_high", "seeds_needed_level")


@dataclass
class Interval(Record):
    """A mean over units (pretraining runs) with its spread and the interval of the mean."""

    mean: float
    std: float  # sample standard deviation of the units (0 for one unit)
    low: float | None  # the interval of the mean (report.confidence); None with a single unit
    high: float | None
    units: list[float]  # each unit's value, in order of pretraining seed


@dataclass
class Score(Interval):
    """A row's downstream number for one fine-tuning mode: per-pretraining-run means of fine-tuning seeds (a mode
    without pretraining behind it: each fine-tuning run is a unit)."""

    groups: list[list[float]] = field(default_factory=list)  # each pretraining run's fine-tuning scores
    n_pretrain: int = 0  # pretraining runs behind it (0 for a mode without pretraining)
    n_finetune: int = 0  # fine-tuning runs behind it
    mlflow_run_ids: list[str] = field(default_factory=list)  # of the fine-tuning runs


@dataclass
class LayoutCell(Interval):
    """A row's accuracy (a fraction) in one cell of the layout probe, with its tests against the floors."""

    vs_floors: dict[str, Comparison] = field(default_factory=dict)  # floor name -> one-sample test


@dataclass
class SuiteCell(Record):
    """A row's score in one column of a task suite (a task, its metric, a mode), and its test there."""

    ran: bool  # whether the row has a score in this column (the fields below are left out of the JSON if not)
    paper: float | None  # the paper's number for this row and column
    mean: float | None = None  # in the column's metric (a fraction for accuracy, F1, exact match)
    low: float | None = None  # the interval of the mean
    high: float | None = None
    n_pretrain: int = 0
    n_finetune: int = 0
    vs: Comparison | None = None  # its test against the family's reference row in this column
    vs_row: str | None = None  # the label of that row

    SCORE = ("mean", "low", "high", "n_pretrain", "n_finetune", "vs", "vs_row")

    def omitted(self) -> set[str]:
        return set() if self.ran else set(self.SCORE)


@dataclass
class Floor(Record):
    """A count-based floor as the report lists it (``pipeline.data.ngram.FLOORS``)."""

    name: str
    label: str  # in words, for tables
    short: str  # for figures
    view: str  # what the count table reads
    accuracy: float  # at the fixed set's masked positions, a fraction


@dataclass
class Crossing(Record):
    """Where a row's runs first rose above a floor on the fixed set: means over the runs that did (None where
    none did, or a run's curve lacks that axis)."""

    runs: int  # runs with a fixed-set curve
    crossed: int  # of those, how many rose above the floor
    step: float | None = None
    tokens: float | None = None  # training tokens seen
    seconds: float | None = None  # training seconds, validation excluded
    flops: float | None = None  # training FLOPs


@dataclass
class PretrainSummary(Record):
    """The pretraining numbers a row shows: means over its pretraining runs (fractions for accuracies)."""

    lm: str  # the LM's metric prefix: mlm, ltr, bilm or w2v
    val_lm_acc: float | None  # the LM's validation accuracy on its own masking (never compared across rows)
    val_perplexity: float | None
    fixed_acc: float | None  # accuracy at the fixed evaluation set's masked positions (comparable across rows)
    fixed_units: list[float]  # each run's fixed_acc
    fixed_replaced: float | None  # fixed set: accuracy where the piece was replaced by a random one
    fixed_unchanged: float | None  # fixed set: accuracy where the piece was left unchanged
    fixed_loss: float | None  # fixed set: cross-entropy at the masked positions, nats
    val_loss: float | None
    steps: int | None  # of the first run
    train_seconds: float | None
    parameters: int | None
    train_flops_per_token: float | None
    runs: int  # pretraining runs behind the numbers
    mlflow_run_id: str | None  # the first run's
    mlflow_run_ids: list[str | None]
    plots: str | None = None  # the first run's curves folder (DVC-tracked CSVs)
    plots_all: list[str | None] | None = None  # every run's curves folder (in a family's rows only)

    OMIT_NONE = ("plots_all",)


@dataclass
class Row(Record):
    """One row of a family's table: a pretraining variant (fine-tuned in every mode of the grid) or a fine-tuning
    mode of the baseline, with its scores and its tests against its reference row."""

    label: str
    paper_row: str | None  # its row in the paper's tables
    paper: dict[str, float]  # the paper's numbers for it, by column
    kind: str  # "variant" or "mode"
    name: str  # the variant or the mode
    ran: bool  # whether this grid ran it (the fields below are left out of the JSON where it did not)
    scores: dict[str, Score | None] = field(default_factory=dict)  # mode -> score (None: the mode did not run)
    primary: Score | None = None  # the score rows are compared on: the mode itself, or a variant's first mode
    key: str | None = None  # how the ledger names it (claims.yaml ``row``): its spec's ``id``, else its variant or mode
    against: str | None = None  # the key of the row it is tested against, where its spec names one (``vs``)
    vs_row: str | None = None  # the label of the row it is tested against (or the classical baseline)
    vs: Comparison | None = None  # its test against that row (None: it is the reference)
    pretrain: PretrainSummary | None = None  # a variant's pretraining numbers
    # on the fixed evaluation set (pretraining variants with a fixed-set score only)
    fixed: Interval | None = None  # its accuracy at the masked positions, with the family's pooled spread
    fixed_kinds: dict[str, float | None] = field(default_factory=dict)  # replaced, unchanged, loss
    vs_fixed_row: str | None = None
    vs_fixed: Comparison | None = None
    vs_floors: dict[str, Comparison] = field(default_factory=dict)  # floor name -> one-sample test
    crossings: dict[str, Crossing] = field(default_factory=dict)  # floor name -> where its runs crossed it
    passes: dict | None = None  # where its fixed-set curve passes its reference's (``fixed.passing``; families
                                # with ``passes: true``)
    passes_nsp: dict | None = None  # the same for the NSP head's accuracy on the pairs (a side's head learned)
    vs_fixed_nsp: Comparison | None = None  # that accuracy after training against the reference's (Welch's test)

    RAN = ("scores", "primary", "vs_row", "vs")
    FIXED = ("fixed", "fixed_kinds", "vs_fixed_row", "vs_fixed", "vs_floors", "crossings")

    def omitted(self) -> set[str]:
        return {*(() if self.ran else self.RAN), *(() if self.pretrain else ("pretrain",)),
                *(() if self.fixed else self.FIXED), *(() if self.passes else ("passes",)),
                *(() if self.passes_nsp else ("passes_nsp", "vs_fixed_nsp"))}


@dataclass
class FamilyResult(Record):
    """One family's table: its rows in order, tested against the first row (or, in a lineage, the row above)."""

    name: str
    title: str
    question: str
    kind: str | None  # the rows' kind ("variant" or "mode"); None without rows
    floors: list[Floor]  # the count-based floors beside its rows (variants only), weakest first
    reference_row: str | None  # the label of the row the others are tested against, or "the row above"
    rows: list[Row]
    classical: Score | None  # the non-neural baseline (TF-IDF, or word overlap on SQuAD), when it ran
    paper: list[dict]  # the paper's tables: {source, columns, rows: {label: values}}
    note: str | None
    first_generation: str | None  # a lineage's first generation: the floor that is its n-gram LM

    @property
    def lineage(self) -> bool:
        return self.reference_row == "the row above"


@dataclass
class BaselineCheck(Record):
    """The baseline on the fixed evaluation set against the count-based floors of its kind of LM."""

    lm: str
    fixed: Interval  # its accuracy at the masked positions over its pretraining runs
    floors: list[Floor]
    vs_floors: dict[str, Comparison]  # floor name -> one-sample test
    crossings: dict[str, Crossing]
    bigram: str | None  # the first floor that reads context
    learned: bool  # whether it beats that floor
    built: dict | None = None  # how the fixed set was built (the eval_set stage's stats and settings)

    OMIT_NONE = ("built",)


@dataclass
class NspCheck(Record):
    """Next-sentence prediction on the fixed set's pairs against always guessing the more common label."""

    actual_next: float  # share of pairs whose B is the actual next segment
    base_rate: float  # accuracy of always guessing the more common label
    accuracy: Interval  # the baseline's NSP accuracy over its pretraining runs
    vs_base: Comparison


@dataclass
class Method(Record):
    """The design and the test in numbers: runs per row, the baseline's noise, error rates by simulation."""

    pretraining_runs: dict[str, int]  # variant -> pretraining runs
    finetune_seeds: int
    confidence: float  # a fraction (0.95)
    sd_pretrain: float  # pretraining luck: sd of a run's score, in the metric's units
    sd_finetune: float  # fine-tuning luck
    false_positive_rate: float | None = None  # simulated, on no difference (left out where nothing varies)
    smallest_detectable: float | None = None  # difference detected with 80% power
    power_at_observed: dict[str, float] | None = None  # the observed difference (as printed) -> power

    OMIT_NONE = ("false_positive_rate", "smallest_detectable", "power_at_observed")


@dataclass
class RunRecord(Record):
    """One run of the grid: its variant, seed, pretraining numbers and fine-tuning runs (MLflow ids)."""

    variant: str
    pretrain_seed: int
    pretrain: PretrainSummary
    finetune_runs: dict[str, list[str]]  # mode -> MLflow run ids


@dataclass
class TaskVerdict(Record):
    """A downstream claim read on one task of a suite: its rows' test in that task's column, and the verdict."""

    task: str
    metric: str
    verdict: str
    rows: str
    test: Comparison


@dataclass
class Claim(Record):
    """One claim of the ledger, as measured by the grid (or not run by it)."""

    id: str
    claim: str
    paper: str  # the direction the paper (or the work it names) found
    verdict: str  # shown, opposite (the paper's direction reversed beyond noise), level (inside the claim's
                  # margin), inconclusive, mixed (tasks disagree), not posed, or not run
    rows: str | None = None  # what was compared: "<row> vs <reference>"
    metric: str | None = None  # what the difference is in ("SST-2 test accuracy", "BLiMP accuracy", ...)
    percent: bool = True  # the difference is a fraction shown in points
    test: Comparison | None = None  # the measurement: the row against its reference
    fixed: Comparison | None = None  # the same rows on the fixed evaluation set (pretraining variants)
    fixed_verdict: str | None = None
    along: list[list[float]] | None = None  # the fixed-set gap [step, points] at each validation both rows share
    cost_seconds: float | None = None  # pretraining seconds of one run of each side (what each extra pair costs)
    section: str | None = None  # the report section that holds the detail
    run_by: str | None = None  # not run: what runs it
    tasks: list[TaskVerdict] | None = None  # a downstream claim read on every task of a suite (``verdict``:
                                            # theirs where they agree, else "mixed")
    precondition: str | None = None  # what must hold for the claim to be posed, as measured (NSP: its head
                                     # against its base rate); verdict "not posed" where it does not hold
    margin: dict | None = None  # claims.yaml's practical margin: value, unit (points, similarity), reason
    fixed_margin: dict | None = None  # the same for the fixed-set reading (pretraining variants)
    level_shown: bool | None = None  # claims.yaml's ``level``: whether a level reading is the paper's direction
                                     # (None: the yaml says nothing of level)

    OMIT_NONE = ("rows", "metric", "test", "fixed", "fixed_verdict", "along", "cost_seconds", "section", "run_by",
                 "tasks", "precondition", "margin", "fixed_margin", "level_shown")


@dataclass
class AblationResults(Record):
    """Everything the report shows about the grid (``reports/ablations.json``)."""

    grid: str
    task: str  # the task the detailed tables show (a suite's first column)
    metric: str
    variant_modes: list[str]  # how each variant was fine-tuned
    families: list[FamilyResult]
    method: Method
    findings: list[str]  # sentences generated from the numbers
    runs: dict[str, RunRecord]
    table: dict[str, dict[str, dict[str, float]]]  # family -> row -> number: what `dvc metrics show` lists
    summary: dict[str, dict]  # row (or "floors") -> number: ``reports/summary.json``
    intrinsic: BaselineCheck | None = None
    layout: dict | None = None  # the layout probe (``pipeline.report.layout.grid_result``)
    nsp: NspCheck | None = None
    suite: dict | None = None  # a task suite's columns (``pipeline.report.suites``), where the grid ran one
    zero_shot: dict | None = None  # BLiMP (``pipeline.report.grammar``), once the report stage adds it
    ledger: list[Claim] | None = None  # the claims of BERT's story (``pipeline.report.ledger``), once it adds them
    choices: list[dict] | None = None  # each task's choices on dev (``pipeline.report.protocol.choices``)
    sweeps: list[dict] | None = None  # each swept row's pretraining rate and pilots (``protocol.sweeps``)
    controls: list[dict] | None = None  # each task's word-order control (``pipeline.report.protocol.controls``)
    noise: list | None = None  # each task's noise and what would cut it (``pipeline.report.noise.TaskNoise``)

    OMIT_NONE = ("suite", "zero_shot", "ledger", "choices", "controls", "sweeps", "noise")


def reference_of(ran: list[Row], i: int, previous: bool) -> Row | None:
    """The row ``ran[i]`` is tested against: the one its spec names (``vs``), else the family's first row, or in
    a lineage (``previous``) the row above; None for the reference itself (or a ``vs`` that did not run)."""
    row = ran[i]
    if row.against is not None:
        return next((r for r in ran if r.key == row.against and r is not row), None)
    if previous:
        return ran[i - 1] if i else None
    return ran[0] if row is not ran[0] else None
