"""The findings: one sentence per comparison, generated from the numbers (never hand-written) -- the fixed set
against its floors and each family's rows there, the layout probe, NSP against its base rate, then each family's
rows downstream with what the paper found about the same two rows. ``results.ablation_results`` keeps them in the
typed results (``AblationResults.findings``); the report's Findings section lists them.
"""
from __future__ import annotations

from pipeline.report.cells import classical_name, describe, fmt
from pipeline.report.model import BaselineCheck, FamilyResult, NspCheck, Row, Score
from pipeline.report.stats import compare
from pipeline.variants import BASELINE


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
