"""One family of the grid: its question, its table (a suite's first), its figures and the paper's tables. Every
family of ``grid.families`` in turn.
"""
from __future__ import annotations

from pipeline.finetune.modes import mode_label
from pipeline.model_config import LM_KINDS
from pipeline.report.cells import (classical_name, comparison_cell, confidence_percent, crossing_text, fixed_cell, fmt,
                                   percent, score_cell)
from pipeline.report.curves import curves_figure, fixed_curves_figure
from pipeline.report.doc import Doc, Sources
from pipeline.report.model import AblationResults, FamilyResult, Floor, Row
from pipeline.report.sections.suite import suite_table
from pipeline.report.style import COLORS, MIN_SPAN, REFERENCE, dots, legend, min_span, plt


def write(doc: Doc, src: Sources) -> None:
    for fam in src.res.families:
        family_section(doc, fam, src.res)


def family_section(doc: Doc, fam: FamilyResult, res: AblationResults) -> None:
    """One family: its question, its table (a suite's first), its figures and the paper's tables."""
    doc.heading(fam.title)
    doc.para(fam.question, cls="question")
    if res.suite:
        suite_table(doc, fam, res)
        doc.para(f"In detail on {res.task}, the suite's first column:", cls="note")
    family_table(doc, fam, res)
    if fam.note:
        doc.para(fam.note, cls="note")
    family_figures(doc, fam, res)
    for block in fam.paper:
        doc.table(["the paper's setting", *block["columns"]],
                  [[label, *[str(v) for v in values]] for label, values in block["rows"].items()],
                  caption=f"The paper's numbers, at its scale (not ours): {block['source']}")


def family_table(doc: Doc, fam: FamilyResult, res: AblationResults) -> None:
    """Our numbers for each row, its tests, the count-based floors, the classical baseline, the paper's numbers."""
    metric, modes, task = res.metric, res.variant_modes, res.task
    paper_columns = list(dict.fromkeys(c for block in fam.paper for c in block["columns"]))
    ours = family_header(fam, metric, modes)
    header = [*ours, *(f"paper: {c}" for c in paper_columns)]
    def floor_row(label: str, floor: Floor) -> list[str]:  # a count-based floor: its fixed-set column alone
        return [label, *[""] * (len(modes) + 1), f"{100 * floor.accuracy:.1f}", *[""] * (len(ours) - len(modes) - 3),
                *[""] * len(paper_columns)]

    first = next((f for f in fam.floors if f.name == fam.first_generation), None)
    rows = [floor_row(f"n-gram count table ({first.label})", first)] if first else []  # a lineage's first generation
    rows += [family_row(row, fam, metric, modes, len(ours), [str(row.paper.get(c, "")) for c in paper_columns])
             for row in fam.rows]
    if fam.kind == "variant":  # the count-based floors, on the fixed set only
        rows += [floor_row(f"floor: {floor.label}", floor) for floor in fam.floors]
    if fam.classical:
        rows.append([("TF-IDF + logistic regression" if classical_name(task) == "TF-IDF" else
                      "sliding-window word overlap") + " (no pretraining)", fmt(metric, fam.classical.mean),
                     *[""] * (len(header) - 2)])
    doc.table(header, rows, caption=f"Ours: {task} test {metric}{' in %' if metric in ('accuracy', 'f1') else ''}: "
                                    f"mean over pretraining runs [{confidence_percent(res)}% interval] (pretraining "
                                    "runs x fine-tuning seeds); each row against the first by the test named in Method")


def family_header(fam: FamilyResult, metric: str, modes: list[str]) -> list[str]:
    """A family table's own columns: a mode's score, or a variant's score in every mode and its pretraining."""
    ref = fam.reference_row
    if fam.kind == "mode":
        return ["setting", f"test {metric} (mean ± std)", f"vs {ref}"]
    return ["setting", *[f"{mode_label(m)} test {metric}" for m in modes], f"vs {ref}", "fixed set: masked pieces %",
            f"vs {ref}: fixed set", "val LM accuracy (own masking)", "val perplexity", "pretraining s", "parameters",
            "training FLOPs / token"]


def family_row(row: Row, fam: FamilyResult, metric: str, modes: list[str], columns: int, paper: list[str]) -> list[str]:
    """A row of a family table: ``columns`` of ours (a row the grid did not run says so), then the paper's."""
    if not row.ran:
        return [row.label, "not in this grid (grid=full runs it)", *[""] * (columns - 2), *paper]
    against = comparison_cell(metric, row.vs)
    if (fam.lineage or row.against) and row.vs_row:  # a lineage, or a row with its own reference: name it
        against = f"vs {row.vs_row}: {against}"
    if fam.kind == "mode":
        return [row.label, score_cell(metric, row.primary), against, *paper]
    return [row.label, *[score_cell(metric, row.scores.get(m)) for m in modes], against,
            *pretraining_cells(row, fam.lineage), *paper]


def pretraining_cells(row: Row, lineage: bool) -> list[str]:
    """A variant's fixed-set score and test, its LM's validation numbers, time, size and compute."""
    p = row.pretrain
    lm = f"{100 * p.val_lm_acc:.1f}% ({LM_KINDS[p.lm].short})" if p.val_lm_acc is not None else "—"
    perplexity = f"{p.val_perplexity:.1f}" if p.val_perplexity is not None else "—"
    size = f"{p.parameters / 1e6:.2f}M" if p.parameters else "—"
    flops = f"{p.train_flops_per_token / 1e6:.2f}M" if p.train_flops_per_token else "—"
    fixed_against = comparison_cell("accuracy", row.vs_fixed) if row.fixed else "—"
    if (lineage or row.against) and row.vs_fixed_row:
        fixed_against = f"vs {row.vs_fixed_row}: {fixed_against}"
    return [fixed_cell(row.fixed), fixed_against, lm, perplexity, f"{p.train_seconds:.0f}", size, flops]


def family_figures(doc: Doc, fam: FamilyResult, res: AblationResults) -> None:
    """Each row's scores as dots with intervals, the fixed set along pretraining, and the learning curves."""
    metric = res.metric
    if any(r.ran for r in fam.rows):
        doc.figure(f"{fam.name}_bars.png", bars_figure(fam, metric, res.variant_modes, res.task),
                   f"{fam.title}: test {metric}")
        doc.para(f"Error bars: the {confidence_percent(res)}% interval of each row's mean, with the spread the table's "
                 "test uses (pooled over the family's rows for pretraining variants).", cls="note")
    fixed_rows = [r for r in fam.rows if r.fixed]
    if fixed_rows:
        doc.figure(f"{fam.name}_fixed_curves.png",
                   fixed_curves_figure([(r.label, r.pretrain.plots_all) for r in fixed_rows], fam.floors, fam.title),
                   f"{fam.title}: the fixed evaluation set along pretraining")
        crossed = fam.floors[1:]  # the floors that read context
        if crossed:
            doc.table(["setting", *[f"crosses: {f.label} ({100 * f.accuracy:.1f}%)" for f in crossed]],
                      [[r.label, *[crossing_text(r.crossings.get(f.name)) for f in crossed]] for r in fixed_rows],
                      caption="Where each row's runs first rose above each floor on the fixed set (interpolated "
                              "between validations; means over the runs that did)")
    curves = [(r.label, r.pretrain.plots, r.pretrain.lm) for r in fam.rows if r.ran and r.kind == "variant"]
    if len(curves) > 1:
        doc.figure(f"{fam.name}_curves.png", curves_figure(curves, fam.title), f"{fam.title}: learning curves")


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
        dots(ax, xs, stats, scale, COLORS[j % len(COLORS)], None if fam.kind == "mode" else mode_label(mode))
    if fam.classical:
        c = scale * fam.classical.mean
        ax.axhline(c, **REFERENCE, label=f"{classical_name(task)} baseline\n(no pretraining): {c:.1f}")
    ax.set_xlim(-0.5, len(rows) - 0.5)
    ax.margins(y=0.1)
    min_span(ax, MIN_SPAN if percent(metric) else MIN_SPAN / 100)
    ax.set_xticks(range(len(rows)), [r.label for r in rows], rotation=20, ha="right", fontsize=8)
    ax.set(xlabel="fine-tuning mode" if fam.kind == "mode" else "pretraining setting",
           ylabel=f"{task} test {metric} ({'%' if percent(metric) else 'correlation'})", title=fam.title)
    ax.grid(axis="y", alpha=0.3)
    legend(ax)
    fig.tight_layout()
    return fig
