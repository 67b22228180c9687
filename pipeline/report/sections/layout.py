"""Does it read ordinary text? Every row on the layout probe (``pipeline.report.layout``'s numbers): its table,
whether the baseline reads, and the probe's figures.
"""
from __future__ import annotations

import numpy as np
from matplotlib.patches import Patch

from pipeline.report.cells import confidence_percent
from pipeline.report.doc import Doc, Sources
from pipeline.report.model import AblationResults, LayoutCell
from pipeline.report.style import COLORS, plt
from pipeline.variants import BASELINE


def write(doc: Doc, src: Sources) -> None:
    layout_section(doc, src.res)


def layout_cell(cell: LayoutCell, bigram: str | None) -> str:
    """A row's accuracy in one cell of the layout probe: mean [interval], and its verdict against the bigram."""
    interval = f" [{100 * cell.low:.1f}, {100 * cell.high:.1f}]" if cell.low is not None else ""
    verdict = cell.vs_floors[bigram].verdict if bigram and bigram in cell.vs_floors else None
    return f"{100 * cell.mean:.1f}{interval}" + (f": {verdict}" if verdict and cell.low is not None else "")


def layout_section(doc: Doc, res: AblationResults) -> None:
    """Every row on the layout probe: does it read held-out text in the layouts it will be used on?"""
    probe = res.layout
    if not probe:
        return
    doc.heading("Does it read ordinary text? The layout probe")
    lengths = ", ".join(str(n) for n in probe["settings"]["lengths"])
    doc.para(f"Held-out text laid out as fine-tuning and fill-mask give it, one hidden piece ([MASK]) a row: single "
             f"segments [CLS] text [SEP] of {lengths} positions with the hidden piece a quarter, half and three "
             "quarters in (the same windows for the three), and two consecutive sentences as [CLS] A [SEP] B [SEP] "
             f"at their natural lengths, hidden in the middle of A or of B; up to {probe['settings']['rows']} rows a "
             "cell. The count tables are scored on the same positions. A model that scores well only where its "
             "pretraining examples put their pieces has learned their layout, not the text.", cls="note")
    base = next((r for r in probe["rows"] if r["variant"] == BASELINE), probe["rows"][0])
    layout_table(doc, probe, base, confidence_percent(res))
    reads = baseline_reads_text(probe, base)
    if reads:
        doc.para(reads)
    doc.figure("layout_probe.png", layout_figure(probe), "every row on the layout probe, against the floors")
    if probe["along"]:
        doc.figure("layout_along.png", layout_along_figure(probe), "the baseline on the layout probe along "
                                                                   "pretraining")


def layout_table(doc: Doc, probe: dict, base: dict, confidence: int) -> None:
    """Each cell of the probe: the baseline, the floors, then every other row."""
    floors = {f["name"]: f for f in probe["floors"]}
    bigram = (base["floors"] + [None, None])[1]
    others = [r for r in probe["rows"] if r is not base]
    header = ["cell", f"{base['label']} ({base['runs']} runs)", *(f["short"] for f in probe["floors"]),
              *(r["label"] for r in others)]
    rows = []
    for cell in probe["cells"]:
        name = cell["name"]
        rows.append([cell["label"], layout_cell(base["cells"][name], bigram),
                     *(f"{100 * floors[f['name']]['cells'][name]:.1f}" for f in probe["floors"]),
                     *(layout_cell(r["cells"][name], bigram) for r in others)])
    doc.table(header, rows, caption=f"Accuracy at the hidden piece (%): mean over pretraining runs [{confidence}% "
                                    "interval], and the verdict against the bigram floor of the same cell "
                                    "(a one-sample t-test over the runs)")


def baseline_reads_text(probe: dict, base: dict) -> str | None:
    """Whether the baseline reads, and its narrowest lead over the bigram floor (None without a bigram floor)."""
    floors = {f["name"]: f for f in probe["floors"]}
    bigram, both = (base["floors"] + [None, None])[1:3]
    if not bigram:
        return None
    cells = base["cells"]
    weakest = min(cells, key=lambda n: cells[n].mean - floors[bigram]["cells"][n])
    label = next(c["label"] for c in probe["cells"] if c["name"] == weakest)
    lead = cells[weakest].mean - floors[bigram]["cells"][weakest]
    above_both = sum(cells[n].mean > floors[both]["cells"][n] for n in cells) if both else 0
    verdict = probe["baseline_reads"]
    return (("The baseline reads: above the bigram floor in every cell, each interval clear of it. "
             if verdict else "The baseline does not read ordinary text everywhere: not clear of the bigram "
             "floor in every cell. " if verdict is False else "One run: no interval to judge the baseline by. ")
            + f"Its narrowest lead over the bigram floor is {'+' if lead >= 0 else '−'}{100 * abs(lead):.1f} "
              f"points ({label}); it is above the floor of both neighbours in {above_both} of {len(cells)} cells.")


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
