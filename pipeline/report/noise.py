"""How much noise, and what would cut it: each task's three kinds of luck, measured, and the difference each
comparison of the grid detects, as run and with twice the pretraining runs, fine-tuning seeds or test examples.

A row's score on a task carries three kinds of noise:

* pretraining luck, sd σp: which pretraining run the row got (its seed: weights, data order, masks);
* fine-tuning luck, sd σf: which fine-tuning seed (head, dropout, batch order);
* test sampling, sd σt = sqrt(p (1 − p) / n): which n examples the test split holds, for an accuracy p.

σp and σf come from a one-way ANOVA of the baseline's fine-tuned runs grouped by pretraining run
(``stats.variance_components``); σt is the binomial sd of a share. A row of k pretraining runs, each fine-tuned with m
seeds, has a mean whose variance is σp²/k + σf²/(k·m) + σt². Assumed: normal luck, one spread for every row (as the
pooled test assumes), and test sampling independent per row -- which overstates it for rows read on the same test
split (they share most of it), so the detectable differences here are conservative.

The detectable difference is that of a t-test whose standard error counts all three terms, at the degrees of freedom
of the report's own test for the comparison (pooled over the family's rows, Welch's, or paired); its power, the chance
of a "better" verdict at the report's confidence, comes from the noncentral t distribution. With σt = 0 it is exactly
the pooled test ``stats.simulate`` simulates (``tests/test_noise.py`` checks that the two agree).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import matplotlib.pyplot as plt
import numpy as np
from scipy import optimize, stats

from pipeline.finetune.modes import mode_label
from pipeline.names import CLASSICAL, SEED_FREE
from pipeline.report.figures import COLORS, REFERENCE
from pipeline.report.model import AblationResults, FamilyResult, NoiseDesign, NoiseOption, TaskNoise
from pipeline.report.results import BASELINE, by_variant, choose_test, fmt, load_runs, percent, score
from pipeline.report.stats import variance_components

TARGET = 0.10  # the difference each comparison should detect with 80% power, in the metric's units (10 points of
# accuracy): a third of what the demo's word_order noise lets it detect (29 points), within reach of more runs
POWER = 0.8  # the power a detectable difference is defined at (as ``stats.smallest_detectable``)
MAX_SCALE = 64  # the most runs per side searched for the target, as a multiple of the runs as run
PROPORTIONS = ("accuracy", "exact")  # metrics that are a share of test examples (the binomial sd applies)
AS_RUN, RUNS, SEEDS, TEST = "as run", "2x pretraining runs", "2x fine-tuning seeds", "2x test examples"


@dataclass(frozen=True)
class Side:
    """One side of a comparison: ``runs`` units (pretraining runs; from scratch, its fine-tuning runs), each the
    mean of ``seeds`` fine-tuning runs. Variances in the metric's units squared; seconds of one unit's pretraining
    (0 from scratch) and of one fine-tuning run (None: not measured)."""

    runs: int
    seeds: int
    var_pretrain: float
    var_finetune: float
    var_test: float
    pretrain_seconds: float | None
    finetune_seconds: float | None

    @property
    def unit_var(self) -> float:
        """The variance of one unit's mean over its seeds: what the test estimates from the runs' spread."""
        return self.var_pretrain + self.var_finetune / self.seeds

    @property
    def var(self) -> float:
        """The variance of the side's mean: σp²/k + σf²/(k·m) + σt²."""
        return self.unit_var / self.runs + self.var_test

    def cost(self, runs: int, seeds: int) -> float | None:
        """Seconds to go from this side's runs to ``runs`` units of ``seeds`` fine-tuning runs each."""
        if self.pretrain_seconds is None or self.finetune_seconds is None:
            return None
        return (runs - self.runs) * self.pretrain_seconds + (runs * seeds - self.runs * self.seeds) * \
            self.finetune_seconds


@dataclass(frozen=True)
class Design:
    """A comparison's noise: its test (``stats.TESTS``'s pooled, welch or paired), its sides (paired: one, the
    per-run differences) and, pooled, the degrees of freedom the family's other rows add to the spread."""

    test: str
    sides: tuple[Side, ...]
    other_df: int = 0

    @property
    def df(self) -> float:
        """The test's degrees of freedom (0: no test can be made): Welch's from the sides' modelled spreads."""
        if self.test == "pooled":
            return self.other_df + sum(s.runs - 1 for s in self.sides)
        if self.test == "paired":
            return self.sides[0].runs - 1
        v = [s.unit_var / s.runs for s in self.sides]
        if any(s.runs < 2 for s in self.sides) or not sum(v):
            return 0.0
        return sum(v) ** 2 / sum(x ** 2 / (s.runs - 1) for x, s in zip(v, self.sides))

    @property
    def se(self) -> float:
        """The sd of the difference of the two means (paired: of the mean difference), all three kinds of noise."""
        return math.sqrt(sum(s.var for s in self.sides))

    def scaled(self, runs: int = 1, seeds: int = 1, test: float = 1.0) -> Design:
        """The design with ``runs`` times the units and ``seeds`` times the seeds per side, and ``test`` times
        the test examples (σt² divided by it)."""
        return replace(self, sides=tuple(replace(s, runs=s.runs * runs, seeds=s.seeds * seeds,
                                                 var_test=s.var_test / test) for s in self.sides))

    def cost(self, runs: int = 1, seeds: int = 1) -> float | None:
        """Seconds that ``scaled(runs, seeds)`` adds (None where a side's times were not measured)."""
        costs = [s.cost(s.runs * runs, s.seeds * seeds) for s in self.sides]
        return None if None in costs else float(sum(costs))


def power(design: Design, diff: float, confidence: float) -> float:
    """The chance the test calls a true difference ``diff`` "better" (NaN where no test can be made)."""
    df, se = design.df, design.se
    if not df or not se:
        return float("nan")
    t = stats.t.ppf(1 - (1 - confidence) / 2, df)
    return float(stats.nct.sf(t, df, diff / se))


def detectable(design: Design, confidence: float) -> float | None:
    """The smallest true difference detected with ``POWER`` (None: no test, or beyond 10,000 standard errors)."""
    se = design.se
    if not design.df or not se:
        return None
    hi = se
    while power(design, hi, confidence) < POWER:
        hi *= 2
        if hi > 1e4 * se:
            return None
    return float(optimize.brentq(lambda d: power(design, d, confidence) - POWER, 0.0, hi, xtol=1e-10))


def floor(design: Design, confidence: float) -> float:
    """The detectable difference with unlimited runs and seeds: what test sampling alone leaves (normal limit)."""
    return float((stats.norm.ppf(1 - (1 - confidence) / 2) + stats.norm.ppf(POWER))
                 * math.sqrt(sum(s.var_test for s in design.sides)))


def binomial_sd(p: float, n: int) -> float:
    """The sd of an accuracy ``p`` read on ``n`` test examples: test sampling alone, in the accuracy's units."""
    return math.sqrt(p * (1 - p) / n)


def sampling_sd(metric: str, p: float, n: int | None) -> tuple[float | None, str | None]:
    """(σt, None), or (None, why it is not known)."""
    if metric.split("_")[-1] not in PROPORTIONS:
        return None, f"{metric} is not a share of test examples, so the binomial sd does not apply"
    if not n:
        return None, "the fine-tuning metrics do not give the test split's size"
    return binomial_sd(p, n), None


def by_run(runs: list[dict], mode: str, metric: str) -> dict[int, list[float]]:
    """``mode``'s scores on each pretraining run (by its seed), in seed order: the groups of the ANOVA."""
    out: dict[int, list[float]] = {}
    for r in runs:
        for x in r["finetune"]["modes"].get(mode, {}).get("runs", []):
            out.setdefault(x.get("pretrain_seed", 0), []).append(x[metric])
    return out


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
    mode, in words, and (pooled) the family's other variants, which add to the pooled spread."""

    comparison: str
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
                out.append(Plan("pretraining variant", "pooled", ref.name, row.name, rows, others))
            else:
                test = choose_test("mode", row.name, ref.name)
                out.append(Plan(f"{mode_label(row.name)} vs {mode_label(ref.name)}", test, ref.name, row.name, rows))
    return out


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
        return Design("pooled", tuple(sides), other)
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
                                      pretrain_seconds(base), None if None in seconds else sum(seconds)),))
    return Design("welch", tuple(mode_side(base, m, g, metric) for m, g in ((plan.ref, a), (plan.row, b))))


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
        return Side(len(values), 1, 0.0, var, sampling_var(metric, groups, runs), 0.0, finetune_seconds(runs, mode))
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

    out = [option(AS_RUN, d), option(RUNS, d.scaled(runs=2), d.cost(runs=2)),
           option(SEEDS, d.scaled(seeds=2), d.cost(seeds=2))]
    if any(s.var_test for s in d.sides):
        out.append(option(TEST, d.scaled(test=2), examples=test_examples))
    reaches = [o for o in out if o.detectable is not None and o.detectable <= target]
    if not reaches:  # more runs than twice: the fewest multiple that reaches the target
        found = next((r for r in range(3, MAX_SCALE + 1) if (x := detectable(d.scaled(runs=r), confidence))
                      is not None and x <= target), None)
        if found:
            out.append(option(f"{found}x runs", d.scaled(runs=found), d.cost(runs=found)))
            reaches = out[-1:]
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
    base = score(base_runs, mode, metric, confidence)
    k, m = len(groups), max(map(len, groups.values()))
    sd_p, sd_f = variance_components(list(groups.values()))
    ft = base_runs[0]["finetune"]
    n_test = ft.get("test_questions", ft.get("test_examples"))
    sd_t, why = sampling_sd(metric, base.mean, n_test)
    designs = []
    if k > 1:  # one pretraining run shows no pretraining luck: nothing to size
        found: dict[tuple, tuple[Design, list[Plan]]] = {}
        for p in plan:
            d = design(p, variants, mode, metric, (sd_p ** 2, sd_f ** 2, (sd_t or 0.0) ** 2))
            if d is not None:  # variants of one design (runs, seeds, pooled spread) share one line
                key = (p.comparison, d.test, tuple((s.runs, s.seeds) for s in d.sides), d.other_df) \
                    if d.test == "pooled" else (p,)
                found.setdefault(key, (d, []))[1].append(p)
        for d, ps in found.values():
            opts, cheapest = options(d, confidence, target, n_test)
            designs.append(NoiseDesign(comparison=ps[0].comparison, test=d.test, rows=[p.rows for p in ps],
                                       runs=[s.runs for s in d.sides], seeds=[s.seeds for s in d.sides],
                                       df=round(d.df, 2) if d.df else None, se=round(d.se, 6),
                                       floor=round(floor(d, confidence), 6), options=opts, cheapest=cheapest))
    return TaskNoise(task=ft["task"], metric=metric, score=base.mean, runs=k, seeds=m,
                     sd_pretrain=round(sd_p, 6) if k > 1 else None, sd_finetune=round(sd_f, 6) if m > 1 else None,
                     sd_test=None if sd_t is None else round(sd_t, 6), test_examples=n_test or None,
                     pretrain_seconds=pretrain_seconds(base_runs), finetune_seconds=finetune_seconds(base_runs, mode),
                     target=target, designs=designs, no_sd_test=why)


def grid_noise(res: AblationResults, runs: dict, confidence: float, target: float = TARGET) -> list[TaskNoise]:
    """Every task of the grid (a suite's, each on its first column's metric; else the one task): its noise and
    what would cut it, for the comparisons ``res``'s families make."""
    columns = res.suite["columns"] if res.suite else [{"task": None, "metric": res.metric}]
    tasks: dict = {}
    for col in columns:
        tasks.setdefault(col["task"], col["metric"])
    plan = plans(res.families)
    found = (task_noise(by_variant(load_runs(runs, task)), plan, res.variant_modes[0], metric, confidence, target)
             for task, metric in tasks.items())
    return [t for t in found if t]


# -- the section: its text, tables and figure

def duration(seconds: float) -> str:
    """Machine time as the tables write it: minutes up to 90, hours up to two days, then days."""
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h" if seconds < 48 * 3600 else f"{seconds / 86400:.1f} days"


def amount(metric: str, value: float) -> str:
    """A difference or an sd in words: points of a share, else the metric's own units."""
    return f"{fmt(metric, value)}{' points' if percent(metric) else ''}"


def option_cell(d: NoiseDesign, change: str, metric: str) -> str:
    """What ``d`` detects with ``change``, and what the change adds: machine time, or test examples."""
    o = next((o for o in d.options if o.change == change), None)
    if o is None:
        return "—"
    if o.detectable is None:
        return "no test"
    added = f" (+{duration(o.seconds)})" if o.seconds is not None else \
        f" (+{o.examples:,} examples)" if o.examples else ""
    return fmt(metric, o.detectable) + added


def cheapest_text(d: NoiseDesign, metric: str) -> str:
    """The cheapest change that reaches the target, or why none does."""
    if d.cheapest is None:
        held = f"; test sampling alone keeps it above {amount(metric, d.floor)}" if d.floor else ""
        return f"nothing up to {MAX_SCALE}x the runs{held}"
    return d.cheapest if d.cheapest == AS_RUN else f"{d.cheapest}: {option_cell(d, d.cheapest, metric)}"


def shares(t: TaskNoise) -> list[float] | None:
    """Each kind's share of the variance of the baseline's mean: pretraining, fine-tuning, test sampling."""
    parts = [(t.sd_pretrain or 0.0) ** 2 / t.runs, (t.sd_finetune or 0.0) ** 2 / (t.runs * t.seeds),
             (t.sd_test or 0.0) ** 2]
    return [p / sum(parts) for p in parts] if sum(parts) else None


def components_row(t: TaskNoise) -> list[str]:
    """A task's line of the noise table: the baseline's runs and score, each sd, their shares of its variance."""
    def sd(value: float | None, why: str) -> str:
        return fmt(t.metric, value) if value is not None else f"— ({why})"

    share = shares(t)
    sampled = sd(t.sd_test, t.no_sd_test or "") + (f" ({t.test_examples:,} examples)" if t.sd_test else "")
    return [t.task, f"{t.runs} x {t.seeds}", fmt(t.metric, t.score), sd(t.sd_pretrain, "one pretraining run"),
            sd(t.sd_finetune, "one seed"), sampled, " / ".join(f"{100 * x:.0f}%" for x in share) if share else "—"]


def design_row(t: TaskNoise, d: NoiseDesign) -> list[str]:
    """A comparison's line: its rows, runs per side, what it detects as run and with each change, the cheapest."""
    runs = " vs ".join(f"{r} x {s}" for r, s in zip(d.runs, d.seeds)) + (", paired" if d.test == "paired" else "")
    return [t.task, f"{d.comparison}: {'; '.join(d.rows)}", runs,
            *(option_cell(d, c, t.metric) for c in (AS_RUN, RUNS, SEEDS, TEST)), cheapest_text(d, t.metric)]


def noise_figure(tasks: list[TaskNoise]):
    """Per task: the three sds of one score side by side; and what its first comparison detects as run and with
    each change, against the target (a named dashed line). Bars from zero: an sd and a difference have a true
    origin. A kind not measured, or a change that makes no test, draws no bar."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 2.2 + 0.8 * len(tasks)))
    y = np.arange(len(tasks))
    kinds = [("pretraining luck", "sd_pretrain"), ("fine-tuning luck", "sd_finetune"), ("test sampling", "sd_test")]
    for i, (label, key) in enumerate(kinds):
        left.barh(y + (i - 1) * 0.25, [100 * (getattr(t, key) or 0.0) for t in tasks], 0.25, color=COLORS[i],
                  label=label)
    left.set_yticks(y, [t.task for t in tasks])
    left.set(xlabel="sd of one score, points (% or correlation x 100)", title="Each kind of noise")
    for i, change in enumerate((AS_RUN, RUNS, SEEDS, TEST)):
        found = [next((o.detectable for o in t.designs[0].options if o.change == change), None)
                 if t.designs else None for t in tasks]
        right.barh(y + (i - 1.5) * 0.2, [100 * (v or 0.0) for v in found], 0.2, color=COLORS[3 + i], label=change)
    target = 100 * tasks[0].target
    right.axvline(target, **REFERENCE, label=f"target: {target:g} points")
    right.set_yticks(y, [f"{t.task}: {t.designs[0].comparison}" if t.designs else t.task for t in tasks], fontsize=8)
    right.set(xlabel="true difference detected with 80% power, points", title="What each change would detect")
    for ax in (left, right):
        ax.invert_yaxis()
        ax.grid(axis="x", alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3, frameon=False)
    fig.tight_layout()
    return fig


def model_text(confidence: float) -> str:
    """How the section's numbers are made, and what they assume."""
    return ("A score's noise has three parts, each measured on each task: pretraining luck (the sd of a pretraining "
            "run's own score) and fine-tuning luck (of one fine-tuning run around it), by a one-way ANOVA of the "
            "baseline's fine-tuned runs grouped by pretraining run, in the grid's first mode; and test sampling, the "
            "binomial sd sqrt(p(1 − p)/n) of an accuracy p read on the test split's n examples. A row of k "
            "pretraining runs with m fine-tuning seeds each has a mean of variance σp²/k + σf²/(k·m) + σt², "
            "assuming normal luck, one spread for every row (as the pooled test does), and test sampling "
            "independent per row -- conservative, since rows read on the same test split share most of it. "
            "Detected: the smallest true difference a t-test with that standard error calls better with 80% power "
            f"at {round(100 * confidence)}% confidence, at the degrees of freedom of the comparison's own test "
            "(without test sampling, Method's simulated number). What a change adds: machine time at this grid's "
            "measured times (pretraining the added runs and fine-tuning them in the compared modes on that task; "
            "the choice on dev is not repeated), or labelled test examples.")


def task_text(t: TaskNoise) -> str:
    """A task's noise and its first comparison in a sentence."""
    share = shares(t)
    parts = (f"at {t.runs} x {t.seeds} runs the baseline mean's variance is {100 * share[0]:.0f}% pretraining luck, "
             f"{100 * share[1]:.0f}% fine-tuning luck and {100 * share[2]:.0f}% test sampling") if share else \
        "no noise measured"
    if not t.designs:
        return f"{t.task}: {parts}; one pretraining run of the baseline leaves no comparison to size."
    d = t.designs[0]
    now = d.options[0].detectable
    detects = f"detects {amount(t.metric, now)}" if now is not None else "makes no test"
    return (f"{t.task}: {parts}. As run, the {d.comparison} comparison ({'; '.join(d.rows)}) {detects}; to "
            f"detect {amount(t.metric, t.target)}: {cheapest_text(d, t.metric)}.")


def noise_section(doc, res: AblationResults) -> None:
    """Each task's noise, what each comparison detects, and the cheapest way to the target; ``doc``: the report's
    writer (``render.Doc``)."""
    tasks = res.noise
    if not tasks:
        return
    doc.heading("How much noise, and what would cut it")
    doc.para(model_text(res.method.confidence), cls="note")
    doc.table(["task", "baseline runs (pretraining x fine-tuning)", "baseline score", "pretraining luck sd",
               "fine-tuning luck sd", "test sampling sd", "share of the baseline mean's variance (pretraining / "
               "fine-tuning / test)"], [components_row(t) for t in tasks],
              caption="Each task's noise, measured on the baseline (points for a share, else the metric's units)")
    doc.table(["task", "comparison", "runs per side (units x seeds)", "detects as run", RUNS, SEEDS, TEST,
               f"cheapest to detect {amount(tasks[0].metric, tasks[0].target)}"],
              [design_row(t, d) for t in tasks for d in t.designs],
              caption="The true difference each comparison detects with 80% power as run, and with twice the "
                      "pretraining runs on each side, twice the fine-tuning seeds or twice the test examples (what "
                      "each adds in brackets); from scratch, each fine-tuning run is a unit")
    doc.figure("noise.png", noise_figure(tasks), "each task's noise, and what its first comparison would detect")
    doc.bullets([task_text(t) for t in tasks])
