"""The ablation report from known numbers: tables, comparisons, findings, figures, and a real browser."""
from __future__ import annotations

import itertools
import json
from dataclasses import replace
from pathlib import Path

import pytest

from omegaconf import OmegaConf

from conftest import chromedriver, tracking_store
from pipeline.config import compose, validate
from pipeline.finetune.training import summarize
from pipeline.io import write_json
from pipeline.report.fixed import learned_nsp, passing
from pipeline.report.ledger import load_claims, verdict
from pipeline.report.ledger import main as ledger_main
from pipeline.report.model import Comparison, Crossing, FamilyResult, Method, Row, Score, SuiteCell, to_json
from pipeline.report.sections.method import method_text
from pipeline.stages.report import run as build_report

# grid=ci as it was before the lineage joined it: two variants, two pretraining runs each; nsp_off (a row of the
# NSP and objective tables) is left out.
CI = ["grid=ci", "grid.seeds.variants=2", "grid.pretrain=[nsp_off_full_sentences,ltr]",
      "grid.families=[pretraining,features,nsp,objective]",
      "~suite"]  # one task (the default suite's tests: test_the_demo_suite_...)


# a claim's test is the report's own, read again against the claim's margin: these fields aside, the same
NO_MARGIN = {"margin": None, "tost_p": None, "tost_low": None, "tost_high": None, "seeds_needed_level": None}


def _grid(*overrides: str) -> list[str]:
    """CI's settings and ``overrides``; one that picks a suite replaces CI's single task."""
    return [*(o for o in CI if o != "~suite" or not any(x.startswith("suite=") for x in overrides)), *overrides]
SCORES = {  # run -> mode -> test accuracy per fine-tuning seed
    "baseline": {"pretrained": [0.60, 0.61, 0.59], "scratch": [0.50, 0.52, 0.48], "tfidf": [0.52],
                 "frozen_weighted": [0.55, 0.555, 0.545]},
    "baseline-s1": {"pretrained": [0.62, 0.63, 0.61], "frozen_weighted": [0.565, 0.57, 0.56]},
    "ltr": {"pretrained": [0.55, 0.56, 0.54], "frozen_weighted": [0.50, 0.51, 0.49]},
    "ltr-s1": {"pretrained": [0.56, 0.57, 0.55], "frozen_weighted": [0.50, 0.51, 0.49]},
    "nsp_off_full_sentences": {"pretrained": [0.605, 0.595, 0.60], "frozen_weighted": [0.56, 0.55, 0.555]},
    "nsp_off_full_sentences-s1": {"pretrained": [0.62, 0.625, 0.615], "frozen_weighted": [0.56, 0.55, 0.555]},
}


RUN_IDS = itertools.count()


def _run_id() -> str:
    return f"{next(RUN_IDS):032x}"  # as MLflow's: the report only cites them


def _selection(mode: str, metrics: list[str], best: float, by: str = "baseline") -> dict:
    """A mode's choice on dev as the finetune stage records it: two candidates, the first chosen."""
    if mode == "tfidf":
        grid = [{"ngrams": 2, "c": 10.0}, {"ngrams": 1, "c": 1.0}]
    else:
        grid = [{"lr": 1e-3, "pooling": "mean"}, {"lr": 3e-4, "pooling": "mean"}]
    return {"chosen": dict(grid[0]), "by": by, "seed": 0,
            "grid": [{**g, "dev": {m: best - 0.05 * i for m in metrics}, "mlflow_run_id": _run_id()}
                     for i, g in enumerate(grid)]}


def _control(ft: dict, shuffled: dict[str, float]) -> dict:
    """The word-order control as the finetune stage records it: each mode's test score with the words shuffled."""
    metrics = ft["metrics"]
    return {"what": "each text's words shuffled", "seeds": [0],
            "modes": {mode: summarize([{"seed": 0, **{m: v for m in metrics}}], metrics)
                      for mode, v in shuffled.items()}}


def _finetune(scores: dict, pretrain_seed: int) -> dict:
    modes = {}
    for mode, values in scores.items():
        runs = [{"seed": s, "pretrain_seed": pretrain_seed, "accuracy": v, "dev": {"accuracy": v},
                 "mlflow_run_id": _run_id()} for s, v in enumerate(values)]
        modes[mode] = {**summarize(runs, ["accuracy"]), "selection": _selection(mode, ["accuracy"], values[0]),
                       "seconds": 1.0}
    return {"task": "bible_sections", "metric": "accuracy", "metrics": ["accuracy"], "scored_on": "test",
            "train_examples": 200, "dev_examples": 100, "test_examples": 100, "chance": 0.3, "pretrain_run_id": "x",
            "modes": modes, "mode_order": list(modes)}


FLOORS = {"majority": 0.07, "left": 0.20, "left_right": 0.33, "clean_left": 0.22, "clean_left2": 0.27,
          "clean_left_right": 0.37}  # each floor's accuracy at the fixed set's masked positions


# The layout probe's cells (lengths 16 and 128, and pairs) and each floor's accuracy in every one of them.
CELLS = [{"name": f"single{n}_{w}", "label": f"one segment of {n}, {w}", "layout": "single", "length": n,
          "where": w, "rows": 100} for n in (16, 128) for w in ("early", "middle", "late")] + \
        [{"name": f"pair_{s}", "label": f"sentence pair, in {s}", "layout": "pair", "length": None, "where": s,
          "rows": 100} for s in ("A", "B")]


def _layout(base: float, weak: float | None = None) -> dict[str, float]:
    """A run's accuracy in each cell of the probe: ``base`` everywhere, ``weak`` in pair_B."""
    return {f"layout/{c['name']}": weak if weak is not None and c["name"] == "pair_B" else base for c in CELLS}


def _floors(folder: Path) -> None:
    """The eval_set stage's meta.json: how the set was built, the count-based floors on it and on the probe."""
    write_json(folder / "meta.json", {
        "floors": {n: {"masked": v, "replaced": v, "unchanged": v, "all": v} for n, v in FLOORS.items()},
        "settings": {"max_seq_length": 128, "short_seq_prob": 0.1},
        "stats": {"sequences": 1000, "tokens": 110000, "actual_next": 0.45, "length": {"p10": 70, "p50": 128, "p90": 128},
                  "first_sep": {"p10": 20, "p50": 55, "p90": 95}},
        "layout": {"settings": {"lengths": [16, 128], "rows": 100}, "cells": CELLS,
                   "floors": {n: {c["name"]: v for c in CELLS} for n, v in FLOORS.items()}}})


def _pretrain(plots: str, lm: str, final_acc: float, fixed_acc: float | None = None) -> dict:
    """A pretraining run's metrics, and its curves where the pretrain stage writes them (plots/, DVC-tracked): the
    fixed set's accuracy rises linearly to ``fixed_acc`` over steps 25 to 100 (tokens 1,000 a step, 0.1 s a step)."""
    Path(plots).mkdir(parents=True, exist_ok=True)
    fixed_acc = final_acc if fixed_acc is None else fixed_acc
    for split, steps in (("train", range(0, 101, 10)), ("val", (50, 100))):
        rows = [f"{step},{9 - 3 * step / 100},{final_acc * step / 100}" for step in steps]
        Path(plots, f"pretrain_{split}.csv").write_text("\n".join([f"step,loss,{lm}_acc", *rows]) + "\n")
    nsp = lm == "mlm"  # the NSP head on the fixed set's pairs, rising to its final accuracy
    rows = [f"{step},{fixed_acc * step / 100},{1000 * step},{0.1 * step},{1e9 * step}"
            + (f",{0.5 + fixed_acc / 10 * step / 100}" if nsp else "") for step in (25, 50, 75, 100)]
    Path(plots, "pretrain_fixed.csv").write_text(
        "\n".join(["step,acc_masked,tokens,seconds,flops" + (",nsp_acc" if nsp else ""), *rows]) + "\n")
    layout = _layout(fixed_acc + 0.1, weak=fixed_acc + 0.03)
    # along pretraining the first 25 rows of each cell (steps 50 and 99), then all 100 after training (step 100)
    rows = [",".join([str(step), str(1000 * step), str(n), *(str(v * step / 99) for v in layout.values())])
            for step, n in ((50, 25), (99, 25), (100, 100))]
    Path(plots, "pretrain_layout.csv").write_text(
        "\n".join([",".join(["step", "tokens", "rows", *(c["name"] for c in CELLS)]), *rows]) + "\n")
    return {"mlflow_run_id": _run_id(), "steps": 100, "train_seconds": 12.0, f"val/{lm}_acc": final_acc,
            "val/loss": 6.0, "val/perplexity": 150.0, "lm": lm, "fixed/acc_masked": fixed_acc,
            "fixed/acc_replaced": fixed_acc, "fixed/acc_unchanged": 0.8, "fixed/loss_masked": 4.0, **layout,
            **({"fixed/nsp_acc": 0.50 + fixed_acc / 10} if lm == "mlm" else {})}


def _ci_report_config(root: Path, *overrides: str):
    """grid=ci's settings (and ``overrides``) with every output under ``root``; the corpus's metrics and the floors
    written there."""
    m = root / "metrics"
    cfg = compose([*_grid(*overrides), f"paths.metrics={m}", f"paths.variants.metrics={m / 'variants'}",
                   f"paths.plots={root / 'plots'}", f"paths.variants.plots={root / 'plots' / 'variants'}",
                   f"paths.reports={root / 'reports'}", f"tracking.uri={tracking_store(root)}",
                   f"paths.eval_set={root / 'eval_set'}"])
    write_json(m / "corpus.json", {s: {"documents": 10, "words": 1000} for s in ("train", "valid")})
    _floors(root / "eval_set")
    return cfg


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    cfg = _ci_report_config(root)
    for name, run in cfg.runs.items():
        lm, acc = ("ltr", 0.25) if run.variant == "ltr" else ("mlm", 0.15 if run.variant != "baseline" else 0.16)
        write_json(f"{run.metrics}/pretrain.json", _pretrain(run.plots, lm, acc, acc + 0.01 * run.pretrain_seed))
        write_json(f"{run.metrics}/finetune.json", _finetune(SCORES[name], run.pretrain_seed))
    res = build_report(validate(cfg))
    return root / "reports", res


def test_the_baseline_against_its_floors_opens_the_report(report):
    """Fixed-set accuracies 0.16 and 0.17 (two runs): above the majority floor (0.07), below the bigram (0.20)."""
    folder, res = report
    it = res.intrinsic
    assert it.fixed.mean == pytest.approx(0.165) and it.fixed.units == [0.16, 0.17]
    assert [f.name for f in it.floors] == ["majority", "left", "left_right"]
    # two runs: one degree of freedom, so 3.5 points below the bigram floor is not yet a verdict
    assert it.vs_floors["majority"].verdict == "better" and it.vs_floors["left"].verdict == "inconclusive"
    assert it.vs_floors["left"].test.startswith("one-sample t-test") and not it.learned
    # the curve rises linearly to the final accuracy: the majority floor falls between steps 25 and 50
    c = it.crossings["majority"]
    assert c.crossed == 2 and c.step == pytest.approx((43.75 + 100 * 0.07 / 0.17) / 2, abs=1e-3)
    assert c.tokens == pytest.approx(1000 * c.step, rel=1e-4) and c.seconds == pytest.approx(c.step / 10, rel=1e-3)
    assert it.crossings["left"] == Crossing(runs=2, crossed=0, step=None, tokens=None, seconds=None, flops=None)
    md = (folder / "report.md").read_text()
    assert md.index("Has the baseline learned language?") < md.index("## Findings")
    assert "The baseline does not beat the bigram floor" in res.findings[1]
    assert "Warning: at 100 steps the baseline is not above the bigram floor" in md
    assert res.summary["floors"]["left"] == 0.20 and res.summary["baseline"]["fixed_acc"] == pytest.approx(0.165)


def test_the_layout_probe_shows_every_row_in_every_cell_against_the_floors(report):
    """Baseline runs at 0.26 and 0.27 in every cell but pair_B (0.19, 0.20): clear of the bigram floor (0.20) in
    seven cells, not in the eighth; the report says which, and summary.json and the figure carry it."""
    folder, res = report
    probe = res.layout
    assert [c["name"] for c in probe["cells"]] == [c["name"] for c in CELLS]
    base = probe["rows"][0]
    assert base["variant"] == "baseline" and base["runs"] == 2 and base["floors"] == ["majority", "left", "left_right"]
    assert base["cells"]["single128_late"].mean == pytest.approx(0.265)
    assert base["cells"]["single128_late"].vs_floors["left"].verdict == "better"
    assert base["cells"]["pair_B"].vs_floors["left"].verdict != "better" and probe["baseline_reads"] is False
    ltr = next(r for r in probe["rows"] if r["variant"] == "ltr")   # its own kind's floors: the clean left context
    assert ltr["floors"] == ["majority", "clean_left", "clean_left2"]
    assert "not clear of the bigram floor in 1 of 8 cells (sentence pair, in B): it reads some layouts" in \
        " ".join(res.findings)
    summary = res.summary
    assert summary["baseline"]["layout"]["pair_B"] == pytest.approx(0.195)
    assert summary["baseline"]["layout_min"] == pytest.approx(0.195)
    assert summary["floors"]["layout"]["left"]["single16_early"] == 0.20
    along = probe["along"]   # the baseline's runs at each validation, from plots/pretrain_layout.csv
    assert [p["step"] for p in along] == [50, 99] and along[1]["rows"] == 25   # the whole probe's point left out
    assert along[1]["cells"]["single16_early"]["mean"] == pytest.approx(0.265)
    md = (folder / "report.md").read_text()
    assert md.index("## Does it read ordinary text? The layout probe") < md.index("## Findings")
    assert "the first [SEP] at position 20 to 95" in md and "45% of them with the actual next segment" in md
    assert "layout_probe.png" in md and (folder / "figures" / "layout_along.png").exists()


def test_without_a_suite_the_noise_target_is_the_task_s_own(report):
    """One task, no suite: the noise section sizes its comparisons against the task's own target, found by its
    name (bible_sections: report.detect_tasks' 5 points, not report.detect's 10), and says so in one header."""
    folder, res = report
    assert [(t.task, t.target) for t in res.noise] == [("bible_sections", 0.05)]
    assert "| cheapest to detect 5.0 points |" in (folder / "report.md").read_text()


def test_nsp_is_read_against_its_base_rate(report):
    """The fixed set's pairs with the actual next B 45% of the time: always guessing "random" scores 55%; the
    baseline's NSP accuracy (0.516, 0.517) is below it."""
    _, res = report
    nsp = res.nsp
    assert nsp.actual_next == pytest.approx(0.45) and nsp.base_rate == pytest.approx(0.55)
    assert nsp.accuracy.mean == pytest.approx(0.5165) and nsp.vs_base.verdict == "worse"
    assert res.summary["floors"]["nsp_base_rate"] == pytest.approx(0.55)
    assert any(f.startswith("Next-sentence prediction: B is the actual next segment in 45.0% of the fixed set's")
               for f in res.findings)
    folder, _ = report  # its curve along pretraining, against the base rate, beside the baseline's fixed-set curve
    assert "figures/baseline_nsp_curve.png" in (folder / "report.md").read_text()
    assert (folder / "figures" / "baseline_nsp_curve.png").stat().st_size > 1000


def test_pretraining_variants_are_tested_on_the_fixed_set_beside_their_floors(report):
    _, res = report
    objective = next(f for f in res.families if f.name == "objective")
    rows = {r.name: r for r in objective.rows}
    ltr = rows["ltr"]
    assert ltr.fixed.units == [0.25, 0.26] and ltr.vs_fixed.verdict == "better"
    assert ltr.vs_fixed.diff == pytest.approx(0.09) and ltr.vs_fixed.test.startswith("t-test on per-")
    # each kind of LM against its own floors: the left-to-right LM's read the clean left context
    assert set(ltr.vs_floors) == {"majority", "clean_left", "clean_left2"}
    assert ltr.vs_floors["majority"].verdict == "better"
    assert ltr.vs_floors["clean_left"].diff == pytest.approx(0.255 - 0.22)
    assert [f.name for f in objective.floors] == ["majority", "left", "left_right", "clean_left", "clean_left2"]
    assert res.table["objective"]["ltr"]["fixed_vs_p"] < 0.05
    lineage = next((f for f in res.families if f.name == "lineage"), None)
    assert lineage is None  # not in this grid


def test_families_rows_and_tested_comparisons(report):
    out, res = report
    saved = json.loads((out / "ablations.json").read_text())
    assert saved == json.loads(json.dumps(to_json(res)))
    fams = {f["name"]: f for f in saved["families"]}
    assert list(fams) == ["pretraining", "features", "nsp", "objective"]
    objective = {r["label"]: r for r in fams["objective"]["rows"]}
    assert not objective["MLM, no NSP"]["ran"]  # nsp_off is not in grid=ci
    ltr = objective["LTR, no NSP"]
    s = ltr["scores"]["pretrained"]
    assert s["mean"] == pytest.approx(0.555) and s["n_pretrain"] == 2 and s["n_finetune"] == 6
    assert s["units"] == pytest.approx([0.55, 0.56])
    c = ltr["vs"]  # 55.5 vs 61.0 over two runs each; the spread pooled over the family's rows
    assert c["verdict"] == "worse" and c["diff"] == pytest.approx(-0.055) and c["high"] < 0 < c["p"] < 0.05
    assert c["borderline"] and c["df"] == 2  # two rows of two runs: two degrees of freedom; p between 0.01 and 0.1
    assert c["n_pretrain"] == [2, 2] and c["n_finetune"] == [6, 6] and "pooled" in c["test"]
    assert ltr["paper"] == {"MNLI-m dev accuracy": 82.1, "QNLI dev accuracy": 84.3, "MRPC dev accuracy": 77.5,
                            "SST-2 dev accuracy": 92.1, "SQuAD 1.1 dev F1": 77.8}
    assert ltr["pretrain"]["lm"] == "ltr" and ltr["pretrain"]["val_lm_acc"] == 0.25 and ltr["pretrain"]["runs"] == 2
    nsp = {r["name"]: r for r in fams["nsp"]["rows"]}
    assert nsp["nsp_off_full_sentences"]["vs"]["verdict"] == "inconclusive"
    assert nsp["nsp_off_full_sentences"]["vs"]["seeds_needed"] is None  # the means are equal
    scratch = fams["pretraining"]["rows"][1]
    assert scratch["scores"]["scratch"]["n_pretrain"] == 0 and scratch["scores"]["scratch"]["n_finetune"] == 3
    assert scratch["vs"]["verdict"] == "worse" and "Welch" in scratch["vs"]["test"]
    frozen = fams["features"]["rows"][1]
    assert frozen["vs"]["verdict"] == "worse" and "paired" in frozen["vs"]["test"]
    assert fams["pretraining"]["classical"]["mean"] == 0.52 and fams["pretraining"]["classical"]["n_finetune"] == 1
    method = saved["method"]
    assert method["pretraining_runs"] == {"baseline": 2, "nsp_off_full_sentences": 2, "ltr": 2}
    assert method["finetune_seeds"] == 3 and method["false_positive_rate"] <= 0.06 and method["smallest_detectable"] > 0


def test_the_report_opens_with_the_claims_ledger_computed_from_its_own_tests(report):
    """One row per claim of claims.yaml, in order: a claim the grid measured carries the test the family table
    shows, its verdict read against the paper's direction; one it did not run names what runs it."""
    out, res = report
    claims = load_claims()
    assert [c.id for c in res.ledger] == [c["id"] for c in claims]
    by_id = {c.id: c for c in res.ledger}
    fams = {f.name: {r.name: r for r in f.rows} for f in res.families}
    pays = by_id["pretraining_pays"]  # from scratch worse than pretrained: the paper's direction
    assert pays.verdict == "shown" and replace(pays.test, **NO_MARGIN) == fams["pretraining"]["scratch"].vs
    assert pays.test.margin == pytest.approx(0.02) and pays.margin["unit"] == "points"  # claims.yaml's 2 points
    assert pays.rows == "from scratch vs pretrained" and pays.metric == "bible_sections test accuracy"
    frozen = by_id["finetune_vs_frozen"]  # the only frozen mode of grid=ci is the closest
    assert frozen.verdict == "shown" and frozen.rows.startswith("learned mix of all layers (ELMo) vs")
    ltr = by_id["bidirectional_vs_ltr"]  # no lineage in this grid: the objective family measures it
    assert ltr.verdict == "shown" and ltr.section == "Pretraining objective"
    assert ltr.test.diff == pytest.approx(-0.055) and replace(ltr.fixed, **NO_MARGIN) == fams["objective"]["ltr"].vs_fixed
    assert ltr.fixed.margin == pytest.approx(0.01)  # the fixed set's margin, 1 point
    assert ltr.fixed_verdict == "opposite"  # LTR 25% vs MLM 16% on the fixed set here: the reverse beyond noise
    assert [step for step, _ in ltr.along] == sorted(step for step, _ in ltr.along) and len(ltr.along) > 1
    nsp = by_id["nsp"]  # nsp_off is not in grid=ci: the claim is not run, and says what runs it
    assert nsp.verdict == "not run" and nsp.run_by.startswith("experiment=nsp_posed") and nsp.test is None
    assert {c.id for c in res.ledger if c.verdict == "not run"} == {
        "contextual_vs_static", "masking_procedure", "nsp", "depth", "depth_12_24", "mask_ratio", "grammar", "senses"}
    saved = json.loads((out / "summary.json").read_text())["ledger"]
    assert saved["pretraining_pays"]["verdict"] == "shown" and saved["pretraining_pays"]["diff"] == pays.test.diff
    assert saved["depth"] == {"verdict": "not run", "run_by": "grid=depth"}
    md = (out / "report.md").read_text()
    assert md.index("## The paper's claims, measured here") < md.index("figures/ledger_forest.png") < \
        md.index("| claim | the paper |") < md.index("## Method")
    assert "| Pretraining pays | pretrained far above" in md and "not run: grid=depth" in md


def test_a_claims_verdict_follows_the_papers_direction():
    base = Comparison(diff=0.02, n_pretrain=[3, 3], n_finetune=None, test="t", confidence=0.95, verdict="better",
                      low=0.01, high=0.03, p=0.01)
    assert verdict(base, "better") == "shown" and verdict(base, "worse") == "opposite"
    assert verdict(Comparison(**{**base.__dict__, "verdict": "inconclusive"}), "better") == "inconclusive"
    assert verdict(Comparison(**{**base.__dict__, "verdict": "inconclusive (one run each)"}), "worse") == \
        "inconclusive"
    assert verdict(None, "better") == "not run"


def test_ledgers_of_several_reports_side_by_side(tmp_path, capsys):
    """python -m pipeline.report.ledger NAME=summary.json ...: a column per report, a row per claim."""
    claims = load_claims()
    a = {"ledger": {"nsp": {"verdict": "inconclusive", "diff": 0.005, "low": -0.02, "high": 0.03, "p": 0.6,
                            "runs_needed": 40, "percent": True, "fixed_verdict": "shown", "fixed_diff": -0.011}}}
    b = {"ledger": {"nsp": {"verdict": "shown", "diff": -0.03, "low": -0.05, "high": -0.01, "p": 0.01,
                            "percent": True}}}
    write_json(tmp_path / "a.json", a)
    write_json(tmp_path / "b.json", b)
    ledger_main([f"default={tmp_path / 'a.json'}", f"long={tmp_path / 'b.json'}"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| claim | default | long |" and len(lines) == 2 + len(claims)
    nsp = next(line for line in lines if line.startswith("| Next-sentence prediction helps |"))
    assert nsp == ("| Next-sentence prediction helps | inconclusive (+0.5 [-2.0, +3.0]), ~40 runs a side; fixed set "
                   "shown (-1.1) | shown (-3.0 [-5.0, -1.0]) |")
    assert "| Deeper is better, even for small tasks | not run | not run |" in lines
    with pytest.raises(SystemExit, match="usage: python -m pipeline.report.ledger NAME=path"):
        ledger_main([str(tmp_path / "a.json")])


def test_findings_are_generated_from_the_numbers(report):
    _, res = report
    text = "\n".join(res.findings)
    assert ("Pretraining objective: LTR, no NSP is 5.5 points below MLM + NSP on bible_sections test accuracy "
            "(55.5 vs 61.0; worse (borderline): 95% interval −10.3 to −0.7, p = 0.039)") in text
    assert "the paper found it worse by 2.3 (MNLI-m dev accuracy 82.1 vs 84.4); the same direction here." in text
    assert ("Next-sentence prediction: NSP off (full sentences) is level with NSP on (segment pairs) on bible_sections "
            "test accuracy (61.0 vs 61.0; inconclusive: 95% interval −6.1 to +6.1, p = 1.000; the difference is too "
            "small to decide with any practical number of runs)") in text
    assert "too close to tell here" in text
    # two pretraining runs against a fixed number: one degree of freedom, too few to tell 9 points apart
    assert ("Fine-tuning the baseline is 9.0 points above the TF-IDF baseline (61.0 vs 52.0; inconclusive "
            "(borderline): 95% interval −3.7 to +21.7, p = 0.070; about 3 pretraining runs per side") in text


def test_a_comparison_with_one_pretraining_run_per_side_is_never_a_verdict(tmp_path):
    cfg = compose([*CI, "grid.seeds.baseline=1", "grid.seeds.variants=1", f"paths.metrics={tmp_path / 'm'}",
                   f"paths.variants.metrics={tmp_path / 'm' / 'variants'}", f"paths.plots={tmp_path / 'p'}",
                   f"paths.variants.plots={tmp_path / 'p' / 'variants'}"])
    for name, run in cfg.runs.items():
        write_json(f"{run.metrics}/pretrain.json", _pretrain(run.plots, "mlm", 0.15))
        write_json(f"{run.metrics}/finetune.json", _finetune(SCORES[name], 0))
    from pipeline.report.results import ablation_results, load_families

    res = ablation_results(OmegaConf.to_container(cfg.runs), "ci", load_families(["nsp", "objective"]),
                           ["pretrained", "frozen_weighted"])
    verdicts = [r.vs.verdict for f in res.families for r in f.rows if r.vs]
    assert verdicts and set(verdicts) == {"inconclusive (one run each)"}


def _suite_finetune(task: str, metrics: list[str], scores: dict[str, list[float]], pretrain_seed: int) -> dict:
    modes = {}
    for mode, values in scores.items():
        runs = [{"seed": s, "pretrain_seed": pretrain_seed, **{m: v - 0.01 * i for i, m in enumerate(metrics)},
                 "mlflow_run_id": _run_id()} for s, v in enumerate(values)]
        modes[mode] = {**summarize(runs, metrics), "selection": _selection(mode, metrics, values[0]), "seconds": 1.0}
    return {"task": task, "metric": metrics[0], "metrics": metrics, "scored_on": "test", "train_examples": 100,
            "dev_examples": 50, "test_examples": 50, "chance": 0.5, "pretrain_run_id": "x", "modes": modes,
            "mode_order": list(modes)}


def test_suite_columns_each_tested_with_the_papers_numbers(tmp_path):
    """suite=table6 (MNLI-m, MRPC, SST-2): every family row gets one cell per task, tested in that task alone."""
    m = tmp_path / "metrics"
    cfg = compose([*_grid("suite=table6"), "grid.families=[features,nsp,objective]", f"paths.metrics={m}",
                   f"paths.variants.metrics={m / 'variants'}", f"paths.plots={tmp_path / 'plots'}",
                   f"paths.variants.plots={tmp_path / 'plots' / 'variants'}", f"paths.reports={tmp_path / 'reports'}",
                   f"tracking.uri={tracking_store(tmp_path)}", f"paths.eval_set={tmp_path / 'eval_set'}"])
    _floors(tmp_path / "eval_set")
    assert sorted(cfg.finetunes) == sorted(f"{r}-{t}" for r in cfg.runs for t in ("mnli_m", "mrpc", "sst2"))
    assert cfg.finetunes["ltr-s1-mrpc"].out == f"{m}/variants/ltr-s1/tasks/mrpc"
    write_json(m / "corpus.json", {s: {"documents": 10, "words": 1000} for s in ("train", "valid")})
    # LTR is clearly worse on MRPC only; level on SST-2 (the same numbers as the baseline); MNLI-m in between
    shift = {"mnli_m": -0.01, "mrpc": -0.10, "sst2": 0.0}
    names = {"mnli_m": ("MNLI-m", ["accuracy"]), "mrpc": ("MRPC", ["f1", "accuracy"]), "sst2": ("SST-2", ["accuracy"])}
    for name, run in cfg.runs.items():
        write_json(f"{run.metrics}/pretrain.json", _pretrain(run.plots, "ltr" if run.variant == "ltr" else "mlm", 0.2))
        base = SCORES["baseline" if not run.pretrain_seed else "baseline-s1"]
        for task, (label, metrics) in names.items():
            d = shift[task] if run.variant == "ltr" else 0.0
            scores = {k: [v + d for v in vs] for k, vs in base.items() if k in cfg.finetunes[f"{name}-{task}"].modes
                      and not (task == "sst2" and k == "frozen_weighted")}  # a mode one task did not run
            write_json(f"{run.metrics}/tasks/{task}/finetune.json", _suite_finetune(label, metrics, scores,
                                                                                  run.pretrain_seed))
    res = build_report(validate(cfg))
    suite = res.suite
    assert [c["label"] for c in suite["columns"]] == ["MNLI-m accuracy", "MRPC accuracy", "SST-2 accuracy"]
    assert [c["paper"] for c in suite["columns"]] == ["MNLI-m dev accuracy", "MRPC dev accuracy",
                                                      "SST-2 dev accuracy"]
    objective = {r["name"]: r for r in next(f for f in suite["families"] if f["name"] == "objective")["rows"]}
    ltr = objective["ltr"]["cells"]
    assert [c.vs.verdict for c in ltr] == ["inconclusive", "worse", "inconclusive"]
    # MRPC's column reads its accuracy (0.01 below its f1 in these files), not the task's headline f1
    assert ltr[1].mean == pytest.approx(0.61 - 0.10 - 0.01) and ltr[1].vs.diff == pytest.approx(-0.10)
    assert ltr[2].vs.diff == pytest.approx(0.0)
    assert [c.paper for c in ltr] == [82.1, 77.5, 92.1]
    assert [c.paper for c in objective["baseline"]["cells"]] == [84.4, 86.7, 92.7]
    assert objective["baseline"]["cells"][0].vs is None and not objective["nsp_off"]["ran"]
    features = {r["name"]: r for r in next(f for f in suite["families"] if f["name"] == "features")["rows"]}
    assert [c.ran for c in features["frozen_weighted"]["cells"]] == [True, True, False]
    assert [c.ran for c in features["pretrained"]["cells"]] == [True, True, True]
    fam = next(f for f in suite["families"] if f["name"] == "objective")
    assert fam["classical"] == pytest.approx([0.52, 0.51, 0.52])  # TF-IDF in each column, on its metric
    assert res.summary["ltr"]["mrpc/pretrained_accuracy"] == pytest.approx(ltr[1].mean)
    assert res.table["objective"]["ltr"]["mrpc/primary_accuracy_vs_p"] < 0.05
    text = "\n".join(res.findings)
    assert ("Pretraining objective, across suite table6: LTR, no NSP against MLM + NSP: MNLI-m accuracy −1.0 "
            "(inconclusive), paper −2.3; MRPC accuracy −10.0 (worse), paper −9.2; SST-2 accuracy +0.0 "
            "(inconclusive), paper −0.6.") in text
    md = (tmp_path / "reports" / "report.md").read_text()
    assert "| setting | MNLI-m accuracy | paper: MNLI-m dev accuracy | MRPC accuracy |" in md
    assert "Suite table6:" in md and "figures/objective_suite.png" in md
    assert res.task == "MNLI-m"  # the detailed tables are the first column's task


def test_the_demo_suite_reads_each_claim_on_both_tasks_beside_each_arm_s_choice_and_the_control(tmp_path):
    """suite=demo (word_order, bible_sections): from scratch is far below fine-tuning on the reading task and far
    above it on the topic task, so "pretraining pays" is mixed -- shown on one, opposite on the other, not
    averaged away; the choices on dev and the word-order control each get their section."""
    cfg = _ci_report_config(tmp_path, "suite=demo")
    shift = {"word_order": {"scratch": -0.10}, "bible_sections": {"scratch": +0.20}}
    labels = {"word_order": "word_order", "bible_sections": "bible_sections"}
    for name, run in cfg.runs.items():
        write_json(f"{run.metrics}/pretrain.json", _pretrain(run.plots, "ltr" if run.variant == "ltr" else "mlm", 0.2))
        base = SCORES["baseline" if not run.pretrain_seed else "baseline-s1"] if run.variant == "baseline" else \
            SCORES[name]
        for task in labels:
            scores = {k: [v + shift[task].get(k, 0.0) for v in vs] for k, vs in base.items()
                      if k in cfg.finetunes[f"{name}-{task}"].modes}
            ft = _suite_finetune(labels[task], ["accuracy"], scores, run.pretrain_seed)
            if name == "baseline":
                ft["control"] = _control(ft, {"tfidf": 0.5, "scratch": 0.5, "pretrained": 0.5} if task == "word_order"
                                         else {"tfidf": 0.50, "scratch": 0.68, "pretrained": 0.55})
            write_json(f"{run.metrics}/tasks/{task}/finetune.json", ft)
    res = build_report(validate(cfg))
    pays = next(c for c in res.ledger if c.id == "pretraining_pays")
    assert pays.verdict == "mixed" and [(t.task, t.verdict) for t in pays.tasks] == \
        [("word_order", "shown"), ("bible_sections", "opposite")]
    assert res.summary["ledger"]["pretraining_pays"]["tasks"]["bible_sections"]["verdict"] == "opposite"
    controls = {c["task_name"]: c for c in res.controls}
    assert controls["word_order"]["needs_word_order"] and not controls["bible_sections"]["needs_word_order"]
    assert controls["bible_sections"]["best_without_pretraining"] == "scratch"  # 0.70 against TF-IDF's 0.52
    assert controls["bible_sections"]["arms"]["scratch"]["drop"] == pytest.approx(0.70 - 0.68)
    assert res.summary["control"]["word_order/needs_word_order"] is True
    chosen = {c["task_name"]: c for c in res.choices}["word_order"]["runs"]
    assert set(chosen) == {"baseline", "ltr", "nsp_off_full_sentences"}  # each network or objective chooses its own
    assert chosen["baseline"]["tfidf"]["chosen"] == {"ngrams": 2, "c": 10.0}
    md = (tmp_path / "reports" / "report.md").read_text()
    assert "## Fine-tuning: every arm at its best" in md and "figures/choices_word_order.png" in md
    assert ("| word_order | 50.0 | fine-tuned 60.0 → 50.0 (−10.0); from scratch 40.0 → 50.0 (+10.0); TF-IDF 52.0 → "
            "50.0 (−2.0) | yes (TF-IDF: −2.0) |") in md
    assert ("| baseline | fine-tuned | lr 3e-4, mean: 55.0; lr 1e-3, mean: 60.0 | lr 1e-3, mean (the grid's highest "
            "rate) | 60.0 (3 seeds) |") in md
    assert "mixed: word_order shown; bible_sections opposite" in md


@pytest.mark.slow  # a whole report of the depth grid, 7 s (CI runs the slow marker too)
def test_a_swept_depth_grid_reads_each_depth_at_its_best_and_12_against_24(tmp_path):
    """grid=depth with its learning-rate sweep: every row's pilots and chosen rate in their own section and figure,
    the pilots one MLflow group under the grid's run; the depth claim reads the deeper stack that trained best
    (pre-LN here) against 2 layers of its kind, and 12 vs 24 layers is its own claim."""
    from mlflow.tracking import MlflowClient

    cfg = _ci_report_config(tmp_path, "grid=depth", "grid.families=[depth,pretraining]",
                            "grid.pretrain=[layers_4,layers_12,layers_24,prenorm_2,prenorm_12,prenorm_24]")
    meta = json.loads((tmp_path / "eval_set" / "meta.json").read_text())
    meta["stats"]["actual_next"] = 0.49  # NSP's base rate 51%: every run's head (52 to 53%) has left it
    write_json(tmp_path / "eval_set" / "meta.json", meta)
    client = MlflowClient(cfg.tracking.uri)
    experiment = client.create_experiment(cfg.tracking.experiment, artifact_location=(tmp_path / "mlruns").as_uri())
    fixed = {"baseline": 0.27, "layers_4": 0.28, "layers_12": 0.20, "layers_24": 0.18, "prenorm_2": 0.27,
             "prenorm_12": 0.29, "prenorm_24": 0.31}
    chosen = {"baseline": 1e-3, "layers_4": 1e-3, "layers_12": 3e-4, "layers_24": 1e-4, "prenorm_2": 3e-3,
              "prenorm_12": 1e-3, "prenorm_24": 1e-3}
    pilot_ids = []
    for name, run in cfg.runs.items():
        acc = fixed[run.variant] + 0.002 * run.pretrain_seed
        pre = _pretrain(run.plots, "mlm", 0.2, acc)
        if not run.pretrain_seed:
            pilots = []
            for lr in cfg.grid.sweep.lrs:
                pilot_ids.append(client.create_run(experiment, tags={"kind": "pilot"}).info.run_id)
                diverged = lr == 3e-3 and run.variant.startswith("layers_")
                pilots.append({"lr": lr, "score": None if diverged else 5.0 + abs(lr - chosen[run.variant]) * 100,
                               "acc_masked": None if diverged else 0.1, "diverged": diverged, "steps": 25,
                               "mlflow_run_id": pilot_ids[-1]})
            lr = chosen[run.variant]
            pre["lr_sweep"] = {"chosen_lr": lr, "score": "fixed/loss_masked", "fraction": 0.25,
                               "edge": lr in (min(cfg.grid.sweep.lrs), max(cfg.grid.sweep.lrs)), "pilots": pilots}
        write_json(f"{run.metrics}/pretrain.json", pre)
        modes = list(run.modes)
        scores = {m: [0.5 + acc + 0.01 * s for s in range(3)] for m in modes}
        write_json(f"{run.metrics}/finetune.json", _finetune(scores, run.pretrain_seed))
    res = build_report(validate(cfg))
    assert [s["row"] for s in res.sweeps] == ["baseline", *cfg.grid.pretrain]
    assert res.summary["prenorm_24"]["pretrain_lr"] == 1e-3 and res.summary["layers_24"]["pretrain_lr"] == 1e-4
    md = (tmp_path / "reports" / "report.md").read_text()
    assert "## Pretraining: every row at its best learning rate" in md and "figures/lr_sweep.png" in md
    assert "| 24 layers | 5.000 (10.0%) | 5.020 (10.0%) | 5.090 (10.0%) | diverged | 0.0001 (the grid's lowest rate) |" \
        in md
    by_id = {c.id: c for c in res.ledger}
    assert by_id["depth"].rows == "24 layers pre-LN vs 2 layers pre-LN" and by_id["depth"].verdict == "shown"
    assert by_id["depth_12_24"].rows == "24 layers pre-LN (12 vs 24) vs 12 layers pre-LN"
    assert by_id["depth_12_24"].fixed.diff == pytest.approx(0.02)
    assert res.table["depth"]["prenorm_24_vs_12"]["fixed_vs_diff"] == pytest.approx(0.02)
    rows = {r.key: r for r in next(f for f in res.families if f.name == "depth").rows}
    assert rows["prenorm_24"].passes["steps"] == {"step": 25, "tokens": 25000, "last_gap": pytest.approx(4.0),
                                                  "until_step": 100, "until_tokens": 100000}
    assert rows["layers_24"].passes["steps"]["step"] is None and rows["layers_24"].passes["flops"]["flops"] is None
    assert "Where 24 layers pre-LN passes 2 layers pre-LN on the fixed set: at the same steps it passes for good at " \
           "step 25 (0.03M tokens); at the same training FLOPs it passes at 0.0 TFLOP." in res.findings
    assert ("Where 24 layers passes 2 layers (baseline) on the fixed set: at the same steps it does not pass within "
            "100 steps (0.10M tokens), −9.1 points at the last") in " ".join(res.findings)
    # the NSP head's curve on the set's pairs read the same way, its end tested run against run
    assert rows["prenorm_24"].passes_nsp["steps"]["step"] == 25 and rows["prenorm_24"].vs_fixed_nsp.verdict == "better"
    assert rows["prenorm_24"].vs_fixed_nsp.diff == pytest.approx(0.004)
    assert ("Where 24 layers pre-LN passes 2 layers pre-LN at next-sentence prediction on the fixed set's pairs: at "
            "the same steps it passes for good at step 25 (0.03M tokens)") in " ".join(res.findings)
    assert rows["layers_24"].passes_nsp["steps"]["step"] is None and rows["layers_24"].vs_fixed_nsp.verdict == "worse"
    base = rows["baseline"].pretrain.plots_all  # a head at its base rate has nothing to pass: the line is left out
    assert learned_nsp(base, 0.51, 0.95) and not learned_nsp(base, 0.55, 0.95)
    ltr = _pretrain(str(tmp_path / "ltr_curves"), "ltr", 0.2, 0.3)  # no NSP head: no NSP curve to read
    assert ltr and passing([str(tmp_path / "ltr_curves")], rows["prenorm_24"].pretrain.plots_all,
                           key="nsp_acc") is None
    grid_run = client.search_runs([experiment], "tags.kind = 'grid'")[0].info.run_id
    group = client.search_runs([experiment], "tags.kind = 'group'")
    assert [g.info.run_name for g in group] == ["lr-sweep-depth"] and group[0].data.tags["mlflow.parentRunId"] == grid_run
    members = client.search_runs([experiment], f"tags.`mlflow.parentRunId` = '{group[0].info.run_id}'")
    assert sorted(r.info.run_id for r in members) == sorted(pilot_ids)


def test_the_nsp_claim_is_posed_only_once_the_head_has_learned(tmp_path):
    """NSP off against a baseline whose NSP head sits at its base rate (the fixed set's B is the actual next
    segment in 45% of pairs: always "random" scores 55%) is "not posed", whatever the rows' difference; above it
    the claim reads as the test says. The precondition is in the ledger either way, with the head's accuracy."""
    from pipeline.report.ledger import cell, pose_nsp
    from pipeline.report.sections.ledger import measured_text

    nsp_acc, verdict = 0.55, "not posed"
    cfg = _ci_report_config(tmp_path, "grid.pretrain=[nsp_off]", "grid.families=[pretraining,nsp]")
    for name, run in cfg.runs.items():
        pre = _pretrain(run.plots, "mlm", 0.2)
        if run.variant == "baseline":
            pre["fixed/nsp_acc"] = nsp_acc + 0.001 * run.pretrain_seed
        else:
            pre.pop("fixed/nsp_acc")
        write_json(f"{run.metrics}/pretrain.json", pre)
        scores = {m: [0.60 - 0.05 * (run.variant == "nsp_off") + 0.01 * s + 0.004 * run.pretrain_seed for s in range(3)]
                  for m in run.modes}
        write_json(f"{run.metrics}/finetune.json", _finetune(scores, run.pretrain_seed))
    res = build_report(validate(cfg))
    nsp = next(c for c in res.ledger if c.id == "nsp")
    assert nsp.verdict == verdict and nsp.test.verdict == "worse"  # NSP off 5 points below either way
    assert f"NSP head {100 * nsp_acc:.0f}." in nsp.precondition and "against its base rate 55.0%" in nsp.precondition
    saved = json.loads((tmp_path / "reports" / "summary.json").read_text())["ledger"]["nsp"]
    assert saved["verdict"] == verdict and saved["precondition"] == nsp.precondition
    md = (tmp_path / "reports" / "report.md").read_text()
    assert f"not posed: {nsp.precondition}" in md
    res.nsp.accuracy.mean, res.nsp.vs_base.verdict = 0.80, "better"  # a head that learned: the test's verdict stands
    nsp.verdict = "shown"
    pose_nsp(nsp, res)
    assert nsp.verdict == "shown" and nsp.precondition.startswith("the baseline's NSP head 80.0% on the fixed set's")
    assert measured_text(nsp).startswith(f"posed: {nsp.precondition}; NSP off")
    saved = {**saved, "verdict": "shown", "precondition": nsp.precondition}
    assert cell(saved).startswith("shown (") and cell(saved).endswith(f"; posed: {nsp.precondition}")


def test_markdown_and_html_carry_tables_figures_and_lineage(report):
    out, res = report
    md, page = (out / "report.md").read_text(), (out / "index.html").read_text()
    figures = sorted(p.name for p in (out / "figures").iterdir())
    assert {"objective_curves.png", "objective_bars.png", "nsp_bars.png", "pretraining_bars.png",
            "pretrain_curves.png"} <= set(figures)
    assert all(f"figures/{f}" in md for f in figures)
    assert page.count("data:image/png;base64,") == len(figures) and "figures/" not in page  # self-contained
    assert "| LTR, no NSP | 55.5 [" in md and "(2 x 3) | −5.5 [" in md and ": worse |" in md
    assert "## Method" in md and "pooled over the family's rows" in md and "false-positive rate" in md
    assert "Grid 'ci': the baseline and 2 pretraining variants, 100 steps each" in md
    assert "the next token's at every position for LTR" in md  # the family's note under its table
    assert "not in this grid" in md and "The paper's numbers, at its scale (not ours): Devlin et al. 2019" in md
    for run in res.runs.values():
        assert run.pretrain.mlflow_run_id in md
    assert "sha256" not in md and "git_commit" in md  # the report reads no MLflow store: run ids are its links


def test_report_renders_in_headless_chromium(report, tmp_path):
    """Open index.html offline in Chromium: every image decodes, nothing on the console, a screenshot is saved."""
    driver_path = chromedriver()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,900"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=opts)
    try:
        driver.get((report[0] / "index.html").as_uri())
        images = driver.execute_script(
            "return Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.alt])")
        tables = driver.execute_script("return document.querySelectorAll('table').length")
        console = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        shot = tmp_path / "report.png"
        driver.save_screenshot(str(shot))
    finally:
        driver.quit()
    assert len(images) == len(list((report[0] / "figures").iterdir())) and tables >= 8
    assert all(complete and width > 0 for complete, width, _ in images), images
    assert console == []
    assert shot.stat().st_size > 10_000


@pytest.mark.parametrize("variants, words", [(0, "the baseline alone"), (1, "the baseline and 1 pretraining variant"),
                                             (2, "the baseline and 2 pretraining variants")])
def test_the_opening_line_names_the_grid_rows_in_words(variants, words):
    from pipeline.report.sections.opening import rows_phrase

    assert rows_phrase(variants) == words


def test_a_crossing_is_interpolated_between_validations():
    from pipeline.report.fixed import crossing

    curve = [{"step": 100, "acc_masked": 0.10, "tokens": 1e5, "seconds": 10, "flops": 1e12},
             {"step": 200, "acc_masked": 0.30, "tokens": 2e5, "seconds": 30, "flops": 2e12}]
    assert crossing(curve, 0.20) == {"step": 150, "tokens": 1.5e5, "seconds": 20, "flops": 1.5e12}
    assert crossing(curve, 0.05)["step"] == 100  # above it at the first validation already
    assert crossing(curve, 0.30) is None  # never strictly above


def test_the_lineage_starts_from_the_n_gram_count_table(tmp_path):
    """On the fixed set each generation is tested against the one before; the first against the n-gram floor."""
    from pipeline.report.results import ablation_results, load_families
    from pipeline.report.render import write_report

    m = tmp_path / "m"
    cfg = compose(["grid=ci", "grid.seeds.variants=2", "grid.pretrain=[cbow,elmo]", "grid.families=[lineage]",
                   f"paths.metrics={m}", f"paths.variants.metrics={m / 'variants'}", f"paths.plots={tmp_path / 'p'}",
                   f"paths.variants.plots={tmp_path / 'p' / 'variants'}"])
    fixed = {"cbow": 0.40, "elmo": 0.30, "baseline": 0.34}  # both-neighbours floor, clean context: 0.37
    lm = {"cbow": "w2v", "elmo": "bilm", "baseline": "mlm"}
    for name, run in cfg.runs.items():
        acc = fixed[run.variant] + 0.01 * run.pretrain_seed
        write_json(f"{run.metrics}/pretrain.json", _pretrain(run.plots, lm[run.variant], acc, acc))
        scores = {k: v for k, v in SCORES["baseline" if not run.pretrain_seed else "baseline-s1"].items()
                  if k in run.modes}
        write_json(f"{run.metrics}/finetune.json", _finetune(scores, run.pretrain_seed))
    floors = {n: {"masked": v} for n, v in FLOORS.items()}
    res = ablation_results(OmegaConf.to_container(cfg.runs), "ci", load_families(["lineage"]),
                           ["pretrained", "frozen_weighted"], floors=floors)
    fam = res.families[0]
    rows = {r.name: r for r in fam.rows if r.ran}
    assert fam.first_generation == "clean_left_right"
    assert rows["cbow"].vs_fixed_row.startswith("n-gram") and rows["cbow"].vs_fixed.diff == pytest.approx(0.035)
    assert rows["cbow"].vs_fixed.test.startswith("one-sample")
    assert rows["elmo"].vs_fixed_row == rows["cbow"].label and rows["elmo"].vs_fixed.diff == pytest.approx(-0.1)
    assert rows["baseline"].vs_fixed_row == rows["elmo"].label
    write_report(res, corpus={s: {"documents": 1, "words": 1} for s in ("train", "valid")},
                 pre=json.loads((m / "pretrain.json").read_text()), ft=json.loads((m / "finetune.json").read_text()),
                 out=tmp_path / "reports", lineage=[])
    md = (tmp_path / "reports" / "report.md").read_text()
    table = md[md.index("| setting |"):]
    assert table.index("| n-gram count table (most frequent between both neighbours, clean context)") < \
        table.index("| static embeddings, CBOW")


# Figures that do not mislead: a mean with an interval is a dot with an error bar (or a bar from zero), every axis
# is labelled, every reference line (a floor, TF-IDF) is named in a legend or by a text beside it.

def _legend_texts(fig) -> set[str]:
    legends = [ax.get_legend() for ax in fig.axes] + list(fig.legends)
    return {t.get_text() for lg in legends if lg for t in lg.get_texts()}


def _assert_honest(fig) -> None:
    from matplotlib.container import BarContainer

    named = _legend_texts(fig)
    for ax in fig.axes:
        assert ax.get_xlabel().strip() and ax.get_ylabel().strip(), ax.get_title()
        if any(isinstance(c, BarContainer) for c in ax.containers):
            assert ax.get_ylim()[0] == 0, f"{ax.get_title()}: bars from {ax.get_ylim()[0]}"
        texts = {t.get_text() for t in ax.texts}
        # reference lines: axhline/axvline (drawn in axes coordinates along one axis) and dashed lines
        for line in ax.lines:
            if line.get_transform() is not ax.transData or line.get_linestyle() == "--":
                label = line.get_label()
                assert label and not label.startswith("_"), f"{ax.get_title()}: an unnamed reference line"
                assert label in named | texts, f"{ax.get_title()}: {label!r} is in no legend and no text"


def _errorbars(ax) -> list:
    from matplotlib.container import ErrorbarContainer

    return [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


def test_figure_every_figure_of_the_report_is_honest(report):
    """Each figure the report draws, from the report's own results: dots with error bars, labelled axes, TF-IDF and
    the floors named."""
    import matplotlib.pyplot as plt

    from pipeline.report.curves import curves_figure, fixed_curves_figure
    from pipeline.report.sections.family import bars_figure

    _, res = report
    figs = []
    for fam in res.families:
        if not any(r.ran for r in fam.rows):
            continue
        fig = bars_figure(fam, res.metric, res.variant_modes, res.task)
        ax = fig.axes[0]
        series = 1 if fam.kind == "mode" else len(res.variant_modes)
        assert not ax.patches and len(_errorbars(ax)) == series, fam.name
        assert any(t.startswith("TF-IDF baseline") for t in _legend_texts(fig))  # the fixture ran TF-IDF
        figs.append(fig)
        fixed_rows = [r for r in fam.rows if r.fixed]
        if fixed_rows:
            figs.append(fixed_curves_figure([(r.label, r.pretrain.plots_all) for r in fixed_rows], fam.floors,
                                            fam.title))
        curves = [(r.label, r.pretrain.plots, r.pretrain.lm) for r in fam.rows if r.ran and r.kind == "variant"]
        figs.append(curves_figure(curves, fam.title))
    base = [r.pretrain.plots for r in res.runs.values() if r.variant == "baseline"]
    fixed = fixed_curves_figure([("baseline", base)], res.intrinsic.floors, "Baseline")
    floors = [line for line in fixed.axes[0].lines if line.get_linestyle() == "--"]
    assert [line.get_label() for line in floors] == ["majority 7.0%", "bigram 20.0%", "both neighbours 33.0%"]
    assert all(ax.get_ylim()[0] == 0 for ax in fixed.axes)
    figs.append(fixed)
    assert len(figs) >= 8
    for fig in figs:
        _assert_honest(fig)
        plt.close(fig)


def test_figure_a_mean_without_an_interval_is_a_bare_dot_and_a_mode_not_run_no_dot():
    """A row with no interval gets no error bar, a mode a row did not run no dot (not one at zero); means a point
    apart sit on an axis at least MIN_SPAN points high."""
    from pipeline.report.sections.family import bars_figure
    from pipeline.report.style import MIN_SPAN

    def stat(mean, half=None):
        return Score(mean=mean, std=0.0, low=None if half is None else mean - half,
                     high=None if half is None else mean + half, units=[mean])

    def row(name, label, ran, scores):
        return Row(label=label, paper_row=None, paper={}, kind="variant", name=name, ran=ran, scores=scores)

    fam = FamilyResult(name="masking", title="Mask ratio", question="", kind="variant", floors=[], reference_row="15%",
                       classical=None, paper=[], note=None, first_generation=None,
                       rows=[row("baseline", "15%", True, {"pretrained": stat(0.46, 0.03), "frozen_weighted": stat(0.40)}),
                             row("mask_40", "40%", True, {"pretrained": stat(0.47)}), row("mask_30", "30%", False, {})])
    fig = bars_figure(fam, "accuracy", ["pretrained", "frozen_weighted"], "bible_sections")
    ax = fig.axes[0]
    pretrained, frozen = _errorbars(ax)
    assert list(pretrained.lines[0].get_ydata()) == pytest.approx([46, 47])
    bars = [[y for _, y in seg] for seg in pretrained.lines[2][0].get_segments()]
    assert bars[0] == pytest.approx([43, 49]) and len(bars[1]) == 0  # 40% has no interval: no error bar
    assert list(frozen.lines[0].get_ydata()) == pytest.approx([40])  # the 40% row did not run it: no dot at 0
    lo, hi = ax.get_ylim()
    assert hi - lo >= MIN_SPAN and lo > 0
    assert [t.get_text() for t in ax.get_xticklabels()] == ["15%", "40%"]
    assert ax.get_ylabel() == "bible_sections test accuracy (%)"
    _assert_honest(fig)


def test_figure_a_suite_puts_every_column_on_one_scale_with_tfidf_named():
    """Correlations are drawn x 100 beside percentages (and the axis says so); TF-IDF's per-column score is one
    named dashed line."""
    from pipeline.report.sections.suite import suite_figure

    cell = lambda mean, half: SuiteCell(ran=True, paper=None, mean=mean, low=mean - half, high=mean + half)  # noqa: E731
    columns = [{"label": "MRPC accuracy", "metric": "accuracy"}, {"label": "STS-B spearman", "metric": "spearman"}]
    spec = {"classical": [0.52, None],
            "rows": [{"label": "MLM + NSP", "ran": True, "cells": [cell(0.61, 0.02), cell(0.40, 0.05)]},
                     {"label": "LTR, no NSP", "ran": True, "cells": [cell(0.55, 0.02), SuiteCell(ran=False, paper=None)]},
                     {"label": "no NSP", "ran": False, "cells": []}]}
    fig = suite_figure(spec, columns, "Objective")
    ax = fig.axes[0]
    ours, ltr = _errorbars(ax)
    assert list(ours.lines[0].get_ydata()) == pytest.approx([61, 40]) and list(ltr.lines[0].get_ydata()) == pytest.approx([55])
    assert "correlations x 100" in ax.get_ylabel()
    tfidf, = [line for line in ax.lines if line.get_linestyle() == "--"]
    assert tfidf.get_label().startswith("no pretraining: TF-IDF") and tfidf.get_ydata()[0] == pytest.approx(52)
    _assert_honest(fig)


def test_figure_contextuality_counts_layers_in_whole_numbers():
    from pipeline.report.sections.polysemy import contextuality_figure

    probe = {"models": {"baseline": {"corrected": [0.43, 0.42, 0.43]}, "word2vec": {"corrected": [0.9]}}}
    fig = contextuality_figure(probe)
    fig.canvas.draw()
    ticks = [t for t in fig.axes[0].get_xticks() if fig.axes[0].get_xlim()[0] <= t <= fig.axes[0].get_xlim()[1]]
    assert ticks and all(t == int(t) for t in ticks)
    _assert_honest(fig)


PHENOMENA = ("anaphor_agreement", "island_effects")
BLIMP = {"baseline": 0.60, "ltr": 0.70, "nsp_off_full_sentences": 0.605}  # overall by variant; + 0.01 a seed


def _zero_shot(overall: float) -> dict:
    """A run's zero_shot.json: two paradigms, one per phenomenon, averaging ``overall``."""
    paradigm = {"p1": overall - 0.05, "p2": overall + 0.05}
    return {"configured": True, "scored": True, "method": "pll", "overall": overall, "paradigm": paradigm,
            "phenomenon": dict(zip(PHENOMENA, paradigm.values())), "field": {"syntax": overall},
            "pairs": {"p1": 10, "p2": 10}, "excluded": {"p1": 0, "p2": 0}, "excluded_total": 0, "unscored": []}


def test_zero_shot_grammar_gets_a_section_with_tested_rows_the_floor_and_the_papers_numbers(tmp_path):
    import matplotlib.pyplot as plt

    from pipeline.report.sections.grammar import along_figure, grammar_figure

    m = tmp_path / "metrics"
    cfg = _ci_report_config(tmp_path)
    for name, run in cfg.runs.items():
        lm, acc = ("ltr", 0.25) if run.variant == "ltr" else ("mlm", 0.16)
        write_json(f"{run.metrics}/pretrain.json", _pretrain(run.plots, lm, acc))
        write_json(f"{run.metrics}/finetune.json", _finetune(SCORES[name], run.pretrain_seed))
        write_json(f"{run.metrics}/zero_shot.json", _zero_shot(BLIMP[run.variant] + 0.01 * run.pretrain_seed))
        if run.variant == "baseline":  # scored along pretraining: 50% at first, rising 4 points a validation;
            fixed = Path(run.plots, "pretrain_fixed.csv")  # the second run from its second validation (resumed)
            lines = fixed.read_text().splitlines()
            blimp = [f"{0.5 + 0.04 * i + 0.01 * run.pretrain_seed}" if i or not run.pretrain_seed else ""
                     for i in range(len(lines) - 1)]
            fixed.write_text("\n".join([lines[0] + ",blimp", *(f"{line},{b}" for line, b in zip(lines[1:], blimp))])
                             + "\n")
    write_json(m / "zero_shot_floor.json", {**_zero_shot(0.55), "order": 3})
    res = build_report(validate(cfg))
    zs = res.zero_shot
    objective = next(f for f in zs["families"] if f["name"] == "objective")
    base, ltr = objective["rows"][0], next(r for r in objective["rows"] if r["name"] == "ltr")
    assert base["overall"].units == [0.6, 0.61] and base["overall"].low < 0.605 < base["overall"].high
    assert base["vs"] is None and base["vs_floor"].test.startswith("one-sample")
    assert ltr["vs_row"] == base["label"] and ltr["vs"].verdict == "better" and ltr["vs"].test.startswith("t-test")
    assert set(base["phenomenon"]) == set(PHENOMENA)
    summary = json.loads((tmp_path / "reports" / "summary.json").read_text())
    assert summary["baseline"]["blimp_overall"] == pytest.approx(0.605) and summary["floors"]["blimp_ngram"] == 0.55
    md = (tmp_path / "reports" / "report.md").read_text()
    assert "## Zero-shot grammar (BLiMP)" in md and "GPT-2 83.0" in md and "human 88.6" in md
    assert "n-gram floor (3-gram)" in md and (tmp_path / "reports" / "figures" / "blimp_objective.png").exists()
    along = zs["along"]
    assert along["runs"] == 2 and [p["step"] for p in along["points"]] == [25, 50, 75, 100]
    assert [p["blimp"].units for p in along["points"]][:2] == [pytest.approx([0.5]), pytest.approx([0.54, 0.55])]
    assert along["blimp_above_chance"] == 75  # 2 runs: t(1) makes the interval 12.7 sd wide; at 50 it reaches 48%
    assert "### Along pretraining" in md and (tmp_path / "reports" / "figures" / "blimp_along.png").exists()
    fig = along_figure(along, zs["floor"])
    _assert_honest(fig)
    assert {"chance 50%", "3-gram floor 55.0%"} <= {t.get_text() for t in fig.axes[1].texts}
    plt.close(fig)
    fig = grammar_figure(objective, zs["floor"], "Objective")
    _assert_honest(fig)
    names = [t.get_text() for t in fig.axes[0].texts]
    assert "chance 50.0%" in names and "n-gram floor 55.0% overall" in names
    plt.close(fig)


def test_zero_shot_of_the_baseline_alone_is_a_row_against_the_floor(tmp_path):
    """A grid with no pretraining variant (experiment=demo_long's grid=baseline): the baseline's BLiMP still gets
    its table row against the n-gram floor (no reference column), and the ledger's grammar claim reads it."""
    from types import SimpleNamespace

    from pipeline.report.grammar import grid_result
    from pipeline.report.ledger import _grammar
    from pipeline.report.doc import Doc
    from pipeline.report.sections.grammar import grammar_table

    runs = {}
    for k, overall in enumerate((0.60, 0.61, 0.62)):
        name = "baseline" if k == 0 else f"baseline-s{k}"
        write_json(tmp_path / name / "zero_shot.json", _zero_shot(overall))
        runs[name] = {"metrics": str(tmp_path / name), "variant": "baseline", "pretrain_seed": k}
    zs = grid_result([], runs, {**_zero_shot(0.55), "order": 3}, 0.95)
    (fam,) = zs["families"]
    (row,) = fam["rows"]
    assert fam["reference_row"] is None and row["name"] == "baseline" and row["vs"] is None
    assert row["overall"].units == pytest.approx([0.60, 0.61, 0.62]) and row["vs_floor"].verdict == "better"
    doc = Doc()
    grammar_table(doc, fam, zs["floor"], None)
    header, _, first, floor = [line for line in "".join(doc.md).splitlines() if line.startswith("|")][:4]
    assert header.split(" | ")[:3] == ["| row", "overall", "vs n-gram floor"] and "reference" not in first
    assert floor.count("|") == header.count("|")
    margin = {"value": 2, "unit": "points", "reason": "r"}
    claim = _grammar(SimpleNamespace(zero_shot=zs), "better", {"id": "grammar", "claim": "c", "paper": "p",
                                                               "margin": margin})
    assert claim.verdict == "shown" and replace(claim.test, **NO_MARGIN) == row["vs_floor"] and "55.0%" in claim.rows
    assert claim.test.margin == pytest.approx(0.02) and claim.margin == margin


def test_without_zero_shot_scores_the_report_has_no_grammar_section(report):
    reports, res = report
    assert res.zero_shot["scored"] is False and "Zero-shot grammar" not in (reports / "report.md").read_text()


def test_method_text_leaves_out_power_when_no_variant_was_compared():
    """A grid of the baseline alone (experiment=demo_long) has no observed difference: the method paragraph
    gives the false-positive rate and the detectable difference, not an empty power list."""
    method = Method(pretraining_runs={"baseline": 3}, finetune_seeds=5, confidence=0.95, sd_pretrain=0.008,
                    sd_finetune=0.013, false_positive_rate=0.05, smallest_detectable=0.03, power_at_observed={})
    text = method_text(method, "accuracy")
    assert "power —" not in text and "at the observed differences" not in text
    assert "a false-positive rate of 5.0% on no difference, and 80% power from a difference of 3.0 points" in text
    assert "(between two pretraining rows of this design by the pooled test, test sampling left out;" in text
    method.power_at_observed = {"1.1": 0.06}
    assert "power 1.1: 6% at the observed differences, and 80% power" in method_text(method, "accuracy")


def test_a_missing_browser_fails_under_ci_and_skips_elsewhere(monkeypatch):
    """`.ci/run` sets BERT_LAB_REQUIRE_BROWSER=1: there a missing chromedriver fails the browser tests."""
    monkeypatch.setenv("PATH", "")
    monkeypatch.setenv("BERT_LAB_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="BERT_LAB_REQUIRE_BROWSER=1 requires it"):
        chromedriver()
    monkeypatch.delenv("BERT_LAB_REQUIRE_BROWSER")
    with pytest.raises(pytest.skip.Exception, match="Chromium's driver is not installed"):
        chromedriver()


# The key structure of ablations.json (summary.json is its "summary"): each mapping's path (a list's items as
# "[]") and its keys, names that come from the grid as placeholders (<run>, <cell>, ...), and key sets that recur
# by name.
COMPARISON = "borderline confidence df diff high low n_finetune n_pretrain p seeds_needed test verdict"
CLAIM_TEST = f"{COMPARISON} margin tost_high tost_low tost_p"  # a ledger's test, read against the claim's margin
MARGIN = "reason unit value"
INTERVAL = "high low mean std units"
SCORE = f"{INTERVAL} groups mlflow_run_ids n_finetune n_pretrain"
CROSSING = "crossed flops runs seconds step tokens"
FLOOR = "accuracy label name short view"
PRETRAIN = ("fixed_acc fixed_loss fixed_replaced fixed_unchanged fixed_units lm mlflow_run_id mlflow_run_ids "
            "parameters plots runs steps train_flops_per_token train_seconds val_lm_acc val_loss val_perplexity")
SUITE_CELLS = " ".join(f"{t}/primary_accuracy_{k}" for t in ("mnli_m", "mrpc", "sst2") for k in ("high", "low", "mean",
                                                                                                "vs_p"))
SUMMARY_ROW = ("blimp_overall fixed_acc fixed_nsp_acc frozen_weighted_accuracy layout layout_mean layout_min "
               "mnli_m/pretrained_accuracy mrpc/pretrained_accuracy pretrained_accuracy scratch_accuracy "
               "sst2/pretrained_accuracy tfidf_accuracy val_ltr_acc val_mlm_acc")
TABLE_ROW = (f"{SUITE_CELLS} frozen_weighted_high frozen_weighted_low frozen_weighted_mean frozen_weighted_n_finetune "
             "frozen_weighted_n_pretrain pretrained_high pretrained_low pretrained_mean pretrained_n_finetune "
             "pretrained_n_pretrain vs_diff vs_high vs_low vs_p")
ABLATIONS_KEYS = {
    "": "choices controls families findings grid intrinsic layout ledger method metric noise nsp runs suite summary "
        "table task variant_modes zero_shot",
    "choices[]": "metric runs task task_name",
    "choices[].runs": "<run>",
    "choices[].runs.<run>": "<mode>",
    "choices[].runs.<run>.<mode>": "chosen grid n seed test",
    "choices[].runs.<run>.<mode>.chosen": "c lr ngrams pooling",
    "choices[].runs.<run>.<mode>.grid[]": "c dev lr ngrams pooling",
    "controls[]": "arms best_without_pretraining chance metric needs_word_order seeds task task_name",
    "controls[].arms": "<mode>",
    "controls[].arms.<mode>": "drop shuffled task",
    "families[]": "classical first_generation floors kind name note paper question reference_row rows title",
    "families[].classical": SCORE,
    "families[].floors[]": FLOOR,
    "families[].paper[]": "columns rows source",
    "families[].paper[].rows": "<paper-row>",
    "families[].rows[]": "against crossings fixed fixed_kinds key kind label name paper paper_row pretrain primary ran scores vs "
                         "vs_fixed vs_fixed_row vs_floors vs_row",
    "families[].rows[].crossings": "<floor>",
    "families[].rows[].crossings.<floor>": CROSSING,
    "families[].rows[].fixed": INTERVAL,
    "families[].rows[].fixed_kinds": "loss replaced unchanged",
    "families[].rows[].paper": "<paper-column>",
    "families[].rows[].pretrain": f"{PRETRAIN} plots_all",
    "families[].rows[].primary": SCORE,
    "families[].rows[].scores": "<mode>",
    "families[].rows[].scores.<mode>": SCORE,
    "families[].rows[].vs": COMPARISON,
    "families[].rows[].vs_fixed": COMPARISON,
    "families[].rows[].vs_floors": "<floor>",
    "families[].rows[].vs_floors.<floor>": COMPARISON,
    "intrinsic": "bigram built crossings fixed floors learned lm vs_floors",
    "intrinsic.built": "actual_next first_sep length sequences settings tokens",
    "intrinsic.built.first_sep": "p10 p50 p90",
    "intrinsic.built.length": "p10 p50 p90",
    "intrinsic.built.settings": "max_seq_length short_seq_prob",
    "intrinsic.crossings": "<floor>",
    "intrinsic.crossings.<floor>": CROSSING,
    "intrinsic.fixed": INTERVAL,
    "intrinsic.floors[]": FLOOR,
    "intrinsic.vs_floors": "<floor>",
    "intrinsic.vs_floors.<floor>": COMPARISON,
    "layout": "along baseline_reads cells floors rows settings",
    "ledger[]": "along claim cost_seconds fixed fixed_margin fixed_verdict id level_shown margin metric paper percent "
                "rows run_by section tasks test verdict",
    "ledger[].margin": MARGIN,
    "ledger[].fixed_margin": MARGIN,
    "ledger[].tasks[]": "metric rows task test verdict",
    "ledger[].tasks[].test": CLAIM_TEST,
    "ledger[].fixed": CLAIM_TEST,
    "ledger[].test": CLAIM_TEST,
    "layout.along[]": "cells rows runs step tokens",
    "layout.along[].cells": "<cell>",
    "layout.along[].cells.<cell>": "high low mean",
    "layout.cells[]": "label layout length name rows where",
    "layout.floors[]": "cells label name short",
    "layout.floors[].cells": "<cell>",
    "layout.rows[]": "cells floors label lm runs variant",
    "layout.rows[].cells": "<cell>",
    "layout.rows[].cells.<cell>": f"{INTERVAL} vs_floors",
    "layout.rows[].cells.<cell>.vs_floors": "<floor>",
    "layout.rows[].cells.<cell>.vs_floors.<floor>": COMPARISON,
    "layout.settings": "lengths rows",
    "method": "confidence false_positive_rate finetune_seeds power_at_observed pretraining_runs sd_finetune "
              "sd_pretrain smallest_detectable",
    "method.power_at_observed": "<difference>",
    "method.pretraining_runs": "<run>",
    "noise[]": "designs finetune_pooled finetune_seconds finetune_spread metric pretrain_seconds runs score "
               "sd_finetune sd_pretrain sd_test seeds target task test_examples",
    "noise[].finetune_spread": "df high low rows runs sd",
    "noise[].finetune_pooled": "df high low rows runs sd",
    "noise[].designs[]": "cheapest comparison df floor options rows runs sd_test se seeds test test_from",
    "noise[].designs[].options[]": "change detectable examples seconds",
    "nsp": "accuracy actual_next base_rate vs_base",
    "nsp.accuracy": INTERVAL,
    "nsp.vs_base": COMPARISON,
    "runs": "<run>",
    "runs.<run>": "finetune_runs pretrain pretrain_seed variant",
    "runs.<run>.finetune_runs": "<mode>",
    "runs.<run>.pretrain": PRETRAIN,
    "suite": "columns families name",
    "suite.columns[]": "comparable dev_examples label metric mode paper task task_name test_examples train_examples "
                       "unit",
    "suite.families[]": "classical name reference_row rows title",
    "suite.families[].rows[]": "cells key label name ran",
    "suite.families[].rows[].cells[]": "high low mean n_finetune n_pretrain paper ran vs vs_row",
    "suite.families[].rows[].cells[].vs": COMPARISON,
    "summary": "<run> control floors ledger",
    "summary.control": "<task>/<mode>_drop <task>/needs_word_order",
    "summary.ledger": "<claim>",
    "summary.ledger.<claim>": "diff fixed_diff fixed_gap_along fixed_high fixed_low fixed_margin fixed_p "
                              "fixed_runs_needed fixed_runs_needed_level fixed_tost_high fixed_tost_low fixed_tost_p "
                              "fixed_verdict high level_shown low margin metric p percent rows run_by runs runs_needed "
                              "runs_needed_level tasks tost_high tost_low tost_p verdict",
    "summary.ledger.<claim>.tasks": "<task>",
    "summary.ledger.<claim>.tasks.<task>": "diff high low margin metric p rows runs runs_needed runs_needed_level "
                                           "tost_high tost_low tost_p verdict",
    "summary.<run>": SUMMARY_ROW,
    "summary.<run>.layout": "<cell>",
    "summary.floors": "<floor> blimp_ngram layout nsp_base_rate",
    "summary.floors.layout": "<floor>",
    "summary.floors.layout.<floor>": "<cell>",
    "table": "features nsp objective pretraining",
    "table.features": "<mode>",
    "table.features.<mode>": TABLE_ROW,
    "table.nsp": "<run>",
    "table.nsp.<run>": f"{TABLE_ROW} fixed_high fixed_low fixed_mean fixed_vs_diff fixed_vs_high fixed_vs_low "
                       "fixed_vs_p",
    "table.objective": "<run>",
    "table.objective.<run>": f"{TABLE_ROW} fixed_high fixed_low fixed_mean fixed_vs_diff fixed_vs_high "
                             "fixed_vs_low fixed_vs_p",
    "table.pretraining": "<mode>",
    "table.pretraining.<mode>": f"{SUITE_CELLS} pretrained_high pretrained_low pretrained_mean pretrained_n_finetune "
                                "pretrained_n_pretrain scratch_high scratch_low scratch_mean scratch_n_finetune "
                                "scratch_n_pretrain vs_diff vs_high vs_low vs_p",
    "zero_shot": "along families floor mean paper per_run published scored",
    "zero_shot.along": "blimp_above_chance fixed_crossed fixed_floors points runs",
    "zero_shot.along.fixed_crossed": "<floor>",
    "zero_shot.along.fixed_floors[]": FLOOR,
    "zero_shot.along.points[]": "blimp fixed step tokens",
    "zero_shot.along.points[].blimp": INTERVAL,
    "zero_shot.families[]": "name reference_row rows title",
    "zero_shot.families[].rows[]": "excluded label method name overall pairs phenomenon vs vs_floor vs_row",
    "zero_shot.families[].rows[].overall": INTERVAL,
    "zero_shot.families[].rows[].phenomenon": "<phenomenon>",
    "zero_shot.families[].rows[].phenomenon.<phenomenon>": INTERVAL,
    "zero_shot.families[].rows[].vs": COMPARISON,
    "zero_shot.families[].rows[].vs_floor": COMPARISON,
    "zero_shot.floor": "excluded_total field order overall phenomenon",
    "zero_shot.floor.field": "syntax",
    "zero_shot.floor.phenomenon": "<phenomenon>",
    "zero_shot.mean": "<run>",
    "zero_shot.paper": "5-gram GPT-2 LSTM Transformer-XL human",
    "zero_shot.per_run": "<run>",
}
# names that come from the grid, and the mappings whose keys are data (the paper's rows and columns, differences)
NAMES = {**{run: "<run>" for run in SCORES}, **{c["name"]: "<cell>" for c in CELLS}, **{f: "<floor>" for f in FLOORS},
         **{m: "<mode>" for m in ("pretrained", "scratch", "tfidf", "frozen_weighted")},
         **{f"{t}/{m}_drop": "<task>/<mode>_drop" for t in ("MNLI-m", "MRPC", "SST-2") for m in ("tfidf", "pretrained")},
         **{f"{t}/needs_word_order": "<task>/needs_word_order" for t in ("MNLI-m", "MRPC", "SST-2")},
         **{p: "<phenomenon>" for p in PHENOMENA}}
DATA_KEYS = {"families[].paper[].rows": "<paper-row>", "families[].rows[].paper": "<paper-column>",
             "method.power_at_observed": "<difference>", "summary.ledger": "<claim>",
             "summary.ledger.<claim>.tasks": "<task>"}


def _key_tree(data, path: str = "", tree: dict | None = None) -> dict[str, str]:
    """Each mapping of a JSON document: its path (a list's items as ``[]``) -> its keys, sorted, space-separated;
    the keys of every mapping at one path merged."""
    tree = {} if tree is None else tree
    if isinstance(data, dict):
        keys = {DATA_KEYS.get(path) or NAMES.get(k, k) for k in data}
        tree[path] = " ".join(sorted(keys | set(tree.get(path, "").split())))
        for key, value in data.items():
            name = DATA_KEYS.get(path) or NAMES.get(key, key)
            _key_tree(value, f"{path}.{name}" if path else name, tree)
    elif isinstance(data, list):
        for value in data:
            _key_tree(value, f"{path}[]", tree)
    return tree


@pytest.mark.slow  # a whole report with every section, 8.5 s (CI runs the slow marker too)
def test_summary_and_ablations_keep_their_keys(tmp_path):
    """summary.json and ablations.json are read by users' scripts: the full set of key paths of a report with
    every section (the floors, the layout probe, NSP, four families, a suite, BLiMP along pretraining) is pinned."""
    m = tmp_path / "metrics"
    cfg = _ci_report_config(tmp_path, "suite=table6")
    names = {"mnli_m": ("MNLI-m", ["accuracy"]), "mrpc": ("MRPC", ["f1", "accuracy"]), "sst2": ("SST-2", ["accuracy"])}
    for name, run in cfg.runs.items():
        lm, acc = ("ltr", 0.25) if run.variant == "ltr" else ("mlm", 0.16)
        write_json(f"{run.metrics}/pretrain.json", _pretrain(run.plots, lm, acc, acc + 0.01 * run.pretrain_seed))
        write_json(f"{run.metrics}/zero_shot.json", _zero_shot(BLIMP[run.variant] + 0.01 * run.pretrain_seed))
        for task, (label, metrics) in names.items():
            scores = {k: v for k, v in SCORES[name].items() if k in cfg.finetunes[f"{name}-{task}"].modes}
            ft = _suite_finetune(label, metrics, scores, run.pretrain_seed)
            if name == "baseline":  # the word-order control
                ft["control"] = _control(ft, {"tfidf": 0.5, "pretrained": 0.55})
            write_json(f"{run.metrics}/tasks/{task}/finetune.json", ft)
        if run.variant == "baseline":  # BLiMP along pretraining
            fixed = Path(run.plots, "pretrain_fixed.csv")
            lines = fixed.read_text().splitlines()
            fixed.write_text("\n".join([lines[0] + ",blimp", *(f"{line},{0.5 + 0.04 * i + 0.01 * run.pretrain_seed}"
                                                               for i, line in enumerate(lines[1:]))]) + "\n")
    write_json(m / "zero_shot_floor.json", {**_zero_shot(0.55), "order": 3})
    build_report(validate(cfg))
    ablations = json.loads((tmp_path / "reports" / "ablations.json").read_text())
    assert json.loads((tmp_path / "reports" / "summary.json").read_text()) == ablations["summary"]
    expected = {path: " ".join(sorted(keys.split())) for path, keys in ABLATIONS_KEYS.items()}
    assert _key_tree(ablations) == expected
