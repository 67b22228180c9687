"""The report stage: MLflow runs to ``reports/`` (HTML, Markdown, figures, JSON).

Run ids come from the metrics files the earlier stages wrote (declared DVC
deps), never from "the newest run". Curves are read back from MLflow.
"""
from __future__ import annotations

import base64
import html
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from pipeline.io import atomic_dir, read_json, write_json  # noqa: E402
from pipeline.tracking import git_commit, metric_history, tracking_uri  # noqa: E402


def _curves_figure(client: MlflowClient, run_id: str):
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.8))
    for key, style in (("train/loss", "-"), ("val/loss", "o-"), ("train/mlm_loss", ":")):
        pts = metric_history(client, run_id, key)
        if pts:
            ax_loss.plot(*zip(*pts), style, label=key, markersize=4)
    for key, style in (("train/mlm_acc", "-"), ("val/mlm_acc", "o-"), ("train/nsp_acc", "-"), ("val/nsp_acc", "o-")):
        pts = metric_history(client, run_id, key)
        if pts:
            ax_acc.plot(*zip(*pts), style, label=key, markersize=4)
    ax_loss.set(xlabel="optimiser step", ylabel="loss", title="Pretraining loss")
    ax_acc.set(xlabel="optimiser step", ylabel="accuracy", title="MLM and NSP accuracy", ylim=(0, 1))
    for ax in (ax_loss, ax_acc):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _finetune_figure(ft: dict):
    modes = list(ft["modes"])
    means = [ft["modes"][m]["accuracy_mean"] for m in modes]
    stds = [ft["modes"][m]["accuracy_std"] for m in modes]
    fig, ax = plt.subplots(figsize=(5, 3.6))
    bars = ax.bar(modes, means, yerr=stds, capsize=6, color=["#3b75af", "#c44e52", "#55a868"][: len(modes)])
    for b, m in zip(bars, means):
        ax.annotate(f"{m:.1%}", (b.get_x() + b.get_width() / 2, m), ha="center", va="bottom",
                    xytext=(0, 3), textcoords="offset points")
    ax.set(ylabel=f"dev {ft['metric']}", ylim=(0, 1), title=f"{ft['task']}: pretrained vs from scratch")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def _table(header: list[str], rows: list[list[str]]) -> tuple[str, str]:
    md = "| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n"
    md += "".join("| " + " | ".join(r) + " |\n" for r in rows)
    h = "<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in header) + "</tr>"
    h += "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows) + "</table>"
    return md, h


def build_report(cfg: DictConfig) -> dict:
    metrics_dir = Path(cfg.paths.metrics)
    corpus = read_json(metrics_dir / "corpus.json")
    pre = read_json(metrics_dir / "pretrain.json")
    ft = read_json(metrics_dir / "finetune.json")
    client = MlflowClient(tracking_uri(cfg))

    figures = {"pretrain_curves.png": _png(_curves_figure(client, pre["mlflow_run_id"])),
               "finetune.png": _png(_finetune_figure(ft))}

    pre_rows = [[k, f"{pre[k]:.4f}"] for k in ("val/loss", "val/mlm_loss", "val/mlm_acc", "val/nsp_acc") if k in pre]
    pre_rows += [["steps", str(pre["steps"])], ["training time (s)", f"{pre['train_seconds']:.0f}"]]
    pre_md, pre_html = _table(["pretraining metric", "value"], pre_rows)

    ft_rows = []
    for mode, r in ft["modes"].items():
        seeds = len(r["runs"])
        ft_rows.append([mode, f"{r['accuracy_mean']:.1%} ± {r['accuracy_std']:.1%}", str(seeds),
                        ", ".join(x["mlflow_run_id"][:8] for x in r["runs"])])
    ft_md, ft_html = _table(["start", f"dev {ft['metric']} (mean ± std)", "seeds", "MLflow runs"], ft_rows)

    finding = ""
    if {"pretrained", "scratch"} <= set(ft["modes"]):
        p, s = ft["modes"]["pretrained"], ft["modes"]["scratch"]
        diff = p["accuracy_mean"] - s["accuracy_mean"]
        noise = max(p["accuracy_std"], s["accuracy_std"])
        verdict = "better" if diff > 0 else "worse"
        finding = (f"Starting from the pretrained model is {abs(diff):.1%} {verdict} on {ft['task']} dev "
                   f"({p['accuracy_mean']:.1%} vs {s['accuracy_mean']:.1%} from scratch"
                   + (f"; seed std {noise:.1%})." if noise else ", one seed each: no seed-noise estimate yet)."))

    c = corpus
    corpus_line = (f"Corpus: {c['train']['documents']:,} train / {c['valid']['documents']:,} valid documents, "
                   f"{c['train']['sentences']:,} / {c['valid']['sentences']:,} sentences, "
                   f"{c['train']['words']:,} / {c['valid']['words']:,} words.")
    lineage = [["git commit", git_commit()], ["pretrain run", pre["mlflow_run_id"]],
               ["fine-tune task", f"{ft['task']} ({ft['train_examples']} train, {ft['dev_examples']} dev)"]]
    lin_md, lin_html = _table(["lineage", ""], lineage)

    md = (f"# BERT lab report\n\n{corpus_line}\n\n## Pretraining\n\n{pre_md}\n"
          f"![pretraining curves](figures/pretrain_curves.png)\n\n## Fine-tuning\n\n{ft_md}\n"
          f"![fine-tuning](figures/finetune.png)\n\n## Findings\n\n{finding}\n\n## Lineage\n\n{lin_md}")
    img = {k: "data:image/png;base64," + base64.b64encode(v).decode() for k, v in figures.items()}
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>BERT lab report</title>
<style>body{{font-family:system-ui,sans-serif;max-width:960px;margin:2em auto;padding:0 1em;color:#222}}
table{{border-collapse:collapse;margin:1em 0}}td,th{{border:1px solid #ccc;padding:4px 10px;text-align:left}}
th{{background:#f3f3f3}}img{{max-width:100%}}</style></head><body>
<h1>BERT lab report</h1><p>{html.escape(corpus_line)}</p>
<h2>Pretraining</h2>{pre_html}<img alt="pretraining curves" src="{img['pretrain_curves.png']}">
<h2>Fine-tuning</h2>{ft_html}<img alt="fine-tuning" src="{img['finetune.png']}">
<h2>Findings</h2><p>{html.escape(finding)}</p><h2>Lineage</h2>{lin_html}</body></html>
"""
    summary = {"corpus": corpus, "pretrain": pre, "finetune": ft, "finding": finding}
    with atomic_dir(cfg.paths.reports) as tmp:
        (tmp / "figures").mkdir()
        for name, data in figures.items():
            (tmp / "figures" / name).write_bytes(data)
        (tmp / "report.md").write_text(md, encoding="utf-8")
        (tmp / "index.html").write_text(page, encoding="utf-8")
        write_json(tmp / "summary.json", summary)
    return summary
