"""The ablation results: each family's rows, their numbers, the comparisons and the findings.

Pure data, no plotting: the report stage renders what ``ablation_results``
returns, and writes it as ``reports/ablations.json``. Numbers come from the
metrics files the stages wrote (declared DVC deps); a row is either the
baseline pretraining, a pretraining variant (fine-tuned with
``grid.finetune.modes``) or a fine-tuning mode of the baseline. What each
family's table shows -- its rows, its question, the paper's numbers -- is data
too: ``families/<name>.yaml`` beside this file.

Seed noise is the spread over fine-tuning seeds: every pretraining variant
runs once, so differences between pretraining runs carry that run's luck too.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import yaml

from pipeline.errors import ConfigError, DataError
from pipeline.finetune.modes import CLASSICAL
from pipeline.io import read_json
from pipeline.variants import BASELINE

FAMILIES = Path(__file__).resolve().parent / "families"  # one table per family: title, question, rows, paper

NOISE_RULE = ("a difference is beyond seed noise when the two means differ by more than twice the larger "
              "of their standard deviations over fine-tuning seeds")


def fmt(metric: str, value: float) -> str:
    """Accuracy and F1 as percentages, correlations as plain numbers."""
    return f"{100 * value:.1f}" if metric in ("accuracy", "f1") else f"{value:.3f}"


def load_families(names: list[str], folder: Path = FAMILIES) -> dict[str, dict]:
    """The table specs of the named families, in order (``grid.families``)."""
    known = sorted(p.stem for p in folder.glob("*.yaml"))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"grid.families: {unknown} not defined: expected names from {folder} ({', '.join(known)})")
    return {n: yaml.safe_load((folder / f"{n}.yaml").read_text(encoding="utf-8")) for n in names}


def load_runs(runs: Mapping[str, Mapping]) -> dict[str, dict]:
    """``{run name: {"pretrain": metrics, "finetune": metrics}}`` from each run's metrics folder (``runs[name].metrics``)."""
    out = {name: {k: read_json(Path(run["metrics"]) / f"{k}.json") for k in ("pretrain", "finetune")}
           for name, run in runs.items()}
    task = {r["finetune"]["task"] for r in out.values()}
    if len(task) > 1:
        raise DataError(f"the runs of the grid were fine-tuned on different tasks ({', '.join(sorted(task))}); "
                        "rerun them with the same task")
    return out


def stat(finetune: dict, mode: str, metric: str) -> dict | None:
    r = finetune["modes"].get(mode)
    if r is None:
        return None
    return {"mean": r[f"{metric}_mean"], "std": r[f"{metric}_std"], "n": r["n"],
            "mlflow_run_ids": [x["mlflow_run_id"] for x in r["runs"]]}


def pretrain_summary(pre: dict) -> dict:
    """The pretraining numbers a row shows; ``lm`` is ``mlm`` or ``ltr`` (accuracy of that objective)."""
    lm = "ltr" if "val/ltr_acc" in pre else "mlm"
    return {"lm": lm, "val_lm_acc": pre.get(f"val/{lm}_acc"), "val_perplexity": pre.get("val/perplexity"),
            "val_loss": pre.get("val/loss"), "steps": pre.get("steps"), "train_seconds": pre.get("train_seconds"),
            "mlflow_run_id": pre.get("mlflow_run_id")}


def compare(a: dict | None, b: dict | None) -> dict | None:
    """``a`` against ``b`` (each mean, std, n): the difference and whether it is beyond seed noise."""
    if not a or not b:
        return None
    diff = a["mean"] - b["mean"]
    noise = max(a["std"], b["std"])
    if min(a["n"], b["n"]) < 2 and max(a["n"], b["n"]) < 2:
        verdict = "no seed-noise estimate (one run each)"
    else:
        verdict = "beyond seed noise" if abs(diff) > 2 * noise else "within seed noise"
    return {"diff": round(diff, 6), "noise": round(noise, 6), "verdict": verdict}


def _paper_values(paper: list, row_label: str | None) -> dict[str, float]:
    if not row_label:
        return {}
    out = {}
    for block in paper:
        values = block["rows"].get(row_label)
        if values is not None:
            out.update(dict(zip(block["columns"], values)))
    return out


def family_result(name: str, fam: dict, runs: dict, metric: str, modes: list[str]) -> dict:
    """One family: its rows in order, each with our numbers, the paper's, and a comparison to the first row."""
    base_ft = runs[BASELINE]["finetune"]
    rows = []
    for row in fam["rows"]:
        out = {"label": row["label"], "paper_row": row.get("paper"),
               "paper": _paper_values(fam["paper"], row.get("paper"))}
        if "mode" in row:
            s = stat(base_ft, row["mode"], metric)
            if s is None:
                continue  # the baseline fine-tuning did not run this mode
            out.update(kind="mode", name=row["mode"], ran=True, scores={row["mode"]: s})
        else:
            v = row["variant"]
            out.update(kind="variant", name=v, ran=v in runs)
            if v in runs:
                out["scores"] = {m: stat(runs[v]["finetune"], m, metric) for m in modes}
                out["pretrain"] = pretrain_summary(runs[v]["pretrain"])
        rows.append(out)
    ran = [r for r in rows if r["ran"]]
    for r in ran:  # the score rows are compared on: the mode itself, or a variant's first fine-tuning mode
        r["primary"] = r["scores"].get(r["name"] if r["kind"] == "mode" else modes[0])
    ref = ran[0] if ran else None
    for r in ran:
        r["vs_first_row"] = None if r is ref else compare(r["primary"], ref["primary"])
    classical = stat(base_ft, CLASSICAL, metric)
    return {"name": name, "title": fam["title"], "question": fam["question"], "kind": rows[0]["kind"] if rows else None,
            "reference_row": ref["label"] if ref else None, "rows": rows, "classical": classical,
            "paper": fam.get("paper") or [], "note": fam.get("note")}


def _paper_direction(fam: dict, row: dict, ref: dict) -> str:
    """What the paper says about ``row`` against ``ref`` (first source with both, its first column), as a clause."""
    for block in fam["paper"]:
        a, b = block["rows"].get(row.get("paper_row")), block["rows"].get(ref.get("paper_row"))
        if a is not None and b is not None:
            col, d = block["columns"][0], a[0] - b[0]
            if d == 0:
                return f"the paper found no difference ({col} {a[0]} vs {b[0]})"
            return f"the paper found it {'better' if d > 0 else 'worse'} by {abs(d):.1f} ({col} {a[0]} vs {b[0]})"
    return ""


def findings(families: list[dict], baseline_ft: dict, metric: str, task: str) -> list[str]:
    """One sentence per comparison, generated from the numbers (never hand-written)."""
    out = []
    for fam in families:
        ran = [r for r in fam["rows"] if r["ran"] and r["primary"]]
        for r in ran[1:]:
            ref, c = ran[0], r["vs_first_row"]
            if fmt(metric, abs(c["diff"])) == fmt(metric, 0.0):
                how = f"is level with {ref['label']}"
            else:
                how = (f"is {fmt(metric, abs(c['diff']))} points {'better' if c['diff'] > 0 else 'worse'} than "
                       f"{ref['label']}")
            sentence = (f"{fam['title']}: {r['label']} {how} on {task} dev {metric} "
                        f"({fmt(metric, r['primary']['mean'])} vs {fmt(metric, ref['primary']['mean'])}; {c['verdict']})")
            paper = _paper_direction(fam, r, ref)
            if paper:
                if c["verdict"] != "beyond seed noise":
                    paper += "; too close to tell here"
                else:
                    paper += "; the same direction here" if (c["diff"] > 0) == (" better " in paper) else \
                        "; the opposite direction here"
                sentence += f"; {paper}"
            out.append(sentence + ".")
    ours, classical = stat(baseline_ft, "pretrained", metric), stat(baseline_ft, CLASSICAL, metric)
    if ours and classical:
        c = compare(ours, classical)
        out.append(f"Fine-tuning the baseline is {fmt(metric, abs(c['diff']))} points "
                   f"{'above' if c['diff'] > 0 else 'below'} the TF-IDF baseline "
                   f"({fmt(metric, ours['mean'])} vs {fmt(metric, classical['mean'])}).")
    return out


def ablation_results(runs: Mapping[str, Mapping], grid: str, families: Mapping[str, dict],
                     modes: list[str]) -> dict:
    """Everything the report shows about the grid, JSON-ready (``reports/ablations.json``).

    ``runs``: each run of the grid (the baseline first) with its ``metrics`` folder;
    ``families``: the table specs (``load_families``); ``modes``: how each variant was fine-tuned.
    """
    results = load_runs(runs)
    ft = results[BASELINE]["finetune"]
    metric = ft["metric"]
    fams = [family_result(name, spec, results, metric, modes) for name, spec in families.items()]
    # The same numbers as nested mappings, which `dvc metrics show` and `dvc exp show` list (they skip lists).
    table = {f["name"]: {r["name"]: {f"{mode}_{k}": s[k] for mode, s in r["scores"].items() if s
                                     for k in ("mean", "std", "n")}
                         for r in f["rows"] if r["ran"]} for f in fams}
    return {"grid": grid, "table": table, "task": ft["task"], "metric": metric, "variant_modes": modes,
            "noise_rule": NOISE_RULE, "families": fams,
            "findings": findings(fams, ft, metric, ft["task"]),
            "runs": {name: {"pretrain": pretrain_summary(r["pretrain"]),
                            "finetune_runs": {m: [x["mlflow_run_id"] for x in v["runs"]]
                                              for m, v in r["finetune"]["modes"].items()}}
                     for name, r in results.items()}}
