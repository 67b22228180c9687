"""The report's title and its opening line: the corpus, the grid's rows and steps, what they were fine-tuned on."""
from __future__ import annotations

from pipeline.report.doc import Doc, Sources
from pipeline.report.model import AblationResults
from pipeline.variants import BASELINE


def write(doc: Doc, src: Sources) -> None:
    doc.heading("BERT lab report: the ablation grid", 1)
    doc.para(opening_text(src.res, src.corpus, src.ft))


def opening_text(res: AblationResults, corpus: dict, ft: dict) -> str:
    """The corpus, the grid's rows, their steps, and what they were fine-tuned on."""
    train, valid = corpus["train"], corpus["valid"]
    tasks = (f"each task of suite {res.suite['name']} "
             f"({', '.join(dict.fromkeys(c['task_name'] for c in res.suite['columns']))})." if res.suite
             else f"{res.task} ({ft['train_examples']} train / {ft['dev_examples']} dev / {ft['test_examples']} test "
                  "examples).")
    return (f"Corpus: {train['documents']:,} train / {valid['documents']:,} valid documents, "
            f"{train['words']:,} / {valid['words']:,} words. Grid {res.grid!r}: "
            f"{rows_phrase(len(res.method.pretraining_runs) - 1)}, {res.runs[BASELINE].pretrain.steps} steps each, "
            f"fine-tuned on {tasks}")


def rows_phrase(variants: int) -> str:
    """The grid's rows in words: the baseline alone, or with its pretraining variant(s)."""
    if variants == 0:
        return "the baseline alone"
    return f"the baseline and {variants} pretraining variant{'s' if variants > 1 else ''}"
