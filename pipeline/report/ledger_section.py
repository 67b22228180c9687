"""The claims ledger as the document writes it, the report's first section: the forest plot, then each claim of
BERT's story with what this grid measured, its verdict in words and the same rows on the fixed set.

The ledger's numbers are ``ledger.py``'s and its figure ``forest.py``'s; this room holds the words: a difference
in the claim's units, a margin, the two one-sided tests' interval, and for an inconclusive claim the runs per side
(and the pretraining time) that would decide it. ``render.write_report`` calls ``ledger_section`` first.
"""
from __future__ import annotations

from pipeline.report.forest import alt_text, forest_figure
from pipeline.report.ledger import PROBE_SECTION, trend
from pipeline.report.model import AblationResults, Claim, Comparison
from pipeline.report.results import confidence_percent, p_text


def ledger_section(doc, res: AblationResults) -> None:
    """The claims ledger: each claim of BERT's story, what this grid measured and the verdict, before anything else;
    first as one figure (every difference against its claim's margin), then as the table. ``doc``: the report's
    writer (``render.Doc``)."""
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
