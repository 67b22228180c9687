"""The figures' style, shared by every section's figure: the off-screen backend, the colours, reference lines (a
floor, TF-IDF: dashed grey, always named), dots with error bars, the legend's place, and a figure as PNG bytes.

Figures that do not mislead: a mean with an interval is a dot with an error bar (a bar's length would be read
against an origin the axis does not show), every axis is labelled with its unit, and every reference line is named,
beside the line or in the legend. A section imports ``plt`` from here, so the backend is chosen before pyplot loads.
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from pipeline.report.model import Interval, SuiteCell  # noqa: E402

COLORS = ["#3b75af", "#c44e52", "#55a868", "#8172b2", "#ccb974", "#64b5cd", "#937860", "#da8bc3"]
REFERENCE = {"ls": "--", "color": "#555", "lw": 1}  # floors and TF-IDF: dashed grey, and always named
MIN_SPAN = 10.0  # the least y-range of a dot chart, in points (% or correlation x 100): means without an interval
# one point apart must not be drawn a chart's height apart


def png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def smooth(values: list[float], weight: float = 0.8) -> list[float]:
    out, last = [], values[0] if values else 0.0
    for v in values:
        last = weight * last + (1 - weight) * v
        out.append(last)
    return out


def dots(ax, xs: list[float], stats: list[Interval | SuiteCell | None], scale: float, color: str,
          label: str | None) -> None:
    """Means as dots, each with its interval as an error bar. ``stats``: a mean with low and high (None when
    there is no interval: a bare dot) or None (nothing ran: no dot, rather than one at zero)."""
    kept = [(x, s) for x, s in zip(xs, stats) if s]
    if not kept:
        return
    nan = float("nan")  # matplotlib draws no error bar for a NaN error
    means = [scale * s.mean for _, s in kept]
    below = [scale * (s.mean - s.low) if s.low is not None else nan for _, s in kept]
    above = [scale * (s.high - s.mean) if s.high is not None else nan for _, s in kept]
    ax.errorbar([x for x, _ in kept], means, yerr=[below, above], fmt="o", markersize=6, capsize=4, lw=1.5,
                color=color, label=label)


def min_span(ax, span: float = MIN_SPAN) -> None:
    """Widen the y-axis around its middle to at least ``span``; not below 0 unless a value is (a correlation)."""
    lo, hi = ax.get_ylim()
    if hi - lo < span:
        middle = (lo + hi - span) / 2
        lo = max(0.0, middle) if lo >= 0 else middle
        ax.set_ylim(lo, lo + span)


def legend(ax) -> None:
    """The legend right of the axes, where it hides no dot or error bar (when anything is named)."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)


def read_curve(plots: str | Path | None, split: str, key: str) -> list[tuple[int, float]]:
    """(step, value) of ``key`` from a run's ``plots/pretrain_<split>.csv`` (empty when it has no such column)."""
    path = Path(plots or "") / f"pretrain_{split}.csv"
    if not plots or not path.exists():
        return []
    with path.open(newline="") as f:
        return [(int(row["step"]), float(row[key])) for row in csv.DictReader(f) if row.get(key) not in (None, "")]
