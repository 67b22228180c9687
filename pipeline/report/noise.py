"""How much noise, and what would cut it: the report's section. Each task's three kinds of luck, measured, and the
true difference each comparison of the grid detects with 80% power, as run and with twice the pretraining runs, the
fine-tuning seeds or the test examples, with what each change costs at the grid's measured times.

Pretraining luck (sd σp) and fine-tuning luck (σf) come from a one-way ANOVA of the baseline's fine-tuned runs grouped
by pretraining run (``stats.variance_components``); test sampling (σt) is ``power.sampling_sd``. This module reads the
runs into each comparison's design, sizes each change with ``power``'s maths, and writes the section: its tables, its
figure and its text (``model_text`` states the assumptions).
"""
from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np

from pipeline.names import CLASSICAL, SEED_FREE
from pipeline.report.figures import COLORS, REFERENCE
from pipeline.report.model import AblationResults, FamilyResult, NoiseDesign, NoiseOption, TaskNoise
from pipeline.report.power import Design, Side, detectable, floor, sampling_sd
from pipeline.report.results import BASELINE, by_variant, choose_test, fmt, load_runs, percent
from pipeline.report.stats import variance_components

TARGET = 0.10  # the difference each comparison should detect with 80% power, in the metric's units (10 points of
# accuracy): a third of what the demo's word_order noise lets it detect (29 points), within reach of more runs
MAX_SCALE = 64  # the most runs per side searched for the target, as a multiple of the runs as run
AS_RUN, RUNS, SEEDS, TEST = "as run", "2x pretraining runs", "2x fine-tuning seeds", "2x test examples"
COMPARISONS = {"pooled": "pretraining variants", "paired": "fine-tuning modes of the same runs",
               "welch": "pretrained and from scratch"}  # each test's comparisons in words, in the tables' order


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
    if any(s.var_test for s in d.sides):
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
    return TaskNoise(task=ft["task"], metric=metric, score=round(mean, 6), runs=k, seeds=m,
                     sd_pretrain=round(sd_p, 6) if k > 1 else None, sd_finetune=round(sd_f, 6) if m > 1 else None,
                     sd_test=None if sd_t is None else round(sd_t, 6), test_examples=n_test or None,
                     pretrain_seconds=seconds[0], finetune_seconds=seconds[1], target=target, designs=designs,
                     no_sd_test=why)


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
            found.setdefault(key, (d, []))[1].append(p)
    out = []
    for d, ps in found.values():
        opts, cheapest = options(d, confidence, target, n_test)
        out.append(NoiseDesign(comparison=COMPARISONS[d.test], test=d.test, rows=[p.rows for p in ps],
                               runs=[s.runs for s in d.sides], seeds=[s.seeds for s in d.sides],
                               df=d.df or None, se=round(d.se, 6),
                               floor=round(floor(d, confidence), 6), options=opts, cheapest=cheapest))
    return out


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
    """Machine time as the tables write it: seconds, minutes up to 90, hours up to two days, then days."""
    if seconds < 90:
        return f"{seconds:.0f} s"
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
    return (f"{t.task}: {parts}. Between {d.comparison} ({'; '.join(d.rows)}) the grid {detects} as run; to "
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
