"""How small a difference a comparison's design detects, with all three kinds of noise: pretraining luck (sd σp),
fine-tuning luck (σf) and test sampling (σt), the binomial sd sqrt(p (1 − p) / n) of an accuracy p on n test examples.

A side of k pretraining runs with m seeds each has a mean of variance σp²/k + σf²/(k·m) + σt² (``noise.model_text``
states the assumptions); where both rows' runs record each test example's outcome, the difference's test sampling
is read from them instead (``Design.shared_test``): rows scored on the same examples share most of it. The
detectable difference is a t-test's whose standard error counts all three terms, at the degrees of freedom of the
report's own test, its power from the noncentral t distribution: with σt = 0 it is the
pooled test ``stats.simulate`` simulates (``tests/test_noise.py``). The maths alone, apart from the noise section
(``noise.py``) that reads the runs into designs and writes what they detect.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize, stats

from pipeline.report.stats import binomial_floor

POWER = 0.8  # the power a detectable difference is defined at (as ``stats.smallest_detectable``)
PROPORTIONS = ("accuracy", "exact")  # metrics that are a share of test examples (the binomial sd applies)


@dataclass(frozen=True)
class Side:
    """One side of a comparison: ``runs`` units, each the mean of ``seeds`` fine-tuning runs; a unit is a
    pretraining run, or from scratch (``pretrained`` false) one fine-tuning run. Variances in the metric's units
    squared; seconds of one unit's pretraining (0 from scratch) and of one fine-tuning run (None: not measured)."""

    runs: int
    seeds: int
    var_pretrain: float
    var_finetune: float
    var_test: float
    pretrain_seconds: float | None
    finetune_seconds: float | None
    pretrained: bool = True

    @property
    def unit_var(self) -> float:
        """The variance of one unit's mean over its seeds: what the test estimates from the runs' spread."""
        return self.var_pretrain + self.var_finetune / self.seeds

    def scaled(self, runs: int, seeds: int, test: float) -> Side:
        """``runs`` times the pretraining runs, ``seeds`` times the seeds (from scratch: times the runs, nothing
        pretrained behind them), ``test`` times the test examples (σt² divided by it)."""
        if self.pretrained:
            return replace(self, runs=self.runs * runs, seeds=self.seeds * seeds, var_test=self.var_test / test)
        return replace(self, runs=self.runs * seeds, var_test=self.var_test / test)

    def cost(self, to: Side) -> float | None:
        """Seconds to go from this side's runs to ``to``'s (None: a time not measured)."""
        if self.pretrain_seconds is None or self.finetune_seconds is None:
            return None
        return (to.runs - self.runs) * self.pretrain_seconds + \
            (to.runs * to.seeds - self.runs * self.seeds) * self.finetune_seconds


@dataclass(frozen=True)
class Design:
    """A comparison's noise: its test (``stats.TESTS``'s pooled, welch or paired), its sides (paired: one, the
    per-run differences) and, pooled, the degrees of freedom the family's other rows add to the spread."""

    test: str
    sides: tuple[Side, ...]
    other_df: int = 0
    shared_test: float | None = None  # the difference's test-sampling variance, read from the two rows' outcomes
    # on the same test examples (``noise.outcome_var``); None: each side's σt² counts independently

    @property
    def var_test(self) -> float:
        """The test-sampling variance of the difference: ``shared_test``, else the sides' σt² summed."""
        return self.shared_test if self.shared_test is not None else sum(s.var_test for s in self.sides)

    @property
    def df(self) -> int:
        """The test's degrees of freedom (0: no test can be made). Welch's at its lower bound, the smaller side's
        units less one: Satterthwaite's value moves toward the side with fewer units as the other's spread
        shrinks, so with it more seeds could read as less power."""
        if self.test == "pooled":
            return self.other_df + sum(s.runs - 1 for s in self.sides)
        return min(s.runs for s in self.sides) - 1

    @property
    def se(self) -> float:
        """The sd of the difference of the two means (paired: of the mean difference), all three kinds of noise."""
        return math.sqrt(sum(s.unit_var / s.runs for s in self.sides) + self.var_test)

    def scaled(self, runs: int = 1, seeds: int = 1, test: float = 1.0) -> Design:
        """Every side with ``Side.scaled`` (and ``shared_test`` divided by ``test``)."""
        shared = None if self.shared_test is None else self.shared_test / test
        return replace(self, sides=tuple(s.scaled(runs, seeds, test) for s in self.sides), shared_test=shared)

    def more(self, times: int) -> Design:
        """``times`` the units on every side: pretraining runs, and from scratch its runs."""
        return replace(self, sides=tuple(replace(s, runs=s.runs * times) for s in self.sides))

    def cost(self, to: Design) -> float | None:
        """Seconds to go from this design's runs to ``to``'s (None where a side's times were not measured)."""
        costs = [s.cost(t) for s, t in zip(self.sides, to.sides)]
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
                 * math.sqrt(design.var_test))


def binomial_sd(p: float, n: int) -> float:
    """The sd of an accuracy ``p`` read on ``n`` test examples, test sampling alone, in the accuracy's units: one
    side of ``stats.binomial_floor`` (which owns the formula, and keeps it above 0 at a share of 0 or 1)."""
    return binomial_floor(np.array([p]), np.array([p]), True, n)


def sampling_sd(metric: str, p: float, n: int | None) -> tuple[float | None, str | None]:
    """(σt, None), or (None, why it is not known)."""
    if metric.split("_")[-1] not in PROPORTIONS:
        return None, f"{metric} is not a share of test examples, so the binomial sd does not apply"
    if not n:
        return None, "the fine-tuning metrics do not give the test split's size"
    return binomial_sd(p, n), None
