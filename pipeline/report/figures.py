"""The report's figures (matplotlib, drawn off-screen): learning curves, each family's means with their intervals,
a suite's table, contextuality per layer. Each function returns a figure; ``png`` turns it into bytes.

Figures that do not mislead: a mean with an interval is a dot with an error bar (a bar's length would be read
against an origin the axis does not show), every axis is labelled with its unit, and every reference line (a floor,
TF-IDF) is named, beside the line or in the legend."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from pipeline.finetune.modes import mode_label  # noqa: E402
from pipeline.model_config import LM_KINDS  # noqa: E402
from pipeline.report.fixed import read_curve as read_fixed_curve  # noqa: E402
from pipeline.report.model import FamilyResult, Floor, Interval, SuiteCell  # noqa: E402
from pipeline.report.results import classical_name, percent  # noqa: E402

COLORS = ["#3b75af", "#c44e52", "#55a868", "#8172b2", "#ccb974", "#64b5cd", "#937860", "#da8bc3"]
REFERENCE = {"ls": "--", "color": "#555", "lw": 1}  # floors and TF-IDF: dashed grey, and always named
MIN_SPAN = 10.0  # the least y-range of a dot chart, in points (% or correlation x 100): means without an interval
# one point apart must not be drawn a chart's height apart


def png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    plt.close(fig)
    return buf.getvalue()


def _smooth(values: list[float], weight: float = 0.8) -> list[float]:
    out, last = [], values[0] if values else 0.0
    for v in values:
        last = weight * last + (1 - weight) * v
        out.append(last)
    return out


def _dots(ax, xs: list[float], stats: list[Interval | SuiteCell | None], scale: float, color: str,
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


def _min_span(ax, span: float = MIN_SPAN) -> None:
    """Widen the y-axis around its middle to at least ``span``; not below 0 unless a value is (a correlation)."""
    lo, hi = ax.get_ylim()
    if hi - lo < span:
        middle = (lo + hi - span) / 2
        lo = max(0.0, middle) if lo >= 0 else middle
        ax.set_ylim(lo, lo + span)


def _legend(ax) -> None:
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


def curves_figure(runs: list[tuple[str, str, str]], title: str):
    """Learning curves of several pretraining runs: LM accuracy (%) and loss against steps.

    ``runs``: (label, the run's plots folder, lm) with lm ``mlm``, ``ltr``,
    ``bilm`` or ``w2v`` (no accuracy). Lines are the training curve (smoothed),
    dots the validation checks.
    """
    fig, (ax_acc, ax_loss) = plt.subplots(1, 2, figsize=(11, 3.8))
    for i, (label, plots, lm) in enumerate(runs):
        color = COLORS[i % len(COLORS)]
        for ax, key, scale in ((ax_acc, f"{lm}_acc", 100), (ax_loss, "loss", 1)):
            train = read_curve(plots, "train", key)
            if train:
                steps, values = zip(*train)
                ax.plot(steps, _smooth([scale * v for v in values]), "-", color=color, alpha=0.8, lw=1.2,
                        label=f"{label} ({LM_KINDS[lm].long})" if ax is ax_acc else None)
            val = read_curve(plots, "val", key)
            if val:
                steps, values = zip(*val)
                ax.plot(steps, [scale * v for v in values], "o", color=color, markersize=4)
    ax_acc.set(xlabel="pretraining step", ylabel="LM token accuracy (%)", title=f"{title}: LM accuracy")
    # the loss logged is the LM's cross-entropy, plus NSP's where the run trains it
    ax_loss.set(xlabel="pretraining step", ylabel="loss (cross-entropy, nats)", title=f"{title}: loss")
    for ax in (ax_acc, ax_loss):
        ax.grid(alpha=0.3)
    kinds = [Line2D([], [], color="#777", lw=1.2, label="training (smoothed)"),
             Line2D([], [], color="#777", marker="o", ls="", markersize=4, label="validation")]
    ax_acc.legend(handles=ax_acc.get_legend_handles_labels()[0] + kinds, fontsize=7)
    fig.tight_layout()
    return fig


def fixed_curves_figure(rows: list[tuple[str, list]], floors: list[Floor], title: str):
    """Accuracy at the fixed set's masked positions along pretraining, against steps, training FLOPs (a log axis:
    rows of different sizes at the same compute) and training seconds: per row the mean over its pretraining runs
    with a band from the lowest to the highest run, the floors as named horizontal lines, and a star where the mean
    first rises above each floor that reads context."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    handles, band, star = [], False, False
    for i, (label, plots) in enumerate(rows):
        curves = [c for c in (read_fixed_curve(p) for p in plots) if c]
        if not curves:
            continue
        n = min(len(c) for c in curves)
        color = COLORS[i % len(COLORS)]
        acc = [[100 * c[j]["acc_masked"] for c in curves] for j in range(n)]
        mean = [sum(a) / len(a) for a in acc]
        for ax, key in zip(axes, ("step", "flops", "seconds")):
            if any(key not in c[j] for c in curves for j in range(n)):  # a curve written before it was logged
                continue
            xs = [sum(c[j].get(key, 0.0) for c in curves) / len(curves) for j in range(n)]
            line, = ax.plot(xs, mean, "o-", color=color, lw=1.5, markersize=3,
                            label=f"{label} (mean of {len(curves)} run{'s' if len(curves) > 1 else ''})")
            if ax is axes[0]:
                handles.append(line)
            if len(curves) > 1:
                band = True
                ax.fill_between(xs, [min(a) for a in acc], [max(a) for a in acc], color=color, alpha=0.2, lw=0)
            for floor in floors[1:]:
                j = next((j for j in range(n) if mean[j] > 100 * floor.accuracy), None)
                if j is not None:
                    star = True
                    ax.plot([xs[j]], [mean[j]], "*", color=color, markersize=11)
    axes[1].set_xscale("log")
    xlabels = ("pretraining step", "training FLOPs (log scale)", "training seconds (validation excluded)")
    for ax, xlabel in zip(axes, xlabels):
        for floor in floors:
            y = 100 * floor.accuracy
            name = f"{floor.short} {y:.1f}%"
            ax.axhline(y, **REFERENCE, label=name)  # named by the text at its right end
            ax.annotate(name, (1.0, y), xycoords=("axes fraction", "data"), xytext=(3, 0),
                        textcoords="offset points", va="center", fontsize=7, color="#333")
        ax.set(xlabel=xlabel, ylabel="accuracy at the masked positions (%)",
               ylim=(0, max([100 * f.accuracy for f in floors] + [ax.get_ylim()[1]]) + 3))
        ax.grid(alpha=0.3)
    if band:
        handles.append(Patch(color="#999", alpha=0.3, label="band: lowest to highest run"))
    if floors:
        handles.append(Line2D([], [], **REFERENCE, label="dashed: a count-based floor"))
    if star:
        handles.append(Line2D([], [], marker="*", ls="", color="#555", markersize=9,
                              label="star: the mean first rises above a floor that reads context"))
    fig.suptitle(f"{title}: the fixed evaluation set", fontsize=10)
    fig.legend(handles=handles, loc="lower center", ncol=min(3, max(1, len(handles))), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.1 if len(handles) > 3 else 0.07, 0.95, 0.97), w_pad=5)  # room for the floors' names
    return fig


def bars_figure(fam: FamilyResult, metric: str, modes: list[str], task: str):
    """Test metric per row as dots with error bars (each row's interval, as the test computes it), one colour per
    fine-tuning mode for a family of pretraining variants; TF-IDF as a named dashed line."""
    rows = [r for r in fam.rows if r.ran]
    series = [fam.rows[0].name] if fam.kind == "mode" else modes
    fig, ax = plt.subplots(figsize=(max(5.5, 1.3 * len(rows) * max(1, len(series)) ** 0.5) + 2, 3.8))
    scale = 100 if percent(metric) else 1
    width = 0.5 / len(series)  # the offset between one row's modes
    for j, mode in enumerate(series):
        stats = [r.primary if fam.kind == "mode" else r.scores.get(mode) for r in rows]
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(rows))]
        _dots(ax, xs, stats, scale, COLORS[j % len(COLORS)], None if fam.kind == "mode" else mode_label(mode))
    if fam.classical:
        c = scale * fam.classical.mean
        ax.axhline(c, **REFERENCE, label=f"{classical_name(task)} baseline\n(no pretraining): {c:.1f}")
    ax.set_xlim(-0.5, len(rows) - 0.5)
    ax.margins(y=0.1)
    _min_span(ax, MIN_SPAN if percent(metric) else MIN_SPAN / 100)
    ax.set_xticks(range(len(rows)), [r.label for r in rows], rotation=20, ha="right", fontsize=8)
    ax.set(xlabel="fine-tuning mode" if fam.kind == "mode" else "pretraining setting",
           ylabel=f"{task} test {metric} ({'%' if percent(metric) else 'correlation'})", title=fam.title)
    ax.grid(axis="y", alpha=0.3)
    _legend(ax)
    fig.tight_layout()
    return fig


def suite_figure(fam: dict, columns: list[dict], title: str):
    """Each row's score in each column of the suite as a dot with its interval (the paper's table drawn at our
    scale); TF-IDF's score in each column as a named dashed segment."""
    rows = [r for r in fam["rows"] if r["ran"]]
    fig, ax = plt.subplots(figsize=(max(5.5, 1.1 * len(columns) * max(1, len(rows)) ** 0.5) + 2, 3.8))
    width = 0.5 / max(1, len(rows))
    for j, r in enumerate(rows):
        xs = [i + (j - (len(rows) - 1) / 2) * width for i in range(len(columns))]
        # correlations x 100 too: one axis for every column
        _dots(ax, xs, [cell if cell.ran else None for cell in r["cells"]], 100, COLORS[j % len(COLORS)],
              r["label"])
    classical = fam.get("classical") or []
    if any(v is not None for v in classical):
        xs, ys = [], []
        for i, v in enumerate(classical):
            if v is not None:  # one Line2D, its segments split by NaN: one legend entry
                xs += [i - 0.35, i + 0.35, float("nan")]
                ys += [100 * v, 100 * v, float("nan")]
        ax.plot(xs, ys, **REFERENCE, label="no pretraining: TF-IDF\n(SQuAD: word overlap)")
    ax.set_xlim(-0.5, len(columns) - 0.5)
    ax.margins(y=0.1)
    _min_span(ax)
    ax.set_xticks(range(len(columns)), [c["label"] for c in columns], rotation=15, ha="right", fontsize=8)
    everything_percent = all(percent(c["metric"]) for c in columns)
    ax.set(xlabel="task and metric",
           ylabel="test score (%)" if everything_percent else "test score (%; correlations x 100)",
           title=f"{title}: every task of the suite")
    ax.grid(axis="y", alpha=0.3)
    _legend(ax)
    fig.tight_layout()
    return fig


def contextuality_figure(probe: dict):
    """Anisotropy-corrected self-similarity per layer, one line per model (a static model: one point)."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for i, (name, m) in enumerate(probe["models"].items()):
        ys = m["corrected"]
        ax.plot(range(len(ys)), ys, "o-", color=COLORS[i % len(COLORS)], label=name, lw=1.5, markersize=4)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="layer (0: the token layer)",
           ylabel="self-similarity - random-pair\nsimilarity (cosine)",
           title="How contextual is each layer? (lower: more context)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def nsp_curves_figure(rows: list[tuple[str, list]], base_rate: float, title: str):
    """The NSP head's accuracy on the fixed set's pairs along pretraining, against steps: per row the mean over its
    runs with a band from the lowest to the highest, and the base rate (always the more common label) named. None
    when no run logged it (curves written before the head was scored along training)."""
    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    drawn = 0
    for i, (label, plots) in enumerate(rows):
        curves = [[r for r in c if "nsp_acc" in r] for c in (read_fixed_curve(p) for p in plots)]
        curves = [c for c in curves if c]
        if not curves:
            continue
        n, color = min(len(c) for c in curves), COLORS[i % len(COLORS)]
        acc = [[100 * c[j]["nsp_acc"] for c in curves] for j in range(n)]
        steps = [sum(c[j]["step"] for c in curves) / len(curves) for j in range(n)]
        ax.plot(steps, [sum(a) / len(a) for a in acc], "o-", color=color, lw=1.5, markersize=3,
                label=f"{label} (mean of {len(curves)} run{'s' if len(curves) > 1 else ''})")
        if len(curves) > 1:
            ax.fill_between(steps, [min(a) for a in acc], [max(a) for a in acc], color=color, alpha=0.2, lw=0,
                            label="band: lowest to highest run" if not drawn else None)
        drawn += 1
    if not drawn:
        plt.close(fig)
        return None
    name = f"base rate {100 * base_rate:.1f}%"
    ax.axhline(100 * base_rate, **REFERENCE)
    ax.annotate(name, (1.0, 100 * base_rate), xycoords=("axes fraction", "data"), xytext=(3, 0),
                textcoords="offset points", va="center", fontsize=7, color="#333")
    ax.set(xlabel="pretraining step", ylabel="NSP accuracy on the fixed set's pairs (%)",
           title=f"{title}: next-sentence prediction along pretraining",
           ylim=(min(45.0, ax.get_ylim()[0]), max(100 * base_rate + 10, ax.get_ylim()[1]) + 2))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout(rect=(0, 0, 0.9, 1))
    return fig


def along_figure(along: dict, floor: dict | None):
    """The baseline along pretraining, against steps: the fixed set's masked accuracy with the count-based floors
    (left) and BLiMP with its interval over runs, chance and the n-gram floor (right), each line named."""
    fig, (ax_fixed, ax_blimp) = plt.subplots(1, 2, figsize=(11, 4.0), sharex=True)
    steps = [p["step"] for p in along["points"]]
    ax_fixed.plot(steps, [100 * p["fixed"] for p in along["points"]], "o-", color=COLORS[0], lw=1.5, markersize=3,
                  label=f"baseline (mean of {along['runs']} run{'s' if along['runs'] > 1 else ''})")
    blimp = [p["blimp"] for p in along["points"]]
    ax_blimp.plot(steps, [100 * b.mean for b in blimp], "o-", color=COLORS[0], lw=1.5, markersize=3,
                  label="baseline (mean over runs)")
    if all(b.low is not None for b in blimp):
        ax_blimp.fill_between(steps, [100 * b.low for b in blimp], [100 * b.high for b in blimp],
                              color=COLORS[0], alpha=0.2, lw=0, label="95% interval over runs")
    lines = [(ax_fixed, 100 * f.accuracy, f"{f.short} {100 * f.accuracy:.1f}%") for f in along["fixed_floors"]]
    lines.append((ax_blimp, 50.0, "chance 50%"))
    if floor:
        lines.append((ax_blimp, 100 * floor["overall"], f"{floor['order']}-gram floor {100 * floor['overall']:.1f}%"))
    for ax, y, name in lines:
        ax.axhline(y, **REFERENCE, label=name)  # named by the text at its right end
        ax.annotate(name, (1.0, y), xycoords=("axes fraction", "data"), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=7, color="#333")
    ax_fixed.set(xlabel="pretraining step", ylabel="accuracy at the fixed set's masked positions (%)",
                 title="fixed evaluation set", ylim=(0, max([y for ax, y, _ in lines if ax is ax_fixed] +
                                                             [ax_fixed.get_ylim()[1]]) + 3))
    low = min([y for ax, y, _ in lines if ax is ax_blimp] + [ax_blimp.get_ylim()[0]])
    ax_blimp.set(xlabel="pretraining step", ylabel="BLiMP accuracy, mean over paradigms (%)",
                 title="BLiMP along pretraining", ylim=(min(low, 45) - 2, max(ax_blimp.get_ylim()[1], 60) + 2))
    for ax in (ax_fixed, ax_blimp):
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        named = {name for a, _, name in lines if a is ax}
        ax.legend([h for h, t in zip(handles, labels) if t not in named], [t for t in labels if t not in named],
                  fontsize=7, loc="lower right")
    fig.tight_layout(rect=(0, 0, 0.93, 1))
    return fig


def grammar_figure(fam: dict, floor: dict | None, title: str):
    """BLiMP per phenomenon: each row's mean over its pretraining runs (a dot with its interval), the n-gram floor
    per phenomenon (grey crosses), chance (50%) and the floor's overall score as named lines."""
    phenomena = sorted({p for r in fam["rows"] for p in r["phenomenon"]})
    fig, ax = plt.subplots(figsize=(11, 4.2))
    n = max(1, len(fam["rows"]))
    for i, r in enumerate(fam["rows"]):
        xs = [j + (i - (n - 1) / 2) * 0.6 / n for j in range(len(phenomena))]
        _dots(ax, xs, [r["phenomenon"].get(p) for p in phenomena], 100, COLORS[i % len(COLORS)],
              f"{r['label']} ({100 * r['overall'].mean:.1f}% overall)")
    references = [("chance 50.0%", 50.0)]
    if floor:
        ax.plot(range(len(phenomena)), [100 * floor["phenomenon"].get(p, float("nan")) for p in phenomena], "x",
                color="#555", markersize=7, label=f"n-gram floor ({floor['order']}-gram Kneser-Ney), per phenomenon")
        references.append((f"n-gram floor {100 * floor['overall']:.1f}% overall", 100 * floor["overall"]))
    for name, y in references:
        ax.axhline(y, **REFERENCE, label=name)
        ax.annotate(name, (1.0, y), xycoords=("axes fraction", "data"), xytext=(3, 0), textcoords="offset points",
                    va="center", fontsize=7, color="#333")
    ax.set_xticks(range(len(phenomena)))
    ax.set_xticklabels([p.replace("_", " ") for p in phenomena], rotation=35, ha="right", fontsize=8)
    ax.set(xlabel="BLiMP phenomenon", ylabel="pairs right (%, mean over paradigms)", ylim=(0, 100),
           title=f"{title}: BLiMP, zero-shot")
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.12, 1), frameon=False)
    fig.tight_layout()
    return fig


def _cell_ticks(cells: list[dict]) -> list[str]:
    """Short x labels of the probe's cells: a single segment's length and offset, or a pair's segment."""
    short = {"early": "early", "middle": "mid", "late": "late"}
    return [f"{c['length']} {short[c['where']]}" if c["layout"] == "single" else f"pair {c['where']}" for c in cells]


def layout_figure(probe: dict):
    """Every row on the layout probe: per cell (a single segment's length and where the hidden piece is, or a
    sentence pair's segment) the row's mean over its pretraining runs with a band from the lowest to the
    highest run, and the count-based floors of a masked LM as named dashed steps."""
    cells = probe["cells"]
    xs = list(range(len(cells)))
    fig, ax = plt.subplots(figsize=(11, 4.4))
    for i, row in enumerate(probe["rows"]):
        color = COLORS[i % len(COLORS)]
        means = [100 * row["cells"][c["name"]].mean for c in cells]
        ax.plot(xs, means, "o-", color=color, lw=1.5, markersize=4,
                label=f"{row['label']} ({row['runs']} run{'s' if row['runs'] > 1 else ''})")
        if row["runs"] > 1:
            units = [[100 * u for u in row["cells"][c["name"]].units] for c in cells]
            ax.fill_between(xs, [min(u) for u in units], [max(u) for u in units], color=color, alpha=0.15, lw=0)
    styles = {"majority": ":", "left": "--", "left_right": "-."}
    for floor in probe["floors"]:
        ys = [100 * floor["cells"][c["name"]] for c in cells]
        ax.step(xs, ys, where="mid", color="#555", lw=1, ls=styles.get(floor["name"], "--"),
                label=f"floor: {floor['short']}")
    for k in range(1, len(cells)):  # a thin rule between lengths
        if (cells[k]["layout"], cells[k]["length"]) != (cells[k - 1]["layout"], cells[k - 1]["length"]):
            ax.axvline(k - 0.5, color="#ddd", lw=0.8)
    ax.set_xticks(xs, _cell_ticks(cells), rotation=45, ha="right", fontsize=8)
    ax.set(xlabel="single segment of N positions, the hidden piece early / in the middle / late; sentence pair, "
                  "hidden in A or B", ylabel="accuracy at the hidden piece (%)",
           title="The layout probe: held-out text as it is used, one hidden piece a row", ylim=(0, None))
    ax.grid(alpha=0.3, axis="y")
    handles, labels = ax.get_legend_handles_labels()
    handles.append(Patch(color="#999", alpha=0.3, label="band: lowest to highest run"))
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return fig


def layout_along_figure(probe: dict):
    """The baseline on the layout probe along pretraining: per length (the mean over its three offsets) and for
    sentence pairs, the mean over runs against the step, and the bigram floor's lowest and highest cell."""
    along, cells = probe["along"], probe["cells"]
    groups: dict[str, list[str]] = {}
    for c in cells:
        groups.setdefault(f"one segment of {c['length']}" if c["layout"] == "single" else "sentence pairs",
                          []).append(c["name"])
    fig, ax = plt.subplots(figsize=(8, 4.0))
    steps = [p["step"] for p in along]
    for i, (label, names) in enumerate(groups.items()):
        ys = [100 * float(np.mean([p["cells"][n]["mean"] for n in names])) for p in along]
        ax.plot(steps, ys, "o-", color=COLORS[i % len(COLORS)], lw=1.5, markersize=3, label=label)
    bigram = next((f for f in probe["floors"] if f["name"] == "left"), None)
    if bigram:
        lo, hi = (100 * v for v in (min(bigram["cells"].values()), max(bigram["cells"].values())))
        ax.axhspan(lo, hi, color="#999", alpha=0.2, lw=0, label=f"bigram floor: {lo:.1f} to {hi:.1f}% by cell")
    rows = f", the first {along[0]['rows']:.0f} rows of each cell" if along[0].get("rows") else ""
    ax.set(xlabel="pretraining step", ylabel="accuracy at the hidden piece (%)", ylim=(0, None),
           title=f"The baseline on the layout probe along pretraining (mean of {along[0]['runs']} "
                 f"run{'s' if along[0]['runs'] > 1 else ''}{rows})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def choices_figure(entry: dict, run: str):
    """One task's choice on dev: each mode's dev score against the candidate learning rate (a log axis), one line
    per mode and pooling, the chosen candidate ringed."""
    modes = {m: c for m, c in entry["runs"][run].items() if c["grid"] and "lr" in c["grid"][0]}
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    scale = 100 if percent(entry["metric"]) else 1
    for j, (mode, c) in enumerate(modes.items()):
        poolings = list(dict.fromkeys(g.get("pooling") for g in c["grid"]))
        for k, pooling in enumerate(poolings):
            points = sorted((g["lr"], scale * g["dev"]) for g in c["grid"] if g.get("pooling") == pooling)
            label = f"{mode_label(mode)}{f', {pooling}' if pooling and len(poolings) > 1 else ''}"
            ax.plot(*zip(*points), marker="o", ms=4, color=COLORS[j % len(COLORS)], ls="-" if k == 0 else "--",
                    label=label)
        chosen = next(g for g in c["grid"] if all(g.get(key) == v for key, v in c["chosen"].items()))
        ax.plot([chosen["lr"]], [scale * chosen["dev"]], marker="o", ms=11, mfc="none", mec="black", mew=1.2)
    ax.set_xscale("log")
    ax.set(xlabel="peak learning rate", title=f"{entry['task_name']}: the choice on dev (ringed: chosen)",
           ylabel=f"dev {entry['metric']} ({'%' if percent(entry['metric']) else 'correlation'})")
    ax.grid(alpha=0.3)
    _legend(ax)
    fig.tight_layout()
    return fig


def sweep_figure(sweeps: list[dict]):
    """Learning-rate sensitivity: each swept row's pilots, fixed-set loss at the masked positions against the peak
    rate (a log axis), the chosen rate ringed, a diverged pilot an x at the top."""
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    scored = [p["score"] for s in sweeps for p in s["pilots"] if p["score"] is not None and not p["diverged"]]
    top = max(scored) if scored else 1.0
    for j, s in enumerate(sweeps):
        color = COLORS[j % len(COLORS)]
        points = sorted((p["lr"], p["score"]) for p in s["pilots"] if p["score"] is not None and not p["diverged"])
        if points:
            ax.plot(*zip(*points), marker="o", ms=4, color=color, label=s["label"])
        bad = [p["lr"] for p in s["pilots"] if p["diverged"] or p["score"] is None]
        if bad:
            ax.plot(bad, [top] * len(bad), marker="x", ms=8, ls="none", color=color)
        best = next((p for p in s["pilots"] if p["lr"] == s["chosen_lr"]), None)
        if best and best["score"] is not None:
            ax.plot([best["lr"]], [best["score"]], marker="o", ms=11, mfc="none", mec="black", mew=1.2)
    ax.set_xscale("log")
    ax.set(xlabel="peak learning rate", ylabel="fixed-set loss, masked pieces (lower is better)",
           title="Learning-rate sweep: each row's pilots (ringed: chosen; x: diverged)")
    ax.grid(alpha=0.3)
    _legend(ax)
    fig.tight_layout()
    return fig
