"""Does each task need reading? Each task's word-order control (``protocol.controls``): the arms on the task and
with every text's words shuffled.
"""
from __future__ import annotations

from pipeline.finetune.modes import mode_label
from pipeline.report.cells import fmt, signed
from pipeline.report.doc import Doc, Sources
from pipeline.report.model import AblationResults
from pipeline.report.protocol import BIG_DROP, NEAR_CHANCE


def write(doc: Doc, src: Sources) -> None:
    if src.res.controls:
        control_section(doc, src.res)


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
