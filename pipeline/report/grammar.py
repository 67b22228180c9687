"""Each pretraining row on BLiMP, zero-shot: its overall score and every phenomenon's, the interval over its
pretraining runs, its verdict against the family's reference and against the n-gram floor.

BLiMP is the same task for every row, so rows are compared here the way they are on the fixed evaluation set
(``pipeline.report.fixed``), with the pretraining run as the unit: a row's number is the mean over its runs of the
overall accuracy (the mean over paradigms), rows are tested against the family's reference (or, in a lineage, the
row above) by the t-test on per-pretraining-run means with the variance pooled over the family's rows, and against
the floor (one deterministic number) by a one-sample t-test. The floor is a Kneser-Ney n-gram LM of the same
pretraining text, scored on the same pairs (``pipeline.stages.zero_shot_floor``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from pipeline.io import read_json
from pipeline.report.fixed import crossing, interval, read_curve
from pipeline.report.model import FamilyResult, Floor
from pipeline.report.stats import compare, pooled_variance
from pipeline.variants import BASELINE
from pipeline.zero_shot.blimp import PAPER_OVERALL


def read_runs(runs: Mapping[str, Mapping]) -> dict[str, dict]:
    """Each run's scored zero_shot summary (``<metrics>/zero_shot.json``), by run name; runs not scored are left out."""
    out = {}
    for name, run in runs.items():
        path = Path(run["metrics"]) / "zero_shot.json"
        summary = read_json(path) if path.exists() else None
        if summary and summary.get("scored"):
            out[name] = summary
    return out


def _row(summaries: list[dict], confidence: float, pooled: tuple[float, int] | None) -> dict:
    phenomena = sorted({p for s in summaries for p in s["phenomenon"]})
    return {"overall": interval([s["overall"] for s in summaries], confidence, pooled),
            "phenomenon": {p: interval([s["phenomenon"][p] for s in summaries if s["phenomenon"].get(p) is not None],
                                       confidence) for p in phenomena},
            "method": summaries[0]["method"], "excluded": summaries[0]["excluded_total"],
            "pairs": sum(summaries[0]["pairs"].values())}


def family(fam: FamilyResult, scored: dict[str, list[dict]], floor: dict | None, confidence: float) -> dict:
    """One family's rows on BLiMP (the variant rows of ``pipeline.report.results.family_result``)."""
    rows = [r for r in fam.rows if r.kind == "variant" and r.ran and scored.get(r.name)]
    units = {r.name: [s["overall"] for s in scored[r.name]] for r in rows}
    pooled = pooled_variance(list(units.values()))
    out = []
    for i, r in enumerate(rows):
        row = {"label": r.label, "name": r.name, **_row(scored[r.name], confidence, pooled)}
        other = (rows[i - 1] if i else None) if fam.lineage else (rows[0] if i else None)
        row["vs_row"] = other.label if other else None
        row["vs"] = compare(units[r.name], units[other.name], test="pooled", pooled=pooled,
                            confidence=confidence) if other else None
        row["vs_floor"] = compare(units[r.name], [floor["overall"]], test="fixed", confidence=confidence) \
            if floor else None
        out.append(row)
    return {"name": fam.name, "title": fam.title, "reference_row": "the row above" if fam.lineage else
            (out[0]["label"] if out else None), "rows": out}


def baseline_only(summaries: list[dict], floor: dict | None, confidence: float) -> dict:
    """The baseline alone on BLiMP, for a grid with no pretraining variant (e.g. ``grid=baseline``): its row against
    the floor, with no reference row."""
    units = [s["overall"] for s in summaries]
    row = {"label": "the baseline", "name": BASELINE, **_row(summaries, confidence, None), "vs_row": None, "vs": None,
           "vs_floor": compare(units, [floor["overall"]], test="fixed", confidence=confidence) if floor else None}
    return {"name": BASELINE, "title": "The baseline", "reference_row": None, "rows": [row]}


def along(runs: Mapping[str, Mapping], fixed_floors: list[Floor], confidence: float) -> dict | None:
    """BLiMP along the baseline's pretraining (``fixed/blimp`` in its runs' fixed-set curves, ``zero_shot.along``):
    at each validation the mean over runs of the fixed set's masked accuracy and the BLiMP interval over the runs
    scored there;
    where the fixed-set mean first rises above each count-based floor (``fixed_floors``: name, short, accuracy)
    and where BLiMP's mean first rises above chance. None when no baseline run was scored along pretraining."""
    curves = [c for c in (read_curve(r.get("plots")) for r in runs.values() if r.get("variant") == BASELINE)
              if any("blimp" in point for point in c)]  # a run resumed with it turned on: from its resumption
    if not curves:
        return None
    n = min(len(c) for c in curves)

    def mean(key: str, j: int) -> float:
        return sum(c[j][key] for c in curves) / len(curves)

    points = [{"step": int(mean("step", j)), "tokens": mean("tokens", j) if all("tokens" in c[j] for c in curves)
               else None, "fixed": mean("acc_masked", j),
               "blimp": interval([c[j]["blimp"] for c in curves if "blimp" in c[j]], confidence)} for j in range(n)]
    points = [p for p in points if p["blimp"]]
    mean_curve = [{"acc_masked": p["fixed"], "blimp": p["blimp"].mean, "step": p["step"]} for p in points]
    crossed = {f.name: (crossing(mean_curve, f.accuracy) or {}).get("step") for f in fixed_floors}
    above_chance = next((p["step"] for p in points if p["blimp"].low is not None and p["blimp"].low > 0.5), None)
    return {"runs": len(curves), "points": points, "fixed_crossed": crossed, "blimp_above_chance": above_chance,
            "fixed_floors": fixed_floors}


def grid_result(families: list[FamilyResult], runs: Mapping[str, Mapping], floor: dict | None, confidence: float,
                fixed_floors: list[Floor] = ()) -> dict:
    """BLiMP for the grid: every family's rows, the floor, the paper's numbers; ``scored`` False when nothing
    was (zero_shot.data not configured)."""
    summaries = read_runs(runs)
    scored: dict[str, list[dict]] = {}
    for name in sorted(summaries, key=lambda n: runs[n].get("pretrain_seed", 0)):
        scored.setdefault(runs[name].get("variant", name), []).append(summaries[name])
    floor = floor if floor and floor.get("scored") else None
    tables = [family(f, scored, floor, confidence) for f in families if f.kind == "variant"]
    if scored.get(BASELINE) and not any(r["name"] == BASELINE for t in tables for r in t["rows"]):
        tables.append(baseline_only(scored[BASELINE], floor, confidence))  # no variant family holds it
    return {"scored": bool(scored), "floor": floor and {k: floor[k] for k in ("overall", "phenomenon", "field",
                                                                              "order", "excluded_total")},
            "paper": PAPER_OVERALL, "published": floor.get("published") if floor else None,
            "families": tables,
            "along": along(runs, list(fixed_floors), confidence),
            "per_run": {name: s["overall"] for name, s in summaries.items()},
            "mean": {v: round(sum(s["overall"] for s in ss) / len(ss), 6) for v, ss in scored.items()}}
