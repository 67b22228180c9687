"""Method: the design and the tests in one paragraph, with the error rates measured at this grid's noise."""
from __future__ import annotations

from pipeline.report.cells import fmt
from pipeline.report.doc import Doc, Sources
from pipeline.report.model import Method


def write(doc: Doc, src: Sources) -> None:
    doc.heading("Method")
    doc.para(method_text(src.res.method, src.res.metric), cls="note")


def method_text(method: Method, metric: str) -> str:
    """The design and the tests in one paragraph, with the error rates measured at this grid's noise."""
    m = method
    runs = m.pretraining_runs
    counts = sorted(set(runs.values()))
    others = sorted({n for v, n in runs.items() if v != "baseline"})
    per_row = (f"{counts[0]} pretraining runs" if len(counts) == 1 else
               f"{runs['baseline']} pretraining runs for the baseline and {' or '.join(map(str, others))} for each "
               "variant")
    text = (f"Design: every row is {per_row} (seeds seed, seed + 1, ...), each fine-tuned with the same "
            f"{m.finetune_seeds} fine-tuning seeds, so fine-tuning runs pair up across rows. A row's number is the "
            "mean over its pretraining runs of each run's mean over fine-tuning seeds: the pretraining run is the "
            "unit, so both kinds of luck count. Tests: pretraining variants against the family's first row by a "
            "t-test on per-run means with the variance pooled over the family's rows (they are assumed to share one "
            "spread; a row of one run adds nothing to it, so with single-run variants the baseline's runs estimate "
            "it); fine-tuning modes of the same runs by a paired t-test; from scratch (no pretraining behind "
            "it) by Welch's t-test; TF-IDF (deterministic) by a one-sample t-test. Verdicts: better or worse when "
            f"the {round(100 * m.confidence)}% interval of the difference excludes zero, else inconclusive (with "
            "the pretraining runs per side it would take); borderline when p lies between a fifth of the threshold "
            "and twice it, where another machine's rounding may move the verdict between better and inconclusive. "
            f"Noise measured on the baseline: pretraining luck sd {fmt(metric, m.sd_pretrain)}, fine-tuning luck "
            f"sd {fmt(metric, m.sd_finetune)} (points of {metric}).")
    if m.false_positive_rate is not None:
        power = ", ".join(f"{d}: {100 * p:.0f}%" for d, p in m.power_at_observed.items())
        observed = f"power {power} at the observed differences, " if power else ""
        text += (f" At that noise, simulated: a false-positive rate of {100 * m.false_positive_rate:.1f}% on no "
                 f"difference, {observed}and 80% power from a difference "
                 f"of {fmt(metric, m.smallest_detectable)} points (between two pretraining rows of this design by "
                 "the pooled test, test sampling left out; each comparison's own, with it, is under 'How much "
                 "noise').")
    return text + (" The paper's numbers come from models hundreds of times larger trained far longer: compare "
                   "directions, not values.")
