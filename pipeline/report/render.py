"""The report stage: the ablation grid's results to ``reports/`` (HTML, Markdown, figures, JSON).

Everything comes from files DVC tracks: numbers from the metrics files the
earlier stages wrote, through ``pipeline.report.results``; learning curves from
each run's ``plots/`` CSVs. The report never reads MLflow, so a fresh clone with
the DVC outputs redraws it byte for byte. ``index.html`` is
self-contained (figures inlined) so it opens offline; ``ablations.json`` is the
same content for machines and ``dvc metrics show``.
"""
from __future__ import annotations

import base64
import html
from pathlib import Path

from pipeline.finetune.modes import mode_label
from pipeline.io import atomic_dir, atomic_file, write_json
from pipeline.model_config import LM_KINDS
from pipeline.report.figures import (along_figure, bars_figure, choices_figure, contextuality_figure,
                                     curves_figure, fixed_curves_figure, grammar_figure, layout_along_figure,
                                     layout_figure, nsp_curves_figure, png, suite_figure, sweep_figure)
from pipeline.report.ledger_section import ledger_section
from pipeline.report.protocol import BIG_DROP, NEAR_CHANCE
from pipeline.report.noise import noise_section
from pipeline.report.model import (AblationResults, Comparison, Crossing, FamilyResult, Floor, Interval, LayoutCell,
                                   Method, Row, Score, SuiteCell, to_json)
from pipeline.report.results import BASELINE, classical_name, confidence_percent, fmt, p_text, percent, signed

STYLE = Path(__file__).resolve().parent / "report.css"  # index.html's style sheet, inlined


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


def intrinsic_section(doc: "Doc", res: AblationResults) -> None:
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


def layout_cell(cell: LayoutCell, bigram: str | None) -> str:
    """A row's accuracy in one cell of the layout probe: mean [interval], and its verdict against the bigram."""
    interval = f" [{100 * cell.low:.1f}, {100 * cell.high:.1f}]" if cell.low is not None else ""
    verdict = cell.vs_floors[bigram].verdict if bigram and bigram in cell.vs_floors else None
    return f"{100 * cell.mean:.1f}{interval}" + (f": {verdict}" if verdict and cell.low is not None else "")


def layout_section(doc: "Doc", res: AblationResults) -> None:
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


def layout_table(doc: "Doc", probe: dict, base: dict, confidence: int) -> None:
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


def suite_table(doc: "Doc", fam: FamilyResult, res: AblationResults) -> None:
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


def method_text(method: Method, metric: str) -> str:
    """The design and the tests in one paragraph, with the error rates measured at this grid's noise."""
    m = method
    runs = m.pretraining_runs
    counts = sorted(set(runs.values()))
    others = sorted({n for v, n in runs.items() if v != "baseline"})
    per_row = (f"{counts[0]} pretraining runs" if len(counts) == 1 else
               f"{runs['baseline']} pretraining runs for the baseline and {' or '.join(map(str, others))} for each "
               "variant")
    text = (f"Design: every row is {per_row} (seeds seed, seed + 1, ...), each fine-tuned with the same "
            f"{m.finetune_seeds} fine-tuning seeds, so fine-tuning runs pair up across rows. A row's number is the "
            "mean over its pretraining runs of each run's mean over fine-tuning seeds: the pretraining run is the "
            "unit, so both kinds of luck count. Tests: pretraining variants against the family's first row by a "
            "t-test on per-run means with the variance pooled over the family's rows (they are assumed to share one "
            "spread; a row of one run adds nothing to it, so with single-run variants the baseline's runs estimate "
            "it); fine-tuning modes of the same runs by a paired t-test; from scratch (no pretraining behind "
            "it) by Welch's t-test; TF-IDF (deterministic) by a one-sample t-test. Verdicts: better or worse when "
            f"the {round(100 * m.confidence)}% interval of the difference excludes zero, else inconclusive (with "
            "the pretraining runs per side it would take); borderline when p lies between a fifth of the threshold "
            "and twice it, where another machine's rounding may move the verdict between better and inconclusive. "
            f"Noise measured on the baseline: pretraining luck sd {fmt(metric, m.sd_pretrain)}, fine-tuning luck "
            f"sd {fmt(metric, m.sd_finetune)} (points of {metric}).")
    if m.false_positive_rate is not None:
        power = ", ".join(f"{d}: {100 * p:.0f}%" for d, p in m.power_at_observed.items())
        observed = f"power {power} at the observed differences, " if power else ""
        text += (f" At that noise, simulated: a false-positive rate of {100 * m.false_positive_rate:.1f}% on no "
                 f"difference, {observed}and 80% power from a difference "
                 f"of {fmt(metric, m.smallest_detectable)} points.")
    return text + (" The paper's numbers come from models hundreds of times larger trained far longer: compare "
                   "directions, not values.")


def polysemy_section(doc: "Doc", probe: dict) -> None:
    """The polysemy probe (``metrics/probe.json``): contextuality per layer and each sense word's neighbours."""
    doc.heading("Polysemy: one vector per word, or one per context?")
    doc.para("A word's self-similarity is the mean cosine similarity of its representations in different sentences "
             "(Ethayarajh 2019); the similarity of random pairs of different words' occurrences is subtracted, since "
             "all representations tend to point one way. A static model gives a word one vector in every sentence: "
             "its corrected self-similarity is 1 less that baseline. Layer 0 is the embedding layer (static for "
             f"word2vec and ELMo; a Transformer's adds the position). Words: {', '.join(probe['words'])}.", cls="note")
    if probe.get("missing"):
        doc.para(f"Not in the corpus, left out: {', '.join(probe['missing'])}.", cls="note")
    doc.figure("contextuality.png", contextuality_figure(probe), "contextuality per layer")
    layers = max(len(m["corrected"]) for m in probe["models"].values())
    doc.table(["model", *[f"layer {i}" for i in range(layers)]],
              [[name, *[f"{c:.3f} ({r:.3f} - {b:.3f})" for c, r, b in zip(m["corrected"], m["self_similarity"],
                                                                         m["anisotropy"])],
                *[""] * (layers - len(m["corrected"]))]
               for name, m in probe["models"].items()],
              caption="Corrected self-similarity per layer (self-similarity - random-pair similarity)")
    for word in probe.get("senses", []):
        senses_table(doc, probe, word)


def senses_table(doc: "Doc", probe: dict, word: str) -> None:
    """One polysemous word: each model's nearest other occurrences of it, and how many share its capitalisation."""
    rows = []
    for name, model in probe["models"].items():
        sense = model["senses"].get(word)
        if not sense:
            continue
        same = "" if sense["same_marking"] is None else (
            f"; {100 * sense['same_marking']:.0f}% share its capitalisation "
            f"({100 * sense['marked_share']:.0f}% of all)")
        rows.append([name, " | ".join(f"{n['text']} ({n['cosine']:.2f})" for n in sense["neighbours"]) + same])
    if rows:
        query = next(m["senses"][word]["query"] for m in probe["models"].values() if word in m["senses"])
        doc.table(["model", "nearest other occurrences (top layer, cosine)"], rows,
                  caption=f"'{word}': the occurrence {query}")


def grammar_section(doc: "Doc", zs: dict) -> None:
    """BLiMP, zero-shot: a table per family (overall and every phenomenon per row, the verdicts), the paper's
    numbers beside them, and a figure per family."""
    doc.heading("Zero-shot grammar (BLiMP)")
    if zs["scored"]:
        grammar_tables(doc, zs)
    if zs.get("along"):
        along_section(doc, zs["along"], zs["floor"])


def along_section(doc: "Doc", along: dict, floor: dict | None) -> None:
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


def grammar_tables(doc: "Doc", zs: dict) -> None:
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


def grammar_table(doc: "Doc", fam: dict, floor: dict | None, published: dict | None) -> None:
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


class Doc:
    """The report written once, as Markdown and as HTML side by side."""

    def __init__(self):
        self.md: list[str] = []
        self.html: list[str] = []
        self.figures: dict[str, bytes] = {}

    def heading(self, text: str, level: int = 2) -> None:
        self.md.append(f"{'#' * level} {text}\n")
        self.html.append(f"<h{level}>{html.escape(text)}</h{level}>")

    def para(self, text: str, cls: str = "") -> None:
        self.md.append(f"{text}\n")
        self.html.append(f"<p{f' class={cls!r}' if cls else ''}>{html.escape(text)}</p>")

    def bullets(self, items: list[str]) -> None:
        self.md.append("".join(f"- {t}\n" for t in items))
        self.html.append("<ul>" + "".join(f"<li>{html.escape(t)}</li>" for t in items) + "</ul>")

    def table(self, header: list[str], rows: list[list[str]], caption: str = "") -> None:
        md = (f"*{caption}*\n\n" if caption else "") + "| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n"
        self.md.append(md + "".join("| " + " | ".join(r) + " |\n" for r in rows))
        h = "<table>" + (f"<caption>{html.escape(caption)}</caption>" if caption else "")
        h += "<tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in header) + "</tr>"
        h += "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
        self.html.append(h + "</table>")

    def figure(self, name: str, fig, alt: str) -> None:
        data = png(fig)
        self.figures[name] = data
        self.md.append(f"![{alt}](figures/{name})\n")
        self.html.append(f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(data).decode()}">')


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


def _rows_phrase(variants: int) -> str:
    """The grid's rows in words: the baseline alone, or with its pretraining variant(s)."""
    if variants == 0:
        return "the baseline alone"
    return f"the baseline and {variants} pretraining variant{'s' if variants > 1 else ''}"


def write_report(res: AblationResults, corpus: dict, pre: dict, ft: dict, out: Path,
                 lineage: list[list[str]], probe: dict | None = None) -> None:
    """``out/index.html``, ``out/report.md``, ``out/figures/`` and ``out/ablations.json`` from the results ``res``.

    ``corpus``, ``pre`` and ``ft``: the corpus statistics and the baseline's pretraining and fine-tuning
    metrics; ``lineage``: the first rows of the lineage table (grid, code, tracking store); ``probe``:
    the polysemy probe's results (``metrics/probe.json``), when it ran.
    """
    doc = Doc()
    doc.heading("BERT lab report: the ablation grid", 1)
    doc.para(opening_text(res, corpus, ft))
    if res.ledger:
        ledger_section(doc, res)
    doc.heading("Method")
    doc.para(method_text(res.method, res.metric), cls="note")
    noise_section(doc, res)
    if res.sweeps:
        sweep_section(doc, res)
    if res.choices:
        choices_section(doc, res)
    if res.controls:
        control_section(doc, res)
    intrinsic_section(doc, res)
    layout_section(doc, res)
    doc.heading("Findings")
    doc.bullets(res.findings or ["Nothing to compare: the grid ran a single row per family."])
    for fam in res.families:
        family_section(doc, fam, res)
    zero_shot = res.zero_shot or {}
    if zero_shot.get("scored") or zero_shot.get("along"):
        grammar_section(doc, zero_shot)
    if probe and probe.get("models"):
        polysemy_section(doc, probe)
    baseline_section(doc, res, pre, ft)
    lineage_section(doc, res, lineage)
    save(doc, res, out)


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


def choices_section(doc: Doc, res: AblationResults) -> None:
    """Every arm at its best: each choosing run's candidates per mode and task, their dev scores, what was
    chosen, and the test score at it."""
    doc.heading("Fine-tuning: every arm at its best")
    doc.para("Each arm's settings are chosen on the dev split of the task's held-out examples, the same way for "
             "every arm: one run per candidate (fine-tuned and from scratch: each peak learning rate crossed with "
             "each pooling -- token: [CLS] through the pooler, a left-to-right model's last token; mean: the mean "
             "over the text's tokens; heads on frozen features likewise; TF-IDF: its regularisation and n-gram "
             "range), with the first fine-tuning seed; a rate chosen on its grid's edge extends the grid one step past "
             "it (by the grid's ratio there, at the chosen pooling) until the choice is inside or on the stated "
             "limit (finetune.lr_bounds); the best on dev is kept, and every seed at it is scored on "
             "the test split, which no choice saw. Each run listed chose its own; every other run of the grid takes "
             "the choice of its chooser (params.yaml's runs.<name>.chooser: its variant's first run, or the "
             "baseline's first for a variant of the same network and objective). From scratch starts from the "
             "architecture's own initialisation.", cls="note")
    for entry in res.choices:
        metric = entry["metric"]
        rows = []
        for run, modes in entry["runs"].items():
            for mode, c in modes.items():
                grid = "; ".join(f"{settings_text(g)}: {fmt(metric, g['dev'])}"
                                 for g in sorted(c["grid"], key=lambda g: (str(g.get("pooling")), g.get("lr", 0),
                                                                           g.get("ngrams", 0), g.get("c", 0))))
                rows.append([run, mode_label(mode), grid, settings_text(c["chosen"]) + edge_text(c),
                             f"{fmt(metric, c['test'])} ({c['n']} {'run' if c['n'] == 1 else 'seeds'})"])
        doc.table(["run", "mode", f"dev {metric} of each candidate", "chosen", f"test {metric} at it"],
                  rows, caption=f"{entry['task_name']}: the choice of each arm's settings on dev")
        if BASELINE in entry["runs"] and any(c["grid"] and "lr" in c["grid"][0]
                                             for c in entry["runs"][BASELINE].values()):
            doc.figure(f"choices_{entry['task_name']}.png", choices_figure(entry, BASELINE),
                       f"{entry['task_name']}: dev score against the learning rate, each mode of the baseline")


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


def edge_text(choice: dict) -> str:
    """Where the chosen learning rate stands: on the bound of finetune.lr_bounds the protocol may not pass (the best
    may lie beyond it), or inside a grid it extended, saying how far. A choice made before grids were extended (no
    ``extended`` in its JSON) is warned of where it is the grid's lowest or highest rate."""
    lr = choice["chosen"].get("lr")
    if "extended" in choice:
        if choice["at_limit"]:
            return f" (at the stated limit {settings_text({'lr': lr})})"
        if not choice["extended"]:
            return ""
        last = choice["extended"][-1]  # the steps go one way, from the edge the grid chose on: the last is farthest
        return (f" (extended {'below' if last['edge'] == 'lowest' else 'above'} the grid to "
                f"{settings_text({'lr': last['lr']})}; interior)")
    lrs = sorted({g["lr"] for g in choice["grid"] if "lr" in g})
    if lr is None or len(lrs) < 2 or lr not in (lrs[0], lrs[-1]):
        return ""
    return f" (the grid's {'lowest' if lr == lrs[0] else 'highest'} rate)"


def control_section(doc: Doc, res: AblationResults) -> None:
    """Each task's word-order control: the arms on the task and with every text's words shuffled."""
    doc.heading("Does each task need reading? The word-order control")
    doc.para("Each task again with the words of every text shuffled (train, dev and test), fine-tuned at the "
             "settings each arm chose on the task itself, with the same seeds. A task whose best arm without "
             f"pretraining keeps its score when the order is gone is a question of which words a text uses: it "
             f"cannot show what reading adds. A task needs word order when that arm falls to within "
             f"{100 * NEAR_CHANCE:.0f} points of chance (always the most common label), or by "
             f"{100 * BIG_DROP:.0f} points or more.", cls="note")
    rows = []
    for c in res.controls:
        metric = c["metric"]
        arms = "; ".join(f"{mode_label(m)} {fmt(metric, a['task'])} → {fmt(metric, a['shuffled'])} "
                         f"({signed(metric, -a['drop'])})" for m, a in c["arms"].items())
        best = c["best_without_pretraining"]
        needs = "—" if c["needs_word_order"] is None else (
            f"{'yes' if c['needs_word_order'] else 'no'} ({mode_label(best)}: {signed(metric, -c['arms'][best]['drop'])})")
        rows.append([c["task_name"], fmt(metric, c["chance"]) if c["chance"] is not None else "—", arms, needs])
    doc.table(["task", "chance", "test score: on the task → words shuffled (change)", "needs word order"], rows,
              caption="The word-order control of every task (the baseline's first pretraining run; seeds "
                      f"{', '.join(str(s) for s in res.controls[0]['seeds'])})")


def opening_text(res: AblationResults, corpus: dict, ft: dict) -> str:
    """The corpus, the grid's rows, their steps, and what they were fine-tuned on."""
    train, valid = corpus["train"], corpus["valid"]
    tasks = (f"each task of suite {res.suite['name']} "
             f"({', '.join(dict.fromkeys(c['task_name'] for c in res.suite['columns']))})." if res.suite
             else f"{res.task} ({ft['train_examples']} train / {ft['dev_examples']} dev / {ft['test_examples']} test "
                  "examples).")
    return (f"Corpus: {train['documents']:,} train / {valid['documents']:,} valid documents, "
            f"{train['words']:,} / {valid['words']:,} words. Grid {res.grid!r}: "
            f"{_rows_phrase(len(res.method.pretraining_runs) - 1)}, {res.runs[BASELINE].pretrain.steps} steps each, "
            f"fine-tuned on {tasks}")


def baseline_section(doc: Doc, res: AblationResults, pre: dict, ft: dict) -> None:
    """The baseline's first pretraining run and every fine-tuning mode of it, from its own metrics files."""
    doc.heading("The baseline's first pretraining run")
    doc.table(["pretraining metric", "value"],
              [[k, f"{pre[k]:.4f}"] for k in ("val/loss", "val/mlm_loss", "val/mlm_acc", "val/ltr_acc", "val/nsp_acc",
                                               "val/perplexity") if k in pre]
              + [["steps", str(pre["steps"])], ["training time (s)", f"{pre['train_seconds']:.0f}"]])
    base = res.runs[BASELINE].pretrain
    doc.figure("pretrain_curves.png", curves_figure([("baseline", base.plots, base.lm)], "Baseline"),
               "baseline pretraining curves")
    metric = ft["metric"]
    doc.table(["fine-tuning mode", *[f"test {m} (mean ± std)" for m in ft["metrics"]], "chosen on dev", "seeds",
               "seconds"],
              [[mode_label(mode), *[f"{fmt(k, r[f'{k}_mean'])} ± {fmt(k, r[f'{k}_std'])}" for k in ft["metrics"]],
                settings_text(r["selection"]["chosen"]), str(r["n"]), f"{r['seconds']:.0f}"]
               for mode, r in ((m, ft["modes"][m]) for m in ft["mode_order"])],
              caption=f"Every fine-tuning mode of the baseline on {ft['task']} ({metric} in %)"
              if percent(metric) else f"Every fine-tuning mode of the baseline on {ft['task']}")


def lineage_section(doc: Doc, res: AblationResults, lineage: list[list[str]]) -> None:
    """Where every number comes from: the grid, the code, the tracking store, and each run's MLflow ids."""
    doc.heading("Lineage")
    rows = [list(row) for row in lineage]
    for name, run in res.runs.items():
        n_finetune = sum(len(ids) for ids in run.finetune_runs.values())
        rows.append([f"{name}: pretraining run", run.pretrain.mlflow_run_id])
        rows.append([f"{name}: fine-tuning runs",
                     f"{n_finetune} runs, e.g. {next(iter(run.finetune_runs.values()))[0]}"])
    doc.table(["lineage", ""], rows)


def save(doc: Doc, res: AblationResults, out: Path) -> None:
    """The report's files, each written atomically; index.html with ``report.css`` inlined (one rule a line)."""
    style = "".join(line.strip() for line in STYLE.read_text(encoding="utf-8").splitlines())
    page = ("<!doctype html><html><head><meta charset=\"utf-8\"><title>BERT lab report</title><style>" + style
            + "</style></head><body>" + "\n".join(doc.html) + "</body></html>\n")
    out.mkdir(parents=True, exist_ok=True)
    with atomic_dir(out / "figures") as tmp:
        for name, data in doc.figures.items():
            (tmp / name).write_bytes(data)
    write_json(out / "ablations.json", to_json(res))
    write_json(out / "summary.json", res.summary)
    with atomic_file(out / "report.md") as f:
        f.write("\n".join(doc.md))
    with atomic_file(out / "index.html") as f:
        f.write(page)
