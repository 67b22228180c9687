"""The ledger's margins: claims.yaml refused before any training where a margin is missing or does not fit, the
"level" state from a test to summary.json's cell and the report's words, and the ledger drawn as a forest plot."""
from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import yaml

from pipeline.check_conf import main as check_conf
from pipeline.errors import ConfigError
from pipeline.report.claims import CLAIMS, check, load
from pipeline.report.fixed import interval
from pipeline.report.ledger import PROBE_SECTION, cell, load_claims, pose_nsp, summary, trend, verdict
from pipeline.report.model import Claim, NspCheck, TaskVerdict
from pipeline.report.sections.ledger import VERDICT_COLORS, fixed_text, forest_figure, lines, verdict_text
from pipeline.report.stats import compare

POINTS = {"value": 2, "unit": "points", "reason": "a smaller gap is no practical one"}
FIXED = {"value": 1, "unit": "points", "reason": "the baseline's runs differ by 0.4 points there"}


# ------------------------------------------------------------------ claims.yaml: margins checked before any training

def _claims_with(change) -> list[dict]:
    claims = copy.deepcopy(yaml.safe_load(CLAIMS.read_text(encoding="utf-8")))
    change({c["id"]: c for c in claims})
    return claims


@pytest.mark.parametrize("change, message", [
    (lambda c: c["nsp"].pop("margin"), "nsp.margin is missing: expected {value: a number > 0, unit: points, "),
    (lambda c: c["nsp"]["margin"].update(value=-1), "nsp.margin.value=-1 is not allowed: expected a number > 0 "
                                                     "(points)"),
    (lambda c: c["nsp"]["margin"].update(value=0), "nsp.margin.value=0 is not allowed: expected a number > 0"),
    (lambda c: c["nsp"]["margin"].update(value="two"), "nsp.margin.value='two' is not allowed: expected a number"),
    (lambda c: c["senses"]["margin"].update(unit="points"), "senses.margin.unit='points' is not allowed: expected "
                                                             "similarity (the unit of what the claim reads)"),
    (lambda c: c["pretraining_pays"]["margin"].update(unit="similarity"), "pretraining_pays.margin.unit="
                                                                          "'similarity' is not allowed: expected points"),
    (lambda c: c["depth"]["margin"].pop("reason"), "depth.margin.reason is missing: expected {value: a number > 0"),
    (lambda c: c["depth"].update(margin=2), "depth.margin=2 is not allowed: expected {value: a number > 0"),
    (lambda c: c["mask_ratio"].pop("fixed_margin"), "mask_ratio.fixed_margin is missing"),
    (lambda c: c["grammar"].update(fixed_margin=FIXED), "grammar.fixed_margin is not allowed: the claim has no "
                                                        "fixed-set reading"),
    (lambda c: c["mask_ratio"].update(level="yes"), "mask_ratio.level='yes' is not allowed: expected one of shown, "
                                                    "not shown"),
])
def test_a_bad_margin_is_refused_by_check_conf_in_one_line_naming_the_key(tmp_path, capsys, change, message):
    """The check_conf stage, the first of the graph, refuses it (exit status 2, one line naming file and key)."""
    bad = tmp_path / "claims.yaml"
    bad.write_text(yaml.safe_dump(_claims_with(change)))
    with pytest.raises(SystemExit) as e:
        check_conf(claims=bad)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {bad}: {message}"), err


def test_the_report_refuses_it_too_naming_the_file_as_the_repository_does():
    claims = _claims_with(lambda c: c["nsp"]["margin"].update(value=-1))
    with pytest.raises(ConfigError) as e:
        check(claims, CLAIMS)
    assert str(e.value) == ("pipeline/report/claims.yaml: nsp.margin.value=-1 is not allowed: expected a number > 0 "
                            "(points)")
    assert load_claims is load  # the report loads the claims through the same check


def test_every_claim_states_its_margins_and_the_no_difference_claims_say_so():
    claims = {c["id"]: c for c in load()}
    assert claims["senses"]["margin"]["unit"] == "similarity"
    assert all(c["margin"]["unit"] == "points" for i, c in claims.items() if i != "senses")
    assert {i for i, c in claims.items() if "fixed_margin" in c} == {
        "contextual_vs_static", "bidirectional_vs_ltr", "masking_procedure", "nsp", "depth", "depth_12_24",
        "mask_ratio"}
    assert {i: c["level"] for i, c in claims.items() if "level" in c} == {
        "finetune_vs_frozen": "shown", "masking_procedure": "shown", "nsp": "not shown", "mask_ratio": "shown"}
    assert claims["nsp"]["run_by"].startswith("experiment=nsp_posed")


# ------------------------------------------------------------------ the level state in the ledger

def _claim(test, **kw) -> Claim:
    return Claim(id="mask_ratio", claim="A higher mask ratio than 15% (40%)", paper="level with or above",
                 verdict=verdict(test, "better"), rows="40% vs 15%", metric="word_order test accuracy", test=test,
                 margin=POINTS, **kw)


def test_a_level_reading_in_summary_cell_and_the_reports_words():
    level = compare([0.503, 0.508, 0.498], [0.501, 0.499, 0.500], margin=0.02)
    claim = _claim(level, level_shown=True)
    assert claim.verdict == "level"
    entry = summary([claim])["mask_ratio"]
    assert entry["verdict"] == "level" and entry["margin"] == 0.02 and entry["level_shown"] is True
    assert (entry["tost_low"], entry["tost_high"]) == (level.tost_low, level.tost_high)
    assert cell(entry) == "level (+0.3 [-0.5, +1.1] within ±2), the paper's direction"
    assert verdict_text(claim) == "level: the 90% interval [−0.5, +1.1] inside ±2 points (the paper's direction)"
    nsp = _claim(level, level_shown=False)
    assert cell(summary([nsp])["mask_ratio"]).endswith(", not the paper's direction")
    assert verdict_text(nsp).endswith("(not the paper's direction)")
    assert verdict_text(_claim(level)).endswith("inside ±2 points")  # a claim silent on level: no flag


def test_the_probe_counts_words_per_side_not_runs():
    wide = compare([0.50, 0.51, 0.49], [0.50, 0.49, 0.51], test="paired", margin=0.02)
    probe = _claim(wide, section=PROBE_SECTION)
    entry = summary([probe])["mask_ratio"]
    assert entry["unit"] == "words" and "unit" not in summary([_claim(wide)])["mask_ratio"]
    assert "words a side" in cell(entry) and "runs" not in cell(entry)
    assert "words per side" in verdict_text(probe) and "runs per side" not in verdict_text(probe)


def test_an_inconclusive_reading_names_the_runs_that_would_show_it_level():
    wide = compare([0.50, 0.55, 0.45], [0.50, 0.45, 0.55], margin=0.02)
    claim = _claim(wide, cost_seconds=120.0)
    entry = summary([claim])["mask_ratio"]
    n = wide.seeds_needed_level
    assert entry["verdict"] == "inconclusive" and entry["runs_needed_level"] == n and not entry["runs_needed"]
    assert cell(entry) == f"inconclusive (+0.0 [-11.3, +11.3]), ~{n} runs a side to show it level within ±2"
    assert verdict_text(claim) == (f"inconclusive: about {n} runs per side would show it level within ±2 points, if "
                                   f"the difference is as measured (about {2 * n} min of pretraining here)")


def test_tasks_and_the_fixed_set_read_level_each_against_their_own_margin():
    level = compare([0.503, 0.508, 0.498], [0.501, 0.499, 0.500], margin=0.02)
    worse = compare([0.40, 0.41, 0.39], [0.50, 0.51, 0.49], margin=0.02)
    fixed = compare([0.253, 0.254, 0.252], [0.25, 0.2505, 0.2495], margin=0.01)
    claim = _claim(level, tasks=[TaskVerdict(task=t, metric="accuracy", verdict=verdict(c, "better"), rows="r",
                                             test=c) for t, c in (("word_order", level), ("bible_sections", worse))],
                   fixed=fixed, fixed_verdict=verdict(fixed, "better"), fixed_margin=FIXED, level_shown=True)
    entry = summary([claim])["mask_ratio"]
    assert entry["tasks"]["word_order"]["verdict"] == "level" and entry["tasks"]["bible_sections"]["verdict"] == \
        "opposite"
    assert entry["fixed_verdict"] == "level" and entry["fixed_margin"] == 0.01
    assert cell(entry).startswith("word_order: level (+0.3 [-0.5, +1.1] within ±2), the paper's direction; "
                                  "bible_sections: opposite (")
    assert cell(entry).endswith("; fixed set level (+0.3)")
    assert fixed_text(claim) == "level (+0.3 points, the 90% interval [+0.1, +0.5] inside ±1 point)"


def test_a_level_nsp_claim_is_still_not_posed_where_the_head_did_not_learn():
    level = compare([0.503, 0.508, 0.498], [0.501, 0.499, 0.500], margin=0.02)
    claim = _claim(level, level_shown=False)
    head = compare([0.55] * 3, [0.55], test="fixed", floor_n=600)  # every run at the base rate: not learned
    res = SimpleNamespace(nsp=NspCheck(actual_next=0.45, base_rate=0.55, accuracy=interval([0.55] * 3, 0.95),
                                       vs_base=head))
    pose_nsp(claim, res)
    assert claim.verdict == "not posed" and "not learned (inconclusive)" in claim.precondition


# ------------------------------------------------------------------ the forest plot

def test_the_forest_plot_draws_one_row_per_claim_and_task_coloured_by_verdict():
    import matplotlib.colors as mcolors
    import matplotlib.pyplot as plt

    from pipeline.report.style import png

    level = compare([0.503, 0.508, 0.498], [0.501, 0.499, 0.500], margin=0.02)
    worse = compare([0.40, 0.41, 0.39], [0.50, 0.51, 0.49], margin=0.02)
    fixed = compare([0.253, 0.254, 0.252], [0.25, 0.2505, 0.2495], margin=0.01)
    tasks = [TaskVerdict(task=t, metric="accuracy", verdict=verdict(c, "better"), rows="r", test=c)
             for t, c in (("word_order", level), ("bible_sections", worse))]
    claims = [_claim(level, tasks=tasks, fixed=fixed, fixed_verdict="level", fixed_margin=FIXED),
              Claim(id="depth", claim="Deeper is better", paper="", verdict="not run", run_by="grid=depth"),
              Claim(id="nsp", claim="NSP helps", paper="", verdict="not posed", test=worse, margin=POINTS,
                    precondition="the head did not learn")]
    rows = lines(claims)
    assert [(r.label, r.verdict) for r in rows] == [
        ("A higher mask ratio than 15% (40%): word_order", "level"),
        ("A higher mask ratio than 15% (40%): bible_sections", "opposite"),
        ("A higher mask ratio than 15% (40%): fixed set", "level"),
        ("Deeper is better", "not run"), ("NSP helps", "not posed")]
    fig = forest_figure(claims)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == [r.label for r in rows]  # top to bottom
    dots = [c.lines[0] for c in ax.containers]  # one error bar per reading; none for the claims without one
    assert len(dots) == 3
    assert [mcolors.to_hex(d.get_color()) for d in dots] == [VERDICT_COLORS[v] for v in ("level", "opposite", "level")]
    assert [d.get_xdata()[0] for d in dots] == pytest.approx([0.3, -10.0, 0.3])  # in points
    assert {t.get_text() for t in ax.texts} == {"not run (the table names what runs it)",
                                              "not posed (its precondition does not hold)"}
    assert len(ax.collections) >= 3 + 3  # a margin band and a TOST bar per reading
    legend = {t.get_text() for t in ax.get_legend().get_texts()}
    assert {"shown", "opposite", "level", "inconclusive", "no difference", "the claim's margin"} <= legend
    assert ax.get_xlabel() and ax.get_ylabel()
    assert len(png(fig)) > 5000
    plt.close("all")


def test_the_gap_along_pretraining_reads_at_half_the_steps_and_the_end_with_a_true_minus():
    along = [[199, -0.34], [399, -0.3], [599, -0.7], [800, -0.75]]
    assert trend(along) == "−0.3 at step 399, −0.8 at step 800 (steady)"
    assert trend([[399, 1.0], [800, 2.4]]) == "+1.0 at step 399, +2.4 at step 800 (widening)"
    assert trend([[399, -3.0], [800, -0.5]]).endswith("(narrowing)") and trend(along[:1]) is None
