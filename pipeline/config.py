"""Configuration: composing conf/ outside Hydra apps, and start-up validation.

Every check names the key, the value and what is allowed, so a bad setting
fails before any compute is spent, never deep inside training. Each check has
one owner: a group's own settings are checked by its class in
``pipeline.settings`` (the model's by its config class, ``pipeline.model_config``);
``validate`` builds them all, at the start of every stage and in the check_conf
stage, and keeps only the rules between groups.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from pipeline.conf import CONF_DIR, conf_hash
from pipeline.errors import ConfigError, LabError
from pipeline.model_config import build_config
from pipeline.settings import Lab, read_groups
from pipeline.variants import find_variant, register_resolvers

register_resolvers()  # ${lab.runs:} and ${lab.examples:} in conf/config.yaml


def compose(overrides: Sequence[str] = (), config_dir: str | Path = CONF_DIR) -> DictConfig:
    """Compose the pipeline config the way DVC and the stage scripts do (for tests and notebooks)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    with initialize_config_dir(str(Path(config_dir).resolve()), version_base="1.3"):
        cfg = hydra_compose("config", overrides=list(overrides))
    try:
        OmegaConf.resolve(cfg)
    except InterpolationResolutionError as e:  # a resolver's own error (an unknown variant): raise it as it is
        cause = e.__cause__ or e.__context__
        raise (cause if isinstance(cause, ConfigError) else e) from None
    return cfg


def validate(cfg: DictConfig) -> Lab:
    """Every group's settings (``pipeline.settings``, each checked by its own class), then the rules between
    groups; the first setting that cannot work raises ``ConfigError``. Returns the settings a stage runs on."""
    settings = read_groups(cfg, resolved_config(cfg))
    grid, pairs, objective, model = (settings.get(k) for k in ("grid", "pairs", "objective", "model"))
    if grid and "family" in cfg:
        for name in grid.pretrain:
            find_variant(cfg, name)
    if pairs and objective and objective.nsp and pairs.format != "nsp_pairs":
        raise ConfigError(f"pairs.format={pairs.format} is not allowed with objective.nsp=true: expected nsp_pairs "
                          "(packed sequences have no sentence pairs to classify)")
    if model:
        tokenizer = settings.tokenizer
        # model.architecture's own checks, and objective.lm among the ones it trains
        build_config(model.values(), tokenizer.vocab_size if tokenizer else 1 << 16,
                     objective.lm if objective else None)
        for key, length in sequence_lengths(settings):
            if length > model.max_position_embeddings:
                raise ConfigError(f"{key}={length} is not allowed: expected at most model.max_position_embeddings="
                                  f"{model.max_position_embeddings} (the position table)")
    return settings


def sequence_lengths(settings: Lab) -> list[tuple[str, int]]:
    """Every sequence length the model must take: the examples', the fixed set's and the layout probe's, the
    task's and each suite task's."""
    out = [("pairs.max_seq_length", settings.pairs.max_seq_length)] if settings.pairs else []
    if settings.eval_set:
        out.append(("eval_set.max_seq_length", settings.eval_set.max_seq_length))
        out += [(f"eval_set.layout.lengths[{i}]", n) for i, n in enumerate(settings.eval_set.layout.lengths)]
    if settings.task:
        out.append(("task.max_seq_length", settings.task.max_seq_length))
    if settings.suite:
        out += [(f"suite.tasks.{name}.max_seq_length", task.max_seq_length)
                for name, task in settings.suite.tasks.items()]
    return out


# Never recorded: a tracking URI can carry credentials (https://user:token@host).
SECRET_KEYS = {"tracking.uri"}
# Not a run's settings: the ablation catalogue, the grid and its generated runs (a variant's own settings
# are already applied).
CATALOGUE_KEYS = ("family", "grid", "runs", "examples", "pilots")


def resolved_config(cfg: DictConfig) -> dict:
    """The run's settings, resolved, without the catalogue and without secrets (what ``config.yaml`` on a run holds)."""
    kept = [k for k in cfg if k not in CATALOGUE_KEYS]  # before resolving: the catalogue is never resolved here
    out = {k: OmegaConf.to_container(cfg[k], resolve=True) if OmegaConf.is_config(cfg[k]) else cfg[k] for k in kept}
    for key in SECRET_KEYS:
        section, name = key.split(".")
        if isinstance(out.get(section), dict):
            out[section].pop(name, None)
    return out


RECOMPOSE = "python -m pipeline.config"


def check_fresh(cfg: DictConfig, conf_dir: Path = CONF_DIR) -> None:
    """Settings composed from conf/ as it is now; a params.yaml composed before conf/ was edited is refused."""
    recorded = cfg.get("conf_hash")
    if recorded is not None and recorded != conf_hash(conf_dir):
        raise ConfigError("params.yaml was composed from an older conf/ (conf/ changed since; conf_hash "
                          f"{recorded} != {conf_hash(conf_dir)}): run `dvc exp run`, which recomposes it, or "
                          f"`{RECOMPOSE}` and then `dvc repro`")


def write_params(root: Path = CONF_DIR.parent) -> Path:
    """Recompose ``params.yaml`` from conf/ the way `dvc exp run` does (DVC's own Hydra composition)."""
    from dvc.utils.hydra import compose_and_dump

    out = root / "params.yaml"
    compose_and_dump(str(out), str(CONF_DIR), None, "config", str(root), [])
    return out


if __name__ == "__main__":  # `python -m pipeline.config`: recompose params.yaml (pipeline.check_conf checks it)
    import sys

    try:
        print(f"wrote {write_params()}")
    except LabError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
