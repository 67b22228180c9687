"""The report's statistical test: verdicts on known cases, and its error rates measured by simulation."""
from __future__ import annotations

import pytest

from pipeline.errors import ConfigError
from pipeline.report.stats import (ONE_RUN, compare, pooled_variance, seeds_needed, simulate, smallest_detectable,
                                   unit_means, variance_components)

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
