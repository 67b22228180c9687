"""Findings: one sentence per comparison, generated from the numbers (``pipeline.report.findings``)."""
from __future__ import annotations

from pipeline.report.doc import Doc, Sources


def write(doc: Doc, src: Sources) -> None:
    doc.heading("Findings")
    doc.bullets(src.res.findings or ["Nothing to compare: the grid ran a single row per family."])
