"""The report's cells and numbers in words, shared by every section: a metric's format (a share as a percentage), a
difference with its sign, a p-value, a score with its interval and runs, a tested comparison, a fixed-set accuracy,
where a row crossed a floor, a candidate's settings. Text only: no numbers are computed here.
"""
from __future__ import annotations

from pipeline.report.model import AblationResults, Comparison, Crossing, Interval, Score


def classical_name(task: str) -> str:
    """What the non-neural mode is on ``task``: the word-overlap baseline on SQuAD, TF-IDF elsewhere."""
    return "word overlap" if task.startswith("SQuAD") else "TF-IDF"


def percent(metric: str) -> bool:
    """Whether ``metric`` is a share (accuracy, F1, SQuAD's exact match and its HasAns/NoAns parts)."""
    return metric.split("_")[-1] in ("accuracy", "f1", "exact") or metric in ("precision", "recall")


def fmt(metric: str, value: float) -> str:
    """Accuracy, F1 and exact match as percentages, correlations as plain numbers."""
    return f"{100 * value:.1f}" if percent(metric) else f"{value:.3f}"


def signed(metric: str, value: float) -> str:
    """A difference as the report writes it: its sign (a true minus), then its size in the metric's format."""
    return ("+" if value >= 0 else "−") + fmt(metric, abs(value))


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


def score_cell(metric: str, score: Score | None) -> str:
    """A row's number: its mean, the interval of the mean, and the runs behind it (pretraining x fine-tuning)."""
    if not score:
        return "—"
    interval = f" [{fmt(metric, score.low)}, {fmt(metric, score.high)}]" if score.low is not None else ""
    runs = f"{score.n_pretrain} x {score.n_finetune // max(1, score.n_pretrain)}" if score.n_pretrain else \
        f"{score.n_finetune} runs"
    return f"{fmt(metric, score.mean)}{interval} ({runs})"


def comparison_cell(metric: str, comparison: Comparison | None) -> str:
    """A tested comparison in a table cell: the difference, its interval and p-value, the verdict."""
    c = comparison
    if c is None:
        return "reference"
    if c.low is None:
        return f"{signed(metric, c.diff)} ({c.verdict})"
    return (f"{signed(metric, c.diff)} [{signed(metric, c.low)}, {signed(metric, c.high)}], {p_text(c.p)}: "
            f"{c.verdict}{' (borderline)' if c.borderline else ''}")


def fixed_cell(accuracy: Interval | None) -> str:
    """A row's fixed-set accuracy at the masked positions: mean [interval] (pretraining runs)."""
    if not accuracy:
        return "—"
    interval = f" [{100 * accuracy.low:.1f}, {100 * accuracy.high:.1f}]" if accuracy.low is not None else ""
    n = len(accuracy.units)
    return f"{100 * accuracy.mean:.1f}{interval} ({n} run{'s' if n > 1 else ''})"


def crossing_text(crossing: Crossing | None) -> str:
    """Where a row's runs crossed a floor: step, tokens, seconds, FLOPs (means over the runs that did)."""
    c = crossing
    if not c or not c.runs:
        return "—"
    if not c.crossed:
        return f"not reached (0 of {c.runs} runs)"
    parts = [f"step {c.step:.0f}"]
    if c.tokens is not None:
        parts.append(f"{c.tokens / 1e6:.2f}M tokens")
    if c.seconds is not None:
        parts.append(f"{c.seconds:.0f} s")
    if c.flops is not None:
        parts.append(f"{c.flops / 1e12:.1f} TFLOP")
    return ", ".join(parts) + f" ({c.crossed} of {c.runs} runs)"


def settings_text(settings: dict) -> str:
    """A candidate's settings as the tables write them: ``lr 3e-4, mean``; TF-IDF's ``1-2-grams, C 10``."""
    parts = []
    if "lr" in settings:
        mantissa, exponent = f"{settings['lr']:e}".split("e")
        parts.append(f"lr {mantissa.rstrip('0').rstrip('.')}e{int(exponent)}")
    if settings.get("pooling"):
        parts.append(settings["pooling"])
    if "ngrams" in settings:
        parts.append(f"1-{settings['ngrams']}-grams" if settings["ngrams"] > 1 else "words")
    if "c" in settings:
        parts.append(f"C {settings['c']:g}")
    return ", ".join(parts) or "nothing to choose"
