"""The report's writer: one document written as Markdown and as HTML side by side (``Doc``), what every section
reads (``Sources``), and the files it becomes (``save``): ``report.md``, a self-contained ``index.html`` (its style
sheet and figures inlined, so it opens offline), ``figures/``, ``ablations.json`` and ``summary.json``.
"""
from __future__ import annotations

import base64
import html
from dataclasses import dataclass
from pathlib import Path

from pipeline.io import atomic_dir, atomic_file, write_json
from pipeline.report.model import AblationResults, to_json
from pipeline.report.style import png

STYLE = Path(__file__).resolve().parent / "report.css"  # index.html's style sheet, inlined


@dataclass
class Sources:
    """What the sections read: the typed results, and the baseline's own metrics files.

    ``corpus``, ``pre`` and ``ft``: the corpus statistics and the baseline's pretraining and fine-tuning metrics;
    ``lineage``: the first rows of the lineage table (grid, code, tracking store); ``probe``: the polysemy probe's
    results (``metrics/probe.json``), when it ran.
    """

    res: AblationResults
    corpus: dict
    pre: dict
    ft: dict
    lineage: list[list[str]]
    probe: dict | None = None


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
