"""The report's figures (matplotlib, drawn off-screen): learning curves, each family's bars with their intervals,
a suite's table as bars, contextuality per layer. Each function returns a figure; ``png`` turns it into bytes."""
from __future__ import annotations

import csv
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from pipeline.finetune.modes import mode_label  # noqa: E402
from pipeline.report.fixed import read_curve as read_fixed_curve  # noqa: E402
from pipeline.report.results import classical_name, percent  # noqa: E402

COLORS = ["#3b75af", "#c44e52", "#55a868", "#8172b2", "#ccb974", "#64b5cd", "#937860", "#da8bc3"]


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


def read_curve(plots: str | Path | None, split: str, key: str) -> list[tuple[int, float]]:
    """(step, value) of ``key`` from a run's ``plots/pretrain_<split>.csv`` (empty when it has no such column)."""
    path = Path(plots or "") / f"pretrain_{split}.csv"
    if not plots or not path.exists():
        return []
    with path.open(newline="") as f:
        return [(int(row["step"]), float(row[key])) for row in csv.DictReader(f) if row.get(key) not in (None, "")]


def curves_figure(runs: list[tuple[str, str, str]], title: str):
    """Learning curves of several pretraining runs: LM accuracy and loss against steps.

    ``runs``: (label, the run's plots folder, lm) with lm ``mlm``, ``ltr``,
    ``bilm`` or ``w2v`` (no accuracy). Lines are the training curve (smoothed),
    dots the validation checks.
    """
    fig, (ax_acc, ax_loss) = plt.subplots(1, 2, figsize=(11, 3.8))
    for i, (label, plots, lm) in enumerate(runs):
        color = COLORS[i % len(COLORS)]
        name = {"mlm": "masked LM", "ltr": "left-to-right LM", "bilm": "two directional LMs",
                "w2v": "word2vec"}.get(lm, lm)
        for ax, key in ((ax_acc, f"{lm}_acc"), (ax_loss, "loss")):
            train = read_curve(plots, "train", key)
            if train:
                steps, values = zip(*train)
                ax.plot(steps, _smooth(list(values)), "-", color=color, alpha=0.8, lw=1.2,
                        label=f"{label} ({name})" if ax is ax_acc else label)
            val = read_curve(plots, "val", key)
            if val:
                ax.plot(*zip(*val), "o", color=color, markersize=4)
    ax_acc.set(xlabel="pretraining step", ylabel="token accuracy (dots: validation)", title=f"{title}: LM accuracy")
    ax_loss.set(xlabel="pretraining step", ylabel="loss (dots: validation)", title=f"{title}: loss")
    for ax in (ax_acc, ax_loss):
        ax.grid(alpha=0.3)
    ax_acc.legend(fontsize=7)
    fig.tight_layout()
    return fig


def fixed_curves_figure(rows: list[tuple[str, list]], floors: list[dict], title: str):
    """Accuracy at the fixed set's masked positions along pretraining, against steps and training seconds: per row
    the mean over its pretraining runs with a band from the lowest to the highest run, the floors as named
    horizontal lines, and a star where the mean first rises above each floor that reads context."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, (label, plots) in enumerate(rows):
        curves = [c for c in (read_fixed_curve(p) for p in plots) if c]
        if not curves:
            continue
        n = min(len(c) for c in curves)
        color = COLORS[i % len(COLORS)]
        acc = [[100 * c[j]["acc_masked"] for c in curves] for j in range(n)]
        mean = [sum(a) / len(a) for a in acc]
        for ax, key in zip(axes, ("step", "seconds")):
            xs = [sum(c[j].get(key, 0.0) for c in curves) / len(curves) for j in range(n)]
            ax.plot(xs, mean, "o-", color=color, lw=1.5, markersize=3,
                    label=f"{label} ({len(curves)} run{'s' if len(curves) > 1 else ''})" if ax is axes[0] else None)
            if len(curves) > 1:
                ax.fill_between(xs, [min(a) for a in acc], [max(a) for a in acc], color=color, alpha=0.2, lw=0)
            for floor in floors[1:]:
                j = next((j for j in range(n) if mean[j] > 100 * floor["accuracy"]), None)
                if j is not None:
                    ax.plot([xs[j]], [mean[j]], "*", color=color, markersize=11)
    for ax, xlabel in zip(axes, ("pretraining step", "training seconds (validation excluded)")):
        for floor in floors:
            y = 100 * floor["accuracy"]
            ax.axhline(y, ls="--", color="#555", lw=0.9)
            ax.annotate(f"{floor['short']} {y:.1f}%", (1.0, y), xycoords=("axes fraction", "data"), xytext=(3, 0),
                        textcoords="offset points", va="center", fontsize=7, color="#333")
        ax.set(xlabel=xlabel, ylim=(0, max([100 * f["accuracy"] for f in floors] + [ax.get_ylim()[1]]) + 3))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("accuracy at the masked positions (%)")
    fig.suptitle(f"{title}: the fixed evaluation set (dashed: count-based floors; star: the mean rises above one)",
                 fontsize=10)
    fig.legend(loc="lower center", ncol=min(4, max(1, len(rows))), fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 0.95, 0.97))
    return fig


def bars_figure(fam: dict, metric: str, modes: list[str], task: str):
    """Dev metric per row with error bars (each row's interval, as the test computes it); TF-IDF as a dashed line."""
    rows = [r for r in fam["rows"] if r["ran"]]
    series = [fam["rows"][0]["name"]] if fam["kind"] == "mode" else modes
    fig, ax = plt.subplots(figsize=(max(5.5, 1.3 * len(rows) * max(1, len(series)) ** 0.5), 3.8))
    width = 0.8 / len(series)
    values = []
    for j, mode in enumerate(series):
        stats = [r["primary"] if fam["kind"] == "mode" else r["scores"].get(mode) for r in rows]
        xs = [i + (j - (len(series) - 1) / 2) * width for i in range(len(rows))]
        means = [100 * s["mean"] if s and percent(metric) else (s["mean"] if s else 0) for s in stats]
        scale = 100 if percent(metric) else 1
        errors = [[scale * (s["mean"] - s["low"]) if s and s["low"] is not None else 0 for s in stats],
                  [scale * (s["high"] - s["mean"]) if s and s["low"] is not None else 0 for s in stats]]
        values += means + [m + e for m, e in zip(means, errors[1])]
        ax.bar(xs, means, width * 0.95, yerr=errors, capsize=4, color=COLORS[j % len(COLORS)],
               label=None if fam["kind"] == "mode" else mode_label(mode))
    if fam["classical"]:
        c = fam["classical"]["mean"] * (100 if percent(metric) else 1)
        ax.axhline(c, ls="--", color="#555", lw=1, label=f"{classical_name(task)} baseline ({c:.1f})")
        values.append(c)
    lo = min(values) if values else 0
    ax.set_ylim(max(0, lo - 0.15 * (max(values) - lo + 1) - 2), max(values) + 2 if values else 1)
    ax.set_xticks(range(len(rows)), [r["label"] for r in rows], rotation=20, ha="right", fontsize=8)
    unit = "%" if percent(metric) else ""
    ax.set(ylabel=f"{task} dev {metric} {unit}".strip(), title=fam["title"])
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def suite_figure(fam: dict, columns: list[dict], title: str):
    """Each row's score in each column of the suite, with its interval: the paper's table drawn at our scale."""
    rows = [r for r in fam["rows"] if r["ran"]]
    fig, ax = plt.subplots(figsize=(max(5.5, 1.1 * len(columns) * max(1, len(rows)) ** 0.5), 3.8))
    width = 0.8 / max(1, len(rows))
    for j, r in enumerate(rows):
        xs, means, errs = [], [], [[], []]
        for i, (col, cell) in enumerate(zip(columns, r["cells"])):
            if not cell["ran"]:
                continue
            scale = 100 if percent(col["metric"]) else 1
            xs.append(i + (j - (len(rows) - 1) / 2) * width)
            means.append(scale * cell["mean"])
            errs[0].append(scale * (cell["mean"] - cell["low"]) if cell["low"] is not None else 0)
            errs[1].append(scale * (cell["high"] - cell["mean"]) if cell["low"] is not None else 0)
        ax.bar(xs, means, width * 0.95, yerr=errs, capsize=3, color=COLORS[j % len(COLORS)], label=r["label"])
    ax.set_xticks(range(len(columns)), [c["label"] for c in columns], rotation=15, ha="right", fontsize=8)
    ax.set(ylabel="dev score (% for accuracy, F1, EM)", title=f"{title}: every task of the suite")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def contextuality_figure(probe: dict):
    """Anisotropy-corrected self-similarity per layer, one line per model (a static model: one point)."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for i, (name, m) in enumerate(probe["models"].items()):
        ys = m["corrected"]
        ax.plot(range(len(ys)), ys, "o-", color=COLORS[i % len(COLORS)], label=name, lw=1.5, markersize=4)
    ax.set(xlabel="layer (0: the token layer)", ylabel="self-similarity - random-pair similarity",
           title="How contextual is each layer? (lower: more context)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
