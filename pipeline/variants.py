"""Ablation variants and the runs of a grid: named settings on top of the baseline, each with its own outputs.

A family (``conf/family/<name>.yaml``) names variants, each a list of
Hydra-style overrides (``masking.mlm_probability=0.40``). A grid
(``conf/grid/<name>.yaml``) lists the variants it pretrains and how many
pretraining runs (seeds) each gets. From those two, ``runs`` and ``examples``
(the OmegaConf resolvers ``lab.runs`` and ``lab.examples``, composed into
``params.yaml``) give every run of the grid -- a variant and a pretraining seed,
the baseline's first -- with the folders it reads and writes; ``dvc.yaml``
iterates over them, so the baseline and each variant are one stage definition.
Run ``k`` of a variant trains from ``seed + k`` (initial weights, data order,
masks, dropout) on the same examples; its fine-tuning seeds are the same as
every other run's, so runs pair up across variants.

``variant=<name>`` on a data or training stage applies a variant's settings and
moves the stage's outputs to the same folders (``apply_variant``), so the DVC
stages, a hand-run ``python -m stages.pretrain variant=<name>`` and a Hydra
sweep over ``variant=...`` run the same thing. A variant that changes
``pairs.*`` settings trains on examples of its own (its make_pairs run);
every other variant trains on the baseline's.

With a task suite (``suite=<name>``, ``conf/suite``) the finetune stage runs once per (run, task):
``finetunes`` (the resolver ``lab.finetunes``) lists those stages, and ``suite_task=<task>`` on the finetune
stage applies the suite's task, its modes and its folder, ``<run metrics>/tasks/<task>`` (``apply_suite_task``).

In a Hydra multirun (``-m``) every job writes its outputs under its own sweep
folder instead of the fixed DVC paths, so parallel jobs never overwrite each
other or an output DVC tracks; each job is still one MLflow run.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf, open_dict

from pipeline.conf import CONF_DIR, conf_hash
from pipeline.errors import ConfigError
from pipeline.names import SEED_FREE
from pipeline.settings import GridSettings
from pipeline.sweep import chosen_rate, pilot_folder, pilot_name, pilot_overrides, sweep_folder

BASELINE = "baseline"
# What each stage writes, by paths.* key: the keys a variant or a sweep job moves.
STAGE_OUTPUTS = {
    "prepare_corpus": ("corpus", "metrics"),
    "train_wordpiece": ("tokenizer", "metrics"),
    "make_pairs": ("pairs", "metrics"),
    "eval_set": ("eval_set",),
    "pretrain": ("pretrain", "metrics", "plots"),
    "pilot": ("metrics", "plots"),
    "finetune": ("metrics",),
    "probe": ("metrics",),
    "zero_shot": ("metrics",),
    "zero_shot_floor": ("metrics",),
    "report": ("reports",),
}
_MISSING = object()


def catalogue(cfg: DictConfig) -> dict[str, list[str]]:
    """``{variant: its overrides}`` over every family of ``cfg.family`` (names are unique across families)."""
    return {name: list(overrides) for fam in cfg.family.values() for name, overrides in fam.items()}


def find_variant(cfg: DictConfig, name: str) -> list[str]:
    """The overrides of variant ``name``; a ``ConfigError`` listing the known names if there is none."""
    variants = catalogue(cfg)
    if name not in variants:
        raise ConfigError(f"variant={name!r} is not defined in any conf/family file: expected one of "
                          f"{', '.join(sorted(variants))}")
    return variants[name]


def data_overrides(overrides: list[str]) -> list[str]:
    """What changes the examples (``pairs.*``, another ``pairs=`` preset): a variant with any has its own make_pairs."""
    return [o for o in overrides if o.startswith(("pairs.", "pairs="))]


def run_name(variant: str, pretrain_seed: int) -> str:
    """A run's name: the variant's for its first pretraining seed, ``<variant>-s<k>`` for the others."""
    return variant if not pretrain_seed else f"{variant}-s{pretrain_seed}"


def run_paths(variant: str, pretrain_seed: int, overrides: list[str], paths: Mapping[str, Any]) -> dict[str, str]:
    """Where a run reads its examples and writes its outputs (the baseline's first run: the ``paths`` themselves).

    A variant's examples do not depend on the pretraining seed: every run of it reads the same ones.
    """
    if variant == BASELINE and not pretrain_seed:
        return {k: str(paths[k]) for k in ("pairs", "pretrain", "metrics", "plots")}
    folders, name = paths["variants"], run_name(variant, pretrain_seed)
    return {"pairs": f"{folders['data']}/{variant}" if data_overrides(overrides) else str(paths["pairs"]),
            "pretrain": f"{folders['models']}/{name}", "metrics": f"{folders['metrics']}/{name}",
            "plots": f"{folders['plots']}/{name}"}


def run_modes(cfg: DictConfig, variant: str, pretrain_seed: int) -> list[str]:
    """How a run is fine-tuned: every configured mode for the baseline, the grid's for a variant, less
    the modes that do not use the pretrained weights (from scratch, TF-IDF) after the first pretraining seed."""
    modes = list(cfg.finetune.modes if variant == BASELINE else cfg.grid.finetune.modes)
    return [m for m in modes if not pretrain_seed or m not in SEED_FREE]


def seeds_of(grid: GridSettings, variant: str) -> int:
    """How many pretraining runs (seeds) the grid gives ``variant``."""
    return grid.seeds.baseline if variant == BASELINE else grid.seeds.variants


# A variant whose overrides touch these groups has another network or pretraining objective than the baseline:
# with ``grid.finetune.choose: model`` it chooses its own fine-tuning settings (docs/statistics.md).
OWN_NETWORK = ("model", "objective")


def chooses_own(grid: GridSettings, variant: str, overrides: list[str]) -> bool:
    """Whether ``variant``'s first run chooses its fine-tuning settings on dev (else it takes the baseline's):
    always with ``grid.finetune.choose: variant``; with ``model``, where its network or objective differs."""
    if variant == BASELINE or grid.finetune.choose == "variant":
        return True
    return any(o.split("=", 1)[0].split(".", 1)[0].lstrip("+~") in OWN_NETWORK for o in overrides)


def grid_runs(cfg: DictConfig) -> dict[str, dict]:
    """Every pretraining run of the grid, the baseline's first: its variant, seed, settings, modes and folders,
    and ``chooser``, the run whose fine-tuning chose its settings on dev (the grid's settings checked first:
    composing conf/ lists the runs before any stage validates it)."""
    grid = GridSettings.read(cfg.grid)
    runs = {}
    for variant in [BASELINE, *grid.pretrain]:
        overrides = [] if variant == BASELINE else find_variant(cfg, variant)
        chooser = run_name(variant if chooses_own(grid, variant, overrides) else BASELINE, 0)
        sweep = sweep_folder(str(cfg.paths.metrics), variant) if grid.sweep and variant in grid.sweep.rows else None
        for k in range(seeds_of(grid, variant)):
            at = run_paths(variant, k, overrides, cfg.paths)
            # What its learning rate comes from, a DVC dependency: its row's pilots, or (a row not swept) its
            # examples again (a dependency it already has)
            runs[run_name(variant, k)] = {"variant": variant, "pretrain_seed": k, "set": overrides,
                                          "modes": run_modes(cfg, variant, k), "chooser": chooser,
                                          "rate_from": sweep or at["pairs"], **at}
    return runs


def grid_pilots(cfg: DictConfig) -> dict[str, dict]:
    """Every pilot of the grid's learning-rate sweep (``pipeline.sweep``), ``{<row>-lr<rate>: {variant, lr, set,
    pairs, out}}``: its row, its peak rate, the row's settings (so that a pilot reruns when they change), the
    examples its row trains on and its folder; none without ``grid.sweep``."""
    grid = GridSettings.read(cfg.grid)
    if not grid.sweep:
        return {}
    runs = grid_runs(cfg)
    return {pilot_name(row, lr): {"variant": row, "lr": float(lr), "set": runs[run_name(row, 0)]["set"],
                                  "pairs": runs[run_name(row, 0)]["pairs"],
                                  "out": pilot_folder(str(cfg.paths.metrics), row, lr)}
            for row in grid.sweep.rows for lr in grid.sweep.lrs}


def suite_modes(cfg: DictConfig, task: str, modes: list[str]) -> list[str]:
    """The modes a run fine-tunes suite task ``task`` in: the suite's list for it (``suite.modes.<task>``) where
    it has one, else the run's own; modes without pretraining behind them only where the run has them too."""
    chosen = (cfg.get("suite") or {}).get("modes", {}).get(task)
    if chosen is None:
        return list(modes)
    return [m for m in chosen if m not in SEED_FREE or m in modes]


def finetune_runs(cfg: DictConfig) -> dict[str, dict]:
    """Every finetune stage of the grid: one per run without a suite (keyed by the run's name, writing
    ``<run metrics>/finetune.json``), one per (run, task of the suite) with one (``<run>-<task>``, writing
    ``<run metrics>/tasks/<task>/``, its metrics and any predictions)."""
    suite = cfg.get("suite")
    runs = grid_runs(cfg)
    out = {}
    for name, run in runs.items():
        common = {"variant": run["variant"], "pretrain_seed": run["pretrain_seed"], "run": name,
                  "pretrain": run["pretrain"], "set": run["set"], "chooser": run["chooser"]}
        args = f"variant={run['variant']} pretrain_seed={run['pretrain_seed']}"  # the stage's overrides
        chooser = runs[run["chooser"]]
        if "scratch" in run["modes"]:  # from scratch runs a seed a baseline run (scratch_seeds): DVC reads it here
            common["baseline_runs"] = cfg.grid.seeds.baseline
        if not suite:
            out[name] = {**common, "args": args, "task": None, "task_key": "task", "modes": run["modes"],
                         "metrics": run["metrics"], "out": f"{run['metrics']}/finetune.json",
                         "choices": _choices(name, run, chooser, f"{chooser['metrics']}/finetune.json")}
            continue
        for task in suite.tasks:
            folder = f"{run['metrics']}/tasks/{task}"
            out[f"{name}-{task}"] = {**common, "args": f"{args} suite_task={task}", "task": task,
                                     "task_key": f"suite.tasks.{task}", "modes": suite_modes(cfg, task, run["modes"]),
                                     "metrics": folder, "out": folder,
                                     "choices": _choices(name, run, chooser, f"{chooser['metrics']}/tasks/{task}")}
    return out


def _choices(name: str, run: dict, chooser: dict, out: str) -> str:
    """What a finetune stage reads its choices from, a DVC dependency: the choosing run's output; a run that
    chooses its own names its pretrained model again (a dependency it already has)."""
    return run["pretrain"] if run["chooser"] == name else out


def zero_shot_runs(cfg: DictConfig) -> dict[str, dict]:
    """The runs the zero_shot stage scores: every run of the grid once BLiMP is configured (``zero_shot.data``),
    none before (no stage that would only start Python to say so)."""
    return grid_runs(cfg) if (cfg.get("zero_shot") or {}).get("data") else {}


def grid_examples(cfg: DictConfig) -> dict[str, dict]:
    """Every example set make_pairs writes for the grid: the baseline's, and one per variant with pairs.* settings."""
    out = {}
    for run in grid_runs(cfg).values():
        if not run["pretrain_seed"] and (run["variant"] == BASELINE or data_overrides(run["set"])):
            out[run["variant"]] = {"variant": run["variant"], "set": data_overrides(run["set"]),
                                   "pairs": run["pairs"], "metrics": run["metrics"]}
    return out


def grid_folders(cfg: DictConfig) -> dict[str, str]:
    """Where the probe and the report find the models and metrics of every run beyond the baseline's first:
    ``paths.variants``; with no such run (a grid of one pretraining run) nothing is written there, and a
    dvc.yaml dependency on it would stop the pipeline after all its compute, so the baseline's own folders
    stand in (a dependency the stage already has)."""
    others = len(grid_runs(cfg)) > 1
    return {kind: str(cfg.paths.variants[kind] if others else cfg.paths[own])
            for kind, own in (("models", "pretrain"), ("metrics", "metrics"))}


def register_resolvers() -> None:
    """``${lab.runs:}``, ``${lab.finetunes:}``, ``${lab.examples:}``, ``${lab.pilots:}``, ``${lab.zero_shot_runs:}``,
    ``${lab.grid_folders:}`` and ``${lab.conf_hash:}`` for conf/config.yaml (also found by DVC through
    hydra_plugins/)."""
    OmegaConf.register_new_resolver("lab.conf_hash", lambda: conf_hash(), replace=True)
    OmegaConf.register_new_resolver("lab.runs", lambda *, _root_: OmegaConf.create(grid_runs(_root_)),
                                  replace=True)
    OmegaConf.register_new_resolver("lab.finetunes", lambda *, _root_: OmegaConf.create(finetune_runs(_root_)),
                                  replace=True)
    OmegaConf.register_new_resolver("lab.pilots", lambda *, _root_: OmegaConf.create(grid_pilots(_root_)),
                                  replace=True)
    OmegaConf.register_new_resolver("lab.examples", lambda *, _root_: OmegaConf.create(grid_examples(_root_)),
                                  replace=True)
    OmegaConf.register_new_resolver("lab.zero_shot_runs", lambda *, _root_: OmegaConf.create(zero_shot_runs(_root_)),
                                  replace=True)
    OmegaConf.register_new_resolver("lab.grid_folders", lambda *, _root_: OmegaConf.create(grid_folders(_root_)),
                                  replace=True)


def with_overrides(cfg: DictConfig, name: str, overrides: list[str], conf_dir: Path = CONF_DIR) -> DictConfig:
    """``cfg`` with a variant's overrides applied, in Hydra's override grammar.

    ``group=choice`` (``model=mini``, ``objective=ltr``) replaces the whole group
    by the preset conf/ defines for it, as Hydra composes it; ``key=value`` sets
    a key that must already exist (a typo is an error naming the variant and the
    entry). The result is a new config; ``cfg`` is left as it is.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except HydraException as e:
        raise ConfigError(f"variant {name}: its settings {list(overrides)} are not Hydra overrides ({e})") from None
    out = copy.deepcopy(cfg)
    for item, o in zip(overrides, parsed):
        key = o.key_or_group
        if o.is_add() or o.is_delete() or o.package:
            raise ConfigError(f"variant {name}: set entry {item!r} is not allowed: expected key=value or group=choice")
        if "." not in key and (conf_dir / key).is_dir():  # a config group: the preset, as Hydra composes it
            preset = _group_preset(conf_dir, key, str(o.value()), name)
            with open_dict(out):
                out[key] = preset
        elif OmegaConf.select(out, key, default=_MISSING) is _MISSING:
            raise ConfigError(f"variant {name}: set entry {item!r} is not allowed: expected key=value with a key "
                              "that exists in the configuration, or group=choice of a conf/ group")
        else:
            OmegaConf.update(out, key, o.value(), merge=False)
    return out


def _group_preset(conf_dir: Path, group: str, choice: str, name: str) -> DictConfig:
    """conf/'s ``group=choice`` as Hydra composes it (inside a running Hydra app, with that app's search path)."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException

    if not (conf_dir / group / f"{choice}.yaml").is_file():
        known = sorted(p.stem for p in (conf_dir / group).glob("*.yaml"))
        raise ConfigError(f"variant {name}: {group}={choice} is not allowed: expected one of {', '.join(known)}")
    try:
        if GlobalHydra.instance().is_initialized():
            return compose("config", overrides=[f"{group}={choice}"])[group]
        with initialize_config_dir(str(conf_dir), version_base="1.3"):
            return compose("config", overrides=[f"{group}={choice}"])[group]
    except HydraException as e:
        raise ConfigError(f"variant {name}: {group}={choice} does not compose ({e})") from None


def apply_variant(cfg: DictConfig, stage: str, swept: bool = True) -> DictConfig:
    """``cfg`` with its run's settings and output paths applied: ``variant``'s settings, the folders of
    its ``pretrain_seed`` (unchanged for the baseline's first run), a pilot's (``pilot_lr``) or a swept row's
    learning rate (``pipeline.sweep``; ``swept=False``: as set, before any pilot has run), and with ``suite_task``
    set (the finetune stage of a suite) that task of the suite, its modes and its folder (``finetune_runs``)."""
    task = cfg.get("suite_task")
    if task is None:
        return _apply_run(cfg, stage, swept)
    if stage != "finetune":
        raise ConfigError(f"suite_task={task}: only the finetune stage runs a suite's tasks; run the {stage} stage "
                          "without suite_task=")
    return apply_suite_task(_apply_run(cfg, stage), task)


def apply_suite_task(cfg: DictConfig, task: str) -> DictConfig:
    """``cfg`` fine-tuning on task ``task`` of ``cfg.suite`` (in its modes), writing under ``<metrics>/tasks/<task>``."""
    suite = cfg.get("suite")
    if not suite:
        raise ConfigError(f"suite_task={task}: no suite is chosen: expected suite=<name> too (conf/suite: "
                          f"{', '.join(sorted(p.stem for p in (CONF_DIR / 'suite').glob('*.yaml')))})")
    if task not in suite.tasks:
        raise ConfigError(f"suite_task={task!r} is not a task of suite {suite.name}: expected one of "
                          f"{', '.join(suite.tasks)}")
    out = copy.deepcopy(cfg)
    with open_dict(out):
        out.task = copy.deepcopy(suite.tasks[task])
        out.finetune.modes = suite_modes(cfg, task, list(cfg.finetune.modes))
        out.paths.metrics = f"{cfg.paths.metrics}/tasks/{task}"
    return out


def _apply_run(cfg: DictConfig, stage: str, swept: bool = True) -> DictConfig:
    variant, k = cfg.get("variant") or BASELINE, cfg.get("pretrain_seed") or 0
    if cfg.get("pilot_lr") is not None:
        return _apply_pilot(cfg, stage, variant, k)
    if stage == "pilot":
        raise ConfigError("pilot_lr is null: expected the pilot's peak learning rate (pilot_lr=3e-4, one of "
                          "grid.sweep.lrs); a full run is the pretrain stage's")
    out = _run_settings(cfg, stage, variant, k)
    return _swept_rate(out, variant, str(cfg.paths.metrics)) if stage == "pretrain" and swept else out


def _run_settings(cfg: DictConfig, stage: str, variant: str, k: int) -> DictConfig:
    if variant == BASELINE and not k:
        return cfg
    overrides = [] if variant == BASELINE else find_variant(cfg, variant)
    at = run_paths(variant, k, overrides, cfg.paths)
    if stage == "make_pairs":
        if k:
            raise ConfigError(f"pretrain_seed={k}: make_pairs writes the same examples for every pretraining seed; "
                              "run it without pretrain_seed=")
        if not data_overrides(overrides):
            raise ConfigError(f"variant={variant}: it changes no pairs.* setting, so it trains on the baseline's "
                              f"examples ({cfg.paths.pairs}); it has no make_pairs stage of its own")
        # All its settings apply (they are validated together); only the examples are written.
        paths = {"pairs": at["pairs"], "metrics": at["metrics"]}
    elif stage == "pretrain":
        paths = at
    elif stage == "finetune":
        overrides = [*overrides, f"finetune.modes={run_modes(cfg, variant, k)}"]
        paths = {"pretrain": at["pretrain"], "metrics": at["metrics"]}
    elif stage == "zero_shot":
        paths = {"pretrain": at["pretrain"], "metrics": at["metrics"]}
    else:
        raise ConfigError(f"variant={variant}: the {stage} stage has no variants (only make_pairs, pretrain, "
                          "finetune and zero_shot do); run it without variant=")
    return OmegaConf.merge(with_overrides(cfg, variant, overrides), {"paths": paths})


def _apply_pilot(cfg: DictConfig, stage: str, variant: str, k: int) -> DictConfig:
    """A pilot of the learning-rate sweep (``pilot_lr``): the row's first run at that peak rate for the sweep's
    share of the steps, writing its record and curves to its pilot folder (``pipeline.sweep``)."""
    lr = float(cfg.pilot_lr)
    if stage not in ("pilot", "pretrain"):
        raise ConfigError(f"pilot_lr={lr:g}: only the pilot stage (or the pretrain stage) runs a pilot of the "
                          f"learning-rate sweep; run the {stage} stage without pilot_lr=")
    if k:
        raise ConfigError(f"pilot_lr={lr:g} with pretrain_seed={k}: a row is piloted on its first run only; run it "
                          "without pretrain_seed=")
    overrides = [] if variant == BASELINE else find_variant(cfg, variant)
    out = str(pilot_folder(str(cfg.paths.metrics), variant, lr))
    at = run_paths(variant, 0, overrides, cfg.paths)
    return OmegaConf.merge(with_overrides(cfg, variant, overrides), pilot_overrides(cfg, lr),
                           {"paths": {"pairs": at["pairs"], "metrics": out, "plots": out}})


def _swept_rate(cfg: DictConfig, variant: str, metrics_root: str) -> DictConfig:
    """A run of a swept row at the peak rate its pilots chose (``pipeline.sweep.chosen_rate``), over any rate its
    variant sets; other rows as set."""
    sweep = cfg.grid.get("sweep")
    if not sweep or variant not in sweep.rows:
        return cfg
    lr, _ = chosen_rate(sweep_folder(metrics_root, variant), list(sweep.lrs), variant)
    return OmegaConf.merge(cfg, {"optim": {"lr": lr}})


def sweep_outputs(cfg: DictConfig, stage: str) -> DictConfig:
    """In a Hydra multirun job, ``cfg`` with the stage's outputs moved into the job's sweep folder."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return cfg
    job_dir = HydraConfig.get().runtime.output_dir
    return OmegaConf.merge(cfg, {"paths": {k: f"{job_dir}/{k}" for k in STAGE_OUTPUTS.get(stage, ())}})
