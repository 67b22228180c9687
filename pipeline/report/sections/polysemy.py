"""Polysemy: one vector per word, or one per context? The probe stage's numbers (``metrics/probe.json``):
contextuality per layer and each sense word's neighbours.
"""
from __future__ import annotations

from matplotlib.ticker import MaxNLocator

from pipeline.report.doc import Doc, Sources
from pipeline.report.style import COLORS, plt


def write(doc: Doc, src: Sources) -> None:
    if src.probe and src.probe.get("models"):
        polysemy_section(doc, src.probe)


def polysemy_section(doc: Doc, probe: dict) -> None:
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


def senses_table(doc: Doc, probe: dict, word: str) -> None:
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


def contextuality_figure(probe: dict):
    """Anisotropy-corrected self-similarity per layer, one line per model (a static model: one point)."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for i, (name, m) in enumerate(probe["models"].items()):
        ys = m["corrected"]
        ax.plot(range(len(ys)), ys, "o-", color=COLORS[i % len(COLORS)], label=name, lw=1.5, markersize=4)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="layer (0: the token layer)",
           ylabel="self-similarity - random-pair\nsimilarity (cosine)",
           title="How contextual is each layer? (lower: more context)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
