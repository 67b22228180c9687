"""Is a difference real, or the luck of the seeds? The tests behind every verdict of the report.

A score comes from two random draws: the pretraining run (its seed: initial
weights, data order, masks) and the fine-tuning run (head initialisation,
dropout, batch order). Runs of the same pretraining share the first draw, so
they are not independent: the unit of comparison is the pretraining run, and
its value is the mean over its fine-tuning seeds (``unit_means``). Fine-tuning
seeds are the same for every pretraining run (paired), so shared noise partly
cancels in the means.

* Two pretraining variants: a t-test on their per-run means, the variance of a
  run mean pooled over every row of the family (one-way ANOVA's error term: the
  rows are assumed to share one pretraining-plus-fine-tuning spread, which lets
  a family with few runs per row still estimate it).
* Two fine-tuning modes of the same pretraining runs (fine-tuned vs frozen
  features): a paired t-test on the per-run differences.
* A pretrained model against training from scratch: Welch's t-test (the
  from-scratch side has no pretraining behind it; each of its runs is a unit).
* Against a deterministic side (the TF-IDF baseline): a one-sample t-test of the
  other side's means against that number.

No test can estimate pretraining luck from one run per row: such a comparison is
"inconclusive (one run each)", never better or worse. Otherwise the verdict is
"better" or "worse" when the ``confidence`` interval of the difference excludes
zero (p < 1 - confidence), else "inconclusive", with a rough count of the
pretraining runs per side that would decide it. A verdict whose p-value lies
between a fifth of the threshold and twice it (0.01 <= p < 0.10 at 95%) is
marked borderline: another machine's floating-point noise can move it between
"better" and "inconclusive", never to "worse". ``simulate`` measures the false
positive rate and the power of the pooled test under a known truth.

With a practical ``margin`` (a claim's, from ``claims.yaml``) a fourth verdict,
"level": two one-sided tests (TOST, Lakens 2017) at the same alpha, that is the
(1 - 2 alpha) interval (90% at 95%) inside (-margin, +margin). Level comes first:
a difference inside the margin is level even where it is beyond noise (a real
difference too small to matter); then better or worse; else inconclusive, with
the runs per side that would show it level where the difference is smaller than
the margin.

Where every run on both sides scored the same, no spread between runs is
measured, and a t-test has nothing to scale by: without ``floor_n`` such a
comparison is "inconclusive (no spread between runs)". With ``floor_n`` (the
examples each run was scored on) the floor is the binomial test-sampling
variance p(1 - p) / n of a side's score, not shrunk by the number of runs (runs
scored on the same examples share that draw), and the test is a normal one.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Sequence

import numpy as np
from scipy import stats

from pipeline.report.model import Comparison
from pipeline.settings import CONFIDENCE

VERDICTS = ("better", "worse", "level", "inconclusive")
ONE_RUN = "inconclusive (one run each)"
NO_SPREAD = "inconclusive (no spread between runs)"
TINY = 1e-12  # a standard error below this is the float rounding of identical scores' mean, not spread
FLOORED = "; no spread between runs: "  # how a test's words say the binomial floor stood in for the spread


def unit_means(runs: Sequence[dict], metric: str, unit_key: str = "pretrain_seed") -> list[float]:
    """The mean of ``metric`` over the fine-tuning runs of each pretraining run, in order of first appearance."""
    groups: dict = {}
    for r in runs:
        groups.setdefault(r.get(unit_key, 0), []).append(r[metric])
    return [float(np.mean(v)) for v in groups.values()]


def pooled_variance(groups: Sequence[Sequence[float]]) -> tuple[float, int]:
    """(variance, degrees of freedom) of per-run means pooled over ``groups`` (one-way ANOVA's within-group mean
    square): each group with two or more runs adds its sum of squares and its runs less one."""
    ss = sum(float(np.sum((np.asarray(g) - np.mean(g)) ** 2)) for g in groups if len(g) > 1)
    df = sum(len(g) - 1 for g in groups if len(g) > 1)
    return (ss / df if df else float("nan")), df


TESTS = {
    "pooled": "t-test on per-pretraining-run means, variance pooled over the family's rows",
    "welch": "Welch's t-test on per-run means",
    "paired": "paired t-test over pretraining runs",
    "fixed": "one-sample t-test of per-pretraining-run means against a deterministic baseline",
}


def compare(a: Sequence[float], b: Sequence[float], *, test: str = "welch", confidence: float = 0.95,
            pooled: tuple[float, int] | None = None, runs: tuple[int, int] | None = None,
            margin: float | None = None, floor_n: int | None = None) -> Comparison:
    """``a`` against ``b``: the difference of means, its interval, the p-value and the verdict.

    ``a`` and ``b`` are per-pretraining-run means (``unit_means``). ``test``:
    ``welch`` (two samples, each with its own variance), ``pooled`` (two
    samples, the variance of a run mean estimated over several rows:
    ``pooled=(variance, df)`` from ``pooled_variance``), ``paired`` (the same
    runs, in the same order: two modes of one model) or ``fixed`` (``b`` is one
    deterministic number). ``runs``: the fine-tuning runs behind each side, for the record.
    ``margin``: a practical margin in the metric's units, for the "level" verdict (``with_margin``).
    ``floor_n``: the examples each run was scored on, for the binomial floor where no run differs from another.
    """
    CONFIDENCE.check("report.confidence", confidence)
    if test not in TESTS:
        raise ValueError(f"test={test!r}: expected one of {', '.join(TESTS)}")
    a, b = np.asarray(a, float), np.asarray(b, float)
    alpha = 1 - confidence
    out = Comparison(diff=round(float(a.mean() - b.mean()), 6), n_pretrain=[int(len(a)), int(len(b))],
                     n_finetune=list(runs) if runs else None, test=TESTS[test], confidence=confidence, verdict=ONE_RUN,
                     margin=margin)
    diff = float(a.mean() - b.mean())
    spread = _standard_error(a, b, test, pooled)
    if spread is None:
        return out
    se, df = spread
    one_sample = test in ("paired", "fixed")
    # the sd of one unit, for the runs per side a decision would take
    sd: float | None = se / math.sqrt(1 / len(a) + 1 / len(b)) if not one_sample else se * math.sqrt(len(a))
    if se < TINY:  # every run gave the same score
        if floor_n is None:
            out.verdict = NO_SPREAD
            return out
        se, df, sd = binomial_floor(a, b, one_sample, floor_n), None, None  # more runs would not narrow it
        out.test += f"{FLOORED}the binomial test-sampling variance of {floor_n:,} examples as floor"
    _significance(out, diff, se, df, alpha, sd, one_sample)
    if margin is not None:
        _equivalence(out, diff, se, df, alpha, margin, sd, one_sample)
    return out


def _standard_error(a: np.ndarray, b: np.ndarray, test: str,
                    pooled: tuple[float, int] | None) -> tuple[float, float] | None:
    """(standard error of the difference, degrees of freedom) of ``test``; None where it cannot be estimated."""
    if test == "pooled":
        var, df = pooled if pooled is not None else pooled_variance([a, b])
        return (math.sqrt(var * (1 / len(a) + 1 / len(b))), df) if df else None
    if test == "welch":
        if len(a) < 2 or len(b) < 2:
            return None
        va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
        se = math.sqrt(va + vb)
        return se, ((va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if se >= TINY else 1)
    d = a - b if test == "paired" else a
    return (float(d.std(ddof=1)) / math.sqrt(len(d)), len(d) - 1) if len(d) >= 2 else None


def binomial_floor(a: np.ndarray, b: np.ndarray, one_sample: bool, n: int) -> float:
    """The standard error of the difference from test sampling alone: each side's score a proportion of ``n``
    examples, variance p(1 - p) / n (a deterministic side adds none). Not divided by the runs: runs scored on the
    same examples share that draw. A share of 0 or 1 counts as half an example off it, so the floor is never 0."""
    def variance(p: float) -> float:
        p = min(max(p, 0.5 / n), 1 - 0.5 / n)
        return p * (1 - p) / n

    return math.sqrt(variance(float(a.mean())) + (0.0 if one_sample and len(b) == 1 else variance(float(b.mean()))))


def _quantile(q: float, df: float | None) -> float:
    """The t quantile, or the normal one where ``df`` is None (the binomial floor)."""
    return float(stats.norm.ppf(q) if df is None else stats.t.ppf(q, df))


def _tail(x: float, df: float | None) -> float:
    """P(T > x) for t with ``df`` degrees of freedom, or the normal where ``df`` is None."""
    return float(stats.norm.sf(x) if df is None else stats.t.sf(x, df))


def _near(p: float | None, alpha: float) -> bool:
    """Within a fifth to twice the threshold: where another machine's rounding may move the verdict."""
    return p is not None and alpha / 5 <= p < 2 * alpha


def _significance(out: Comparison, diff: float, se: float, df: float | None, alpha: float, sd: float | None,
                  one_sample: bool) -> None:
    """The two-sided test: interval, p, better / worse / inconclusive, borderline, and the runs that would decide."""
    t = _quantile(1 - alpha / 2, df)
    p = 2 * _tail(abs(diff) / se, df)
    out.low, out.high, out.p = round(diff - t * se, 6), round(diff + t * se, 6), round(p, 6)
    out.df = None if df is None else round(float(df), 2)
    out.verdict = ("better" if diff > 0 else "worse") if p < alpha else "inconclusive"
    out.borderline = _near(p, alpha)
    if out.verdict == "inconclusive" and sd is not None:
        out.seeds_needed = seeds_needed(abs(diff), sd, alpha, one_sided_sample=one_sample)


def _equivalence(out: Comparison, diff: float, se: float, df: float | None, alpha: float, margin: float,
                 sd: float | None, one_sample: bool) -> None:
    """Two one-sided tests of the difference against -``margin`` and +``margin`` at ``alpha``: "level" where both
    reject (the 1 - 2 alpha interval inside the margin), whatever the two-sided test said."""
    if not margin > 0:
        raise ValueError(f"margin={margin!r}: expected a number > 0 in the metric's units")
    t = _quantile(1 - alpha, df)
    p = max(_tail((diff + margin) / se, df), _tail((margin - diff) / se, df))
    out.margin, out.tost_p = margin, round(p, 6)
    out.tost_low, out.tost_high = round(diff - t * se, 6), round(diff + t * se, 6)
    if p < alpha:
        out.verdict, out.seeds_needed = "level", None
        out.borderline = _near(p, alpha)
        return
    out.borderline = out.borderline or _near(p, alpha)
    if out.verdict == "inconclusive" and sd is not None:
        out.seeds_needed_level = seeds_needed_level(diff, sd, margin, alpha, one_sided_sample=one_sample)


def with_margin(c: Comparison, margin: float) -> Comparison:
    """``c`` read against a practical ``margin`` (in the metric's units): a copy with the two one-sided tests and
    the verdict decided again (level first). The standard error is the one behind ``c``'s interval, so any
    comparison the report made (a family's row, a suite's cell, the fixed set's) takes its claim's margin without
    its runs. A comparison without a test (one run each, no spread) only records the margin."""
    out = replace(c, margin=margin)
    if c.low is None or c.high is None:
        return out
    alpha = 1 - c.confidence
    se = (c.high - c.low) / (2 * _quantile(1 - alpha / 2, c.df))
    if se <= 0:
        return out
    kind = next(k for k, words in TESTS.items() if c.test.startswith(words))
    one_sample = kind in ("paired", "fixed")
    floored = FLOORED in c.test  # more runs would not narrow it
    na, nb = c.n_pretrain
    sd = None if floored else se * math.sqrt(na) if one_sample else se / math.sqrt(1 / na + 1 / nb)
    _equivalence(out, c.diff, se, c.df, alpha, margin, sd, one_sample)
    return out


def seeds_needed(diff: float, sd: float, alpha: float = 0.05, power: float = 0.8, one_sided_sample: bool = False,
                 limit: int = 200) -> int | None:
    """Pretraining runs per side for ``power`` at a true difference ``diff`` (None: more than ``limit``).

    Two samples of n with standard deviation ``sd`` (or, ``one_sided_sample``,
    one sample of n differences or values against a fixed number), two-sided
    t-test at level ``alpha``; power from the noncentral t distribution.
    """
    if sd == 0 or diff == 0 or not math.isfinite(sd):
        return None
    for n in range(2, limit + 1):
        df = n - 1 if one_sided_sample else 2 * n - 2
        se = sd / math.sqrt(n) if one_sided_sample else sd * math.sqrt(2 / n)
        t = stats.t.ppf(1 - alpha / 2, df)
        nc = diff / se
        if stats.nct.sf(t, df, nc) + stats.nct.cdf(-t, df, nc) >= power:
            return n
    return None


def seeds_needed_level(diff: float, sd: float, margin: float, alpha: float = 0.05, power: float = 0.8,
                       one_sided_sample: bool = False, limit: int = 200) -> int | None:
    """Pretraining runs per side for the two one-sided tests to show ``diff`` level within ``margin`` with
    ``power`` (None: the difference is not inside the margin, or more than ``limit`` runs).

    The same samples as ``seeds_needed``; power of TOST at a true difference ``diff``, from the noncentral t of
    each one-sided test: P(both reject) >= P(one) + P(other) - 1, the usual bound (exact as power nears 1).
    """
    if sd == 0 or not math.isfinite(sd) or abs(diff) >= margin:
        return None
    for n in range(2, limit + 1):
        df = n - 1 if one_sided_sample else 2 * n - 2
        se = sd / math.sqrt(n) if one_sided_sample else sd * math.sqrt(2 / n)
        t = stats.t.ppf(1 - alpha, df)
        if stats.nct.sf(t, df, (margin + diff) / se) + stats.nct.sf(t, df, (margin - diff) / se) - 1 >= power:
            return n
    return None


def simulate(diff: float, sd_pretrain: float, sd_finetune: float, ks: Sequence[int], m: int, *, sims: int = 20000,
             confidence: float = 0.95, seed: int = 0, margin: float | None = None) -> dict:
    """Verdict rates of the pooled test on ``sims`` simulated families with a known true ``diff``.

    Row ``i`` has ``ks[i]`` pretraining runs, each fine-tuned with ``m`` seeds:
    score = row mean + pretraining luck (sd ``sd_pretrain``) + fine-tuning luck
    (sd ``sd_finetune``). Row 1 is ``diff`` above row 0 (the reference), the
    others equal to it; the variance is pooled over every row, as the report
    pools it over a family. Returns the share of "better", "worse" and "inconclusive";
    with a ``margin``, "level" too, decided first as ``compare`` decides it (the TOST's error rates).
    """
    rng = np.random.default_rng(seed)
    rows = []
    for i, k in enumerate(ks):
        pre = rng.normal(0, sd_pretrain, (sims, k))
        fine = rng.normal(0, sd_finetune, (sims, k, m)).mean(-1)
        rows.append((diff if i == 1 else 0.0) + pre + fine)  # (sims, k) per-pretraining-run means
    ss = sum(((r - r.mean(1, keepdims=True)) ** 2).sum(1) for r in rows if r.shape[1] > 1)
    df = sum(r.shape[1] - 1 for r in rows if r.shape[1] > 1)
    if not df:
        return {"better": 0.0, "worse": 0.0, "inconclusive": 1.0, "sims": sims, **({"level": 0.0} if margin else {})}
    se = np.sqrt(ss / df * (1 / ks[1] + 1 / ks[0]))
    d = rows[1].mean(1) - rows[0].mean(1)
    alpha = 1 - confidence
    level = np.zeros(sims, bool)
    if margin is not None:  # both one-sided tests reject: the (1 - 2 alpha) interval inside the margin
        t = stats.t.ppf(1 - alpha, df)
        level = (d - t * se > -margin) & (d + t * se < margin)
    significant = (2 * stats.t.sf(np.abs(d) / se, df) < alpha) & ~level
    better, worse = significant & (d > 0), significant & (d < 0)
    out = {"better": float(better.mean()), "worse": float(worse.mean()),
           "inconclusive": float(1 - better.mean() - worse.mean()) if margin is None else
           float((~(better | worse | level)).mean()), "sims": sims}
    return {**out, "level": float(level.mean())} if margin is not None else out


def smallest_detectable(sd_pretrain: float, sd_finetune: float, ks: Sequence[int], m: int, power: float = 0.8,
                        confidence: float = 0.95, sims: int = 4000) -> float:
    """The smallest true difference the pooled test calls "better" with probability ``power`` (bisection on
    simulation; the same random draws at every step, so the search is monotone)."""
    lo, hi = 0.0, 20 * max(sd_pretrain, sd_finetune, 1e-9)
    for _ in range(30):
        mid = (lo + hi) / 2
        if simulate(mid, sd_pretrain, sd_finetune, ks, m, sims=sims, confidence=confidence)["better"] >= power:
            hi = mid
        else:
            lo = mid
    return hi


def variance_components(groups: Sequence[Sequence[float]]) -> tuple[float, float]:
    """(sd of pretraining luck, sd of fine-tuning luck) from runs grouped by pretraining run (one-way ANOVA).

    Fine-tuning sd: the pooled within-run sd. Pretraining sd: from the variance of
    the run means, less what fine-tuning luck alone puts there (zero if negative).
    """
    groups = [np.asarray(g, float) for g in groups if len(g)]
    within = [g.var(ddof=1) for g in groups if len(g) > 1]
    sd_f = float(math.sqrt(np.mean(within))) if within else 0.0
    if len(groups) < 2:
        return 0.0, sd_f
    m = np.mean([len(g) for g in groups])
    between = float(np.var([g.mean() for g in groups], ddof=1))
    return float(math.sqrt(max(0.0, between - sd_f ** 2 / m))), sd_f


def sd_interval(sd: float, df: int, confidence: float) -> tuple[float, float]:
    """The two-sided interval of a true sd from a pooled sd with ``df`` degrees of freedom (normal luck:
    df·s²/σ² is chi-square with df degrees of freedom). At 3 df an sd of 2.5 reads [1.5, 7.3] at 90%."""
    tail = (1 - confidence) / 2
    return (sd * math.sqrt(df / stats.chi2.ppf(1 - tail, df)), sd * math.sqrt(df / stats.chi2.ppf(tail, df)))
