"""The claims ledger, the report's first section: the forest plot, then each claim of BERT's story with what this grid
measured, its verdict in words and the same rows on the fixed set. The numbers are ``pipeline.report.ledger``'s.

The forest plot: one line per claim and task (and one for its fixed-set reading, where it has one), from the same
tests the table reads: the difference of the row from its reference as a dot, coloured by the verdict; its interval at
the report's confidence as a thin bar, and the two one-sided tests' interval (90% at 95%) as a thick one; the claim's
margin shaded around zero, so a thick bar inside the shade reads "level" at a glance. A claim not run, or not posed,
is listed by name without a dot. Every difference is drawn in points (a share or a correlation x 100; the polysemy
probe's similarity x 100 too), so all lines share one axis.

The words: a difference in the claim's units, a margin, the two one-sided tests' interval, and for an inconclusive
claim the runs per side (and the pretraining time) that would decide it.
"""
from __future__ import annotations

from dataclasses import dataclass

from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from pipeline.report.cells import confidence_percent, p_text
from pipeline.report.doc import Doc, Sources
from pipeline.report.ledger import PROBE_SECTION, trend
from pipeline.report.model import AblationResults, Claim, Comparison
from pipeline.report.style import COLORS, REFERENCE, plt

SCALE = 100  # differences, intervals and margins drawn in points: a fraction (or a similarity) x 100
VERDICT_COLORS = {"shown": COLORS[2], "opposite": COLORS[1], "level": COLORS[0], "inconclusive": "#999999"}
MARGIN_SHADE = "#3b75af22"  # the margin band: the level colour, faint
ALT = ("The claims ledger as a forest plot: each claim's difference (row less reference, in points; similarity x "
       "100) per task and on the fixed set, its {confidence}% interval thin and its {tost}% interval (two one-sided "
       "tests) thick, the claim's margin shaded around zero. Dots: green shown (the paper's direction beyond noise), "
       "red opposite, blue level (the thick interval inside the margin), grey inconclusive; claims not run or not "
       "posed are listed without a dot.")


def write(doc: Doc, src: Sources) -> None:
    if src.res.ledger:
        ledger_section(doc, src.res)


def ledger_section(doc: Doc, res: AblationResults) -> None:
    """The claims ledger: each claim of BERT's story, what this grid measured and the verdict, before anything else;
    first as one figure (every difference against its claim's margin), then as the table."""
    doc.heading("The paper's claims, measured here")
    doc.figure("ledger_forest.png", forest_figure(res.ledger), alt_text(res.method.confidence))
    confidence = confidence_percent(res)
    doc.table(["claim", "the paper", "measured here", "verdict", "the same rows on the fixed set", "detail"],
              [[c.claim, c.paper, measured_text(c), verdict_text(c), fixed_text(c), c.section or ""]
               for c in res.ledger],
              caption=f"Each claim by the report's own test ({confidence}% intervals; shown: the paper's direction "
                      f"beyond noise, opposite: the reverse beyond noise, level: the {2 * confidence - 100}% "
                      "interval inside the claim's margin by two one-sided tests, whether or not it excludes zero); "
                      "a claim this grid did not run names what runs it")


def _diff(claim: Claim, value: float) -> str:
    """A difference in the claim's units, signed with a true minus: points for a fraction, else three decimals."""
    return (f"{100 * value:+.1f}" if claim.percent else f"{value:+.3f}").replace("-", "−")


def measured_text(c: Claim) -> str:
    """A claim's measurement: the rows, the metric, the difference with its interval and p, the runs per side
    (read on several tasks: each task's), after the precondition it was posed on, if it has one."""
    if c.test is None:
        return "not in this grid"

    def one(rows: str, metric: str, t: Comparison) -> str:
        text = f"{rows}; {metric}: {_diff(c, t.diff)}"
        if t.low is not None:
            text += f" [{_diff(c, t.low)}, {_diff(c, t.high)}], {p_text(t.p)}"
        return text + f"; {t.n_pretrain[0]} vs {t.n_pretrain[1]} {'words' if c.section == PROBE_SECTION else 'runs'}"

    posed = f"posed: {c.precondition}; " if c.precondition and c.verdict != "not posed" else ""
    margin = f"; margin {margin_text(c.margin)}" if c.margin else ""
    if c.tasks:
        return posed + " / ".join(one(t.rows, f"{t.task} test {t.metric}", t.test) for t in c.tasks) + margin
    return posed + one(c.rows, c.metric, c.test) + margin


def margin_text(margin: dict) -> str:
    """A margin of ``claims.yaml`` as the ledger writes it: ``±2 points``, ``±1 point``, ``±0.02 similarity``."""
    unit = margin["unit"].removesuffix("s") if margin["value"] == 1 else margin["unit"]
    return f"±{margin['value']:g} {unit}"


def verdict_text(c: Claim) -> str:
    """A claim's verdict, and for an inconclusive one the pretraining runs per side that would decide it (read on
    several tasks: each task's, whether or not they agree)."""
    if c.verdict == "not run":
        return f"not run: {c.run_by}"
    if c.verdict == "not posed":
        return f"not posed: {c.precondition}"
    if c.tasks:
        return f"{c.verdict}: " + "; ".join(f"{t.task} {one_verdict(c, t.verdict, t.test)}" for t in c.tasks)
    if c.test is None:
        return c.verdict
    return one_verdict(c, c.verdict, c.test)


def one_verdict(c: Claim, verdict: str, test: Comparison) -> str:
    """One reading's verdict: a level one with the interval inside the claim's margin and whether level is the
    paper's direction; an inconclusive one with what would decide it -- the runs per side that would show it level,
    where fewer than would show the difference, else those."""
    if verdict == "level":
        return "level: " + tost_text(c, test, c.margin) + {True: " (the paper's direction)",
                                                           False: " (not the paper's direction)"}.get(c.level_shown, "")
    if verdict != "inconclusive":
        return verdict
    n, n_level = test.seeds_needed, test.seeds_needed_level
    unit = "words" if c.section == PROBE_SECTION else "runs"  # the probe's sides are its words
    if n_level and (not n or n_level < n):
        return (f"inconclusive: about {n_level} {unit} per side would show it level within {margin_text(c.margin)}, "
                f"if the difference is as measured{cost_text(n_level, c.cost_seconds)}")
    if not n:
        return f"inconclusive ({test.verdict})" if test.verdict != "inconclusive" else \
            "inconclusive: too small a difference to decide with a practical number of runs"
    return f"inconclusive: about {n} {unit} per side would decide it{cost_text(n, c.cost_seconds)}"


def cost_text(runs: int, cost_seconds: float | None) -> str:
    """What ``runs`` more pairs of pretraining runs cost here, where one pair's time is known."""
    return f" (about {runs * cost_seconds / 60:.0f} min of pretraining here)" if cost_seconds else ""


def tost_text(c: Claim, test: Comparison, margin: dict | None) -> str:
    """The two one-sided tests' interval against the margin: ``the 90% interval [−0.9, +1.5] inside ±2 points``."""
    return (f"the {round(100 * (2 * test.confidence - 1))}% interval [{_diff(c, test.tost_low)}, "
            f"{_diff(c, test.tost_high)}] inside {margin_text(margin)}")


def fixed_text(c: Claim) -> str:
    """The same rows on the fixed evaluation set, and their gap along pretraining (does more pretraining move it)."""
    if c.fixed is None:
        return "—"
    text = f"{c.fixed_verdict} ({_diff(c, c.fixed.diff)} points"
    if c.fixed_verdict == "level":
        text += f", {tost_text(c, c.fixed, c.fixed_margin)}"
    elif c.fixed.low is not None:
        text += f" [{_diff(c, c.fixed.low)}, {_diff(c, c.fixed.high)}]"
    text += ")"
    if along := trend(c.along):
        text += f"; gap along pretraining: {along}"
    return text


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
