"""How much noise, and what would cut it: the numbers of the report's section of that name (``sections/noise.py``).
Each task's three kinds of luck, measured, and the true difference each comparison of the grid detects with 80% power,
as run and with twice the pretraining runs, the fine-tuning seeds or the test examples, with what each change costs
at the grid's measured times.

Pretraining luck (sd σp) and fine-tuning luck (σf) come from a one-way ANOVA of the baseline's fine-tuned runs grouped
by pretraining run (``stats.variance_components``); test sampling (σt) is ``power.sampling_sd`` for one row, and
for a difference ``outcome_var``, from the two rows' outcomes on the same test examples, where the runs record them.
This module reads the runs into each comparison's design and sizes each change with ``power``'s maths; the records
below are what the results hold (``AblationResults.noise``).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from pipeline.names import CLASSICAL, SEED_FREE
from pipeline.report.model import AblationResults, FamilyResult, Record
from pipeline.report.power import Design, Side, detectable, floor, sampling_sd
from pipeline.report.results import BASELINE, by_variant, choose_test, load_runs
from pipeline.report.stats import sd_interval, variance_components

TARGET = 0.10  # the difference each comparison should detect with 80% power, in the metric's units (10 points of
# accuracy), where no target is given: the stage passes report.detect and report.detect_tasks
MAX_SCALE = 64  # the most runs per side searched for the target, as a multiple of the runs as run
AS_RUN, RUNS, SEEDS, TEST = "as run", "2x pretraining runs", "2x fine-tuning seeds", "2x test examples"
COMPARISONS = {"pooled": "pretraining variants", "paired": "fine-tuning modes of the same runs",
               "welch": "pretrained and from scratch"}  # each test's comparisons in words, in the tables' order


@dataclass
class NoiseOption(Record):
    """One way to run a comparison (``pipeline.report.noise``): what changes, the true difference it would then
    detect with 80% power, and what the change adds at this grid's measured times."""

    change: str  # "as run", "2x pretraining runs", "2x fine-tuning seeds", "2x test examples" or "<r>x runs"
    detectable: float | None  # in the metric's units (a fraction for accuracy); None: no test can be made
    seconds: float | None = None  # the machine time it adds (left out as run, and for more test examples)
    examples: int | None = None  # the labelled test examples it adds (twice the test examples)

    OMIT_NONE = ("seconds", "examples")


@dataclass
class NoiseDesign(Record):
    """One comparison the grid runs on a task, its noise, and what would shrink the difference it detects."""

    comparison: str  # in words: a pretraining variant against its reference, from scratch, frozen features
    test: str  # the test's key in ``stats.TESTS``: pooled, welch or paired
    rows: list[str]  # the rows compared this way, each "<row> vs <reference>"
    runs: list[int]  # units per side (pretraining runs; from scratch: its fine-tuning runs); paired: one side
    seeds: list[int]  # fine-tuning runs per unit, per side
    df: int | None  # the test's degrees of freedom as run, Welch's at its lower bound (None: no test can be made)
    se: float  # sd of the difference of the two means as run, all three kinds of noise, in the metric's units
    sd_test: float  # of it, test sampling's sd: from the rows' outcomes on the same examples, else independent
    test_from: str  # "outcomes" (``outcome_var``; the widest of the line's comparisons), or "each row"
    floor: float  # what unlimited runs and seeds would detect: test sampling's share alone (0 where unknown)
    options: list[NoiseOption]  # as run first
    cheapest: str | None  # the option that reaches the task's target at the least machine time (None: none does)


@dataclass
class Spread(Record):
    """Fine-tuning luck as measured: the pooled within-run sd, its degrees of freedom and its interval at the
    report's confidence (``stats.sd_interval``), and the pretraining runs (of which rows) it pools."""

    sd: float
    df: int  # fine-tuning runs less pretraining runs: each run's seeds, less one
    low: float
    high: float
    runs: int  # pretraining runs with two seeds or more
    rows: list[str]  # the variants they belong to


@dataclass
class TaskNoise(Record):
    """A task's noise, measured on the baseline's runs, and the grid's comparisons on it
    (``pipeline.report.noise``): sds in the metric's units, seconds of this grid's machine."""

    task: str
    metric: str
    score: float  # the baseline's mean in the grid's first mode
    runs: int  # the baseline's pretraining runs
    seeds: int  # fine-tuning seeds per pretraining run
    sd_pretrain: float | None  # pretraining luck (None: one pretraining run cannot show it)
    sd_finetune: float | None  # fine-tuning luck (None: one seed per run)
    sd_test: float | None  # test sampling: the binomial sd of the baseline's score on the test split
    test_examples: int | None  # the test split's size (questions on SQuAD)
    pretrain_seconds: float | None  # one pretraining run of the baseline
    finetune_seconds: float | None  # one fine-tuning run in the first mode (its share of the choice on dev apart)
    target: float  # the difference each comparison is asked to detect
    designs: list[NoiseDesign]
    no_sd_test: str | None = None  # why ``sd_test`` is missing
    finetune_spread: Spread | None = None  # ``sd_finetune`` with its degrees of freedom and interval
    finetune_pooled: Spread | None = None  # pooled over every row's runs in the mode, where rows beyond the
    # baseline add runs (one spread for every row, as the pooled test assumes): the sharper estimate

    OMIT_NONE = ("no_sd_test", "finetune_spread", "finetune_pooled")



def by_run(runs: list[dict], mode: str, metric: str) -> dict[int, list[float]]:
    """``mode``'s scores on each pretraining run (by its seed), in seed order: the groups of the ANOVA."""
    out: dict[int, list[float]] = {}
    for r in runs:
        for x in r["finetune"]["modes"].get(mode, {}).get("runs", []):
            out.setdefault(x.get("pretrain_seed", 0), []).append(x[metric])
    return out


def spread(variants: dict[str, list[dict]], names: list[str], mode: str, metric: str,
           confidence: float) -> Spread | None:
    """Fine-tuning luck pooled within each pretraining run of the rows ``names`` in ``mode`` (None: no run has two
    seeds)."""
    groups = [(name, g) for name in names for g in by_run(variants.get(name, []), mode, metric).values() if len(g) > 1]
    if not groups:
        return None
    df = sum(len(g) - 1 for _, g in groups)
    sd = float(np.sqrt(sum(np.var(g, ddof=1) * (len(g) - 1) for _, g in groups) / df))
    low, high = sd_interval(sd, df, confidence)
    return Spread(sd=round(sd, 6), df=df, low=round(low, 6), high=round(high, 6), runs=len(groups),
                  rows=sorted({name for name, _ in groups}, key=names.index))


def outcomes(runs: list[dict], mode: str) -> np.ndarray | None:
    """``mode``'s test outcomes over ``runs`` (every fine-tuning run of every pretraining run): a runs x examples
    array of 1 (right) and 0 (wrong); None where a run did not record them (a metric other than a classifier's
    accuracy, metrics from before they were recorded) or their lengths differ."""
    rows = [x.get("outcomes") for r in runs for x in r["finetune"]["modes"].get(mode, {}).get("runs", [])]
    if not rows or None in rows or len({len(o) for o in rows}) != 1:
        return None
    return np.array([[c == "1" for c in o] for o in rows], dtype=float)


def outcome_var(metric: str, a: tuple[list[dict], str], b: tuple[list[dict], str]) -> float | None:
    """The test-sampling variance of the difference between two rows scored on the same test examples, each a
    (runs, mode): the variance over examples of the rows' per-example mean outcomes' difference, over the number
    of examples. Rows that agree on an example cancel there, which the binomial sd of each row alone cannot see.
    It holds each run's own luck as it fell (an upper bound on pure test sampling). None where the metric is not
    accuracy or a side lacks outcomes."""
    if metric.split("_")[-1] != "accuracy":
        return None
    x, y = outcomes(*a), outcomes(*b)
    if x is None or y is None or x.shape[1] != y.shape[1] or x.shape[1] < 2:
        return None
    diff = x.mean(axis=0) - y.mean(axis=0)
    return float(np.var(diff, ddof=1)) / diff.size


def pretrain_seconds(runs: list[dict]) -> float | None:
    """Seconds of one pretraining run (training time, the mean over ``runs``)."""
    values = [r["pretrain"]["train_seconds"] for r in runs if r["pretrain"].get("train_seconds") is not None]
    return float(np.mean(values)) if values else None


def finetune_seconds(runs: list[dict], mode: str) -> float | None:
    """Seconds of one fine-tuning run in ``mode``: each run's time for the mode over the trainings it made (its
    seeds, and on a run that chose on dev its other candidates too), the mean over ``runs``."""
    per = []
    for r in runs:
        m = r["finetune"]["modes"].get(mode)
        if m and m.get("seconds") is not None and m.get("n"):
            per.append(m["seconds"] / (m["n"] + max(0, len(m.get("selection", {}).get("grid", [])) - 1)))
    return float(np.mean(per)) if per else None


@dataclass(frozen=True)
class Plan:
    """A comparison the grid makes, whatever the task: its test, the reference's and the row's variant (pooled) or
    mode, the rows in words, and (pooled) the family's other variants, which add to the pooled spread."""

    test: str
    ref: str
    row: str
    rows: str
    others: tuple[str, ...] = ()


def plans(families: list[FamilyResult]) -> list[Plan]:
    """Every tested comparison of the families' rows, but those against TF-IDF (deterministic: no noise of its
    own to cut)."""
    out = []
    for fam in families:
        ran = {r.label: r for r in fam.rows if r.ran and r.primary}
        for row in ran.values():
            ref = ran.get(row.vs_row) if row.vs else None
            if ref is None or CLASSICAL in (row.name, ref.name):
                continue
            rows = f"{row.label} vs {ref.label}"
            if fam.kind == "variant":
                others = tuple(r.name for r in ran.values() if r is not row and r is not ref)
                out.append(Plan("pooled", ref.name, row.name, rows, others))
            else:
                out.append(Plan(choose_test("mode", row.name, ref.name), ref.name, row.name, rows))
    return sorted(out, key=lambda p: list(COMPARISONS).index(p.test))  # the ablations first


def design(plan: Plan, variants: dict[str, list[dict]], mode: str, metric: str,
           base_var: tuple[float, float, float]) -> Design | None:
    """``plan``'s noise on one task (None where a side did not run there). Variants share the baseline's spread
    ``base_var`` (σp², σf², σt²) as the pooled test assumes; fine-tuning modes of the baseline get their own."""
    base = variants[BASELINE]
    if plan.test == "pooled":
        if plan.ref not in variants or plan.row not in variants:
            return None
        sides = []
        for v in (plan.ref, plan.row):
            groups = by_run(variants[v], mode, metric)
            if not groups:
                return None
            sides.append(Side(len(groups), max(map(len, groups.values())), *base_var,
                              pretrain_seconds(variants[v]), finetune_seconds(variants[v], mode)))
        other = sum(len(variants[o]) - 1 for o in plan.others if o in variants)
        shared = outcome_var(metric, (variants[plan.ref], mode), (variants[plan.row], mode))
        return Design("pooled", tuple(sides), other, shared)
    a, b = by_run(base, plan.ref, metric), by_run(base, plan.row, metric)
    if not a or not b:
        return None
    if plan.test == "paired":
        shared = [s for s in a if s in b]
        if not shared:
            return None
        diffs = [[x - y for x, y in zip(b[s], a[s])] for s in shared]
        sd_p, sd_f = variance_components(diffs)
        var_t = sum(sampling_var(metric, g, base) for g in (a, b))
        seconds = [finetune_seconds(base, m) for m in (plan.ref, plan.row)]
        return Design("paired", (Side(len(shared), min(map(len, diffs)), sd_p ** 2, sd_f ** 2, var_t,
                                      pretrain_seconds(base), None if None in seconds else sum(seconds)),),
                      shared_test=outcome_var(metric, (base, plan.ref), (base, plan.row)))
    return Design("welch", tuple(mode_side(base, m, g, metric) for m, g in ((plan.ref, a), (plan.row, b))),
                  shared_test=outcome_var(metric, (base, plan.ref), (base, plan.row)))


def sampling_var(metric: str, groups: dict[int, list[float]], runs: list[dict]) -> float:
    """σt² of a mode's mean score (0 where the binomial does not apply or the test split's size is not known)."""
    ft = runs[0]["finetune"]
    sd, _ = sampling_sd(metric, float(np.mean([x for g in groups.values() for x in g])),
                    ft.get("test_questions", ft.get("test_examples")))
    return sd ** 2 if sd else 0.0


def mode_side(runs: list[dict], mode: str, groups: dict[int, list[float]], metric: str) -> Side:
    """A fine-tuning mode of the baseline as one side of Welch's test: its pretraining runs, or from scratch each
    fine-tuning run a unit of its own (no pretraining behind it)."""
    if mode in SEED_FREE:
        values = [x for g in groups.values() for x in g]
        var = float(np.var(values, ddof=1)) if len(values) > 1 else 0.0
        return Side(len(values), 1, 0.0, var, sampling_var(metric, groups, runs), 0.0, finetune_seconds(runs, mode),
                    pretrained=False)
    sd_p, sd_f = variance_components(list(groups.values()))
    return Side(len(groups), max(map(len, groups.values())), sd_p ** 2, sd_f ** 2, sampling_var(metric, groups, runs),
                pretrain_seconds(runs), finetune_seconds(runs, mode))


def options(d: Design, confidence: float, target: float, test_examples: int | None) -> tuple[list[NoiseOption],
                                                                                              str | None]:
    """The difference ``d`` detects as run and with each change, what each adds, and the cheapest that reaches
    ``target``: as run, else the least machine time, else more test examples (None: nothing here reaches it)."""
    def option(change: str, scaled: Design, seconds: float | None = None, examples: int | None = None):
        found = detectable(scaled, confidence)
        return NoiseOption(change, None if found is None else round(found, 6),
                           None if seconds is None else round(seconds, 1), examples)

    out = [option(AS_RUN, d)] + [option(change, x, d.cost(x)) for change, x in ((RUNS, d.scaled(runs=2)),
                                                                             (SEEDS, d.scaled(seeds=2)))]
    if d.var_test:
        out.append(option(TEST, d.scaled(test=2), examples=test_examples))
    reaches = [o for o in out if o.detectable is not None and o.detectable <= target]
    if not reaches:  # more than twice the runs: the fewest multiple of every side's units that reaches it
        for r in range(3, MAX_SCALE + 1):
            more = option(f"{r}x runs", d.more(r), d.cost(d.more(r)))
            if more.detectable is not None and more.detectable <= target:
                out.append(more)
                reaches = [more]
                break
    if any(o.change == AS_RUN for o in reaches):
        return out, AS_RUN
    timed = [o for o in reaches if o.seconds is not None]
    cheapest = min(timed, key=lambda o: o.seconds) if timed else (reaches[0] if reaches else None)
    return out, cheapest.change if cheapest else None


def task_noise(variants: dict[str, list[dict]], plan: list[Plan], mode: str, metric: str, confidence: float,
               target: float = TARGET) -> TaskNoise | None:
    """One task: the baseline's three kinds of noise in ``mode`` (the grid's first), and each comparison of
    ``plan`` with the difference it detects and what would shrink it (None: the baseline did not run ``mode``)."""
    base_runs = variants[BASELINE]
    groups = by_run(base_runs, mode, metric)
    if not groups:
        return None
    mean = float(np.mean([np.mean(g) for g in groups.values()]))  # the row's number: a mean of run means
    k, m = len(groups), max(map(len, groups.values()))
    sd_p, sd_f = variance_components(list(groups.values()))
    ft = base_runs[0]["finetune"]
    n_test = ft.get("test_questions", ft.get("test_examples"))
    sd_t, why = sampling_sd(metric, mean, n_test)
    designs = sized(plan, variants, mode, metric, (sd_p ** 2, sd_f ** 2, (sd_t or 0.0) ** 2), confidence, target,
                    n_test) if k > 1 else []  # one pretraining run shows no pretraining luck: nothing to size
    seconds = pretrain_seconds(base_runs), finetune_seconds(base_runs, mode)
    own = spread(variants, [BASELINE], mode, metric, confidence)
    pooled = spread(variants, list(variants), mode, metric, confidence)
    return TaskNoise(task=ft["task"], metric=metric, score=round(mean, 6), runs=k, seeds=m,
                     sd_pretrain=round(sd_p, 6) if k > 1 else None, sd_finetune=round(sd_f, 6) if m > 1 else None,
                     sd_test=None if sd_t is None else round(sd_t, 6), test_examples=n_test or None,
                     pretrain_seconds=seconds[0], finetune_seconds=seconds[1], target=target, designs=designs,
                     no_sd_test=why, finetune_spread=own,
                     finetune_pooled=pooled if pooled and own and pooled.df > own.df else None)


def sized(plan: list[Plan], variants: dict[str, list[dict]], mode: str, metric: str,
          base_var: tuple[float, float, float], confidence: float, target: float,
          n_test: int | None) -> list[NoiseDesign]:
    """Each comparison of ``plan`` that ran on the task, with its options; pretraining variants of one design (runs
    and seeds per side, the pooled spread's degrees of freedom) share one line."""
    found: dict[tuple, tuple[Design, list[Plan]]] = {}
    for p in plan:
        d = design(p, variants, mode, metric, base_var)
        if d is not None:
            key = (tuple((s.runs, s.seeds) for s in d.sides), d.other_df) if d.test == "pooled" else (p,)
            kept, ps = found.setdefault(key, (d, []))
            ps.append(p)
            if d.shared_test is None or kept.shared_test is None:  # one line, its widest test sampling
                found[key] = (replace(kept, shared_test=None), ps)
            elif d.shared_test > kept.shared_test:
                found[key] = (d, ps)
    out = []
    for d, ps in found.values():
        opts, cheapest = options(d, confidence, target, n_test)
        out.append(NoiseDesign(comparison=COMPARISONS[d.test], test=d.test, rows=[p.rows for p in ps],
                               runs=[s.runs for s in d.sides], seeds=[s.seeds for s in d.sides],
                               df=d.df or None, se=round(d.se, 6), sd_test=round(float(np.sqrt(d.var_test)), 6),
                               test_from="each row" if d.shared_test is None else "outcomes",
                               floor=round(floor(d, confidence), 6), options=opts, cheapest=cheapest))
    return out


def grid_noise(res: AblationResults, runs: dict, confidence: float,
               target: Callable[[str | None], float] = lambda task: TARGET) -> list[TaskNoise]:
    """Every task of the grid (a suite's, each on its first column's metric; else the one task): its noise and
    what would cut it, for the comparisons ``res``'s families make, each against ``target(task)``: the suite's task
    key, None without a suite."""
    columns = res.suite["columns"] if res.suite else [{"task": None, "metric": res.metric}]
    tasks: dict = {}
    for col in columns:
        tasks.setdefault(col["task"], col["metric"])
    plan = plans(res.families)
    found = (task_noise(by_variant(load_runs(runs, task)), plan, res.variant_modes[0], metric, confidence,
                        target(task))
             for task, metric in tasks.items())
    return [t for t in found if t]
