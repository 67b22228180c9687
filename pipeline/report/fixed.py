"""Each pretraining row on the fixed evaluation set: its score, its verdicts, the floors and where it crosses them.

The fixed set (``pipeline.data.eval_set``) is the same task for every row, so
this is where pretraining variants are compared on what pretraining itself
learned, with the pretraining run as the unit: a row's number is the mean over
its runs of the accuracy at the masked positions (``fixed/acc_masked``), rows
are tested against the family's reference by the same pooled t-test as the
downstream scores, and against each count-based floor (a deterministic number)
by a one-sample t-test. The learning curves (``plots/pretrain_fixed.csv``, one
point per validation) give where each run first crossed each floor, in steps,
tokens, seconds and FLOPs (linear interpolation between validations).
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
from scipy import stats as scipy_stats

from pipeline.data.ngram import FLOORS, FLOORS_OF
from pipeline.report.model import BaselineCheck, Comparison, Crossing, Floor, Interval, Row, reference_of
from pipeline.report.stats import compare, pooled_variance

HEADLINE = "fixed/acc_masked"
AXES = ("step", "tokens", "seconds", "flops")  # what a crossing is measured in


def units(pres: list[dict]) -> list[float]:
    """Each pretraining run's accuracy at the fixed set's masked positions (runs without the set are skipped)."""
    return [float(p[HEADLINE]) for p in pres if p.get(HEADLINE) is not None]


def interval(values: list[float], confidence: float, pooled: tuple[float, int] | None = None) -> Interval | None:
    """Mean, spread and the t-interval of the mean; with ``pooled`` (variance, df) the family's pooled spread."""
    if not values:
        return None
    n, mean = len(values), float(np.mean(values))
    sd = float(np.std(values, ddof=1)) if n > 1 else 0.0
    var, df = pooled if pooled and pooled[1] else (sd ** 2, n - 1)
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, df) * math.sqrt(var / n)) if df else None
    return Interval(mean=round(mean, 6), std=round(sd, 6), low=None if half is None else round(mean - half, 6),
                    high=None if half is None else round(mean + half, 6), units=[round(v, 6) for v in values])


def floor_names(lms: list[str]) -> list[str]:
    """The floors beside a family whose rows are language models of kinds ``lms`` (metric prefixes), in order."""
    return list(dict.fromkeys(name for lm in lms for name in FLOORS_OF.get(lm, ())))


def add_to_family(rows: list[Row], floors: dict[str, dict], previous: bool, confidence: float,
                  first: str | None = None) -> list[Floor]:
    """Each pretraining row's fixed-set score (``row.fixed``) and its test against the reference row (the first,
    or the one above in a lineage: ``row.vs_fixed``), with the spread pooled over the family's rows; and the
    floors that apply to the family's rows, each with its accuracy (returned, weakest first). In a lineage,
    ``first`` names the floor that is its first generation (the n-gram LM): the first row is tested against it."""
    ran = [row for row in rows if row.ran and row.kind == "variant" and units_of(row)]
    pooled = pooled_variance([units_of(row) for row in ran])
    for row in ran:
        row.fixed = interval(units_of(row), confidence, pooled)
        row.fixed_kinds = {"replaced": row.pretrain.fixed_replaced, "unchanged": row.pretrain.fixed_unchanged,
                           "loss": row.pretrain.fixed_loss}
    for i, row in enumerate(ran):
        other = reference_of(ran, i, previous)
        row.vs_fixed_row = other.label if other else None
        row.vs_fixed = compare(units_of(row), units_of(other), test="pooled", pooled=pooled,
                               confidence=confidence) if other else None
        if other is None and previous and first in floors:
            row.vs_fixed_row = f"n-gram ({FLOORS[first].label})"
            row.vs_fixed = compare(units_of(row), [floors[first]["masked"]], test="fixed", confidence=confidence)
        row.vs_floors = {name: compare(units_of(row), [floors[name]["masked"]], test="fixed", confidence=confidence)
                         for name in FLOORS_OF.get(row.pretrain.lm, ()) if name in floors}
    return [listing(n, floors) for n in floor_names([row.pretrain.lm for row in ran]) if n in floors]


def listing(name: str, floors: dict[str, dict]) -> Floor:
    """A floor as the report shows it: its name, label, short label, view and accuracy at the masked positions."""
    f = FLOORS[name]
    return Floor(name=name, label=f.label, short=f.short, view=f.view, accuracy=floors[name]["masked"])


def units_of(row: Row) -> list[float]:
    return row.pretrain.fixed_units or []


def read_curve(plots: str | Path | None) -> list[dict[str, float]]:
    """A run's fixed-set curve: one dict per validation (``step``, ``acc_masked``, ``tokens``, ...)."""
    path = Path(plots or "") / "pretrain_fixed.csv"
    if not plots or not path.exists():
        return []
    with path.open(newline="") as f:
        rows = [{k: float(v) for k, v in row.items() if v not in (None, "")} for row in csv.DictReader(f)]
    return [r for r in rows if "acc_masked" in r]


def crossing(curve: list[dict[str, float]], level: float) -> dict[str, float] | None:
    """Where a curve first rises above ``level``: each axis of ``AXES`` interpolated between the two validations
    around it (the first validation itself if it is already above); None if it never does."""
    prev = None
    for point in curve:
        if point["acc_masked"] > level:
            if prev is None or point["acc_masked"] == prev["acc_masked"]:
                return {a: point.get(a) for a in AXES}
            w = (level - prev["acc_masked"]) / (point["acc_masked"] - prev["acc_masked"])
            return {a: None if a not in point or a not in prev else prev[a] + w * (point[a] - prev[a]) for a in AXES}
        prev = point
    return None


def crossings(plots: list[str | None], floors: list[Floor]) -> dict[str, Crossing]:
    """For each floor: how many of the runs crossed it, and the mean over those of where (``AXES``)."""
    curves = [read_curve(p) for p in plots]
    out = {}
    for floor in floors:
        hits = [c for c in (crossing(curve, floor.accuracy) for curve in curves if curve) if c]
        out[floor.name] = Crossing(runs=sum(1 for c in curves if c), crossed=len(hits),
                                   **{a: round(float(np.mean([h[a] for h in hits])), 3) if hits and
                                      all(h[a] is not None for h in hits) else None for a in AXES})
    return out


def baseline_check(pres: list[dict], plots: list[str | None], floors: dict[str, dict],
                   confidence: float) -> BaselineCheck | None:
    """The baseline against its floors: its fixed-set score, a test against each floor, where its runs crossed
    them, and ``learned``: whether it beats the bigram floor (the report says so before any ablation)."""
    values = units(pres)
    if not values or not floors:
        return None
    lm = pres[0]["lm"]
    names = [n for n in FLOORS_OF.get(lm, ()) if n in floors]
    listed = [listing(n, floors) for n in names]
    vs_floors = {n: compare(values, [floors[n]["masked"]], test="fixed", confidence=confidence) for n in names}
    bigram = names[1] if len(names) > 1 else None  # the first floor that reads context: left neighbour
    return BaselineCheck(lm=lm, fixed=interval(values, confidence), floors=listed, vs_floors=vs_floors,
                         crossings=crossings(plots, listed), bigram=bigram,
                         learned=bool(bigram and vs_floors[bigram].verdict == "better"))


def mean_curve(plots: list[str | None], key: str = "acc_masked") -> list[dict[str, float]]:
    """The runs' fixed-set curves averaged at each validation step every run has (``key``: the masked pieces'
    accuracy, or ``nsp_acc``; tokens, FLOPs); empty where a run's curve lacks ``key``."""
    curves = [{p["step"]: p for p in read_curve(x)} for x in plots]
    curves = [c for c in curves if c]
    if not curves or any(key not in p for c in curves for p in c.values()):
        return []
    steps = sorted(set.intersection(*(set(c) for c in curves)))
    return [{k: float(np.mean([c[s][k] for c in curves])) for k in ("step", key, "tokens", "flops")
             if all(k in c[s] for c in curves)} for s in steps]


def last_values(plots: list[str | None], key: str) -> list[float]:
    """Each run's ``key`` at its curve's last validation (the fixed set after training); runs without it skipped."""
    return [c[-1][key] for c in (read_curve(p) for p in plots) if c and key in c[-1]]


def learned_nsp(plots: list[str | None], base_rate: float, confidence: float) -> bool:
    """Whether the runs' NSP head left its base rate (always the commoner label) on the fixed set's pairs: each
    run's accuracy there after training, tested against it."""
    values = last_values(plots, "nsp_acc")
    return bool(values) and compare(values, [base_rate], test="fixed", confidence=confidence).verdict == "better"


def passing_nsp(row: list[str | None], ref: list[str | None], base_rate: float | None,
                confidence: float) -> tuple[dict | None, Comparison | None]:
    """``passing`` on the NSP head's curve, and its accuracy after training tested run against run (Welch's);
    (None, None) where neither side's head left its base rate: a head at it on both sides has nothing to pass."""
    if base_rate is None or not any(learned_nsp(p, base_rate, confidence) for p in (row, ref)):
        return None, None
    passes = passing(row, ref, key="nsp_acc")
    if not passes:
        return None, None
    return passes, compare(last_values(row, "nsp_acc"), last_values(ref, "nsp_acc"), test="welch",
                           confidence=confidence)


def _stays_above(points: list[tuple[float, float]]) -> float | None:
    """The first x from which the gaps ``(x, gap)`` stay above zero to the end; None if the last is not."""
    first = None
    for x, gap in points:
        first = (first if first is not None else x) if gap > 0 else None
    return first


def passing(row: list[str | None], ref: list[str | None], key: str = "acc_masked") -> dict | None:
    """Where a row's fixed-set curve passes its reference's for good (the mean over each side's runs), in both
    framings: at the same steps (and so tokens), and at the same training FLOPs (the reference's curve
    interpolated at the row's FLOPs, over the budget both spent). Each: the step / tokens / FLOPs from which the
    row stays above, or None with the last gap (points) and the span looked at. ``key``: the curve read, the
    masked pieces' accuracy or the NSP head's on the set's pairs (``nsp_acc``)."""
    a, b = mean_curve(row, key), mean_curve(ref, key)
    if not a or not b:
        return None
    at = {p["step"]: p for p in b}
    same = [(p["step"], 100 * (p[key] - at[p["step"]][key])) for p in a if p["step"] in at]
    out: dict = {}
    if same:
        step, last = _stays_above(same), same[-1][0]
        tokens = {p["step"]: p.get("tokens") for p in a}
        out["steps"] = {"step": step, "tokens": tokens.get(step), "last_gap": round(same[-1][1], 2),
                        "until_step": last, "until_tokens": tokens[last]}
    if all("flops" in p for p in a + b):
        xs, ys = [p["flops"] for p in b], [p[key] for p in b]
        equal = [(p["flops"], 100 * (p[key] - float(np.interp(p["flops"], xs, ys))))
                 for p in a if xs[0] <= p["flops"] <= xs[-1]]
        if equal:
            out["flops"] = {"flops": _stays_above(equal), "last_gap": round(equal[-1][1], 2),
                            "until_flops": equal[-1][0]}
        else:  # the row's first validation already spent more than the reference's whole budget
            out["flops"] = {"flops": None, "last_gap": None, "until_flops": xs[-1]}
    return out or None
