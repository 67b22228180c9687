"""Each task's noise and what would cut it: the components from known spreads, the binomial term, the analytic
detectable difference against the simulated one, the costs of each change, and the section in a built report."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from pipeline.config import validate
from pipeline.io import write_json
from pipeline.report.noise import (AS_RUN, RUNS, SEEDS, TEST, Plan, finetune_seconds, options, outcome_var,
                                   task_noise)
from pipeline.report.power import Design, Side, binomial_sd, detectable, floor, power, sampling_sd
from pipeline.report.stats import sd_interval, simulate, smallest_detectable
from pipeline.stages.report import run as build_report
from test_report import SCORES, _ci_report_config, _control, _pretrain, _suite_finetune

# the demo's measured word_order noise (fractions of accuracy): pretraining and fine-tuning luck
SD_P, SD_F = 0.034, 0.055


def _variants(scores: dict[str, dict[str, list[list[float]]]], test_examples: int = 1000,
              candidates: int = 0) -> dict[str, list[dict]]:
    """In-memory runs as ``results.load_runs`` reads them: variant -> mode -> each pretraining run's seed scores;
    every pretraining run trains 100 s, every fine-tuning run 10 s (the first run of each variant also tried
    ``candidates`` settings on dev)."""
    out: dict[str, list[dict]] = {}
    for variant, modes in scores.items():
        for j in range(max(len(g) for g in modes.values())):
            ft = {}
            for mode, groups in modes.items():
                if j < len(groups):
                    runs = [{"seed": s, "pretrain_seed": j, "accuracy": x} for s, x in enumerate(groups[j])]
                    tried = candidates if j == 0 else 0
                    ft[mode] = {"runs": runs, "n": len(runs), "seconds": 10.0 * (len(runs) + max(0, tried - 1)),
                                "selection": {"grid": [{}] * tried}}
            out.setdefault(variant, []).append({
                "variant": variant, "pretrain_seed": j, "pretrain": {"train_seconds": 100.0},
                "finetune": {"task": "t", "metric": "accuracy", "test_examples": test_examples, "modes": ft}})
    return out


def _groups(rng, k: int, m: int, mean: float, sd_p: float, sd_f: float) -> list[list[float]]:
    return [list(mean + rng.normal(0, sd_p) + rng.normal(0, sd_f, m)) for _ in range(k)]


def test_pretraining_and_fine_tuning_luck_are_recovered_from_runs_of_known_spread():
    """120 pretraining runs of 6 seeds each, drawn with sd 0.034 and 0.055: the ANOVA finds both within 15%."""
    rng = np.random.default_rng(0)
    variants = _variants({"baseline": {"pretrained": _groups(rng, 120, 6, 0.6, SD_P, SD_F)}}, test_examples=1500)
    t = task_noise(variants, [], "pretrained", "accuracy", 0.95)
    assert (t.runs, t.seeds) == (120, 6)
    assert t.sd_pretrain == pytest.approx(SD_P, rel=0.15) and t.sd_finetune == pytest.approx(SD_F, rel=0.15)
    assert t.sd_test == pytest.approx(math.sqrt(t.score * (1 - t.score) / 1500), abs=1e-6)


def test_the_fine_tuning_sd_s_interval_covers_the_true_sd_at_its_confidence():
    """4,000 designs of 3 pretraining runs x 2 seeds (3 df, the default's) drawn with fine-tuning sd 0.02: the 90%
    chi-square interval misses the true sd about 10% of the time, about half of it on each side."""
    rng = np.random.default_rng(1)
    low = high = 0
    for _ in range(4000):
        groups = _groups(rng, 3, 2, 0.8, 0.01, 0.02)
        sd = math.sqrt(np.mean([np.var(g, ddof=1) for g in groups]))
        lo, hi = sd_interval(sd, 3, 0.90)
        low, high = low + (lo > 0.02), high + (hi < 0.02)
    assert 0.04 < low / 4000 < 0.06 and 0.04 < high / 4000 < 0.06


def test_fine_tuning_luck_is_pooled_over_every_row_that_adds_runs():
    """The baseline's 2 runs give 2 df; a variant's 3 runs of 3 seeds add 6. Its own spread is the ANOVA's; the
    pooled one weighs each run by its seeds less one; a grid of the baseline alone gives no pooled line."""
    base = [[0.80, 0.84], [0.82, 0.83]]
    other = [[0.70, 0.71, 0.72], [0.60, 0.60, 0.63], [0.65, 0.66, 0.64]]
    t = task_noise(_variants({"baseline": {"p": base}, "mask40": {"p": other}}), [], "p", "accuracy", 0.95)
    own, pooled = t.finetune_spread, t.finetune_pooled
    assert (own.df, own.runs, own.rows) == (2, 2, ["baseline"]) and own.sd == pytest.approx(t.sd_finetune, abs=1e-6)
    assert own.low < own.sd < own.high
    ss = sum(np.var(g, ddof=1) * (len(g) - 1) for g in base + other)
    assert (pooled.df, pooled.runs, pooled.rows) == (8, 5, ["baseline", "mask40"])
    assert pooled.sd == pytest.approx(math.sqrt(ss / 8), abs=1e-6)
    assert pooled.high - pooled.low < own.high - own.low  # more df, a narrower interval
    alone = task_noise(_variants({"baseline": {"p": base}}), [], "p", "accuracy", 0.95)
    assert alone.finetune_pooled is None and alone.finetune_spread == own


def test_one_pretraining_run_shows_no_pretraining_luck_and_sizes_nothing():
    variants = _variants({"baseline": {"pretrained": [[0.6, 0.62, 0.58]]}})
    plan = [Plan("pooled", "baseline", "baseline", "x vs y")]
    t = task_noise(variants, plan, "pretrained", "accuracy", 0.95)
    assert t.sd_pretrain is None and t.sd_finetune == pytest.approx(0.02) and t.designs == []


def test_the_binomial_term_from_p_and_n():
    assert binomial_sd(0.6, 1500) == pytest.approx(math.sqrt(0.24 / 1500))
    assert binomial_sd(0.5, 100) == pytest.approx(0.05)
    assert 0 < binomial_sd(1.0, 100) < binomial_sd(0.99, 100)  # every example right: half an example off, not 0
    assert sampling_sd("accuracy", 0.5, 100) == (pytest.approx(0.05), None)
    assert sampling_sd("HasAns_exact", 0.5, 400)[0] == pytest.approx(0.025)  # SQuAD's exact match: questions
    sd, why = sampling_sd("f1", 0.8, 100)  # not a share of examples
    assert sd is None and "binomial sd does not apply" in why
    sd, why = sampling_sd("accuracy", 0.8, None)
    assert sd is None and "test split's size" in why


def _pooled(sd_test: float = 0.0, ks=(3, 1), m: int = 3, other_df: int = 0) -> Design:
    return Design("pooled", tuple(Side(k, m, SD_P ** 2, SD_F ** 2, sd_test ** 2, 100.0, 10.0) for k in ks), other_df)


DESIGNS = {
    "pooled": lambda sd_t: _pooled(sd_t),
    "welch": lambda sd_t: Design("welch", (Side(3, 3, SD_P ** 2, SD_F ** 2, sd_t ** 2, 100.0, 10.0),
                                           Side(3, 1, 0.0, 0.08 ** 2, sd_t ** 2, 0.0, 10.0, pretrained=False))),
    "paired": lambda sd_t: Design("paired", (Side(3, 3, 0.01 ** 2, 0.03 ** 2, 2 * sd_t ** 2, 100.0, 20.0),)),
}


@pytest.mark.parametrize("test", DESIGNS)
@pytest.mark.parametrize("sd_test", [0.005, 0.0126, 0.05])
def test_twice_the_test_examples_halves_the_sampling_variance_and_never_detects_less(test, sd_test):
    d = DESIGNS[test](sd_test)
    more = d.scaled(test=2)
    assert [s.var_test for s in more.sides] == [s.var_test / 2 for s in d.sides]
    assert [(s.runs, s.seeds, s.var_pretrain, s.var_finetune) for s in more.sides] == \
        [(s.runs, s.seeds, s.var_pretrain, s.var_finetune) for s in d.sides]
    assert detectable(more, 0.95) < detectable(d, 0.95)
    assert detectable(d, 0.95) > detectable(DESIGNS[test](0.0), 0.95)  # the sampling term costs power
    assert floor(more, 0.95) == pytest.approx(floor(d, 0.95) / math.sqrt(2))


@pytest.mark.parametrize("ks, m", [((3, 1), 3), ((3, 3, 3), 3), ((2, 2), 5)])
def test_the_analytic_detectable_difference_is_the_simulated_pooled_tests(ks, m):
    """Without test sampling the analytic number is the pooled test's: ``stats.smallest_detectable`` finds it by
    simulation within 3%, and ``stats.simulate`` at it gives 80% power (20,000 draws: ±0.9 points at 3 sd)."""
    d = _pooled(0.0, ks[:2], m, other_df=sum(k - 1 for k in ks[2:]))
    found = detectable(d, 0.95)
    assert power(d, found, 0.95) == pytest.approx(0.8, abs=1e-6)
    assert found == pytest.approx(smallest_detectable(SD_P, SD_F, ks, m, sims=20000), rel=0.03)
    assert simulate(found, SD_P, SD_F, ks, m, sims=20000, seed=7)["better"] == pytest.approx(0.8, abs=0.009)


def test_no_test_without_the_runs_to_estimate_the_spread():
    assert detectable(_pooled(0.01, ks=(1, 1)), 0.95) is None  # one run each: no degrees of freedom
    assert detectable(_pooled(0.01, ks=(1, 1), other_df=2), 0.95) is not None  # the family's other rows give some
    assert detectable(Design("paired", (Side(1, 3, 0.0, 0.01, 0.0, 1.0, 1.0),)), 0.95) is None
    assert detectable(Design("welch", (Side(3, 3, 0.01, 0.01, 0.0, 1.0, 1.0), Side(1, 1, 0.0, 0.01, 0.0, 0.0, 1.0))),
                      0.95) is None


def test_each_change_costs_its_runs_and_the_cheapest_that_reaches_the_target_is_named():
    """3 x 3 against 1 x 3 (pretraining 100 s a run, fine-tuning 10 s): twice the runs adds 4 pretraining runs
    and 12 fine-tuning runs (520 s), twice the seeds 12 fine-tuning runs (120 s); the test examples add examples."""
    d = _pooled(0.0126)
    opts, cheapest = options(d, 0.95, 0.10, 1500)
    by = {o.change: o for o in opts}
    assert list(by)[:4] == [AS_RUN, RUNS, SEEDS, TEST]
    assert by[RUNS].seconds == 520.0 and by[SEEDS].seconds == 120.0
    assert by[TEST].seconds is None and by[TEST].examples == 1500
    assert by[AS_RUN].detectable > by[SEEDS].detectable > by[RUNS].detectable  # pretraining luck dominates
    # 10 points: not within twice the runs, so the fewest multiple of the runs that reaches it, and its cost
    extra = opts[4]
    assert extra.change.endswith("x runs") and cheapest == extra.change and extra.detectable <= 0.10
    r = int(extra.change.split("x")[0])
    assert detectable(d.more(r - 1), 0.95) > 0.10
    assert extra.seconds == pytest.approx(d.cost(d.more(r)))
    _, cheapest = options(d, 0.95, 0.5, 1500)  # a target the design already reaches
    assert cheapest == AS_RUN
    _, cheapest = options(_pooled(0.2), 0.95, 0.10, 1500)  # test sampling alone keeps it above the target
    assert cheapest is None and floor(_pooled(0.2), 0.95) > 0.10


def test_from_scratch_more_seeds_are_more_runs_and_more_pretraining_leaves_it_alone():
    """From scratch each fine-tuning run is a unit with nothing pretrained behind it: twice the pretraining runs
    adds to the pretrained side only (3 runs x 100 s, 9 fine-tuning runs x 10 s); twice the seeds doubles its
    runs (3 more, 30 s) beside the pretrained side's 9 more fine-tuning runs (90 s)."""
    d = DESIGNS["welch"](0.01)
    runs, seeds = d.scaled(runs=2), d.scaled(seeds=2)
    assert [(s.runs, s.seeds) for s in runs.sides] == [(6, 3), (3, 1)]
    assert [(s.runs, s.seeds) for s in seeds.sides] == [(3, 6), (6, 1)]
    assert d.cost(runs) == 390.0 and d.cost(seeds) == 120.0
    assert detectable(seeds, 0.95) < detectable(d, 0.95) and detectable(runs, 0.95) < detectable(d, 0.95)


def test_a_fine_tuning_run_s_seconds_leave_out_the_candidates_tried_on_dev():
    """The first run tried 6 settings on dev with its first seed, then ran 2 more seeds: 8 trainings in 80 s."""
    variants = _variants({"baseline": {"pretrained": [[0.6, 0.61, 0.62], [0.6, 0.61, 0.62]]}}, candidates=6)
    assert variants["baseline"][0]["finetune"]["modes"]["pretrained"]["seconds"] == 80.0
    assert finetune_seconds(variants["baseline"], "pretrained") == pytest.approx(10.0)


def test_every_comparison_the_plan_names_is_sized_on_the_task():
    """A variant (1 run) against the baseline (3), from scratch (Welch), frozen features (paired): three lines,
    each with its runs per side, its test's degrees of freedom and its options."""
    rng = np.random.default_rng(1)
    pre = _groups(rng, 3, 3, 0.6, SD_P, SD_F)
    variants = _variants({"baseline": {"pretrained": pre, "scratch": [[0.5, 0.45, 0.55]],
                                       "frozen": [[x - 0.05 + rng.normal(0, 0.01) for x in g] for g in pre]},
                          "v": {"pretrained": _groups(rng, 1, 3, 0.6, SD_P, SD_F)}})
    plan = [Plan("pooled", "baseline", "v", "v vs baseline"),
            Plan("welch", "pretrained", "scratch", "scratch vs fine-tuned"),
            Plan("paired", "pretrained", "frozen", "frozen vs fine-tuned")]
    t = task_noise(variants, plan, "pretrained", "accuracy", 0.95)
    pooled, welch, paired = t.designs
    assert (pooled.runs, pooled.seeds, pooled.df) == ([3, 1], [3, 3], 2)
    assert (welch.runs, welch.seeds, welch.df) == ([3, 3], [3, 1], 2)  # Welch's at its lower bound
    assert (paired.runs, paired.seeds, paired.df) == ([3], [3], 2)
    # frozen tracks fine-tuning run by run: the paired difference is far less noisy than either side
    assert paired.options[0].detectable < pooled.options[0].detectable
    assert all(o.detectable is not None for d in t.designs for o in d.options)


def _with_outcomes(runs: list[list[np.ndarray]], mode: str = "m") -> list[dict]:
    """Pretraining runs as ``results.load_runs`` reads them, each fine-tuning run with its test ``outcomes``."""
    return [{"finetune": {"modes": {mode: {"runs": [{"accuracy": float(o.mean()),
                                                     "outcomes": "".join("1" if c else "0" for c in o)}
                                                    for o in seeds]}}}} for seeds in runs]


def test_a_difference_s_test_sampling_from_outcomes_is_what_redrawing_the_test_examples_gives():
    """Two rows of fixed runs (3 x 2 and 2 x 2) on a population of 40,000 examples of varied difficulty, the
    second 3 points easier: the variance of the rows' difference over 3,000 fresh test draws of 800 examples is
    what ``outcome_var`` reads from one draw (within 20%), and well under the two rows' binomial variances
    summed, which treat the rows as if read on different examples."""
    rng = np.random.default_rng(3)
    hard = rng.beta(2, 2, 40_000)
    a = [[rng.random(hard.size) < hard for _ in range(2)] for _ in range(3)]
    b = [[rng.random(hard.size) < np.clip(hard + 0.03, 0, 1) for _ in range(2)] for _ in range(2)]
    diff = np.mean([o for r in b for o in r], axis=0) - np.mean([o for r in a for o in r], axis=0)
    n = 800
    draws = [rng.choice(hard.size, n, replace=False) for _ in range(3000)]
    redrawn = np.var([diff[i].mean() for i in draws])
    first = draws[0]
    read = outcome_var("accuracy", (_with_outcomes([[o[first] for o in r] for r in b]), "m"),
                       (_with_outcomes([[o[first] for o in r] for r in a]), "m"))
    assert read == pytest.approx(redrawn, rel=0.2)
    p = float(hard.mean())
    assert read < 0.5 * 2 * p * (1 - p) / n
    # not accuracy, or a run without outcomes: nothing is read
    assert outcome_var("f1", (_with_outcomes([[a[0][0][first]]]), "m"), (_with_outcomes([[b[0][0][first]]]), "m")) \
        is None
    assert outcome_var("accuracy", ([{"finetune": {"modes": {"m": {"runs": [{"accuracy": 0.5}]}}}}], "m"),
                       (_with_outcomes([[b[0][0][first]]]), "m")) is None


def test_a_comparison_reads_its_test_sampling_from_the_outcomes_where_every_run_has_them():
    """Frozen features against fine-tuning on the same runs: agreeing on most examples, their difference's test
    sampling is far below the independent sum, and so is what the design detects; runs without outcomes fall
    back to each row's binomial term; identical outcomes leave no test sampling (and no "2x test examples")."""
    rng = np.random.default_rng(4)
    n = 1000
    hard = rng.random(n)
    variants = _variants({"baseline": {"pretrained": [[0.61, 0.6], [0.63, 0.64], [0.6, 0.62]],
                                       "frozen": [[0.55, 0.56], [0.57, 0.6], [0.56, 0.55]]}}, test_examples=n)
    plan = [Plan("paired", "pretrained", "frozen", "frozen vs fine-tuned")]
    before = task_noise(variants, plan, "pretrained", "accuracy", 0.95).designs[0]
    assert before.test_from == "each row"
    for r in variants["baseline"]:
        for mode, m in r["finetune"]["modes"].items():
            for x in m["runs"]:  # each run right where the example is easy enough for its score
                x["outcomes"] = "".join("1" if h < x["accuracy"] + rng.normal(0, 0.02) else "0" for h in hard)
    after = task_noise(variants, plan, "pretrained", "accuracy", 0.95).designs[0]
    assert after.test_from == "outcomes" and after.sd_test < 0.5 * before.sd_test
    assert after.options[0].detectable < before.options[0].detectable
    for r in variants["baseline"]:  # each frozen run right and wrong where its fine-tuned seed was
        modes = r["finetune"]["modes"]
        for x, y in zip(modes["frozen"]["runs"], modes["pretrained"]["runs"]):
            x["outcomes"] = y["outcomes"]
    tied = task_noise(variants, plan, "pretrained", "accuracy", 0.95).designs[0]
    assert tied.test_from == "outcomes" and tied.sd_test == 0 and tied.floor == 0
    assert TEST not in [o.change for o in tied.options] and tied.options[0].detectable is not None


@pytest.mark.slow  # a whole report of two tasks, 9 s (CI runs the slow marker too)
def test_the_demo_suite_gets_the_section_right_after_method_with_each_task_s_noise(tmp_path):
    """suite=demo on grid=ci's runs: each task's baseline runs (0.60, 0.61, 0.59 and 0.62, 0.63, 0.61) give
    fine-tuning sd 0.01 (4 df, [0.006, 0.029] at 95%) and pretraining sd sqrt(0.0002 - 0.0001 / 3); the test
    split's 50 examples give the binomial sd; the section sits after Method with its tables, its figure, and
    ablations.json holds it."""
    cfg = _ci_report_config(tmp_path, "suite=demo")
    for name, run in cfg.runs.items():
        write_json(f"{run.metrics}/pretrain.json", _pretrain(run.plots, "ltr" if run.variant == "ltr" else "mlm", 0.2))
        base = SCORES["baseline" if not run.pretrain_seed else "baseline-s1"] if run.variant == "baseline" else \
            SCORES[name]
        for task in ("word_order", "bible_sections"):
            ft = _suite_finetune(task, ["accuracy"], {k: v for k, v in base.items()
                                                      if k in cfg.finetunes[f"{name}-{task}"].modes}, run.pretrain_seed)
            if name == "baseline":
                ft["control"] = _control(ft, {"tfidf": 0.5, "scratch": 0.5, "pretrained": 0.5})
            write_json(f"{run.metrics}/tasks/{task}/finetune.json", ft)
    res = build_report(validate(cfg))
    assert [t.task for t in res.noise] == ["word_order", "bible_sections"]
    t = res.noise[0]
    assert (t.runs, t.seeds, t.test_examples) == (2, 3, 50)
    assert t.sd_finetune == pytest.approx(0.01, abs=1e-6)
    assert t.sd_pretrain == pytest.approx(math.sqrt(0.0002 - 0.0001 / 3), abs=1e-6)
    assert t.sd_test == pytest.approx(math.sqrt(0.61 * 0.39 / 50), abs=1e-6)
    tests = {d.test for d in t.designs}
    assert tests == {"pooled", "welch", "paired"}  # the variants, from scratch, frozen features
    md = (tmp_path / "reports" / "report.md").read_text()
    section = md[md.index("## How much noise, and what would cut it"):]
    assert md.index("## Method") < md.index("## How much noise") < md.index("## Fine-tuning: every arm at its best")
    assert "| task | baseline runs (pretraining x fine-tuning) | baseline score | pretraining luck sd |" in section
    assert t.finetune_spread.df == 4 and t.finetune_pooled.df == 12  # 2 runs x 2, and the other rows' 8
    assert (f"| word_order | 2 x 3 | 61.0 | {100 * t.sd_pretrain:.1f} | 1.0 [0.6, 2.9] (4 df) | "
            f"{100 * t.finetune_pooled.sd:.1f} [{100 * t.finetune_pooled.low:.1f}, {100 * t.finetune_pooled.high:.1f}] "
            "(12 df), 6 runs of 3 rows | 6.9 (50 examples) |") in section
    assert "figures/noise.png" in section and (tmp_path / "reports" / "figures" / "noise.png").stat().st_size > 1000
    assert "- word_order: at 2 x 3 runs the baseline mean's variance is" in section
    # each task against its own target (report.detect, report.detect_tasks.bible_sections), named in its rows
    assert [n.target for n in res.noise] == [0.10, 0.05]
    assert "| the task's target: cheapest to detect it |" in section
    rows = [line for line in section.splitlines() if line.startswith("| bible_sections | pretraining variants")]
    assert rows and all(line.split(" | ")[-1].startswith("5.0 points: ") for line in rows), rows
    saved = json.loads((tmp_path / "reports" / "ablations.json").read_text())["noise"]
    assert [n["task"] for n in saved] == ["word_order", "bible_sections"]
    assert saved[0]["designs"][0]["options"][0]["change"] == AS_RUN
