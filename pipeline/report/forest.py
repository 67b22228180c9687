"""The claims ledger as one figure, at the top of its section: a forest plot of every claim's difference.

One line per claim and task (and one for its fixed-set reading, where it has one), from the same tests the ledger
table reads: the difference of the row from its reference as a dot, coloured by the verdict; its interval at the
report's confidence as a thin bar, and the two one-sided tests' interval (90% at 95%) as a thick one; the claim's
margin shaded around zero, so a thick bar inside the shade reads "level" at a glance. A claim not run, or not
posed, is listed by name without a dot. Every difference is drawn in points (a share or a correlation x 100; the
polysemy probe's similarity x 100 too), so all lines share one axis.
"""
from __future__ import annotations

from dataclasses import dataclass

from pipeline.report.figures import COLORS, REFERENCE
from pipeline.report.model import Claim, Comparison

import matplotlib.pyplot as plt  # noqa: E402  (after figures: it picks the off-screen backend)
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

SCALE = 100  # differences, intervals and margins drawn in points: a fraction (or a similarity) x 100
VERDICT_COLORS = {"shown": COLORS[2], "opposite": COLORS[1], "level": COLORS[0], "inconclusive": "#999999"}
MARGIN_SHADE = "#3b75af22"  # the margin band: the level colour, faint
ALT = ("The claims ledger as a forest plot: each claim's difference (row less reference, in points; similarity x "
       "100) per task and on the fixed set, its {confidence}% interval thin and its {tost}% interval (two one-sided "
       "tests) thick, the claim's margin shaded around zero. Dots: green shown (the paper's direction beyond noise), "
       "red opposite, blue level (the thick interval inside the margin), grey inconclusive; claims not run or not "
       "posed are listed without a dot.")


@dataclass
class Line:
    """One line of the plot: a reading of a claim, or a claim without one (``test`` None, ``note`` says why)."""

    label: str
    verdict: str
    test: Comparison | None = None
    note: str | None = None


def lines(claims: list[Claim]) -> list[Line]:
    """The plot's lines, top to bottom: each claim's readings (one per task of a suite, else one), then its
    fixed-set reading; a claim not run or not posed as one line without a reading."""
    out = []
    for c in claims:
        if c.verdict in ("not run", "not posed") or c.test is None:
            out.append(Line(c.claim, c.verdict, note="not run (the table names what runs it)"
                            if c.verdict == "not run" else "not posed (its precondition does not hold)"))
            continue
        out += [Line(f"{c.claim}: {t.task}", t.verdict, t.test) for t in c.tasks] if c.tasks else \
            [Line(c.claim, c.verdict, c.test)]
        if c.fixed is not None:
            out.append(Line(f"{c.claim}: fixed set", c.fixed_verdict or "inconclusive", c.fixed))
    return out


def forest_figure(claims: list[Claim]):
    """The ledger's forest plot (``lines``), one row per reading, the first claim on top."""
    rows = lines(claims)
    fig, ax = plt.subplots(figsize=(10, 1.4 + 0.32 * len(rows)))
    widest = 1.0
    for y, line in zip(range(len(rows), 0, -1), rows):
        t = line.test
        if t is None:
            ax.text(0.01, y, line.note, transform=ax.get_yaxis_transform(), va="center", fontsize=7, color="#555",
                    bbox={"fc": "white", "ec": "none", "pad": 1})
            continue
        if t.margin is not None:
            ax.fill_betweenx([y - 0.4, y + 0.4], -SCALE * t.margin, SCALE * t.margin, color=MARGIN_SHADE, lw=0)
        if t.tost_low is not None:
            ax.hlines(y, SCALE * t.tost_low, SCALE * t.tost_high, lw=4, color=VERDICT_COLORS.get(line.verdict))
        nan = float("nan")  # matplotlib draws no error bar for a NaN error: a comparison without an interval
        err = [[SCALE * (t.diff - t.low) if t.low is not None else nan],
               [SCALE * (t.high - t.diff) if t.high is not None else nan]]
        ax.errorbar([SCALE * t.diff], [y], xerr=err, fmt="o", markersize=6, capsize=3, lw=1,
                    color=VERDICT_COLORS.get(line.verdict, VERDICT_COLORS["inconclusive"]))
        widest = max(widest, *(abs(SCALE * v) for v in (t.diff, t.low, t.high, t.margin) if v is not None))
    zero = ax.axvline(0, **REFERENCE, label="no difference")
    ax.set_xlim(-1.1 * widest, 1.1 * widest)
    ax.set_ylim(0.4, len(rows) + 0.6)
    ax.set_yticks(range(len(rows), 0, -1), [line.label for line in rows], fontsize=7)
    ax.set_xlabel("difference, row less its reference (points; the probe's similarity x 100)")
    ax.set_ylabel("claim (task, or the fixed set)")
    ax.set_title("The paper's claims, measured here", fontsize=10)
    handles = [Line2D([], [], marker="o", ls="", color=color, label=verdict)
               for verdict, color in VERDICT_COLORS.items()]
    handles += [Line2D([], [], color="#555", lw=1, label="interval (report's confidence)"),
                Line2D([], [], color="#555", lw=4, label="interval of the two one-sided tests"),
                Patch(color=MARGIN_SHADE, label="the claim's margin"), zero]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.tight_layout()
    return fig


def alt_text(confidence: float) -> str:
    """The figure's alt text at the report's ``confidence`` (a fraction)."""
    return ALT.format(confidence=round(100 * confidence), tost=round(100 * (2 * confidence - 1)))
