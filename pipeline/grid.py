"""Ablation variants: named settings on top of the baseline, each with its own outputs.

A family (``conf/family/<name>.yaml``) defines variants, each ``set``, a list
of Hydra-style overrides (``masking.mlm_probability=0.40``), and ``pairs``, the
examples it trains on. ``variant=<name>`` on any data or training stage applies
them and moves the stage's outputs to ``paths.variants.<kind>/<name>``, so
the DVC ``*_variant`` stages, a hand-run ``python -m stages.pretrain
variant=<name>`` and a Hydra sweep over ``variant=...`` run the same thing.

In a Hydra multirun (``-m``) every job writes its outputs under its own sweep
folder instead of the fixed DVC paths, so parallel jobs never overwrite each
other or an output DVC tracks; each job is still one MLflow run.
"""
from __future__ import annotations

from omegaconf import DictConfig, OmegaConf

from pipeline.errors import ConfigError

BASELINE = "baseline"
# What each stage writes, by paths.* key: the keys a variant or a sweep job moves.
STAGE_OUTPUTS = {
    "prepare_corpus": ("corpus", "metrics"),
    "train_wordpiece": ("tokenizer", "metrics"),
    "make_pairs": ("pairs", "metrics"),
    "pretrain": ("pretrain", "metrics", "plots"),
    "finetune": ("metrics",),
    "report": ("reports",),
}
_MISSING = object()


def find_variant(cfg: DictConfig, name: str) -> tuple[str, DictConfig]:
    """``(family name, variant spec)`` for a variant defined in any family of ``cfg.family``."""
    for family, spec in cfg.family.items():
        if name in (spec.get("variants") or {}):
            return family, spec.variants[name]
    known = sorted(v for spec in cfg.family.values() for v in (spec.get("variants") or {}))
    raise ConfigError(f"variant={name!r} is not defined in any conf/family file: expected one of {', '.join(known)}")


def parse_overrides(name: str, overrides: list[str], cfg: DictConfig) -> DictConfig:
    """A variant's ``key=value`` list as a config, every key checked against the baseline's."""
    for item in overrides:
        key, sep, _ = item.partition("=")
        if not sep or OmegaConf.select(cfg, key, default=_MISSING) is _MISSING:
            raise ConfigError(f"variant {name}: set entry {item!r} is not allowed: expected key=value with a key "
                              "that exists in the configuration")
    return OmegaConf.from_dotlist(list(overrides))


def data_overrides(overrides: list[str]) -> list[str]:
    """The entries that change the examples (``pairs.*``): a variant with any needs its own make_pairs."""
    return [o for o in overrides if o.startswith("pairs.")]


def apply_variant(cfg: DictConfig, stage: str) -> DictConfig:
    """``cfg`` with ``cfg.variant``'s settings and output paths applied (unchanged without a variant)."""
    name = cfg.get("variant")
    if not name or name == BASELINE:
        return cfg
    _, spec = find_variant(cfg, name)
    overrides = list(spec.set)
    data = data_overrides(overrides)
    folders = cfg.paths.variants
    own_pairs = f"{folders.data}/{name}"
    if stage == "make_pairs":
        if not data:
            raise ConfigError(f"variant={name}: it changes no pairs.* setting, so it trains on the baseline's "
                              f"examples ({cfg.paths.pairs}); it has no make_pairs stage of its own")
        # All its settings apply (they are validated together); only the examples are written.
        paths = {"pairs": own_pairs, "metrics": f"{folders.metrics}/{name}"}
    elif stage == "pretrain":
        expected = own_pairs if data else cfg.paths.pairs
        if spec.pairs != expected:
            raise ConfigError(f"variant {name}: pairs={spec.pairs!r} is not allowed: expected {expected!r} "
                              + ("(it changes pairs.* settings, so it needs its own examples)" if data else
                                 "(it changes no pairs.* setting)"))
        paths = {"pairs": spec.pairs, "pretrain": f"{folders.models}/{name}",
                 "metrics": f"{folders.metrics}/{name}", "plots": f"{folders.plots}/{name}"}
    elif stage == "finetune":
        overrides = [*overrides, f"finetune.modes={list(cfg.grid.finetune.modes)}"]
        paths = {"pretrain": f"{folders.models}/{name}", "metrics": f"{folders.metrics}/{name}"}
    else:
        raise ConfigError(f"variant={name}: the {stage} stage has no variants (only make_pairs, pretrain and "
                          "finetune do); run it without variant=")
    return OmegaConf.merge(cfg, parse_overrides(name, overrides, cfg), {"paths": paths})


def sweep_outputs(cfg: DictConfig, stage: str) -> DictConfig:
    """In a Hydra multirun job, ``cfg`` with the stage's outputs moved into the job's sweep folder."""
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode

    if not HydraConfig.initialized() or HydraConfig.get().mode != RunMode.MULTIRUN:
        return cfg
    job_dir = HydraConfig.get().runtime.output_dir
    return OmegaConf.merge(cfg, {"paths": {k: f"{job_dir}/{k}" for k in STAGE_OUTPUTS.get(stage, ())}})


def grid_variants(cfg: DictConfig) -> list[str]:
    """The pretraining variants the configured grid runs, in its order."""
    return list(cfg.grid.pretrain)
