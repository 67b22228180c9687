"""The ablation results: each family's rows, their numbers, the comparisons and the findings.

Pure data, no plotting: the report stage renders what ``ablation_results``
returns, and writes it as ``reports/ablations.json``. Numbers come from the
metrics files the stages wrote (declared DVC deps); a row is either a
pretraining variant (the baseline included; fine-tuned with its modes) or a
fine-tuning mode of the baseline. Each row pools every pretraining run of its
variant (``grid.seeds``): its value is the mean over pretraining runs of each
run's mean over fine-tuning seeds, and every comparison is a test from
``pipeline.report.stats`` with its interval and verdict. What each family's
table shows -- its rows, its question, the paper's numbers -- is data too:
``families/<name>.yaml`` beside this file.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping

import numpy as np
import yaml
from scipy import stats as scipy_stats

from pipeline.errors import DataError
from pipeline.io import read_json
from pipeline.names import CLASSICAL, FAMILIES, SEED_FREE, check_families
from pipeline.report import fixed, layout
from pipeline.report.cells import classical_name, fmt
from pipeline.report.findings import findings, fixed_findings, layout_findings, nsp_findings
from pipeline.report.model import (AblationResults, FamilyResult, Method, NspCheck, PretrainSummary, Row, RunRecord,
                                   Score, reference_of)
from pipeline.report.stats import compare, pooled_variance, simulate, smallest_detectable, variance_components
from pipeline.variants import BASELINE


def load_families(names: list[str], folder: Path = FAMILIES) -> dict[str, dict]:
    """The table specs of the named families, in order (``grid.families``, checked at start-up)."""
    check_families(names, folder)
    return {n: yaml.safe_load((folder / f"{n}.yaml").read_text(encoding="utf-8")) for n in names}


def load_runs(runs: Mapping[str, Mapping], task: str | None = None) -> dict[str, dict]:
    """``{run name: {"variant", "pretrain_seed", "pretrain": metrics, "finetune": metrics}}`` from each run's
    metrics folder (``runs[name].metrics``); with ``task``, its fine-tuning on that task of the suite
    (``<metrics>/tasks/<task>/finetune.json``)."""
    def finetune_file(run: Mapping) -> Path:
        return Path(run["metrics"]) / ("finetune.json" if task is None else f"tasks/{task}/finetune.json")

    out = {name: {"variant": run.get("variant", name), "pretrain_seed": run.get("pretrain_seed", 0),
                  "plots": run.get("plots"), "pretrain": read_json(Path(run["metrics"]) / "pretrain.json"),
                  "finetune": read_json(finetune_file(run))}
           for name, run in runs.items()}
    task = {r["finetune"]["task"] for r in out.values()}
    if len(task) > 1:
        raise DataError(f"the runs of the grid were fine-tuned on different tasks ({', '.join(sorted(task))}); "
                        "rerun them with the same task")
    return out


def by_variant(results: Mapping[str, dict]) -> dict[str, list[dict]]:
    """The runs of each variant, in order of pretraining seed."""
    out: dict[str, list[dict]] = {}
    for r in sorted(results.values(), key=lambda r: r["pretrain_seed"]):
        out.setdefault(r["variant"], []).append(r)
    return out


def score(runs: list[dict], mode: str, metric: str, confidence: float) -> Score | None:
    """One row's number for ``mode``: its units (per-pretraining-run means; for a mode without pretraining behind
    it, each fine-tuning run), their mean, spread and interval, and the runs behind them."""
    ft = [x for r in runs if mode in r["finetune"]["modes"] for x in r["finetune"]["modes"][mode]["runs"]]
    if not ft:
        return None
    groups: dict[int, list[float]] = {}
    for x in ft:
        groups.setdefault(x.get("pretrain_seed", 0), []).append(x[metric])
    units = [x[metric] for x in ft] if mode in SEED_FREE else [float(np.mean(g)) for g in groups.values()]
    n = len(units)
    mean = float(np.mean(units))
    sd = float(np.std(units, ddof=1)) if n > 1 else 0.0
    half = float(scipy_stats.t.ppf(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n)) if n > 1 else None
    return Score(mean=round(mean, 6), std=round(sd, 6), low=None if half is None else round(mean - half, 6),
                 high=None if half is None else round(mean + half, 6), units=[round(u, 6) for u in units],
                 groups=[[round(v, 6) for v in g] for g in groups.values()],
                 n_pretrain=0 if mode in SEED_FREE else len(groups), n_finetune=len(ft),
                 mlflow_run_ids=[x["mlflow_run_id"] for x in ft])


def pretrain_summary(pres: list[dict]) -> PretrainSummary:
    """The pretraining numbers a row shows (mean over its pretraining runs); ``lm`` is the LM's metric prefix
    (``mlm``, ``ltr``, ``bilm`` or ``w2v``). Its own validation accuracy (``val_lm_acc``, on its own masking) is
    shown but never compared across rows; the fixed set's (``fixed_*``, the same positions for every row) is."""
    lm = pres[0]["lm"]

    def mean(key: str):
        values = [p[key] for p in pres if p.get(key) is not None]
        return round(float(np.mean(values)), 6) if values else None

    return PretrainSummary(
        lm=lm, val_lm_acc=mean(f"val/{lm}_acc"), val_perplexity=mean("val/perplexity"),
        fixed_acc=mean(fixed.HEADLINE), fixed_units=fixed.units(pres), fixed_replaced=mean("fixed/acc_replaced"),
        fixed_unchanged=mean("fixed/acc_unchanged"), fixed_loss=mean("fixed/loss_masked"), val_loss=mean("val/loss"),
        steps=pres[0].get("steps"), train_seconds=mean("train_seconds"), parameters=pres[0].get("parameters"),
        train_flops_per_token=pres[0].get("train_flops_per_token"), runs=len(pres),
        mlflow_run_id=pres[0].get("mlflow_run_id"), mlflow_run_ids=[p.get("mlflow_run_id") for p in pres])


def _paper_values(paper: list, row_label: str | None) -> dict[str, float]:
    if not row_label:
        return {}
    out = {}
    for block in paper:
        values = block["rows"].get(row_label)
        if values is not None:
            out.update(dict(zip(block["columns"], values)))
    return out


def choose_test(kind: str, row_mode: str, ref_mode: str) -> str:
    """Which test compares two rows: variants pool their spread; modes of the same runs are paired; a mode
    without pretraining behind it (from scratch) against one with it, Welch's."""
    if kind == "variant":
        return "pooled"
    return "welch" if (row_mode in SEED_FREE) != (ref_mode in SEED_FREE) else "paired"


def family_result(name: str, fam: dict, variants: dict[str, list[dict]], metric: str, modes: list[str],
                  confidence: float, floors: dict[str, dict] | None = None,
                  nsp_base: float | None = None) -> FamilyResult:
    """One family: its rows in order, each with our numbers, the paper's, and a tested comparison to the first row,
    downstream and on the fixed evaluation set (beside the count-based ``floors`` that apply, and where each row's
    runs crossed them). ``nsp_base``: NSP's base rate on the fixed set's pairs; where a side's head left it, the
    family's passing reads the NSP curves too."""
    paper = fam.get("paper") or []
    rows = [row for spec in fam["rows"] if (row := _row(spec, paper, variants, metric, modes, confidence))]
    ran = [row for row in rows if row.ran]
    for row in ran:  # the score rows are compared on: the mode itself, or a variant's first fine-tuning mode
        row.primary = row.scores.get(row.name if row.kind == "mode" else modes[0])
    kind = rows[0].kind if rows else None
    pooled = None
    if kind == "variant":  # each row's interval with the pooled spread the test uses (the first mode's)
        spreads = [_pool_intervals([row.scores.get(mode) for row in ran], confidence) for mode in modes]
        pooled = spreads[0] if spreads else None
    classical = score(variants[BASELINE], CLASSICAL, metric, confidence)
    previous = fam.get("compare") == "previous"  # a lineage: each row against the one before it
    _compare_rows(ran, kind, previous, classical, classical_name(variants[BASELINE][0]["finetune"]["task"]), pooled,
                  confidence)
    family_floors = fixed.add_to_family(rows, floors or {}, previous, confidence, fam.get("first_generation")) \
        if kind == "variant" else []
    for row in rows:
        if row.fixed:
            row.crossings = fixed.crossings(row.pretrain.plots_all, family_floors)
    if fam.get("passes"):  # where each row's fixed-set curve passes its reference's (depth: when depth pays)
        for row in rows:
            ref = next((r for r in rows if r.label == row.vs_fixed_row and r.pretrain), None)
            if row.fixed and ref is not None:
                row.passes = fixed.passing(row.pretrain.plots_all, ref.pretrain.plots_all)
                # depth may pay on the pairs before it does at the masked pieces
                row.passes_nsp, row.vs_fixed_nsp = fixed.passing_nsp(row.pretrain.plots_all, ref.pretrain.plots_all,
                                                                     nsp_base, confidence)
    return FamilyResult(name=name, title=fam["title"], question=fam["question"], kind=kind, floors=family_floors,
                        reference_row="the row above" if previous else (ran[0].label if ran else None), rows=rows,
                        classical=classical, paper=paper, note=fam.get("note"),
                        first_generation=fam.get("first_generation"))


def _row(spec: dict, paper: list, variants: dict[str, list[dict]], metric: str, modes: list[str],
         confidence: float) -> Row | None:
    """A family's row from its spec (a fine-tuning mode of the baseline, or a pretraining variant fine-tuned in
    every mode); None for a mode the baseline's fine-tuning did not run."""
    named = {"label": spec["label"], "paper_row": spec.get("paper"), "paper": _paper_values(paper, spec.get("paper")),
             "key": spec.get("id", spec.get("variant", spec.get("mode"))), "against": spec.get("vs")}
    if "mode" in spec:
        mode_score = score(variants[BASELINE], spec["mode"], metric, confidence)
        if mode_score is None:
            return None
        return Row(**named, kind="mode", name=spec["mode"], ran=True, scores={spec["mode"]: mode_score})
    variant = spec["variant"]
    if variant not in variants:
        return Row(**named, kind="variant", name=variant, ran=False)
    runs = variants[variant]
    pretrain = pretrain_summary([r["pretrain"] for r in runs])
    pretrain.plots = runs[0]["plots"]  # its first run's curves (DVC-tracked CSVs)
    pretrain.plots_all = [r["plots"] for r in runs]
    return Row(**named, kind="variant", name=variant, ran=True, pretrain=pretrain,
               scores={mode: score(runs, mode, metric, confidence) for mode in modes})


def _compare_rows(ran: list[Row], kind: str | None, previous: bool, classical: Score | None, classical_label: str,
                  pooled: tuple[float, int] | None, confidence: float) -> None:
    """Each row's test against its reference: the first row, or in a lineage the row above (the first row of a
    lineage against the classical baseline, a fixed number)."""
    for i, row in enumerate(ran):
        other = reference_of(ran, i, previous)
        row.vs_row = other.label if other else (classical_label if previous and classical else None)
        if other is None or not row.primary or not other.primary:
            row.vs = compare(row.primary.units, [classical.mean], test="fixed", confidence=confidence,
                             runs=(row.primary.n_finetune, 1)) if previous and classical and row.primary else None
            continue
        row.vs = compare(row.primary.units, other.primary.units, test=choose_test(kind, row.name, other.name),
                         confidence=confidence, pooled=pooled,
                         runs=(row.primary.n_finetune, other.primary.n_finetune))


def _pool_intervals(scores: list[Score | None], confidence: float) -> tuple[float, int]:
    """Set each score's interval from the variance of a run mean pooled over ``scores``; return (variance, df)."""
    var, df = pooled_variance([s.units for s in scores if s])
    for s in scores:
        if s and df:
            half = float(scipy_stats.t.ppf(0.5 + confidence / 2, df) * math.sqrt(var / len(s.units)))
            s.low, s.high = round(s.mean - half, 6), round(s.mean + half, 6)
    return var, df


def nsp_base_rate(eval_meta: dict | None) -> float | None:
    """NSP's base rate on the fixed set's pairs: always guessing the commoner label (None: the set's meta lacks it)."""
    if not eval_meta or "actual_next" not in eval_meta.get("stats", {}):
        return None
    actual = float(eval_meta["stats"]["actual_next"])
    return max(actual, 1 - actual)


def nsp_check(pres: list[dict], eval_meta: dict | None, confidence: float) -> NspCheck | None:
    """Next-sentence prediction against its base rate: the share of the fixed set's pairs whose B is the actual
    next segment (its ``meta.json``), the accuracy of always guessing the more common label, and the baseline's
    NSP accuracy on those pairs (``fixed/nsp_acc``) tested against it over the pretraining runs. Runs that all
    scored the same (a head that gives every pair one label) are tested with the binomial floor of the set's pairs."""
    values = [float(p["fixed/nsp_acc"]) for p in pres if p.get("fixed/nsp_acc") is not None]
    base = nsp_base_rate(eval_meta)
    if not values or base is None:
        return None
    actual = float(eval_meta["stats"]["actual_next"])
    return NspCheck(actual_next=round(actual, 6), base_rate=round(base, 6),
                    accuracy=fixed.interval(values, confidence),
                    vs_base=compare(values, [base], test="fixed", confidence=confidence,
                                    floor_n=eval_meta["stats"].get("sequences")))


def method(variants: dict[str, list[dict]], families: list[FamilyResult], metric: str, confidence: float) -> Method:
    """The design and the test in numbers: runs per row, the noise measured on the baseline's runs, and the
    false-positive rate and power of the test at that noise, by simulation."""
    base = score(variants[BASELINE], "pretrained", metric, confidence)
    seeds = {v: len(runs) for v, runs in variants.items()}
    m = max((len(g) for g in base.groups), default=1) if base else 1
    sd_p, sd_f = variance_components(base.groups) if base else (0.0, 0.0)
    out = Method(pretraining_runs=seeds, finetune_seeds=m, confidence=confidence, sd_pretrain=round(sd_p, 6),
                 sd_finetune=round(sd_f, 6))
    ks = [seeds[BASELINE], *(seeds[v] for v in seeds if v != BASELINE)] if len(seeds) > 1 else \
        [seeds[BASELINE], seeds[BASELINE]]
    if (sd_p or sd_f) and sum(k - 1 for k in ks):
        null = simulate(0.0, sd_p, sd_f, ks, m, sims=20000, confidence=confidence, seed=0)
        out.false_positive_rate = round(null["better"] + null["worse"], 4)
        out.smallest_detectable = round(smallest_detectable(sd_p, sd_f, ks, m, confidence=confidence), 6)
        observed = sorted({abs(row.vs.diff) for fam in families if fam.kind == "variant" for row in fam.rows
                           if row.vs and row.vs_row in {x.label for x in fam.rows}})
        out.power_at_observed = {fmt(metric, d): round(simulate(d, sd_p, sd_f, ks, m, sims=20000,
                                                                confidence=confidence, seed=1)["better"], 3)
                                 for d in observed}
    return out


def headline(variants: dict[str, list[dict]], metric: str, floors: dict[str, dict] | None = None) -> dict[str, dict]:
    """The few numbers `dvc exp show` lists (``reports/summary.json``): per row of the grid, its accuracy on the
    fixed evaluation set's masked positions, its LM's validation accuracy and each fine-tuning mode's test score,
    means over its runs; and each count-based floor's accuracy on the fixed set (``floors``)."""
    out: dict[str, dict] = {"floors": {n: f["masked"] for n, f in floors.items()}} if floors else {}
    for v, runs in variants.items():
        pre = pretrain_summary([r["pretrain"] for r in runs])
        row = {"fixed_acc": pre.fixed_acc} if pre.fixed_acc is not None else {}
        if pre.val_lm_acc is not None:
            row[f"val_{pre.lm}_acc"] = pre.val_lm_acc
        for mode in runs[0]["finetune"]["modes"]:
            values = [x[metric] for r in runs if mode in r["finetune"]["modes"]
                      for x in r["finetune"]["modes"][mode]["runs"]]
            row[f"{mode}_{metric}"] = round(float(np.mean(values)), 6)
        out[v] = row
    return out


def row_labels(families: list[FamilyResult]) -> dict[str, str]:
    """Each pretraining variant's label in the first family table that shows it (the baseline: "the baseline",
    whatever a family calls it)."""
    out: dict[str, str] = {BASELINE: "the baseline"}
    for fam in families:
        for row in fam.rows:
            if row.kind == "variant":
                out.setdefault(row.name, row.label)
    return out


def table_entry(row: Row) -> dict[str, float]:
    """A row's numbers as a flat mapping, which `dvc metrics show` and `dvc exp show` list (they skip lists)."""
    entry = {f"{mode}_{k}": getattr(s, k) for mode, s in row.scores.items() if s
             for k in ("mean", "low", "high", "n_pretrain", "n_finetune") if getattr(s, k) is not None}
    if row.vs and row.vs.low is not None:
        entry.update({"vs_diff": row.vs.diff, "vs_low": row.vs.low, "vs_high": row.vs.high, "vs_p": row.vs.p})
    if row.fixed:
        entry.update({f"fixed_{k}": getattr(row.fixed, k) for k in ("mean", "low", "high")
                      if getattr(row.fixed, k) is not None})
    if row.vs_fixed and row.vs_fixed.low is not None:
        entry.update({"fixed_vs_diff": row.vs_fixed.diff, "fixed_vs_low": row.vs_fixed.low,
                      "fixed_vs_high": row.vs_fixed.high, "fixed_vs_p": row.vs_fixed.p})
    return entry


def ablation_results(runs: Mapping[str, Mapping], grid: str, families: Mapping[str, dict], modes: list[str],
                     confidence: float = 0.95, task: str | None = None, floors: dict[str, dict] | None = None,
                     eval_meta: dict | None = None) -> AblationResults:
    """Everything the report shows about the grid (``reports/ablations.json``).

    ``runs``: each run of the grid (the baseline's first) with its ``variant``, ``pretrain_seed`` and
    ``metrics`` folder; ``families``: the table specs (``load_families``); ``modes``: how each variant
    was fine-tuned; ``task``: a suite's task to read (``pipeline.report.suites`` adds the other columns);
    ``floors``: the count-based floors on the fixed evaluation set; ``eval_meta``: the eval_set stage's
    ``meta.json`` (how the set was built, NSP's base rate on it, the layout probe's cells and floors).
    """
    results = load_runs(runs, task)
    variants = by_variant(results)
    ft = variants[BASELINE][0]["finetune"]
    metric = ft["metric"]
    fams = [family_result(name, spec, variants, metric, modes, confidence, floors, nsp_base_rate(eval_meta))
            for name, spec in families.items()]
    base_runs = variants[BASELINE]
    intrinsic = fixed.baseline_check([r["pretrain"] for r in base_runs], [r["plots"] for r in base_runs],
                                     floors or {}, confidence)
    if intrinsic and eval_meta:
        intrinsic.built = {**eval_meta["stats"], "settings": eval_meta["settings"]}
    classical = score(base_runs, CLASSICAL, metric, confidence)
    pretrained = score(base_runs, "pretrained", metric, confidence)
    probe = layout.grid_result(variants, row_labels(fams), eval_meta, confidence)
    nsp = nsp_check([r["pretrain"] for r in base_runs], eval_meta, confidence)
    return AblationResults(
        grid=grid, task=ft["task"], metric=metric, variant_modes=modes, families=fams,
        method=method(variants, fams, metric, confidence), intrinsic=intrinsic, layout=probe, nsp=nsp,
        findings=fixed_findings(intrinsic, fams) + layout_findings(probe) + nsp_findings(nsp)
        + findings(fams, classical, pretrained, metric, ft["task"], confidence),
        table={f.name: {row.key or row.name: table_entry(row) for row in f.rows if row.ran} for f in fams},
        summary=_summary(variants, metric, floors, probe, nsp),
        runs={name: _run_record(r) for name, r in results.items()})


def _summary(variants: dict[str, list[dict]], metric: str, floors: dict[str, dict] | None, probe: dict | None,
             nsp: NspCheck | None) -> dict[str, dict]:
    """``summary.json``: the headline numbers, the layout probe's and NSP's base rate."""
    summary = headline(variants, metric, floors)
    for row, numbers in layout.summary(probe).items():
        summary.setdefault(row, {}).update(numbers)
    if nsp:
        summary.setdefault(BASELINE, {})["fixed_nsp_acc"] = nsp.accuracy.mean
        summary.setdefault("floors", {})["nsp_base_rate"] = nsp.base_rate
    return summary


def _run_record(run: dict) -> RunRecord:
    pretrain = pretrain_summary([run["pretrain"]])
    pretrain.plots = run["plots"]
    return RunRecord(variant=run["variant"], pretrain_seed=run["pretrain_seed"], pretrain=pretrain,
                     finetune_runs={mode: [x["mlflow_run_id"] for x in v["runs"]]
                                    for mode, v in run["finetune"]["modes"].items()})
