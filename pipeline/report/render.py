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
from pipeline.report.figures import (along_figure, bars_figure, contextuality_figure, curves_figure,
                                     fixed_curves_figure, grammar_figure, layout_along_figure, layout_figure, png,
                                     suite_figure)
from pipeline.report.results import BASELINE, classical_name, fmt, p_text, percent


def pm(metric: str, s: dict | None) -> str:
    """A row's number: its mean, the interval of the mean, and the runs behind it (pretraining x fine-tuning)."""
    if not s:
        return "—"
    interval = f" [{fmt(metric, s['low'])}, {fmt(metric, s['high'])}]" if s["low"] is not None else ""
    runs = f"{s['n_pretrain']} x {s['n_finetune'] // max(1, s['n_pretrain'])}" if s["n_pretrain"] else \
        f"{s['n_finetune']} runs"
    return f"{fmt(metric, s['mean'])}{interval} ({runs})"


def vs(metric: str, c: dict | None) -> str:
    """A tested comparison in a table cell: the difference, its interval and p-value, the verdict."""
    if c is None:
        return "reference"
    diff = f"{'+' if c['diff'] >= 0 else '−'}{fmt(metric, abs(c['diff']))}"
    if c["low"] is None:
        return f"{diff} ({c['verdict']})"
    lo, hi = (f"{'+' if v >= 0 else '−'}{fmt(metric, abs(v))}" for v in (c["low"], c["high"]))
    return f"{diff} [{lo}, {hi}], {p_text(c['p'])}: {c['verdict']}{' (borderline)' if c['borderline'] else ''}"


def fixed_cell(s: dict | None) -> str:
    """A row's fixed-set accuracy at the masked positions: mean [interval] (pretraining runs)."""
    if not s:
        return "—"
    interval = f" [{100 * s['low']:.1f}, {100 * s['high']:.1f}]" if s["low"] is not None else ""
    n = len(s["units"])
    return f"{100 * s['mean']:.1f}{interval} ({n} run{'s' if n > 1 else ''})"


def crossing_text(c: dict | None) -> str:
    """Where a row's runs crossed a floor: step, tokens, seconds, FLOPs (means over the runs that did)."""
    if not c or not c["runs"]:
        return "—"
    if not c["crossed"]:
        return f"not reached (0 of {c['runs']} runs)"
    parts = [f"step {c['step']:.0f}"]
    if c.get("tokens") is not None:
        parts.append(f"{c['tokens'] / 1e6:.2f}M tokens")
    if c.get("seconds") is not None:
        parts.append(f"{c['seconds']:.0f} s")
    if c.get("flops") is not None:
        parts.append(f"{c['flops'] / 1e12:.1f} TFLOP")
    return ", ".join(parts) + f" ({c['crossed']} of {c['runs']} runs)"


def intrinsic_section(doc: "Doc", res: dict) -> None:
    """The baseline on the fixed evaluation set against the count-based floors, before any ablation is read."""
    it = res.get("intrinsic")
    if not it:
        return
    doc.heading("Has the baseline learned language? The fixed evaluation set against count-based floors")
    doc.para("Every pretraining run is scored on one fixed evaluation set: the held-out sequences with 15% of their "
             "pieces chosen once and corrupted once (80% [MASK], 10% a random piece, 10% unchanged), the same "
             "for every row whatever its own masking. The headline is the accuracy at the [MASK] positions. The "
             "floors are count tables from the pretraining examples, scored on the same positions and reading what "
             "the model reads (a masked neighbour is masked for the table too): a model below the bigram floor "
             "predicts piece frequencies, not language.", cls="note")
    rows = [["the baseline (BERT)", fixed_cell(it["fixed"]), "—", "—"]]
    for fl in it["floors"]:
        rows.append([f"floor: {fl['label']}", f"{100 * fl['accuracy']:.1f}", vs("accuracy", it["vs_floors"][fl["name"]]),
                     crossing_text(it["crossings"].get(fl["name"]))])
    confidence = round(100 * res["method"]["confidence"])
    if it.get("built"):
        doc.para(built_text(it["built"]), cls="note")
    doc.table(["", "accuracy at masked positions (%)", "the baseline against it", "where the baseline's runs crossed it"],
              rows, caption=f"The baseline's mean over its pretraining runs [{confidence}% interval]; against each "
                            "floor a one-sample t-test over the runs")
    base = res["runs"][BASELINE]["pretrain"]
    plots = [r["pretrain"]["plots"] for r in res["runs"].values() if r["variant"] == BASELINE]
    doc.figure("baseline_fixed_curves.png", fixed_curves_figure([("baseline", plots)], it["floors"], "Baseline"),
               "the baseline on the fixed evaluation set along pretraining")
    if not it["learned"]:
        doc.para(f"Warning: at {base['steps']} steps the baseline is not above the bigram floor. Every comparison "
                 "below is made on a model that has not learned context; read them as the machinery working, not "
                 "as evidence about BERT.", cls="question")


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


def layout_cell(cell: dict, bigram: str | None) -> str:
    """A row's accuracy in one cell of the layout probe: mean [interval], and its verdict against the bigram."""
    interval = f" [{100 * cell['low']:.1f}, {100 * cell['high']:.1f}]" if cell["low"] is not None else ""
    verdict = cell["vs_floors"][bigram]["verdict"] if bigram and bigram in cell["vs_floors"] else None
    return f"{100 * cell['mean']:.1f}{interval}" + (f": {verdict}" if verdict and cell["low"] is not None else "")


def layout_section(doc: "Doc", res: dict) -> None:
    """Every row on the layout probe: does it read held-out text in the layouts it will be used on?"""
    probe = res.get("layout")
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
    floors = {f["name"]: f for f in probe["floors"]}
    bigram, both = (base["floors"] + [None, None])[1:3]
    others = [r for r in probe["rows"] if r is not base]
    header = ["cell", f"{base['label']} ({base['runs']} runs)", *(f["short"] for f in probe["floors"]),
              *(r["label"] for r in others)]
    rows = []
    for c in probe["cells"]:
        name = c["name"]
        rows.append([c["label"], layout_cell(base["cells"][name], bigram),
                     *(f"{100 * floors[f['name']]['cells'][name]:.1f}" for f in probe["floors"]),
                     *(layout_cell(r["cells"][name], bigram) for r in others)])
    confidence = round(100 * res["method"]["confidence"])
    doc.table(header, rows, caption=f"Accuracy at the hidden piece (%): mean over pretraining runs [{confidence}% "
                                    "interval], and the verdict against the bigram floor of the same cell "
                                    "(a one-sample t-test over the runs)")
    verdict = probe["baseline_reads"]
    weakest = min(base["cells"], key=lambda n: base["cells"][n]["mean"] - floors[bigram]["cells"][n]) if bigram \
        else None
    if weakest:
        label = next(c["label"] for c in probe["cells"] if c["name"] == weakest)
        lead = base["cells"][weakest]["mean"] - floors[bigram]["cells"][weakest]
        above_both = sum(base["cells"][n]["mean"] > floors[both]["cells"][n] for n in base["cells"]) if both else 0
        doc.para(("The baseline reads: above the bigram floor in every cell, each interval clear of it. "
                  if verdict else "The baseline does not read ordinary text everywhere: not clear of the bigram "
                  "floor in every cell. " if verdict is False else "One run: no interval to judge the baseline by. ")
                 + f"Its narrowest lead over the bigram floor is {'+' if lead >= 0 else '−'}{100 * abs(lead):.1f} "
                   f"points ({label}); it is above the floor of both neighbours in {above_both} of "
                   f"{len(base['cells'])} cells.")
    doc.figure("layout_probe.png", layout_figure(probe), "every row on the layout probe, against the floors")
    if probe["along"]:
        doc.figure("layout_along.png", layout_along_figure(probe), "the baseline on the layout probe along "
                                                                   "pretraining")


def suite_cell(metric: str, cell: dict) -> str:
    """A suite table's cell: the row's score and interval, and its tested difference to the reference row."""
    if not cell["ran"]:
        return "—"
    interval = f" [{fmt(metric, cell['low'])}, {fmt(metric, cell['high'])}]" if cell["low"] is not None else ""
    c = cell["vs"]
    if c is None:
        return f"{fmt(metric, cell['mean'])}{interval}"
    p = f", {p_text(c['p'])}" if c.get("p") is not None else ""
    return f"{fmt(metric, cell['mean'])}{interval}; {'+' if c['diff'] >= 0 else '−'}{fmt(metric, abs(c['diff']))}" \
           f"{p}: {c['verdict']}"


def suite_table(doc: "Doc", fam: dict, res: dict) -> None:
    """A family's rows across the suite's columns, ours beside the paper's (the paper's own table, at our scale)."""
    suite = res["suite"]
    spec = next(f for f in suite["families"] if f["name"] == fam["name"])
    cols = suite["columns"]
    header = ["setting"]
    for col in cols:
        header += [col["label"], *([f"paper: {col['paper']}"] if col["paper"] else [])]
    rows = []
    for r in spec["rows"]:
        line = [r["label"]]
        for col, cell in zip(cols, r["cells"]):
            line += [suite_cell(col["metric"], cell) if r["ran"] else "not in this grid",
                     *([str(cell["paper"]) if cell["paper"] is not None else ""] if col["paper"] else [])]
        rows.append(line)
    if any(v is not None for v in spec["classical"]):
        line = ["no pretraining: TF-IDF + logistic regression (SQuAD: word overlap)"]
        for col, v in zip(cols, spec["classical"]):
            line += [fmt(col["metric"], v) if v is not None else "—", *([""] if col["paper"] else [])]
        rows.append(line)
    confidence = round(100 * res["method"]["confidence"])
    data = "; ".join(f"{c['task_name']} {c['train_examples']} train / {c['dev_examples']} dev {c['unit']}"
                     + ("" if c["comparable"] else " (dev split from the training data: not comparable to the "
                        "official dev set)") for c in {c["task"]: c for c in cols}.values())
    doc.table(header, rows, caption=f"Suite {suite['name']}: each row's dev score in each task (% for accuracy, F1, "
                                    f"exact match) [{confidence}% interval]; its difference to {spec['reference_row']} "
                                    f"in that task by the test named in Method; the paper's number at its scale. "
                                    f"Examples: {data}")
    if any(r["ran"] for r in spec["rows"]):
        doc.figure(f"{fam['name']}_suite.png", suite_figure(spec, cols, fam["title"]),
                   f"{fam['title']}: every task of suite {suite['name']}")


def method_text(res: dict) -> str:
    """The design and the tests in one paragraph, with the error rates measured at this grid's noise."""
    m, metric = res["method"], res["metric"]
    runs = m["pretraining_runs"]
    counts = sorted(set(runs.values()))
    others = sorted({n for v, n in runs.items() if v != "baseline"})
    per_row = (f"{counts[0]} pretraining runs" if len(counts) == 1 else
               f"{runs['baseline']} pretraining runs for the baseline and {' or '.join(map(str, others))} for each "
               "variant")
    text = (f"Design: every row is {per_row} (seeds seed, seed + 1, ...), each fine-tuned with the same "
            f"{m['finetune_seeds']} fine-tuning seeds, so fine-tuning runs pair up across rows. A row's number is the "
            "mean over its pretraining runs of each run's mean over fine-tuning seeds: the pretraining run is the "
            "unit, so both kinds of luck count. Tests: pretraining variants against the family's first row by a "
            "t-test on per-run means with the variance pooled over the family's rows (they are assumed to share one "
            "spread; a row of one run adds nothing to it, so with single-run variants the baseline's runs estimate "
            "it); fine-tuning modes of the same runs by a paired t-test; from scratch (no pretraining behind "
            "it) by Welch's t-test; TF-IDF (deterministic) by a one-sample t-test. Verdicts: better or worse when "
            f"the {round(100 * m['confidence'])}% interval of the difference excludes zero, else inconclusive (with "
            "the pretraining runs per side it would take); borderline when p lies between a fifth of the threshold "
            "and twice it, where another machine's rounding may move the verdict between better and inconclusive. "
            f"Noise measured on the baseline: pretraining luck sd {fmt(metric, m['sd_pretrain'])}, fine-tuning luck "
            f"sd {fmt(metric, m['sd_finetune'])} (points of {metric}).")
    if "false_positive_rate" in m:
        power = ", ".join(f"{d}: {100 * p:.0f}%" for d, p in m["power_at_observed"].items())
        observed = f"power {power} at the observed differences, " if power else ""
        text += (f" At that noise, simulated: a false-positive rate of {100 * m['false_positive_rate']:.1f}% on no "
                 f"difference, {observed}and 80% power from a difference "
                 f"of {fmt(metric, m['smallest_detectable'])} points.")
    return text + (" The paper's numbers come from models hundreds of times larger trained far longer: compare "
                   "directions, not values.")


def polysemy_section(doc: "Doc", probe: dict) -> None:
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
        rows = []
        for name, m in probe["models"].items():
            sense = m["senses"].get(word)
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
    crossed = [f"{f['label']} at step {along['fixed_crossed'][f['name']]:,.0f}" if along["fixed_crossed"].get(f["name"])
               is not None else f"not {f['label']}" for f in along["fixed_floors"]]
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
    published = zs.get("published")
    for fam in zs["families"]:
        if not fam["rows"]:
            continue
        phenomena = sorted({p for r in fam["rows"] for p in r["phenomenon"]})
        header = ["row", "overall", f"vs {fam['reference_row']}", "vs n-gram floor",
                  *[p.replace("_", " ") for p in phenomena]]
        rows = [[r["label"], fixed_cell(r["overall"]), vs("accuracy", r["vs"]), vs("accuracy", r["vs_floor"]),
                 *[f"{100 * r['phenomenon'][p]['mean']:.1f}" if r["phenomenon"].get(p) else "—" for p in phenomena]]
                for r in fam["rows"]]
        if floor:
            rows.append([f"n-gram floor ({floor['order']}-gram)", f"{100 * floor['overall']:.1f}", "", "",
                         *[f"{100 * floor['phenomenon'][p]:.1f}" if floor["phenomenon"].get(p) is not None else "—"
                           for p in phenomena]])
        if published:
            for model, overall in published["overall"].items():
                rows.append([f"published: {model}", f"{100 * overall:.1f}", "", "",
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


def family_section(doc: Doc, fam: dict, res: dict) -> None:
    metric, modes, task = res["metric"], res["variant_modes"], res["task"]
    doc.heading(fam["title"])
    doc.para(fam["question"], cls="question")
    if res.get("suite"):
        suite_table(doc, fam, res)
        doc.para(f"In detail on {task}, the suite's first column:", cls="note")
    paper_cols = list(dict.fromkeys(c for block in fam["paper"] for c in block["columns"]))
    ref = fam["reference_row"]
    if fam["kind"] == "mode":
        header = ["setting", f"dev {metric} (mean ± std)", f"vs {ref}"]
    else:
        header = ["setting", *[f"{mode_label(m)} dev {metric}" for m in modes], f"vs {ref}",
                  "fixed set: masked pieces %", f"vs {ref}: fixed set", "val LM accuracy (own masking)",
                  "val perplexity", "pretraining s", "parameters", "training FLOPs / token"]
    header += [f"paper: {c}" for c in paper_cols]
    rows = []
    blank = [""] * (len(header) - 1 - len(paper_cols))
    first = next((f for f in fam.get("floors", []) if f["name"] == fam.get("first_generation")), None)
    if first:  # a lineage's first generation: the n-gram LM, a count table
        rows.append([f"n-gram count table ({first['label']})", *blank[:len(modes) + 1],
                     f"{100 * first['accuracy']:.1f}", *blank[len(modes) + 2:], *[""] * len(paper_cols)])
    for r in fam["rows"]:
        paper = [str(r["paper"].get(c, "")) for c in paper_cols]
        if not r["ran"]:
            rows.append([r["label"], "not in this grid (grid=full runs it)", *[""] * (len(header) - 2 - len(paper_cols)),
                         *paper])
            continue
        c = vs(metric, r.get("vs"))
        if fam["reference_row"] == "the row above" and r.get("vs_row"):  # a lineage: name what each row is against
            c = f"vs {r['vs_row']}: {c}"
        if fam["kind"] == "mode":
            rows.append([r["label"], pm(metric, r["primary"]), c, *paper])
        else:
            p = r["pretrain"]
            lm_name = {"mlm": "MLM", "ltr": "LTR", "bilm": "biLM"}.get(p["lm"], p["lm"])
            lm = f"{100 * p['val_lm_acc']:.1f}% ({lm_name})" if p["val_lm_acc"] is not None else "—"
            ppl = f"{p['val_perplexity']:.1f}" if p["val_perplexity"] is not None else "—"
            size = f"{p['parameters'] / 1e6:.2f}M" if p.get("parameters") else "—"
            flops = f"{p['train_flops_per_token'] / 1e6:.2f}M" if p.get("train_flops_per_token") else "—"
            cf = vs("accuracy", r.get("vs_fixed")) if r.get("fixed") else "—"
            if fam["reference_row"] == "the row above" and r.get("vs_fixed_row"):
                cf = f"vs {r['vs_fixed_row']}: {cf}"
            rows.append([r["label"], *[pm(metric, r["scores"].get(m)) for m in modes], c, fixed_cell(r.get("fixed")),
                         cf, lm, ppl, f"{p['train_seconds']:.0f}", size, flops, *paper])
    if fam["kind"] == "variant":  # the count-based floors, on the fixed set only
        for fl in fam.get("floors", []):
            rows.append([f"floor: {fl['label']}", *blank[:len(modes) + 1], f"{100 * fl['accuracy']:.1f}",
                         *blank[len(modes) + 2:], *[""] * len(paper_cols)])
    if fam["classical"]:
        rows.append([("TF-IDF + logistic regression" if classical_name(task) == "TF-IDF" else
                      "sliding-window word overlap") + " (no pretraining)", fmt(metric, fam["classical"]["mean"]),
                     *[""] * (len(header) - 2)])
    confidence = round(100 * res["method"]["confidence"])
    doc.table(header, rows, caption=f"Ours: {task} dev {metric}{' in %' if metric in ('accuracy', 'f1') else ''}: "
                                    f"mean over pretraining runs [{confidence}% interval] (pretraining runs x "
                                    "fine-tuning seeds); each row against the first by the test named in Method")
    if fam.get("note"):
        doc.para(fam["note"], cls="note")
    if any(r["ran"] for r in fam["rows"]):
        doc.figure(f"{fam['name']}_bars.png", bars_figure(fam, metric, modes, task), f"{fam['title']}: dev {metric}")
        doc.para(f"Error bars: the {confidence}% interval of each row's mean, with the spread the table's test uses "
                 "(pooled over the family's rows for pretraining variants).", cls="note")
    fixed_rows = [r for r in fam["rows"] if r.get("fixed")]
    if fixed_rows:
        doc.figure(f"{fam['name']}_fixed_curves.png",
                   fixed_curves_figure([(r["label"], r["pretrain"]["plots_all"]) for r in fixed_rows],
                                       fam.get("floors", []), fam["title"]),
                   f"{fam['title']}: the fixed evaluation set along pretraining")
        crossed = fam.get("floors", [])[1:]  # the floors that read context
        if crossed:
            doc.table(["setting", *[f"crosses: {f['label']} ({100 * f['accuracy']:.1f}%)" for f in crossed]],
                      [[r["label"], *[crossing_text(r.get("crossings", {}).get(f["name"])) for f in crossed]]
                       for r in fixed_rows],
                      caption="Where each row's runs first rose above each floor on the fixed set (interpolated "
                              "between validations; means over the runs that did)")
    curves = [(r["label"], r["pretrain"]["plots"], r["pretrain"]["lm"]) for r in fam["rows"]
              if r["ran"] and r["kind"] == "variant"]
    if len(curves) > 1:
        doc.figure(f"{fam['name']}_curves.png", curves_figure(curves, fam["title"]),
                   f"{fam['title']}: learning curves")
    for block in fam["paper"]:
        doc.table(["the paper's setting", *block["columns"]],
                  [[label, *[str(v) for v in values]] for label, values in block["rows"].items()],
                  caption=f"The paper's numbers, at its scale (not ours): {block['source']}")


def _rows_phrase(variants: int) -> str:
    """The grid's rows in words: the baseline alone, or with its pretraining variant(s)."""
    if variants == 0:
        return "the baseline alone"
    return f"the baseline and {variants} pretraining variant{'s' if variants > 1 else ''}"


def write_report(res: dict, corpus: dict, pre: dict, ft: dict, out: Path,
                 lineage: list[list[str]], probe: dict | None = None) -> None:
    """``out/index.html``, ``out/report.md``, ``out/figures/`` and ``out/ablations.json`` from the results ``res``.

    ``corpus``, ``pre`` and ``ft``: the corpus statistics and the baseline's pretraining and fine-tuning
    metrics; ``lineage``: the first rows of the lineage table (grid, code, tracking store); ``probe``:
    the polysemy probe's results (``metrics/probe.json``), when it ran.
    """
    base = res["runs"][BASELINE]["pretrain"]
    m = res["method"]

    doc = Doc()
    doc.heading("BERT lab report: the ablation grid", 1)
    c = corpus
    doc.para(f"Corpus: {c['train']['documents']:,} train / {c['valid']['documents']:,} valid documents, "
             f"{c['train']['words']:,} / {c['valid']['words']:,} words. Grid {res['grid']!r}: "
             f"{_rows_phrase(len(m['pretraining_runs']) - 1)}, {base['steps']} steps each, fine-tuned on "
             + (f"each task of suite {res['suite']['name']} "
                f"({', '.join(dict.fromkeys(c['task_name'] for c in res['suite']['columns']))})." if res.get("suite")
                else f"{res['task']} ({ft['train_examples']} train / {ft['dev_examples']} dev examples)."))
    doc.heading("Method")
    doc.para(method_text(res), cls="note")
    intrinsic_section(doc, res)
    layout_section(doc, res)
    doc.heading("Findings")
    doc.bullets(res["findings"] or ["Nothing to compare: the grid ran a single row per family."])
    for fam in res["families"]:
        family_section(doc, fam, res)

    if res.get("zero_shot", {}).get("scored") or res.get("zero_shot", {}).get("along"):
        grammar_section(doc, res["zero_shot"])
    if probe and probe.get("models"):
        polysemy_section(doc, probe)

    doc.heading("The baseline's first pretraining run")
    doc.table(["pretraining metric", "value"],
              [[k, f"{pre[k]:.4f}"] for k in ("val/loss", "val/mlm_loss", "val/mlm_acc", "val/ltr_acc", "val/nsp_acc",
                                               "val/perplexity") if k in pre]
              + [["steps", str(pre["steps"])], ["training time (s)", f"{pre['train_seconds']:.0f}"]])
    doc.figure("pretrain_curves.png", curves_figure([("baseline", base["plots"],
                                                              base["lm"])], "Baseline"), "baseline pretraining curves")
    metric = ft["metric"]
    doc.table(["fine-tuning mode", *[f"dev {m} (mean ± std)" for m in ft["metrics"]], "seeds", "seconds"],
              [[mode_label(m), *[f"{fmt(k, r[f'{k}_mean'])} ± {fmt(k, r[f'{k}_std'])}" for k in ft["metrics"]],
                str(r["n"]), f"{r['seconds']:.0f}"] for m, r in ((m, ft["modes"][m]) for m in ft["mode_order"])],
              caption=f"Every fine-tuning mode of the baseline on {ft['task']} ({metric} in %)"
              if percent(metric) else f"Every fine-tuning mode of the baseline on {ft['task']}")

    doc.heading("Lineage")
    lineage = [list(row) for row in lineage]
    for name, r in res["runs"].items():
        n_ft = sum(len(v) for v in r["finetune_runs"].values())
        lineage.append([f"{name}: pretraining run", r["pretrain"]["mlflow_run_id"]])
        lineage.append([f"{name}: fine-tuning runs", f"{n_ft} runs, e.g. {next(iter(r['finetune_runs'].values()))[0]}"])
    doc.table(["lineage", ""], lineage)

    page = ("<!doctype html><html><head><meta charset=\"utf-8\"><title>BERT lab report</title><style>"
            "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
            "table{border-collapse:collapse;margin:1em 0;font-size:14px}td,th{border:1px solid #ccc;padding:4px 8px;"
            "text-align:left}th{background:#f3f3f3}caption{text-align:left;font-style:italic;padding:4px 0}"
            "img{max-width:100%;display:block;margin:1em 0}.question{font-style:italic}.note{color:#555}"
            "</style></head><body>" + "\n".join(doc.html) + "</body></html>\n")
    out.mkdir(parents=True, exist_ok=True)
    with atomic_dir(out / "figures") as tmp:
        for name, data in doc.figures.items():
            (tmp / name).write_bytes(data)
    write_json(out / "ablations.json", res)
    write_json(out / "summary.json", res["summary"])
    with atomic_file(out / "report.md") as f:
        f.write("\n".join(doc.md))
    with atomic_file(out / "index.html") as f:
        f.write(page)
