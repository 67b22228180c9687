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
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats

from pipeline.report.model import Comparison
from pipeline.settings import CONFIDENCE

VERDICTS = ("better", "worse", "inconclusive")
ONE_RUN = "inconclusive (one run each)"


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
            pooled: tuple[float, int] | None = None, runs: tuple[int, int] | None = None) -> Comparison:
    """``a`` against ``b``: the difference of means, its interval, the p-value and the verdict.

    ``a`` and ``b`` are per-pretraining-run means (``unit_means``). ``test``:
    ``welch`` (two samples, each with its own variance), ``pooled`` (two
    samples, the variance of a run mean estimated over several rows:
    ``pooled=(variance, df)`` from ``pooled_variance``), ``paired`` (the same
    runs, in the same order: two modes of one model) or ``fixed`` (``b`` is one
    deterministic number). ``runs``: the fine-tuning runs behind each side, for the record.
    """
    CONFIDENCE.check("report.confidence", confidence)
    a, b = np.asarray(a, float), np.asarray(b, float)
    alpha = 1 - confidence
    out = Comparison(diff=round(float(a.mean() - b.mean()), 6), n_pretrain=[int(len(a)), int(len(b))],
                     n_finetune=list(runs) if runs else None, test=TESTS[test], confidence=confidence, verdict=ONE_RUN)
    diff = float(a.mean() - b.mean())
    if test == "pooled":
        var, df = pooled if pooled is not None else pooled_variance([a, b])
        if not df:
            return out
        se = math.sqrt(var * (1 / len(a) + 1 / len(b)))
    elif test == "welch":
        if len(a) < 2 or len(b) < 2:
            return out
        va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
        se = math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1)) if se else 1
    elif test in ("paired", "fixed"):
        d = a - b if test == "paired" else a
        if len(d) < 2:
            return out
        se, df = float(d.std(ddof=1)) / math.sqrt(len(d)), len(d) - 1
    else:
        raise ValueError(f"test={test!r}: expected one of {', '.join(TESTS)}")
    if not se:  # no spread on either side: every run gave the same score
        out.verdict = "inconclusive (no spread between runs)"
        return out
    t = stats.t.ppf(1 - alpha / 2, df)
    p = float(2 * stats.t.sf(abs(diff) / se, df))
    out.low, out.high, out.p, out.df = round(diff - t * se, 6), round(diff + t * se, 6), round(p, 6), round(float(df), 2)
    out.verdict = ("better" if diff > 0 else "worse") if p < alpha else "inconclusive"
    out.borderline = bool(alpha / 5 <= p < 2 * alpha)
    if out.verdict == "inconclusive":
        sd = se / math.sqrt(1 / len(a) + 1 / len(b)) if test in ("pooled", "welch") else se * math.sqrt(len(a))
        out.seeds_needed = seeds_needed(abs(diff), sd, alpha, one_sided_sample=test in ("paired", "fixed"))
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


def simulate(diff: float, sd_pretrain: float, sd_finetune: float, ks: Sequence[int], m: int, *, sims: int = 20000,
             confidence: float = 0.95, seed: int = 0) -> dict:
    """Verdict rates of the pooled test on ``sims`` simulated families with a known true ``diff``.

    Row ``i`` has ``ks[i]`` pretraining runs, each fine-tuned with ``m`` seeds:
    score = row mean + pretraining luck (sd ``sd_pretrain``) + fine-tuning luck
    (sd ``sd_finetune``). Row 1 is ``diff`` above row 0 (the reference), the
    others equal to it; the variance is pooled over every row, as the report
    pools it over a family. Returns the share of "better", "worse" and "inconclusive".
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
        return {"better": 0.0, "worse": 0.0, "inconclusive": 1.0, "sims": sims}
    se = np.sqrt(ss / df * (1 / ks[1] + 1 / ks[0]))
    d = rows[1].mean(1) - rows[0].mean(1)
    significant = 2 * stats.t.sf(np.abs(d) / se, df) < 1 - confidence
    better, worse = significant & (d > 0), significant & (d < 0)
    return {"better": float(better.mean()), "worse": float(worse.mean()),
            "inconclusive": float(1 - better.mean() - worse.mean()), "sims": sims}


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
