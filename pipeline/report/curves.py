"""Learning curves along pretraining, drawn by more than one section: a row's LM accuracy and loss (the baseline's
section, each family's), and the fixed evaluation set against steps, FLOPs and seconds beside the count-based floors
(the fixed set's section, each family's).
"""
from __future__ import annotations

from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from pipeline.model_config import LM_KINDS
from pipeline.report.fixed import read_curve as read_fixed_curve
from pipeline.report.model import Floor
from pipeline.report.style import COLORS, REFERENCE, plt, read_curve, smooth


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
                ax.plot(steps, smooth([scale * v for v in values]), "-", color=color, alpha=0.8, lw=1.2,
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
