"""How much noise, and what would cut it: each task's three kinds of luck and what each comparison of the grid
detects with 80% power, as run and with twice the pretraining runs, the fine-tuning seeds or the test examples, with
what each change costs (``pipeline.report.noise``'s numbers). Its tables, its figure and its text (``model_text``
states the assumptions).
"""
from __future__ import annotations

import numpy as np

from pipeline.report.cells import fmt, percent
from pipeline.report.doc import Doc, Sources
from pipeline.report.model import AblationResults
from pipeline.report.noise import AS_RUN, MAX_SCALE, RUNS, SEEDS, TEST, NoiseDesign, Spread, TaskNoise
from pipeline.report.style import COLORS, REFERENCE, plt


def write(doc: Doc, src: Sources) -> None:
    noise_section(doc, src.res)

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


def spread_cell(metric: str, s: Spread) -> str:
    """Fine-tuning luck with what bounds it: the sd, its interval and its degrees of freedom."""
    return f"{fmt(metric, s.sd)} [{fmt(metric, s.low)}, {fmt(metric, s.high)}] ({s.df} df)"


def components_row(t: TaskNoise) -> list[str]:
    """A task's line of the noise table: the baseline's runs and score, each sd (fine-tuning luck's with its
    interval, and pooled over every row where that adds runs), their shares of its variance."""
    def sd(value: float | None, why: str) -> str:
        return fmt(t.metric, value) if value is not None else f"— ({why})"

    share = shares(t)
    sampled = sd(t.sd_test, t.no_sd_test or "") + (f" ({t.test_examples:,} examples)" if t.sd_test else "")
    tuned = spread_cell(t.metric, t.finetune_spread) if t.finetune_spread else sd(t.sd_finetune, "one seed")
    pooled = spread_cell(t.metric, t.finetune_pooled) + f", {t.finetune_pooled.runs} runs of " \
        f"{len(t.finetune_pooled.rows)} rows" if t.finetune_pooled else "—"
    return [t.task, f"{t.runs} x {t.seeds}", fmt(t.metric, t.score), sd(t.sd_pretrain, "one pretraining run"),
            tuned, pooled, sampled, " / ".join(f"{100 * x:.0f}%" for x in share) if share else "—"]


def design_row(t: TaskNoise, d: NoiseDesign, own_target: bool = False) -> list[str]:
    """A comparison's line: its rows, runs per side, what it detects as run and with each change, the cheapest
    (after the task's target where the tasks' targets differ, ``own_target``)."""
    runs = " vs ".join(f"{r} x {s}" for r, s in zip(d.runs, d.seeds)) + (", paired" if d.test == "paired" else "")
    sampled = f"{fmt(t.metric, d.sd_test)} ({'from the outcomes' if d.test_from == 'outcomes' else 'each row'})" \
        if d.sd_test else "—"
    return [t.task, f"{d.comparison}: {'; '.join(d.rows)}", runs, sampled,
            *(option_cell(d, c, t.metric) for c in (AS_RUN, RUNS, SEEDS, TEST)),
            (f"{amount(t.metric, t.target)}: " if own_target else "") + cheapest_text(d, t.metric)]


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
    for i, t in enumerate(tasks):  # each task's own target, across its bars
        right.vlines(100 * t.target, i - 0.45, i + 0.45, **REFERENCE, zorder=3,  # over the bars
                     label="target" if i == 0 else None)
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
            "assuming normal luck and one spread for every row (as the pooled test does). Two rows are read on the "
            "same test examples, so their difference's test sampling is not the two rows' σt² summed: where the "
            "runs record each test example's outcome (a classifier's accuracy), it is the variance over examples "
            "of the two rows' per-example mean outcomes' difference, over n (it keeps the runs' own luck as it "
            "fell, so it overstates pure test sampling a little); elsewhere each row's σt² counts independently, "
            "which overstates it more. "
            "Detected: the smallest true difference a t-test with that standard error calls better with 80% power "
            f"at {round(100 * confidence)}% confidence, at the degrees of freedom of the comparison's own test "
            "(without test sampling, Method's simulated number). Fine-tuning luck is pooled within pretraining "
            "runs and bounded by its chi-square interval at its degrees of freedom (each run's seeds less one): "
            "at 3, the interval's upper end is 3.7 times the estimate at 95%. Where other rows ran two seeds or "
            "more, it is pooled over theirs too, a sharper estimate under the same one-spread assumption (the "
            "designs are sized on the baseline's own). What a change adds: machine time at this grid's "
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


def noise_section(doc: Doc, res: AblationResults) -> None:
    """Each task's noise, what each comparison detects, and the cheapest way to the target."""
    tasks = res.noise
    if not tasks:
        return
    doc.heading("How much noise, and what would cut it")
    doc.para(model_text(res.method.confidence), cls="note")
    conf = f"{round(100 * res.method.confidence)}%"
    own = len({t.target for t in tasks}) > 1  # the tasks' targets differ: each row names its own
    doc.table(["task", "baseline runs (pretraining x fine-tuning)", "baseline score", "pretraining luck sd",
               f"fine-tuning luck sd [{conf} interval]", "fine-tuning luck pooled over every row's runs",
               "test sampling sd", "share of the baseline mean's variance (pretraining / "
               "fine-tuning / test)"], [components_row(t) for t in tasks],
              caption="Each task's noise, measured on the baseline (points for a share, else the metric's units)")
    doc.table(["task", "comparison", "runs per side (units x seeds)", "test sampling sd of the difference",
               "detects as run", RUNS, SEEDS, TEST,
               "the task's target: cheapest to detect it" if own else
               f"cheapest to detect {amount(tasks[0].metric, tasks[0].target)}"],
              [design_row(t, d, own) for t in tasks for d in t.designs],
              caption="The true difference each comparison detects with 80% power as run, and with twice the "
                      "pretraining runs on each side, twice the fine-tuning seeds or twice the test examples (what "
                      "each adds in brackets); from scratch, each fine-tuning run is a unit")
    doc.figure("noise.png", noise_figure(tasks), "each task's noise, and what its first comparison would detect")
    doc.bullets([task_text(t) for t in tasks])
