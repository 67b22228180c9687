"""Fine-tuning, every arm at its best: each choosing run's candidates on dev (``protocol.choices``), what was
chosen and where it stands in its grid, and the test score at it.
"""
from __future__ import annotations

from pipeline.finetune.modes import mode_label
from pipeline.report.cells import fmt, percent, settings_text
from pipeline.report.doc import Doc, Sources
from pipeline.report.model import AblationResults
from pipeline.report.style import COLORS, legend, plt
from pipeline.variants import BASELINE


def write(doc: Doc, src: Sources) -> None:
    if src.res.choices:
        choices_section(doc, src.res)


def choices_section(doc: Doc, res: AblationResults) -> None:
    """Every arm at its best: each choosing run's candidates per mode and task, their dev scores, what was
    chosen, and the test score at it."""
    doc.heading("Fine-tuning: every arm at its best")
    doc.para("Each arm's settings are chosen on the dev split of the task's held-out examples, the same way for "
             "every arm: one run per candidate (fine-tuned and from scratch: each peak learning rate crossed with "
             "each pooling -- token: [CLS] through the pooler, a left-to-right model's last token; mean: the mean "
             "over the text's tokens; heads on frozen features likewise; TF-IDF: its regularisation and n-gram "
             "range), with the first fine-tuning seed; a rate chosen on its grid's edge extends the grid one step past "
             "it (by the grid's ratio there, at the chosen pooling) until the choice is inside or on the stated "
             "limit (finetune.lr_bounds), and TF-IDF's C likewise at its n-grams (finetune.tfidf.c_bounds); the "
             "best on dev is kept, and every seed at it is scored on "
             "the test split, which no choice saw. Each run listed chose its own; every other run of the grid takes "
             "the choice of its chooser (params.yaml's runs.<name>.chooser: its variant's first run, or the "
             "baseline's first for a variant of the same network and objective). From scratch starts from the "
             "architecture's own initialisation.", cls="note")
    for entry in res.choices:
        metric = entry["metric"]
        rows = []
        for run, modes in entry["runs"].items():
            for mode, c in modes.items():
                grid = "; ".join(f"{settings_text(g)}: {fmt(metric, g['dev'])}"
                                 for g in sorted(c["grid"], key=lambda g: (str(g.get("pooling")), g.get("lr", 0),
                                                                           g.get("ngrams", 0), g.get("c", 0))))
                rows.append([run, mode_label(mode), grid, settings_text(c["chosen"]) + edge_text(c),
                             f"{fmt(metric, c['test'])} ({c['n']} {'run' if c['n'] == 1 else 'seeds'})"])
        doc.table(["run", "mode", f"dev {metric} of each candidate", "chosen", f"test {metric} at it"],
                  rows, caption=f"{entry['task_name']}: the choice of each arm's settings on dev")
        if BASELINE in entry["runs"] and any(c["grid"] and "lr" in c["grid"][0]
                                             for c in entry["runs"][BASELINE].values()):
            doc.figure(f"choices_{entry['task_name']}.png", choices_figure(entry, BASELINE),
                       f"{entry['task_name']}: dev score against the learning rate, each mode of the baseline")


def edge_text(choice: dict) -> str:
    """Where the chosen learning rate (TF-IDF: its C) stands: on the bound of finetune.lr_bounds (tfidf.c_bounds) the
    protocol may not pass (the best may lie beyond it), or inside a grid it extended, saying how far. A choice made
    before grids were extended (no ``extended`` in its JSON) is warned of where it is the grid's lowest or highest
    rate."""
    lr = choice["chosen"].get("lr")
    key = "lr" if lr is not None or "c" not in choice["chosen"] else "c"
    if "extended" in choice:
        if choice["at_limit"]:
            return f" (at the stated limit {settings_text({key: choice['chosen'][key]})})"
        if not choice["extended"]:
            return ""
        last = choice["extended"][-1]  # the steps go one way, from the edge the grid chose on: the last is farthest
        return (f" (extended {'below' if last['edge'] == 'lowest' else 'above'} the grid to "
                f"{settings_text({key: last[key]})}; interior)")
    lrs = sorted({g["lr"] for g in choice["grid"] if "lr" in g})
    if lr is None or len(lrs) < 2 or lr not in (lrs[0], lrs[-1]):
        return ""
    return f" (the grid's {'lowest' if lr == lrs[0] else 'highest'} rate)"


def choices_figure(entry: dict, run: str):
    """One task's choice on dev: each mode's dev score against the candidate learning rate (a log axis), one line
    per mode and pooling, the chosen candidate ringed."""
    modes = {m: c for m, c in entry["runs"][run].items() if c["grid"] and "lr" in c["grid"][0]}
    fig, ax = plt.subplots(figsize=(6.5, 3.8))
    scale = 100 if percent(entry["metric"]) else 1
    for j, (mode, c) in enumerate(modes.items()):
        poolings = list(dict.fromkeys(g.get("pooling") for g in c["grid"]))
        for k, pooling in enumerate(poolings):
            points = sorted((g["lr"], scale * g["dev"]) for g in c["grid"] if g.get("pooling") == pooling)
            label = f"{mode_label(mode)}{f', {pooling}' if pooling and len(poolings) > 1 else ''}"
            ax.plot(*zip(*points), marker="o", ms=4, color=COLORS[j % len(COLORS)], ls="-" if k == 0 else "--",
                    label=label)
        chosen = next(g for g in c["grid"] if all(g.get(key) == v for key, v in c["chosen"].items()))
        ax.plot([chosen["lr"]], [scale * chosen["dev"]], marker="o", ms=11, mfc="none", mec="black", mew=1.2)
    ax.set_xscale("log")
    ax.set(xlabel="peak learning rate", title=f"{entry['task_name']}: the choice on dev (ringed: chosen)",
           ylabel=f"dev {entry['metric']} ({'%' if percent(entry['metric']) else 'correlation'})")
    ax.grid(alpha=0.3)
    legend(ax)
    fig.tight_layout()
    return fig
