"""A family across a task suite's columns (``pipeline.report.suites``' numbers): ours beside the paper's, the
paper's own table at our scale, and its figure. Part of each family's section.
"""
from __future__ import annotations

from pipeline.report.cells import confidence_percent, fmt, p_text, percent, signed
from pipeline.report.doc import Doc
from pipeline.report.model import AblationResults, FamilyResult, SuiteCell
from pipeline.report.style import COLORS, REFERENCE, dots, legend, min_span, plt





def suite_cell(metric: str, cell: SuiteCell) -> str:
    """A suite table's cell: the row's score and interval, and its tested difference to the reference row."""
    if not cell.ran:
        return "—"
    interval = f" [{fmt(metric, cell.low)}, {fmt(metric, cell.high)}]" if cell.low is not None else ""
    c = cell.vs
    if c is None:
        return f"{fmt(metric, cell.mean)}{interval}"
    p = f", {p_text(c.p)}" if c.p is not None else ""
    return f"{fmt(metric, cell.mean)}{interval}; {signed(metric, c.diff)}{p}: {c.verdict}"


def suite_table(doc: Doc, fam: FamilyResult, res: AblationResults) -> None:
    """A family's rows across the suite's columns, ours beside the paper's (the paper's own table, at our scale)."""
    suite = res.suite
    spec = next(f for f in suite["families"] if f["name"] == fam.name)
    cols = suite["columns"]
    header = ["setting"]
    for col in cols:
        header += [col["label"], *([f"paper: {col['paper']}"] if col["paper"] else [])]
    rows = []
    for r in spec["rows"]:
        line = [r["label"]]
        for col, cell in zip(cols, r["cells"]):
            line += [suite_cell(col["metric"], cell) if r["ran"] else "not in this grid",
                     *([str(cell.paper) if cell.paper is not None else ""] if col["paper"] else [])]
        rows.append(line)
    if any(v is not None for v in spec["classical"]):
        line = ["no pretraining: TF-IDF + logistic regression (SQuAD: word overlap)"]
        for col, v in zip(cols, spec["classical"]):
            line += [fmt(col["metric"], v) if v is not None else "—", *([""] if col["paper"] else [])]
        rows.append(line)
    data = "; ".join(f"{c['task_name']} {c['train_examples']} train / {c['dev_examples']} dev / "
                     f"{c['test_examples']} test {c['unit']}"
                     + ("" if c["comparable"] else " (held-out split from the training data: not comparable to the "
                        "official dev set)") for c in {c["task"]: c for c in cols}.values())
    doc.table(header, rows, caption=f"Suite {suite['name']}: each row's test score in each task (% for accuracy, F1, "
                                    f"exact match) [{confidence_percent(res)}% interval]; its difference to {spec['reference_row']} "
                                    f"in that task by the test named in Method; the paper's number at its scale. "
                                    f"Examples: {data}")
    if any(r["ran"] for r in spec["rows"]):
        doc.figure(f"{fam.name}_suite.png", suite_figure(spec, cols, fam.title),
                   f"{fam.title}: every task of suite {suite['name']}")


def suite_figure(fam: dict, columns: list[dict], title: str):
    """Each row's score in each column of the suite as a dot with its interval (the paper's table drawn at our
    scale); TF-IDF's score in each column as a named dashed segment."""
    rows = [r for r in fam["rows"] if r["ran"]]
    fig, ax = plt.subplots(figsize=(max(5.5, 1.1 * len(columns) * max(1, len(rows)) ** 0.5) + 2, 3.8))
    width = 0.5 / max(1, len(rows))
    for j, r in enumerate(rows):
        xs = [i + (j - (len(rows) - 1) / 2) * width for i in range(len(columns))]
        # correlations x 100 too: one axis for every column
        dots(ax, xs, [cell if cell.ran else None for cell in r["cells"]], 100, COLORS[j % len(COLORS)],
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
    min_span(ax)
    ax.set_xticks(range(len(columns)), [c["label"] for c in columns], rotation=15, ha="right", fontsize=8)
    everything_percent = all(percent(c["metric"]) for c in columns)
    ax.set(xlabel="task and metric",
           ylabel="test score (%)" if everything_percent else "test score (%; correlations x 100)",
           title=f"{title}: every task of the suite")
    ax.grid(axis="y", alpha=0.3)
    legend(ax)
    fig.tight_layout()
    return fig
