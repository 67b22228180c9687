"""The report's statistical test: verdicts on known cases, and its error rates measured by simulation."""
from __future__ import annotations

import pytest

from pipeline.errors import ConfigError
from pipeline.report.stats import (NO_SPREAD, ONE_RUN, compare, pooled_variance, seeds_needed, seeds_needed_level,
                                   simulate, smallest_detectable, unit_means, variance_components, with_margin)

# The demo's noise, measured on its dev accuracy (fractions; README, "Verdicts"): the spread of a
# pretraining run's mean over its fine-tuning seeds, and of single fine-tuning runs around it.
SD_PRETRAIN, SD_FINETUNE = 0.010, 0.010
KS, M = (3, 3, 3), 3  # pretraining runs of each row of a family, fine-tuning seeds per pretraining run


def test_false_positive_rate_on_no_difference_is_at_most_nominal():
    rates = simulate(0.0, SD_PRETRAIN, SD_FINETUNE, KS, M, sims=40000, seed=1)
    # 5% nominal; simulation error with 40k draws is about 0.1 points
    assert rates["better"] + rates["worse"] <= 0.05 + 3 * (0.05 * 0.95 / 40000) ** 0.5
    assert rates["better"] == pytest.approx(rates["worse"], abs=0.006)  # symmetric
    assert rates["better"] + rates["worse"] >= 0.04  # and not far below: the pooled test is exact here


def test_false_positive_rate_with_one_run_per_variant_and_the_baseline_s_spread():
    """One pretraining run per variant: the pooled spread comes from the baseline's runs alone."""
    rates = simulate(0.0, SD_PRETRAIN, SD_FINETUNE, (3, 1, 1), M, sims=40000, seed=6)
    assert rates["better"] + rates["worse"] <= 0.05 + 3 * (0.05 * 0.95 / 40000) ** 0.5


@pytest.mark.parametrize("sd_pretrain, sd_finetune", [(0.0, 0.02), (0.02, 0.0), (0.005, 0.015)])
def test_false_positive_rate_holds_whichever_luck_dominates(sd_pretrain, sd_finetune):
    rates = simulate(0.0, sd_pretrain, sd_finetune, KS, M, sims=20000, seed=2)
    assert rates["better"] + rates["worse"] <= 0.05 + 3 * (0.05 * 0.95 / 20000) ** 0.5


def test_power_grows_with_the_difference_and_never_calls_the_wrong_sign():
    powers = [simulate(d, SD_PRETRAIN, SD_FINETUNE, KS, M, sims=20000, seed=3) for d in (0.01, 0.02, 0.04, 0.06)]
    better = [p["better"] for p in powers]
    assert better == sorted(better) and better[-1] > 0.9 and better[0] < 0.3
    assert all(p["worse"] < 0.005 for p in powers)  # the wrong sign: far below alpha / 2 even at small effects


def test_smallest_detectable_difference_is_where_power_reaches_80_percent():
    d = smallest_detectable(SD_PRETRAIN, SD_FINETUNE, KS, M, sims=4000)
    assert simulate(d * 1.05, SD_PRETRAIN, SD_FINETUNE, KS, M, sims=20000, seed=4)["better"] >= 0.78
    assert simulate(d * 0.7, SD_PRETRAIN, SD_FINETUNE, KS, M, sims=20000, seed=5)["better"] < 0.8


def test_clear_difference_is_better_and_its_interval_excludes_zero():
    c = compare([0.50, 0.51, 0.49], [0.45, 0.46, 0.44], test="pooled", runs=(9, 9))
    assert c.verdict == "better" and 0 < c.low < c.diff < c.high and c.diff == pytest.approx(0.05)
    assert c.n_pretrain == [3, 3] and c.n_finetune == [9, 9] and c.p < 0.05
    assert compare([0.45, 0.46, 0.44], [0.50, 0.51, 0.49]).verdict == "worse"


def test_overlapping_sides_are_inconclusive_with_the_seeds_it_would_take():
    c = compare([0.50, 0.51, 0.49], [0.48, 0.50, 0.47])
    assert c.verdict == "inconclusive" and c.low < 0 < c.high
    assert c.seeds_needed is not None and c.seeds_needed > 3


def test_one_run_per_side_is_never_a_verdict():
    for test in ("welch", "pooled", "paired", "fixed"):
        assert compare([0.9], [0.1], test=test).verdict == ONE_RUN
    assert compare([0.9], [0.1, 0.2, 0.15]).verdict == ONE_RUN
    # pooled over a family whose other rows have several runs, one run per side is enough
    pooled = pooled_variance([[0.9], [0.1], [0.5, 0.51, 0.49], [0.3, 0.32, 0.31]])
    c = compare([0.9], [0.1], test="pooled", pooled=pooled)
    assert c.verdict == "better" and c.df == 4


def test_against_a_deterministic_baseline_the_interval_is_of_the_difference():
    c = compare([0.50, 0.51, 0.49], [0.45], test="fixed")
    assert c.verdict == "better" and c.low < 0.05 < c.high and c.low > 0


def test_paired_modes_of_the_same_runs():
    # the same three pretraining runs: frozen features about 3 points below, whatever the run's luck
    c = compare([0.50, 0.55, 0.45], [0.47, 0.515, 0.425], test="paired")
    assert c.verdict == "better"  # unpaired, the run-to-run spread would hide it
    assert compare([0.50, 0.55, 0.45], [0.47, 0.515, 0.425]).verdict == "inconclusive"


def test_borderline_verdicts_are_marked():
    # p between 0.01 and 0.10 at 95%: another machine may land on the other side of 0.05
    c = compare([0.50, 0.52, 0.49], [0.48, 0.485, 0.47])
    assert 0.01 <= c.p < 0.10 and c.borderline
    assert not compare([0.50, 0.51, 0.49], [0.40, 0.41, 0.39]).borderline


@pytest.mark.parametrize("confidence", [0, 1, 1.5, -0.1, "high"])
def test_a_confidence_level_outside_zero_one_names_the_key(confidence):
    with pytest.raises(ConfigError, match=r"report.confidence=.* is not allowed: expected a number in \(0, 1\)"):
        compare([0.5, 0.6], [0.4, 0.5], confidence=confidence)


def test_unit_means_and_variance_components():
    runs = [{"pretrain_seed": p, "seed": f, "accuracy": 0.5 + 0.02 * p + 0.001 * f} for p in range(3) for f in range(3)]
    assert unit_means(runs, "accuracy") == pytest.approx([0.501, 0.521, 0.541])
    sd_p, sd_f = variance_components([[0.5, 0.51, 0.52], [0.6, 0.61, 0.62], [0.7, 0.71, 0.72]])
    assert sd_f == pytest.approx(0.01) and sd_p == pytest.approx((0.01 - 0.0001 / 3) ** 0.5)


def test_seeds_needed_matches_the_textbook_two_sample_case():
    # Cohen's d = 1 at 5%, 80% power: 17 per group for a two-sample t-test
    assert seeds_needed(1.0, 1.0) == 17
    assert seeds_needed(0.0, 1.0) is None


# ------------------------------------------------------------------ level: two one-sided tests against a margin

MARGIN = 0.02  # two points of accuracy, as claims.yaml states most downstream margins


@pytest.mark.parametrize("ks", [(3, 3, 3), (30, 30)])
@pytest.mark.parametrize("sign", [1, -1])
def test_tost_calls_a_difference_of_exactly_the_margin_level_at_most_alpha_of_the_time(ks, sign):
    """The equivalence test's false "level" rate, at the worst true difference for it (on the margin's edge): at
    most 5%, by simulation of the report's pooled test (a few runs per row, and many, where it nears 5%)."""
    sims = 8000
    rates = simulate(sign * MARGIN, SD_PRETRAIN, SD_FINETUNE, ks, M, sims=sims, seed=11, margin=MARGIN)
    assert rates["level"] <= 0.05 + 3 * (0.05 * 0.95 / sims) ** 0.5
    assert rates["better"] + rates["worse"] + rates["level"] + rates["inconclusive"] == pytest.approx(1)


def test_tost_power_is_what_the_runs_per_side_it_names_deliver():
    """seeds_needed_level: at the runs per side it names for a true difference of zero, the simulated test reads
    level at least 80% of the time (its power bound is conservative); with none of the margin left, never."""
    sd_unit = (SD_PRETRAIN ** 2 + SD_FINETUNE ** 2 / M) ** 0.5  # the sd of one run's mean over its fine-tuning seeds
    n = seeds_needed_level(0.0, sd_unit, MARGIN)
    assert n is not None and 2 < n < 20
    assert simulate(0.0, SD_PRETRAIN, SD_FINETUNE, (n, n), M, sims=4000, seed=12, margin=MARGIN)["level"] >= 0.78
    assert seeds_needed_level(MARGIN, sd_unit, MARGIN) is None and seeds_needed_level(-0.03, sd_unit, MARGIN) is None
    assert "level" not in simulate(0.0, SD_PRETRAIN, SD_FINETUNE, KS, M, sims=2000, seed=13)


def test_a_narrow_interval_inside_the_margin_is_level_and_a_wide_one_around_zero_inconclusive():
    level = compare([0.503, 0.508, 0.498], [0.501, 0.499, 0.500], margin=MARGIN)
    assert level.verdict == "level" and -MARGIN < level.tost_low < level.diff < level.tost_high < MARGIN
    assert level.tost_p < 0.05 and level.low < 0 < level.high  # the 95% interval still spans zero
    assert level.margin == MARGIN and level.seeds_needed is None
    wide = compare([0.50, 0.55, 0.45], [0.50, 0.45, 0.55], margin=MARGIN)
    assert wide.verdict == "inconclusive" and wide.tost_low < -MARGIN and wide.tost_high > MARGIN
    assert wide.seeds_needed_level is not None and wide.seeds_needed_level > 3  # what would show it level
    # without a margin, none of it: the same comparison as before, its JSON without the TOST's fields
    plain = compare([0.503, 0.508, 0.498], [0.501, 0.499, 0.500])
    assert plain.verdict == "inconclusive" and plain.to_json().keys() == {
        "diff", "n_pretrain", "n_finetune", "test", "confidence", "verdict", "low", "high", "p", "df", "borderline",
        "seeds_needed"}


def test_level_comes_before_better_and_a_difference_beyond_the_margin_stays_better():
    """A real difference smaller than the margin is level (the 95% interval excludes zero, the 90% one is inside the
    margin); one whose interval reaches past the margin is better, its TOST far from level."""
    small = compare([0.503, 0.5035, 0.5025], [0.501, 0.5005, 0.5015], margin=MARGIN)
    assert small.p < 0.05 and small.low > 0 and small.verdict == "level"
    big = compare([0.53, 0.54, 0.52], [0.50, 0.50, 0.49], margin=MARGIN)
    assert big.verdict == "better" and big.tost_p > 0.5 and big.tost_high > MARGIN


def test_with_margin_reads_a_comparison_the_report_already_made_as_compare_would():
    """The ledger reads the report's own tests (a family's row, a suite's cell) against a claim's margin from their
    interval: the same verdict and TOST as testing the runs with the margin, for every kind of test."""
    a, b = [0.503, 0.508, 0.498, 0.501], [0.501, 0.499, 0.500, 0.496]
    pooled = pooled_variance([a, b, [0.49, 0.50, 0.495]])
    for test, kw in (("welch", {}), ("pooled", {"pooled": pooled}), ("paired", {}), ("fixed", {})):
        other = b if test != "fixed" else [0.4995]
        direct = compare(a, other, test=test, margin=MARGIN, **kw)
        later = with_margin(compare(a, other, test=test, **kw), MARGIN)
        assert later.verdict == direct.verdict, test
        assert later.tost_low == pytest.approx(direct.tost_low, abs=2e-6), test
        assert later.tost_p == pytest.approx(direct.tost_p, abs=1e-4), test
        assert later.seeds_needed_level == direct.seeds_needed_level, test
    assert with_margin(compare([0.9], [0.1]), MARGIN).verdict == ONE_RUN  # no test: only the margin recorded


# ------------------------------------------------------------------ every run the same score: the binomial floor

def test_identical_runs_far_from_the_reference_are_decided_by_the_binomial_floor():
    """Three runs all at 42.2% in a cell of 100 rows against a bigram table at 22.8%: no spread between runs, but
    the test sampling of 100 examples is a floor, and 19 points is far beyond it -- better; the other way, worse."""
    c = compare([0.422] * 3, [0.228], test="fixed", floor_n=100)
    assert c.verdict == "better" and c.low > 0 and c.df is None
    assert c.test.endswith("; no spread between runs: the binomial test-sampling variance of 100 examples as floor")
    se = (0.422 * 0.578 / 100) ** 0.5  # one run's variance: the runs share their examples, so not divided by 3
    assert c.high - c.low == pytest.approx(2 * 1.959964 * se, rel=1e-4)
    assert compare([0.10] * 3, [0.30], test="fixed", floor_n=600).verdict == "worse"
    assert compare([0.6] * 3, [0.4] * 3, floor_n=200).verdict == "better"  # two sides, each its own variance


def test_identical_runs_at_the_reference_are_not_decided_and_level_within_a_margin():
    """An NSP head that gives every pair the commoner label scores the base rate in every run: not better, not
    worse; within a margin wider than the floor's interval, level."""
    at = compare([0.55] * 3, [0.55], test="fixed", floor_n=600)
    assert at.verdict == "inconclusive" and at.low < 0 < at.high and at.seeds_needed is None  # runs would not help
    assert compare([0.55] * 3, [0.55], test="fixed", floor_n=600, margin=0.05).verdict == "level"
    assert compare([0.55] * 3, [0.55], test="fixed", floor_n=600, margin=0.02).verdict == "inconclusive"


@pytest.mark.parametrize("score", [0.1, 0.422, 0.55, 0.7])
def test_without_a_floor_identical_runs_read_no_spread_even_where_their_mean_rounds(score):
    """The mean of three equal floats need not equal them (0.1 + 0.1 + 0.1), which leaves a spread of 1e-17: that
    is rounding, not a spread to test against."""
    assert compare([score] * 3, [score - 0.05], test="fixed").verdict == NO_SPREAD
    assert compare([score] * 3, [score - 0.05] * 3).verdict == NO_SPREAD
