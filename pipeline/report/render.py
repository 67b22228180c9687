"""The report as an ordered list of sections: ``reports/report.md`` and a self-contained ``index.html``, with their
figures, ``ablations.json`` and ``summary.json``.

Each section is one module of ``pipeline/report/sections/`` with a ``write(doc, src)`` that reads its numbers from the
typed results (``src.res``, ``pipeline.report.model``) and writes its text, tables and figures into ``doc`` (Markdown
and HTML side by side), or nothing where the grid did not run what it shows. Adding a section is one new module and
one line in ``SECTIONS`` (docs/ablations.md, "Adding a section to the report"). Everything comes from files DVC tracks;
the report never reads MLflow, so a fresh clone with the DVC outputs redraws it byte for byte.
"""
from __future__ import annotations

from pathlib import Path

from pipeline.report.doc import Doc, Sources, save
from pipeline.report.model import AblationResults
from pipeline.report.sections import (baseline, choices, control, family, findings, fixed_set, grammar, layout,
                                      ledger, lineage, method, noise, opening, polysemy, sweep)

SECTIONS = [
    opening,    # the title, the corpus, the grid's rows and what they were fine-tuned on
    ledger,     # the paper's claims, measured here: the forest plot and the table
    method,     # the design and the tests
    noise,      # how much noise, and what would cut it
    sweep,      # pretraining: every row at its best learning rate
    choices,    # fine-tuning: every arm at its best
    control,    # does each task need reading? the word-order control
    fixed_set,  # has the baseline learned language? the fixed set against count-based floors
    layout,     # does it read ordinary text? the layout probe
    findings,   # one sentence per comparison
    family,     # each family's question, table, figures and the paper's numbers
    grammar,    # zero-shot grammar (BLiMP)
    polysemy,   # one vector per word, or one per context?
    baseline,   # the baseline's first pretraining run and its fine-tuning modes
    lineage,    # where every number comes from
]


def write_report(res: AblationResults, corpus: dict, pre: dict, ft: dict, out: Path,
                 lineage: list[list[str]], probe: dict | None = None) -> None:
    """``out/index.html``, ``out/report.md``, ``out/figures/`` and ``out/ablations.json`` from the results ``res``:
    every section of ``SECTIONS`` in order (``Sources`` says what ``corpus``, ``pre``, ``ft``, ``lineage`` and
    ``probe`` are)."""
    doc, src = Doc(), Sources(res, corpus, pre, ft, lineage, probe)
    for section in SECTIONS:
        section.write(doc, src)
    save(doc, res, out)
