"""The claims ledger: one row per claim of BERT's story that the grid touches, each from the report's own tests.

``claims.yaml`` lists the claims, the direction the paper found, the practical margin of each and where the report
measures it; here each claim gets the measurement the grid ran (the rows, the metric, the difference and its
interval), its verdict against the paper's direction (shown, opposite, level within its margin, inconclusive with
the pretraining runs per side that would decide it), the same rows on the fixed evaluation set with the gap along
pretraining (whether more pretraining moves it), and the section of the report that holds the detail. A claim the
grid did not run names what runs it. The tests are the report's own (a family's row, a suite's cell, the fixed
set's), each read again against the claim's margin (``stats.with_margin``): the margin is the claim's, not the
table's, so the family tables keep their three verdicts.

``python -m pipeline.report.ledger NAME=reports/summary.json ...`` sets the ledgers of several reports side by
side (the README's "Results at a glance").
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from pipeline.io import read_json
from pipeline.report import fixed
from pipeline.report.claims import in_units
from pipeline.report.claims import load as load_claims
from pipeline.report.model import AblationResults, Claim, Comparison, Row, TaskVerdict
from pipeline.report.stats import compare, with_margin

GRAMMAR_SECTION = "Zero-shot grammar (BLiMP)"
PROBE_SECTION = "Polysemy: one vector per word, or one per context?"


def verdict(test: Comparison | None, expect: str) -> str:
    """The claim's verdict from a test of the row against its reference, ``expect`` being the paper's direction."""
    if test is None:
        return "not run"
    if test.verdict in ("better", "worse"):
        return "shown" if test.verdict == expect else "opposite"
    return "level" if test.verdict == "level" else "inconclusive"


def ledger(res: AblationResults, probe: dict | None, confidence: float,
           claims: list[dict] | None = None) -> list[Claim]:
    """Every claim of ``claims`` (``claims.yaml``) measured by the first of its measures the grid ran, each test
    read against the claim's margin."""
    out = []
    for spec in claims if claims is not None else load_claims():
        base = {"id": spec["id"], "claim": spec["claim"], "paper": spec["paper"], "margin": spec["margin"],
                "fixed_margin": spec.get("fixed_margin"),
                "level_shown": spec["level"] == "shown" if "level" in spec else None}
        found = next((c for m in spec["measure"] if (c := measure(res, probe, m, base, confidence))), None)
        if found and spec.get("requires") == "nsp_learned":
            pose_nsp(found, res)
        out.append(found or Claim(**base, verdict="not run", run_by=spec["run_by"]))
    return out


def pose_nsp(claim: Claim, res: AblationResults) -> None:
    """The NSP claim's precondition: the baseline's NSP head above its base rate on the fixed set's pairs, beyond
    noise. Where it is not (or no run measured it), the claim reads "not posed": NSP off against a head that never
    learned its task compares two models without NSP."""
    nsp = res.nsp
    if nsp is None:
        claim.precondition = "the baseline's NSP accuracy on the fixed set was not measured"
        claim.verdict = "not posed"
        return
    learned = nsp.vs_base.verdict == "better"
    claim.precondition = (f"the baseline's NSP head {100 * nsp.accuracy.mean:.1f}% on the fixed set's pairs against "
                          f"its base rate {100 * nsp.base_rate:.1f}% (always the more common label): "
                          f"{'learned' if learned else 'not learned'} ({nsp.vs_base.verdict})")
    if not learned:
        claim.verdict = "not posed"


def combined(verdicts: list[str]) -> str:
    """One verdict for a claim read on several tasks: theirs where they agree, else ``mixed`` (the report then
    gives each task's: a claim shown on one task and opposite on another is not averaged away)."""
    return verdicts[0] if len(set(verdicts)) == 1 else "mixed"


def per_task(res: AblationResults, fam_name: str, row_name: str | None, closest: bool,
             expect: str, margin: float) -> list[TaskVerdict]:
    """The claim's rows tested on every column of the suite (each column's own test against its reference, read
    against the claim's ``margin``, in the metric's units)."""
    suite = res.suite or {}
    fam = next((f for f in suite.get("families", []) if f["name"] == fam_name), None)
    if fam is None:
        return []
    out = []
    for i, col in enumerate(suite["columns"]):
        ran = [r for r in fam["rows"] if r["cells"][i].ran and r["cells"][i].vs is not None]
        row = max(ran, key=lambda r: r["cells"][i].mean) if closest and ran else \
            next((r for r in ran if r.get("key", r["name"]) == row_name), None)
        if row is None:
            continue
        test = with_margin(row["cells"][i].vs, margin)
        out.append(TaskVerdict(task=col["task_name"], metric=col["metric"], verdict=verdict(test, expect),
                               rows=f"{row['label']} vs {row['cells'][i].vs_row}", test=test))
    return out


def measure(res: AblationResults, probe: dict | None, m: dict, base: dict, confidence: float) -> Claim | None:
    """One way of measuring a claim, or None where the grid did not run it. A downstream claim of a grid with a
    suite is read on every task of it (``tasks``); its verdict combines theirs. Each test is read against the
    claim's margin (``base``), the fixed set's against its fixed-set margin."""
    if m.get("grammar"):
        return _grammar(res, m["expect"], base)
    if m.get("probe"):
        return _probe(probe, m["expect"], base, confidence)
    fam = next((f for f in res.families if f.name == m["family"]), None)
    if fam is None:
        return None
    ran = [r for r in fam.rows if r.ran and r.vs is not None]
    if m.get("closest"):
        row = max(ran, key=lambda r: r.primary.mean) if ran else None
    elif m.get("best_trained"):  # the row of these trained best: the highest fixed-set accuracy
        trained = [r for r in ran if r.key in m["best_trained"] and r.fixed is not None]
        row = max(trained, key=lambda r: r.fixed.mean) if trained else None
    else:
        row = next((r for r in ran if r.key == m.get("row")), None)
    if row is None:
        return None
    ref = next((r for r in fam.rows if r.label == row.vs_row), None)
    margin = in_units(base["margin"])
    tasks = per_task(res, fam.name, row.key, bool(m.get("closest")), m["expect"], margin)
    test = with_margin(row.vs, margin)
    claim = Claim(**base, verdict=verdict(test, m["expect"]), rows=f"{row.label} vs {row.vs_row}",
                  metric=f"{res.task} test {res.metric}", percent=res.metric in ("accuracy", "f1", "exact_match"),
                  test=test, section=fam.title, tasks=tasks if len(tasks) > 1 else None)
    if claim.tasks:
        claim.verdict = combined([t.verdict for t in tasks])
    if row.vs_fixed is not None and ref is not None and row.vs_fixed_row == ref.label:
        claim.fixed = with_margin(row.vs_fixed, in_units(base["fixed_margin"]))
        claim.fixed_verdict = verdict(claim.fixed, m["expect"])
        claim.along = gap_along(row, ref)
    if ref is not None and row.pretrain and ref.pretrain and row.pretrain.train_seconds and ref.pretrain.train_seconds:
        claim.cost_seconds = round(row.pretrain.train_seconds + ref.pretrain.train_seconds, 1)
    return claim


def gap_along(row: Row, ref: Row) -> list[list[float]] | None:
    """The row's mean fixed-set accuracy less its reference's at each validation step both have, in points."""
    def mean_curve(r: Row) -> dict[float, float]:
        curves = [c for c in (fixed.read_curve(p) for p in r.pretrain.plots_all or []) if c]
        steps = set.intersection(*[{p["step"] for p in c} for c in curves]) if curves else set()
        return {s: float(np.mean([p["acc_masked"] for c in curves for p in c if p["step"] == s])) for s in steps}

    a, b = mean_curve(row), mean_curve(ref)
    steps = sorted(set(a) & set(b))
    return [[int(s), round(100 * (a[s] - b[s]), 2)] for s in steps] or None


def _grammar(res: AblationResults, expect: str, base: dict) -> Claim | None:
    """The baseline on BLiMP against the n-gram floor the zero_shot_floor stage scored."""
    zs = res.zero_shot or {}
    if not zs.get("scored") or not zs.get("floor"):
        return None
    row = next((r for f in zs["families"] for r in f["rows"] if r["name"] == "baseline" and r.get("vs_floor")), None)
    if row is None:
        return None
    floor, test = zs["floor"]["overall"], with_margin(row["vs_floor"], in_units(base["margin"]))
    return Claim(**base, verdict=verdict(test, expect), rows=f"the baseline vs the n-gram floor "
                 f"({100 * floor:.1f}%)", metric="BLiMP accuracy, mean over paradigms", test=test,
                 section=GRAMMAR_SECTION)


def _probe(probe: dict | None, expect: str, base: dict, confidence: float) -> Claim | None:
    """The baseline's corrected self-similarity, last layer against the embedding layer, paired over the words."""
    model = (probe or {}).get("models", {}).get("baseline")
    if not model or not model.get("per_word") or model["layers"] < 2:
        return None
    words, top, aniso = sorted(model["per_word"]), model["layers"] - 1, model["anisotropy"]
    last = [model["per_word"][w][top] - aniso[top] for w in words]
    first = [model["per_word"][w][0] - aniso[0] for w in words]
    test = compare(last, first, test="paired", confidence=confidence, margin=in_units(base["margin"]))
    return Claim(**base, verdict=verdict(test, expect), rows=f"BERT (baseline): layer {top} vs layer 0, {len(words)} "
                 "words", metric="corrected self-similarity", percent=False, test=test, section=PROBE_SECTION)


def trend(along: list[list[float]] | None) -> str | None:
    """The fixed-set gap along pretraining in words: at half the steps and at the end."""
    if not along or len(along) < 2:
        return None
    mid, end = along[(len(along) - 1) // 2], along[-1]
    d = end[1] - mid[1]
    how = "widening" if d > 0.5 and end[1] > 0 or d < -0.5 and end[1] < 0 else \
        "narrowing" if abs(end[1]) < abs(mid[1]) - 0.5 else "steady"
    sign = str.maketrans("-", "−")  # a true minus, as every other difference of the report
    return f"{mid[1]:+.1f} at step {mid[0]}, {end[1]:+.1f} at step {end[0]} ({how})".translate(sign)


def numbers(test: Comparison, prefix: str = "") -> dict:
    """A test's numbers as ``summary.json`` holds them (``prefix``: ``fixed_`` for the fixed set's), with the
    margin's where the test was read against one."""
    out = {f"{prefix}diff": test.diff, f"{prefix}low": test.low, f"{prefix}high": test.high, f"{prefix}p": test.p}
    out.update({} if prefix else {"runs": test.n_pretrain})
    out[f"{prefix}runs_needed"] = test.seeds_needed
    if test.margin is not None:
        out.update({f"{prefix}margin": test.margin, f"{prefix}tost_low": test.tost_low,
                    f"{prefix}tost_high": test.tost_high, f"{prefix}tost_p": test.tost_p,
                    f"{prefix}runs_needed_level": test.seeds_needed_level})
    return out


def summary(claims: list[Claim]) -> dict[str, dict]:
    """The ledger as ``summary.json`` holds it: per claim its verdict and numbers."""
    out = {}
    for c in claims:
        entry: dict = {"verdict": c.verdict}
        if c.test is not None:
            entry.update({"rows": c.rows, "metric": c.metric, **numbers(c.test), "percent": c.percent})
            if c.section == PROBE_SECTION:  # the probe's sides are its words, not pretraining runs
                entry["unit"] = "words"
        if c.tasks:
            entry["tasks"] = {t.task: {"verdict": t.verdict, "rows": t.rows, "metric": t.metric, **numbers(t.test)}
                              for t in c.tasks}
        if c.fixed is not None:
            entry.update({"fixed_verdict": c.fixed_verdict, **numbers(c.fixed, "fixed_")})
        if c.along:
            entry["fixed_gap_along"] = c.along
        if c.run_by:
            entry["run_by"] = c.run_by
        if c.precondition:
            entry["precondition"] = c.precondition
        if c.level_shown is not None:
            entry["level_shown"] = c.level_shown
        out[c.id] = entry
    return out


def cell(entry: dict) -> str:
    """A claim's verdict and difference as one short cell of the side-by-side table (read on several tasks:
    each task's), and the precondition it was posed on, if it has one. A level reading shows the interval that lies
    inside the margin (the TOST's, 90% at 95%), and whether level is the paper's direction."""
    if "diff" not in entry:
        return "not run"
    if entry["verdict"] == "not posed":
        return f"not posed: {entry.get('precondition', 'its precondition does not hold')}"
    def num(value: float) -> str:
        return f"{100 * value:+.1f}" if entry.get("percent", True) else f"{value:+.3f}"

    def size(value: float) -> str:
        return f"±{100 * value:g}" if entry.get("percent", True) else f"±{value:g}"

    def one(e: dict) -> str:
        if e["verdict"] == "level":
            flag = {True: ", the paper's direction", False: ", not the paper's direction"}.get(entry.get("level_shown"),
                                                                                              "")
            return (f"level ({num(e['diff'])} [{num(e['tost_low'])}, {num(e['tost_high'])}] within "
                    f"{size(e['margin'])}){flag}")
        text = f"{e['verdict']} ({num(e['diff'])}"
        text += f" [{num(e['low'])}, {num(e['high'])}])" if e.get("low") is not None else ")"
        n, n_level, unit = e.get("runs_needed"), e.get("runs_needed_level"), entry.get("unit", "runs")
        if e["verdict"] == "inconclusive" and n_level and (not n or n_level < n):
            text += f", ~{n_level} {unit} a side to show it level within {size(e['margin'])}"
        elif e["verdict"] == "inconclusive" and n:
            text += f", ~{n} {unit} a side"
        return text

    text = "; ".join(f"{task}: {one(e)}" for task, e in entry["tasks"].items()) if entry.get("tasks") else one(entry)
    if entry.get("fixed_verdict"):
        text += f"; fixed set {entry['fixed_verdict']} ({100 * entry['fixed_diff']:+.1f})"
    if entry.get("precondition"):
        text += f"; posed: {entry['precondition']}"
    return text


def side_by_side(summaries: dict[str, dict], claims: list[dict] | None = None) -> str:
    """A Markdown table: one row per claim, one column per report (its ``summary.json``)."""
    claims = claims if claims is not None else load_claims()
    names = list(summaries)
    lines = ["| claim | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for spec in claims:
        cells = [cell(summaries[n].get("ledger", {}).get(spec["id"], {"verdict": "not run"})) for n in names]
        lines.append(f"| {spec['claim']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(args: list[str]) -> None:
    if not args or any("=" not in a for a in args):
        sys.exit("usage: python -m pipeline.report.ledger NAME=path/to/summary.json [NAME=...]")
    print(side_by_side({name: read_json(Path(path)) for name, path in (a.split("=", 1) for a in args)}), end="")


if __name__ == "__main__":
    main(sys.argv[1:])
