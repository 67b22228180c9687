"""Each config group's settings: a frozen dataclass that reads the group's node, checks it, and is what the
code uses; here, every group in the order the validator reads them (``GROUPS``) and ``read_groups``, which
reads them all into a ``Lab``.

One module per family of groups: ``base`` the pattern every group follows (``Settings``), ``data`` (corpus,
tokenizer, pairs, masking, eval_set), ``pretrain`` (objective, model, optim, trainer), ``finetune`` (finetune,
task, suite), ``grid`` (grid, report, probe, zero_shot, tracking) and ``run`` (the top-level keys, paths, the
grid's runs, runtime). The rules that span groups (the position table, the pair format NSP needs, a grid's
variants, the model against its objective and vocabulary) are ``pipeline.config.validate``'s, which builds
every group's settings at the start of each stage and in the check_conf stage, before any compute. Torch-free.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from pipeline.settings.base import Settings, plain_node
from pipeline.settings.data import CorpusSettings, EvalSetSettings, MaskingSettings, PairsSettings, TokenizerSettings
from pipeline.settings.finetune import FinetuneSettings, SuiteSettings, TaskSettings
from pipeline.settings.grid import (CONFIDENCE, GridSettings, ProbeSettings, ReportSettings, TrackingSettings,
                                    ZeroShotSettings)
from pipeline.settings.pretrain import ModelSettings, ObjectiveSettings, OptimSettings, TrainerSettings
from pipeline.settings.run import PRECISIONS, GridRun, PathsSettings, RunSettings, RuntimeSettings
from pipeline.values import shown


def as_plain(settings: Settings) -> dict:
    """A group's settings as the plain mapping they were read from (lists, not tuples), for code that takes JSON."""
    return shown(asdict(settings))


# Every group with settings, in the order the validator reads them ("run": the top-level keys).
GROUPS: dict[str, type[Settings]] = {
    "run": RunSettings, "paths": PathsSettings, "corpus": CorpusSettings, "tokenizer": TokenizerSettings,
    "pairs": PairsSettings, "eval_set": EvalSetSettings, "masking": MaskingSettings, "objective": ObjectiveSettings,
    "model": ModelSettings, "optim": OptimSettings, "trainer": TrainerSettings, "finetune": FinetuneSettings,
    "task": TaskSettings, "suite": SuiteSettings, "grid": GridSettings, "report": ReportSettings,
    "probe": ProbeSettings, "zero_shot": ZeroShotSettings, "tracking": TrackingSettings, "runtime": RuntimeSettings}


@dataclass(frozen=True)
class Lab:
    """A stage's settings once checked: what every stage's ``run`` receives and hands down.

    One attribute per group of ``GROUPS`` (None where the composed config has none: a null suite, or a test's
    partial config); ``runs``, the grid's pretraining runs by name; ``resolved``, the run's resolved settings as
    plain values (no catalogue, no secrets), which the tracker records and nothing reads a setting from."""
    run: RunSettings | None = None
    paths: PathsSettings | None = None
    corpus: CorpusSettings | None = None
    tokenizer: TokenizerSettings | None = None
    pairs: PairsSettings | None = None
    eval_set: EvalSetSettings | None = None
    masking: MaskingSettings | None = None
    objective: ObjectiveSettings | None = None
    model: ModelSettings | None = None
    optim: OptimSettings | None = None
    trainer: TrainerSettings | None = None
    finetune: FinetuneSettings | None = None
    task: TaskSettings | None = None
    suite: SuiteSettings | None = None
    grid: GridSettings | None = None
    report: ReportSettings | None = None
    probe: ProbeSettings | None = None
    zero_shot: ZeroShotSettings | None = None
    tracking: TrackingSettings | None = None
    runtime: RuntimeSettings | None = None
    runs: dict[str, GridRun] = field(default_factory=dict)
    resolved: dict = field(default_factory=dict)

    def get(self, group: str) -> Settings | None:
        return getattr(self, group)

    @property
    def run_name(self) -> str:
        """This run's name in the grid: ``baseline``, ``<variant>``, ``<variant>-s<k>`` for its further runs."""
        k = self.run.pretrain_seed
        return f"{self.run.variant or 'baseline'}{f'-s{k}' if k else ''}"


def read_groups(cfg: Mapping[str, Any], resolved: dict | None = None) -> Lab:
    """The settings of every group ``cfg`` has (a null suite is none), each checked on its own; the grid's runs;
    ``resolved``: what the tracker records (``Lab.resolved``)."""
    out = {}
    for name, cls in GROUPS.items():
        node = cfg if name == "run" else cfg.get(name)
        if node is not None and (name != "run" or "seed" in cfg):
            out[name] = cls.read(node)
    runs = cfg.get("runs")
    runs = {} if runs is None else {name: GridRun.read(spec, f"runs.{name}") for name, spec in plain_node(runs).items()}
    return Lab(**out, runs=runs, resolved=resolved or {})


__all__ = ["Settings", "Lab", "GROUPS", "read_groups", "as_plain", "GridRun", "CONFIDENCE", "PRECISIONS",
           "RunSettings", "PathsSettings", "CorpusSettings", "TokenizerSettings", "PairsSettings", "EvalSetSettings",
           "MaskingSettings", "ObjectiveSettings", "ModelSettings", "OptimSettings", "TrainerSettings",
           "FinetuneSettings", "TaskSettings", "SuiteSettings", "GridSettings", "ReportSettings", "ProbeSettings",
           "ZeroShotSettings", "TrackingSettings", "RuntimeSettings"]
