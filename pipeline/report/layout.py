"""Each pretraining row on the layout probe: does it read ordinary text, or only its examples' layout?

The layout probe (``pipeline.data.layout``) asks every run about held-out text
in single segments of each length, the hidden piece early, in the middle and
late, and in sentence pairs of natural length; the count-based floors are
scored on the same positions (the eval_set stage's ``meta.json``). A row's
number in a cell is the mean over its pretraining runs of each run's accuracy
there (``layout/<cell>`` in its metrics, from the last validation), with the
t-interval over the runs; against each floor, a deterministic number, the same
one-sample t-test as on the fixed set. The baseline *reads* when it is above the
bigram floor in every cell, each interval clear of it. Along pretraining, the
baseline's runs are read from ``plots/pretrain_layout.csv`` (one point per
validation).
"""
from __future__ import annotations

import csv
from dataclasses import asdict
from pathlib import Path

import numpy as np

from pipeline.data.ngram import FLOORS, FLOORS_OF
from pipeline.report.fixed import interval
from pipeline.report.model import LayoutCell
from pipeline.report.stats import compare
from pipeline.variants import BASELINE

PREFIX = "layout/"


def cell_values(pres: list[dict], cell: str) -> list[float]:
    """Each pretraining run's accuracy in ``cell`` (runs without the probe are skipped)."""
    return [float(p[PREFIX + cell]) for p in pres if p.get(PREFIX + cell) is not None]


def row_result(variant: str, label: str, pres: list[dict], cells: list[dict], floors: dict[str, dict[str, float]],
               confidence: float) -> dict | None:
    """One row: its LM kind, runs, and per cell its interval and its test against each floor of its kind (runs that
    all scored the same in a cell: with the binomial floor of the cell's rows, one hidden piece a row)."""
    lm = pres[0]["lm"]
    names = [n for n in FLOORS_OF.get(lm, ()) if n in floors]
    scores = {}
    for c in cells:
        values = cell_values(pres, c["name"])
        if not values:
            return None  # a run scored before the probe existed
        scores[c["name"]] = LayoutCell(**asdict(interval(values, confidence)),
                                       vs_floors={n: compare(values, [floors[n][c["name"]]], test="fixed",
                                                             confidence=confidence, floor_n=c.get("rows"))
                                                  for n in names})
    return {"variant": variant, "label": label, "lm": lm, "runs": len(pres), "floors": names, "cells": scores}


def reads(row: dict) -> bool | None:
    """Whether a row is above its bigram floor (its kind's first floor that reads context) in every cell, the
    interval clear of it; None with a single run (no interval)."""
    if len(row["floors"]) < 2:
        return None
    bigram = row["floors"][1]
    verdicts = [cell.vs_floors[bigram].verdict for cell in row["cells"].values()]
    if any(cell.low is None for cell in row["cells"].values()):
        return None
    return all(v == "better" for v in verdicts)


def read_curve(plots: str | Path | None) -> list[dict[str, float]]:
    """A run's layout-probe curve: one dict per validation (``step``, ``tokens``, one key per cell)."""
    path = Path(plots or "") / "pretrain_layout.csv"
    if not plots or not path.exists():
        return []
    with path.open(newline="") as f:
        return [{k: float(v) for k, v in row.items() if v not in (None, "")} for row in csv.DictReader(f)]


def along(plots: list[str | None], cells: list[dict]) -> list[dict]:
    """The baseline along pretraining: at each validation all its runs reached, the mean over them of each cell,
    the lowest and highest run, the tokens seen and the rows a cell had (its first rows; the whole probe at the
    end is a number of its own, left out)."""
    curves = [[p for p in c if p.get("rows", 0) < max(q.get("rows", 0) for q in c)] or c
              for c in (read_curve(p) for p in plots) if c]
    if not curves:
        return []
    n = min(len(c) for c in curves)
    out = []
    for j in range(n):
        point = {"step": curves[0][j]["step"], "tokens": float(np.mean([c[j].get("tokens", 0.0) for c in curves])),
                 "runs": len(curves), "rows": curves[0][j].get("rows"), "cells": {}}
        for cell in cells:
            values = [c[j][cell["name"]] for c in curves if cell["name"] in c[j]]
            if values:
                point["cells"][cell["name"]] = {"mean": round(float(np.mean(values)), 6),
                                                "low": round(min(values), 6), "high": round(max(values), 6)}
        out.append(point)
    return out


def grid_result(variants: dict[str, list[dict]], labels: dict[str, str], meta: dict | None,
                confidence: float) -> dict | None:
    """The probe for the whole grid: its cells and floors, every row that was scored on it (the baseline first),
    whether the baseline reads, and the baseline along pretraining. None when the eval set has no probe."""
    if not meta or "layout" not in meta:
        return None
    cells, floors = meta["layout"]["cells"], meta["layout"]["floors"]
    rows = [r for r in (row_result(v, labels.get(v, v), [x["pretrain"] for x in runs], cells, floors, confidence)
                        for v, runs in variants.items()) if r]
    if not rows:
        return None
    base = next((r for r in rows if r["variant"] == BASELINE), None)
    return {"cells": cells, "settings": meta["layout"]["settings"],
            "floors": [{"name": n, "label": FLOORS[n].label, "short": FLOORS[n].short, "cells": floors[n]}
                       for n in FLOORS_OF["mlm"] if n in floors],
            "rows": rows, "baseline_reads": reads(base) if base else None,
            "along": along([x["plots"] for x in variants.get(BASELINE, [])], cells)}


def summary(result: dict | None) -> dict[str, dict]:
    """What ``summary.json`` carries of the probe: per row its mean per cell, its lowest cell and its mean over
    cells; and each floor's accuracy per cell."""
    if not result:
        return {}
    out: dict[str, dict] = {}
    for r in result["rows"]:
        means = {name: cell.mean for name, cell in r["cells"].items()}
        out[r["variant"]] = {"layout": means, "layout_min": round(min(means.values()), 6),
                             "layout_mean": round(float(np.mean(list(means.values()))), 6)}
    out["floors"] = {"layout": {f["name"]: f["cells"] for f in result["floors"]}}
    return out
