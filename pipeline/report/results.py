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
from pipeline.report.model import (AblationResults, BaselineCheck, Comparison, FamilyResult, Method, NspCheck,
                                   PretrainSummary, Row, RunRecord, Score, reference_of)
from pipeline.report.stats import compare, pooled_variance, simulate, smallest_detectable, variance_components
from pipeline.variants import BASELINE


def classical_name(task: str) -> str:
    """What the non-neural mode is on ``task``: the word-overlap baseline on SQuAD, TF-IDF elsewhere."""
    return "word overlap" if task.startswith("SQuAD") else "TF-IDF"


def percent(metric: str) -> bool:
    """Whether ``metric`` is a share (accuracy, F1, SQuAD's exact match and its HasAns/NoAns parts)."""
    return metric.split("_")[-1] in ("accuracy", "f1", "exact") or metric in ("precision", "recall")


def fmt(metric: str, value: float) -> str:
    """Accuracy, F1 and exact match as percentages, correlations as plain numbers."""
    return f"{100 * value:.1f}" if percent(metric) else f"{value:.3f}"


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


def _paper_direction(fam: FamilyResult, row: Row, ref: Row) -> tuple[str, int]:
    """What the paper says about ``row`` against ``ref`` (first source with both, its first column), as a clause,
    and its sign."""
    for block in fam.paper:
        a, b = block["rows"].get(row.paper_row), block["rows"].get(ref.paper_row)
        if a is not None and b is not None:
            col, d = block["columns"][0], a[0] - b[0]
            if d == 0:
                return f"the paper found no difference ({col} {a[0]} vs {b[0]})", 0
            return (f"the paper found it {'better' if d > 0 else 'worse'} by {abs(d):.1f} ({col} {a[0]} vs {b[0]})",
                    1 if d > 0 else -1)
    return "", 0


def p_text(p: float) -> str:
    """A p-value as the report writes it: three decimals, or an upper bound below 0.001."""
    return "p < 0.001" if p < 0.0005 else f"p = {p:.3f}"


def confidence_percent(res: AblationResults) -> int:
    """The report's confidence as its captions write it: 95 for 0.95."""
    return round(100 * res.method.confidence)


def describe(comparison: Comparison, metric: str) -> str:
    """A comparison in words: the verdict, the interval, the p-value, the runs behind each side."""
    c = comparison
    if c.low is None:
        return f"{c.verdict}: {c.n_pretrain[0]} vs {c.n_pretrain[1]} pretraining runs"
    words = (f"{c.verdict}{' (borderline)' if c.borderline else ''}: "
             f"{round(100 * c.confidence)}% interval {signed(metric, c.low)} to {signed(metric, c.high)}, "
             f"{p_text(c.p)}")
    if c.verdict == "inconclusive":
        n = c.seeds_needed
        words += (f"; about {n} pretraining runs per side would decide a difference this size" if n else
                  "; the difference is too small to decide with any practical number of runs")
    return words


def signed(metric: str, value: float) -> str:
    """A difference as the report writes it: its sign (a true minus), then its size in the metric's format."""
    return ("+" if value >= 0 else "−") + fmt(metric, abs(value))


def findings(families: list[FamilyResult], classical: Score | None, pretrained: Score | None, metric: str, task: str,
             confidence: float) -> list[str]:
    """One sentence per comparison, generated from the numbers (never hand-written)."""
    out = [_row_finding(fam, row, metric, task) for fam in families for row in fam.rows
           if row.ran and row.primary and row.vs is not None]
    if pretrained and classical:
        c = compare(pretrained.units, [classical.mean], test="fixed", confidence=confidence)
        out.append(f"Fine-tuning the baseline is {fmt(metric, abs(c.diff))} points "
                   f"{'above' if c.diff > 0 else 'below'} the {classical_name(task)} baseline "
                   f"({fmt(metric, pretrained.mean)} vs {fmt(metric, classical.mean)}; {describe(c, metric)}).")
    return out


def _row_finding(fam: FamilyResult, row: Row, metric: str, task: str) -> str:
    """A row's test against its reference in a sentence, and what the paper found about the same two rows."""
    c = row.vs
    ref = next((r for r in fam.rows if r.ran and r.primary and r.label == row.vs_row), None)
    ref_label, ref_mean = (ref.label, ref.primary.mean) if ref else \
        (f"the {classical_name(task)} baseline", fam.classical.mean)
    if fmt(metric, abs(c.diff)) == fmt(metric, 0.0):
        how = f"is level with {ref_label}"
    else:
        how = f"is {fmt(metric, abs(c.diff))} points {'above' if c.diff > 0 else 'below'} {ref_label}"
    sentence = (f"{fam.title}: {row.label} {how} on {task} test {metric} "
                f"({fmt(metric, row.primary.mean)} vs {fmt(metric, ref_mean)}; {describe(c, metric)})")
    paper, sign = _paper_direction(fam, row, ref) if ref else ("", 0)
    if paper:
        if c.verdict not in ("better", "worse"):
            paper += "; too close to tell here"
        else:
            paper += "; the same direction here" if (c.diff > 0) == (sign > 0) else "; the opposite direction here"
        sentence += f"; {paper}"
    return sentence + "."


def fixed_findings(intrinsic: BaselineCheck | None, families: list[FamilyResult]) -> list[str]:
    """The fixed evaluation set in sentences: the baseline against its floors first (a model below the bigram
    floor has not learned what the ablations ask about), then each tested comparison of a family's rows."""
    if not intrinsic:
        return []
    parts = [f"{floor.label} {100 * floor.accuracy:.1f}%: {describe(intrinsic.vs_floors[floor.name], 'accuracy')}"
             for floor in intrinsic.floors]
    out = [f"The baseline predicts {100 * intrinsic.fixed.mean:.1f}% of the fixed evaluation set's masked pieces "
           f"(mean over {len(intrinsic.fixed.units)} pretraining runs); against the count-based floors: "
           + "; ".join(parts) + "."]
    if not intrinsic.learned:
        out.append("The baseline does not beat the bigram floor: it has learned piece frequencies, not context, so "
                   "every ablation below is tested on a model that has not learned what it asks about.")
    for fam in families:
        for row in fam.rows:
            if row.vs_fixed is None or not row.fixed:
                continue
            ref = next((x for x in fam.rows if x.label == row.vs_fixed_row and x.fixed), None)
            c = row.vs_fixed
            how = "level with" if round(100 * abs(c.diff), 1) == 0 else \
                f"{100 * abs(c.diff):.1f} points {'above' if c.diff > 0 else 'below'}"
            against = f"{100 * row.fixed.mean:.1f}% vs {100 * ref.fixed.mean:.1f}%" if ref else \
                f"{100 * row.fixed.mean:.1f}%"
            out.append(f"{fam.title}, fixed evaluation set: {row.label} is {how} {row.vs_fixed_row} "
                       f"({against} of the masked pieces; {describe(c, 'accuracy')}).")
            if row.passes:
                out.append(passing_text(row, row.passes))
            if row.passes_nsp:
                out.append(passing_text(row, row.passes_nsp, "nsp"))
    return out


def passing_text(row: Row, passes: dict, curve: str = "masked") -> str:
    """Where a row's fixed-set curve (``curve``: the masked pieces' accuracy, or the NSP head's on the set's pairs)
    passes its reference's, at the same steps and at the same FLOPs, in words."""
    parts = []
    same, flops = passes.get("steps"), passes.get("flops")
    if same:
        tokens = f" ({same['tokens'] / 1e6:.2f}M tokens)" if same.get("tokens") else ""
        parts.append(f"at the same steps it passes for good at step {same['step']:.0f}{tokens}" if same["step"]
                     is not None else f"at the same steps it does not pass within {same['until_step']:.0f} steps"
                     + (f" ({same['until_tokens'] / 1e6:.2f}M tokens)" if same.get("until_tokens") else "")
                     + f", {same['last_gap']:+.1f} points at the last".replace("-", "−"))
    if flops:
        parts.append(f"at the same training FLOPs it passes at {flops['flops'] / 1e12:.1f} TFLOP" if flops["flops"]
                     is not None else f"at the same training FLOPs it does not pass within "
                     f"{flops['until_flops'] / 1e12:.1f} TFLOP (the budget both spent)"
                     + (f", {flops['last_gap']:+.1f} points there".replace("-", "−") if flops["last_gap"] is not None
                        else ""))
    if curve == "masked":
        return f"Where {row.label} passes {row.vs_fixed_row} on the fixed set: " + "; ".join(parts) + "."
    end = row.vs_fixed_nsp
    after = f" After training: {describe(end, 'accuracy')}." if end else ""
    return (f"Where {row.label} passes {row.vs_fixed_row} at next-sentence prediction on the fixed set's pairs: "
            + "; ".join(parts) + "." + after)


def layout_findings(probe: dict | None) -> list[str]:
    """The layout probe in a sentence: does the baseline read held-out text in every layout, or only some?"""
    if not probe:
        return []
    base = next((r for r in probe["rows"] if r["variant"] == BASELINE), None)
    if not base or len(base["floors"]) < 2:
        return []
    bigram = base["floors"][1]
    cell_label = {c["name"]: c["label"] for c in probe["cells"]}
    bigram_floor = next(f["cells"] for f in probe["floors"] if f["name"] == bigram)
    below = [cell_label[n] for n, cell in base["cells"].items() if cell.vs_floors[bigram].verdict != "better"]
    worst = min(base["cells"], key=lambda n: base["cells"][n].mean - bigram_floor[n])
    cells = len(base["cells"])
    if not below:
        return [f"The layout probe: the baseline reads held-out text in every layout it was asked about, above the "
                f"bigram floor in all {cells} cells (its lowest: {100 * base['cells'][worst].mean:.1f}% in "
                f"{cell_label[worst]})."]
    if len(below) == cells:
        return [f"The layout probe: the baseline is not clear of the bigram floor in any of its {len(below)} cells: "
                "it does not read held-out text better than a table of piece pairs in any layout."]
    return [f"The layout probe: the baseline is not clear of the bigram floor in {len(below)} of "
            f"{cells} cells ({'; '.join(below)}): it reads some layouts, not ordinary text in general."]


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


def nsp_findings(nsp: NspCheck | None) -> list[str]:
    if not nsp:
        return []
    accuracy = nsp.accuracy
    head = (f"Next-sentence prediction: B is the actual next segment in {100 * nsp.actual_next:.1f}% of the "
            f"fixed set's pairs, so always guessing the more common label scores {100 * nsp.base_rate:.1f}%; ")
    if all(abs(u - nsp.base_rate) < 5e-7 for u in accuracy.units):
        return [head + f"the baseline's NSP accuracy is exactly that in all {len(accuracy.units)} runs: its NSP head "
                       "gives every pair the more common label, and has not learned the task at this budget."]
    return [head + f"the baseline's NSP accuracy is {100 * accuracy.mean:.1f}% ({describe(nsp.vs_base, 'accuracy')})."]


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
