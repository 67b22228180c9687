"""The baseline's first pretraining run and every fine-tuning mode of it, from its own metrics files."""
from __future__ import annotations

from pipeline.finetune.modes import mode_label
from pipeline.report.cells import fmt, percent, settings_text
from pipeline.report.curves import curves_figure
from pipeline.report.doc import Doc, Sources
from pipeline.report.model import AblationResults
from pipeline.variants import BASELINE


def write(doc: Doc, src: Sources) -> None:
    baseline_section(doc, src.res, src.pre, src.ft)


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
