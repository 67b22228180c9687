"""Has the baseline learned language? The fixed evaluation set against the count-based floors (``fixed.py``'s
numbers), along pretraining, and the NSP head against its base rate.
"""
from __future__ import annotations

from pipeline.report.cells import comparison_cell, confidence_percent, crossing_text, fixed_cell
from pipeline.report.curves import fixed_curves_figure
from pipeline.report.doc import Doc, Sources
from pipeline.report.fixed import read_curve as read_fixed_curve
from pipeline.report.model import AblationResults
from pipeline.report.style import COLORS, REFERENCE, plt
from pipeline.variants import BASELINE


def write(doc: Doc, src: Sources) -> None:
    intrinsic_section(doc, src.res)


def intrinsic_section(doc: Doc, res: AblationResults) -> None:
    """The baseline on the fixed evaluation set against the count-based floors, before any ablation is read."""
    baseline = res.intrinsic
    if not baseline:
        return
    doc.heading("Has the baseline learned language? The fixed evaluation set against count-based floors")
    doc.para("Every pretraining run is scored on one fixed evaluation set: the held-out sequences with 15% of their "
             "pieces chosen once and corrupted once (80% [MASK], 10% a random piece, 10% unchanged), the same "
             "for every row whatever its own masking. The headline is the accuracy at the [MASK] positions. The "
             "floors are count tables from the pretraining examples, scored on the same positions and reading what "
             "the model reads (a masked neighbour is masked for the table too): a model below the bigram floor "
             "predicts piece frequencies, not language.", cls="note")
    rows = [["the baseline (BERT)", fixed_cell(baseline.fixed), "—", "—"]]
    for floor in baseline.floors:
        rows.append([f"floor: {floor.label}", f"{100 * floor.accuracy:.1f}",
                     comparison_cell("accuracy", baseline.vs_floors[floor.name]),
                     crossing_text(baseline.crossings.get(floor.name))])
    if baseline.built:
        doc.para(built_text(baseline.built), cls="note")
    doc.table(["", "accuracy at masked positions (%)", "the baseline against it", "where the baseline's runs crossed it"],
              rows, caption=f"The baseline's mean over its pretraining runs [{confidence_percent(res)}% interval]; "
                            "against each floor a one-sample t-test over the runs")
    plots_of: dict[str, list] = {}  # each row's runs' curve folders, rows in the grid's order
    for r in res.runs.values():
        plots_of.setdefault(r.variant, []).append(r.pretrain.plots)
    plots = plots_of.get(BASELINE, [])
    doc.figure("baseline_fixed_curves.png", fixed_curves_figure([("baseline", plots)], baseline.floors, "Baseline"),
               "the baseline on the fixed evaluation set along pretraining")
    # every row with an NSP head beside the baseline's (a row without one draws nothing)
    nsp = res.nsp and nsp_curves_figure(list(plots_of.items()), res.nsp.base_rate, "The NSP head")
    if nsp:
        doc.figure("baseline_nsp_curve.png", nsp, "the NSP head on the fixed set's pairs along pretraining: the "
                                                  "baseline, and any row with NSP beside it")
    if not baseline.learned:
        doc.para(f"Warning: at {res.runs[BASELINE].pretrain.steps} steps the baseline is not above the bigram floor. "
                 "Every comparison below is made on a model that has not learned context; read them as the machinery "
                 "working, not as evidence about BERT.", cls="question")


def built_text(built: dict) -> str:
    """How the fixed set was built, and what its sequences look like."""
    s = built["settings"]
    return (f"The fixed set: the held-out split cut into {built['sequences']:,} sentence pairs by BERT's original "
            f"recipe at {s['max_seq_length']} positions, whatever the pretraining examples' length "
            f"({s['short_seq_prob']:.0%} of the documents at a shorter target), "
            f"{built['actual_next']:.0%} of them with the actual next segment as B. Lengths: median "
            f"{built['length']['p50']:.0f} (10th percentile {built['length']['p10']:.0f}); the first [SEP] at "
            f"position {built['first_sep']['p10']:.0f} to {built['first_sep']['p90']:.0f} (10th to 90th "
            "percentile), so no row is scored in one layout.")


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
