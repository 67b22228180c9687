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


def fmt_metric(metric: str, value: float) -> str:
    """Accuracy and F1 as percentages, correlations as plain numbers."""
    return f"{value:.1%}" if metric in ("accuracy", "f1") else f"{value:.3f}"


def _finetune_figure(ft: dict):
    modes = ft.get("mode_order") or list(ft["modes"])
    metric = ft["metric"]
    means = [ft["modes"][m][f"{metric}_mean"] for m in modes]
    stds = [ft["modes"][m][f"{metric}_std"] for m in modes]
    fig, ax = plt.subplots(figsize=(max(5, 1.1 * len(modes)), 3.8))
    colors = ["#3b75af", "#c44e52", "#8c8c8c"] + ["#55a868"] * len(modes)
    bars = ax.bar(modes, means, yerr=stds, capsize=6, color=colors[: len(modes)])
    for b, m in zip(bars, means):
        ax.annotate(fmt_metric(metric, m), (b.get_x() + b.get_width() / 2, m), ha="center", va="bottom",
                    xytext=(0, 3), textcoords="offset points")
    ax.set(ylabel=f"dev {metric}", ylim=(min(0, min(means) - 0.1), 1), title=f"{ft['task']}: dev {metric} by start")
    ax.tick_params(axis="x", labelrotation=30)
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

    metric, metrics = ft["metric"], ft.get("metrics", [ft["metric"]])
    ft_rows = []
    for mode in ft.get("mode_order") or list(ft["modes"]):
        r = ft["modes"][mode]
        cells = [f"{fmt_metric(m, r[f'{m}_mean'])} ± {fmt_metric(m, r[f'{m}_std'])}" for m in metrics]
        ft_rows.append([mode, *cells, str(len(r["runs"])), ", ".join(x["mlflow_run_id"][:8] for x in r["runs"])])
    ft_md, ft_html = _table(["start", *[f"dev {m} (mean ± std)" for m in metrics], "seeds", "MLflow runs"], ft_rows)

    findings = []
    modes = ft["modes"]

    def compare(a: str, b: str, what: str) -> None:
        if a in modes and b in modes:
            x, y = modes[a], modes[b]
            diff = x[f"{metric}_mean"] - y[f"{metric}_mean"]
            noise = max(x[f"{metric}_std"], y[f"{metric}_std"])
            verdict = "better" if diff > 0 else "worse"
            beyond = ("beyond seed noise" if abs(diff) > 2 * noise else "within seed noise") if noise else \
                "one seed each: no seed-noise estimate"
            findings.append(f"{what} is {fmt_metric(metric, abs(diff))} {verdict} on {ft['task']} dev "
                            f"({fmt_metric(metric, x[f'{metric}_mean'])} vs {fmt_metric(metric, y[f'{metric}_mean'])}"
                            f"; {beyond}).")

    compare("pretrained", "scratch", "Starting from the pretrained model")
    frozen = [m for m in modes if m.startswith("frozen_")]
    if frozen:
        best = max(frozen, key=lambda m: modes[m][f"{metric}_mean"])
        compare("pretrained", best, f"Fine-tuning, against the best frozen features ({best}),")
    compare("pretrained", "tfidf", "Fine-tuning, against the TF-IDF baseline,")
    finding = " ".join(findings)

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
