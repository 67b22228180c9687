"""Pretraining at each row's best learning rate: every swept row's pilots (``protocol.sweeps``), their table and
figure.
"""
from __future__ import annotations

from pipeline.report.doc import Doc, Sources
from pipeline.report.model import AblationResults
from pipeline.report.style import COLORS, legend, plt


def write(doc: Doc, src: Sources) -> None:
    if src.res.sweeps:
        sweep_section(doc, src.res)


def sweep_section(doc: Doc, res: AblationResults) -> None:
    """Pretraining at each row's best: every swept row's pilots at each peak rate, and the rate it trained at."""
    doc.heading("Pretraining: every row at its best learning rate")
    first = res.sweeps[0]
    share = f"{100 * first['fraction']:g}% of" if first.get("fraction") else "a share of"
    doc.para(f"Each swept row's first run is piloted at every peak learning rate for {share} "
             "its steps (warm-up and decay shrunk with it) and scored on the fixed evaluation set; every run of the "
             "row then trains at the rate whose pilot reached the lowest loss at the masked positions (accuracy "
             "ties while a pilot is still on the unigram plateau; the loss still ranks it). A pilot whose loss left "
             "the finite numbers is marked diverged. The pilots are one group of runs in MLflow (lr-sweep-<grid>, "
             "under the grid's run), for the compare view.", cls="note")
    lrs = sorted({p["lr"] for s in res.sweeps for p in s["pilots"]})
    rows = []
    for s in res.sweeps:
        at = {p["lr"]: p for p in s["pilots"]}
        cells = ["—" if lr not in at else "diverged" if at[lr]["diverged"] or at[lr]["score"] is None else
                 f"{at[lr]['score']:.3f} ({100 * at[lr]['acc_masked']:.1f}%)" for lr in lrs]
        edge = f" (the grid's {'lowest' if s['chosen_lr'] == lrs[0] else 'highest'} rate)" if s["edge"] else ""
        rows.append([s["label"], *cells, f"{s['chosen_lr']:g}{edge}"])
    doc.table(["row", *(f"lr {lr:g}" for lr in lrs), "chosen"], rows,
              caption="Each pilot's fixed-set loss at the masked positions (accuracy there)")
    doc.figure("lr_sweep.png", sweep_figure(res.sweeps), "Learning-rate sensitivity: each row's pilots")


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
    legend(ax)
    fig.tight_layout()
    return fig
