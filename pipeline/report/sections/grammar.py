"""Zero-shot grammar (BLiMP; ``pipeline.report.grammar``'s numbers): a table and a figure per family with the
n-gram floor and the published numbers beside them, and BLiMP along the baseline's pretraining.
"""
from __future__ import annotations

from pipeline.report.cells import comparison_cell, fixed_cell
from pipeline.report.doc import Doc, Sources
from pipeline.report.style import COLORS, REFERENCE, dots, plt


def write(doc: Doc, src: Sources) -> None:
    zero_shot = src.res.zero_shot or {}
    if zero_shot.get("scored") or zero_shot.get("along"):
        grammar_section(doc, zero_shot)


def grammar_section(doc: Doc, zs: dict) -> None:
    """BLiMP, zero-shot: a table per family (overall and every phenomenon per row, the verdicts), the paper's
    numbers beside them, and a figure per family."""
    doc.heading("Zero-shot grammar (BLiMP)")
    if zs["scored"]:
        grammar_tables(doc, zs)
    if zs.get("along"):
        along_section(doc, zs["along"], zs["floor"])


def along_section(doc: Doc, along: dict, floor: dict | None) -> None:
    """BLiMP along the baseline's pretraining, beside its fixed-set accuracy and where that crosses the floors."""
    doc.heading("Along pretraining", level=3)
    crossed = [f"{f.label} at step {along['fixed_crossed'][f.name]:,.0f}" if along["fixed_crossed"].get(f.name)
               is not None else f"not {f.label}" for f in along["fixed_floors"]]
    chance = along["blimp_above_chance"]
    doc.para(f"The baseline ({along['runs']} pretraining run{'s' if along['runs'] > 1 else ''}) scored on a fixed "
             "subset of BLiMP (zero_shot.along.pairs of each paradigm) at every validation; a run resumed with the "
             "setting turned on counts from its resumption. Its fixed-set mean "
             f"crossed: {'; '.join(crossed) or 'no floor'}. BLiMP's interval over runs first lies above chance (50%) "
             + (f"at step {chance:,}." if chance is not None else "at no validation.")
             + (f" The n-gram floor ({100 * floor['overall']:.1f}%) was scored on zero_shot.pairs of each paradigm, "
                "a superset of these pairs." if floor else ""), cls="note")
    doc.table(["step", "tokens seen", "fixed set, masked (%)", "BLiMP along (%)"],
              [[f"{p['step']:,}", f"{p['tokens']:,.0f}" if p["tokens"] is not None else "—", f"{100 * p['fixed']:.1f}",
                fixed_cell(p["blimp"])] for p in along["points"]],
              caption="The baseline along pretraining: the fixed set and BLiMP at each validation (mean over runs; "
                      "BLiMP with its 95% interval over the runs scored there)")
    doc.figure("blimp_along.png", along_figure(along, floor), "BLiMP along the baseline's pretraining")


def grammar_tables(doc: Doc, zs: dict) -> None:
    """Each family's BLiMP table and figure, the floor and the published numbers beside them."""
    floor = zs["floor"]
    doc.para("Each row scored on BLiMP's minimal pairs with no training: a pair is right when the grammatical "
             "sentence gets the higher log-likelihood (BERT: pseudo-log-likelihood; a left-to-right LM and ELMo: "
             "their log-likelihoods). Accuracy is the mean over paradigms; a row's number is the mean over its "
             "pretraining runs with its 95% interval. Rows are compared with the pretraining run as the unit: "
             "t-test on per-pretraining-run means, variance pooled over the family's rows; against the n-gram floor "
             "(one number) by a one-sample t-test." + (
                 f" Floor: a {floor['order']}-gram Kneser-Ney LM of the pretraining text on the same pairs, "
                 f"{100 * floor['overall']:.1f}% overall." if floor else ""), cls="note")
    paper = zs["paper"]
    doc.para("Published (Warstadt et al., 2020, overall, a word-level 5-gram on Gigaword and LMs trained on far more "
             "text): " + ", ".join(f"{k} {v:.1f}" for k, v in paper.items()) + ".", cls="note")
    for fam in zs["families"]:
        if fam["rows"]:
            grammar_table(doc, fam, floor, zs.get("published"))


def grammar_table(doc: Doc, fam: dict, floor: dict | None, published: dict | None) -> None:
    """One family on BLiMP: each row overall and per phenomenon with its tests, then the floor and published LMs."""
    phenomena = sorted({p for r in fam["rows"] for p in r["phenomenon"]})
    ref = [f"vs {fam['reference_row']}"] if fam["reference_row"] else []  # none: the baseline alone
    header = ["row", "overall", *ref, "vs n-gram floor", *[p.replace("_", " ") for p in phenomena]]
    rows = [[r["label"], fixed_cell(r["overall"]), *([comparison_cell("accuracy", r["vs"])] if ref else []),
             comparison_cell("accuracy", r["vs_floor"]),
             *[f"{100 * r['phenomenon'][p].mean:.1f}" if r["phenomenon"].get(p) else "—" for p in phenomena]]
            for r in fam["rows"]]
    blank = [""] * (len(ref) + 1)
    if floor:
        rows.append([f"n-gram floor ({floor['order']}-gram)", f"{100 * floor['overall']:.1f}", *blank,
                     *[f"{100 * floor['phenomenon'][p]:.1f}" if floor["phenomenon"].get(p) is not None else "—"
                       for p in phenomena]])
    for model, overall in (published["overall"].items() if published else ()):
        rows.append([f"published: {model}", f"{100 * overall:.1f}", *blank,
                     *[f"{100 * published['phenomenon'][model][p]:.1f}"
                       if p in published["phenomenon"].get(model, {}) else "—" for p in phenomena]])
    doc.table(header, rows, caption=f"{fam['title']}: BLiMP accuracy (%), overall and per phenomenon")
    doc.figure(f"blimp_{fam['name']}.png", grammar_figure(fam, floor, fam["title"]),
               f"{fam['title']}: BLiMP accuracy per phenomenon")


def grammar_figure(fam: dict, floor: dict | None, title: str):
    """BLiMP per phenomenon: each row's mean over its pretraining runs (a dot with its interval), the n-gram floor
    per phenomenon (grey crosses), chance (50%) and the floor's overall score as named lines."""
    phenomena = sorted({p for r in fam["rows"] for p in r["phenomenon"]})
    fig, ax = plt.subplots(figsize=(11, 4.2))
    n = max(1, len(fam["rows"]))
    for i, r in enumerate(fam["rows"]):
        xs = [j + (i - (n - 1) / 2) * 0.6 / n for j in range(len(phenomena))]
        dots(ax, xs, [r["phenomenon"].get(p) for p in phenomena], 100, COLORS[i % len(COLORS)],
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
