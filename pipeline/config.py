"""Configuration: composing conf/ outside Hydra apps, and start-up validation.

Every check names the key, the value and what is allowed, so a bad setting
fails before any compute is spent, never deep inside training. Each check is
made once: the closed sets of names a setting may take are imported from the
(torch-free) modules that own them, the model's checks are ``BertConfig``'s own,
and ``check_pairs`` also guards ``pipeline.data.pairs`` when it is called directly.
"""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Callable, Sequence

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import InterpolationResolutionError

from pipeline.data.shards import FORMATS
from pipeline.data.tokenizer import SPECIAL_TOKENS
from pipeline.errors import ConfigError, LabError
from pipeline.finetune.modes import MODES
from pipeline.model.config import build_config
from pipeline.optim import OPTIMIZERS, SCHEDULES
from pipeline.pretrain.objectives import LM_OBJECTIVES
from pipeline.variants import CONF_DIR, conf_hash, find_variant, register_resolvers

_DURATION = re.compile(r"\d+:\d\d:\d\d:\d\d")  # Lightning's max_time format, DD:HH:MM:SS
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


def _get(cfg: DictConfig, key: str) -> Any:
    return OmegaConf.select(cfg, key, throw_on_missing=False)


def _check(cfg: DictConfig, key: str, ok: Callable[[Any], bool], allowed: str) -> None:
    value = _get(cfg, key)
    if value is None and "optional" in allowed:
        return
    try:
        good = ok(value)
    except TypeError:
        good = False
    if not good:
        raise ConfigError(f"{key}={value!r} is not allowed: expected {allowed}")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def validate(cfg: DictConfig) -> None:
    """Raise ``ConfigError`` for the first setting that cannot work."""
    if "grid" in cfg and "family" in cfg:
        _check_distinct(cfg, "grid.pretrain", "variant names (each is one row of pretraining runs)")
        for name in cfg.grid.pretrain:
            find_variant(cfg, name)
    if "seed" in cfg:
        _check(cfg, "seed", lambda v: _int(v) and v >= 0, "a non-negative integer")
    if "pretrain_seed" in cfg:
        _check(cfg, "pretrain_seed", lambda v: _int(v) and v >= 0, "a non-negative integer")
    if "grid" in cfg:
        for k in ("baseline", "variants"):
            _check(cfg, f"grid.seeds.{k}", lambda v: _int(v) and v >= 1, "a positive integer (pretraining runs)")
    if "corpus" in cfg:
        _check(cfg, "corpus.valid_fraction", lambda v: _number(v) and 0 < v < 1, "a number in (0, 1)")
    if "tokenizer" in cfg:
        _check(cfg, "tokenizer.vocab_size", lambda v: _int(v) and v > len(SPECIAL_TOKENS) + 26,
               f"an integer large enough for the {len(SPECIAL_TOKENS)} special tokens and an alphabet (> 31)")
        _check(cfg, "tokenizer.min_frequency", lambda v: _int(v) and v >= 1, "an integer >= 1")
    if "pairs" in cfg:
        p = cfg.pairs
        check_pairs(p.format, p.max_seq_length, p.short_seq_prob, p.dupe_factor, p.shard_tokens)
        if cfg.get("objective", {}).get("nsp") and cfg.pairs.format != "nsp_pairs":
            raise ConfigError(f"pairs.format={cfg.pairs.format} is not allowed with objective.nsp=true: "
                              "expected nsp_pairs (packed sequences have no sentence pairs to classify)")
    if "masking" in cfg:
        _check(cfg, "masking.mlm_probability", lambda v: _number(v) and 0 < v < 1, "a probability in (0, 1)")
        _check_procedure(cfg, "masking")
        _check(cfg, "masking.max_predictions_per_seq", lambda v: v is None or (_int(v) and v >= 1),
               "an integer >= 1 or null (optional: no cap beyond the ratio)")
        _check(cfg, "masking.whole_word", lambda v: isinstance(v, bool), "true or false")
        _check(cfg, "masking.static", lambda v: isinstance(v, bool), "true or false")
    if "eval_set" in cfg:
        _check(cfg, "eval_set.mlm_probability", lambda v: _number(v) and 0 < v < 1, "a share in (0, 1)")
        _check_procedure(cfg, "eval_set")
        _check(cfg, "eval_set.mask_token_prob", lambda v: v > 0,
               "more than 0 (the headline scores the positions shown as [MASK])")
        _check(cfg, "eval_set.max_sequences", lambda v: v is None or (_int(v) and v >= 1),
               "a positive integer or null (optional: all valid examples)")
    if "model" in cfg:
        lm = cfg.get("objective", {}).get("lm")
        # model.architecture's own checks, objective.lm among the ones it trains (an unknown one: below)
        build_config(OmegaConf.to_container(cfg.model), cfg.get("tokenizer", {}).get("vocab_size", 1 << 16),
                     lm if lm in LM_OBJECTIVES else None)
        if "pairs" in cfg and cfg.model.max_position_embeddings < cfg.pairs.max_seq_length:
            raise ConfigError(
                f"pairs.max_seq_length={cfg.pairs.max_seq_length} is not allowed: expected at most "
                f"model.max_position_embeddings={cfg.model.max_position_embeddings} (the position table)")
    if "objective" in cfg:
        _check(cfg, "objective.lm", lambda v: v in LM_OBJECTIVES, f"one of {', '.join(LM_OBJECTIVES)}")
        _check(cfg, "objective.nsp", lambda v: isinstance(v, bool), "true or false")
        if cfg.objective.lm == "left_to_right" and cfg.objective.nsp:
            raise ConfigError("objective.nsp=true is not allowed with objective.lm=left_to_right: expected false "
                              "(a left-to-right model has no bidirectional [CLS] to classify pairs with)")
    if "optim" in cfg:
        _check(cfg, "optim.name", lambda v: v in OPTIMIZERS, f"one of {', '.join(OPTIMIZERS)}")
        _check(cfg, "optim.lr", lambda v: _number(v) and v > 0, "a positive number")
        _check(cfg, "optim.weight_decay", lambda v: _number(v) and v >= 0, "a number >= 0")
        _check(cfg, "optim.warmup_ratio", lambda v: _number(v) and 0 <= v < 1, "a number in [0, 1)")
        _check(cfg, "optim.schedule", lambda v: v in SCHEDULES, f"one of {', '.join(SCHEDULES)}")
        _check(cfg, "optim.decay_ratio", lambda v: _number(v) and 0 < v <= 1, "a share of the steps in (0, 1]")
        if cfg.optim.warmup_ratio + cfg.optim.decay_ratio > 1 and cfg.optim.schedule == "wsd":
            raise ConfigError(f"optim.warmup_ratio + optim.decay_ratio = {cfg.optim.warmup_ratio + cfg.optim.decay_ratio:g} "
                              "is not allowed with optim.schedule=wsd: expected at most 1 (warm-up and decay share the steps)")
        _check(cfg, "optim.betas", lambda v: len(v) == 2 and all(_number(b) and 0 <= b < 1 for b in v),
               "two numbers in [0, 1)")
    if "trainer" in cfg:
        for k in ("max_steps", "batch_size", "accumulate_grad_batches", "val_check_interval",
                  "limit_val_batches", "log_every_n_steps", "checkpoint_every_n_steps"):
            _check(cfg, f"trainer.{k}", lambda v: _int(v) and v >= 1, "a positive integer")
        _check(cfg, "trainer.length_grouped", lambda v: v is None or isinstance(v, bool), "true or false")
        _check(cfg, "trainer.max_time", lambda v: v is None or bool(_DURATION.fullmatch(str(v))),
               'a wall-clock budget "DD:HH:MM:SS" or null (optional)')
    if "finetune" in cfg:
        _check(cfg, "finetune.modes", lambda v: len(v) > 0 and set(v) <= set(MODES),
               f"a non-empty list of: {', '.join(MODES)}")
        _check(cfg, "finetune.seeds", lambda v: len(v) > 0 and all(_int(s) for s in v),
               "a non-empty list of integers")
        _check_distinct(cfg, "finetune.seeds", "seeds (each is one run; a repeat would count the same run twice)")
        _check_distinct(cfg, "finetune.modes", "modes (each is fine-tuned once per seed)")
        for k in ("epochs", "feature_epochs", "batch_size", "eval_batch_size", "feature_eval_batch_size"):
            _check(cfg, f"finetune.{k}", lambda v: _int(v) and v >= 1, "a positive integer")
        _check(cfg, "finetune.betas", lambda v: len(v) == 2 and all(_number(b) and 0 <= b < 1 for b in v),
               "two numbers in [0, 1)")
        for k in ("eps", "gradient_clip_val"):
            _check(cfg, f"finetune.{k}", lambda v: _number(v) and v > 0, "a positive number")
        _check(cfg, "finetune.eval_every_epoch", lambda v: isinstance(v, bool), "true or false")
        for k in ("lr", "feature_lr"):
            _check(cfg, f"finetune.{k}", lambda v: _number(v) and v > 0, "a positive number")
    if "task" in cfg:
        for k in ("train_size", "dev_size"):
            if k in cfg.task.get("data", {}):
                _check(cfg, f"task.data.{k}", lambda v: v is None or (_int(v) and v >= 1),
                       "a positive integer or null (optional)")
        _check(cfg, "task.max_seq_length", lambda v: _int(v) and v >= 4, "an integer >= 4")
        if "model" in cfg and cfg.task.max_seq_length > cfg.model.max_position_embeddings:
            raise ConfigError(
                f"task.max_seq_length={cfg.task.max_seq_length} is not allowed: expected at most "
                f"model.max_position_embeddings={cfg.model.max_position_embeddings} (the position table)")
    if cfg.get("suite"):
        check_suite(cfg)
    if "report" in cfg:
        check_confidence(cfg.report.get("confidence"))
    if "runtime" in cfg:
        _check(cfg, "runtime.num_workers", lambda v: v is None or (_int(v) and v >= 1),
               "a positive integer or null (optional: all cores)")
        _check(cfg, "runtime.loader_workers", lambda v: _int(v) and v >= 0, "an integer >= 0")
        _check(cfg, "runtime.parts", lambda v: v is None or (_int(v) and v >= 1), "a positive integer (machines)")
        _check(cfg, "runtime.fused_optimizer", lambda v: isinstance(v, bool), "true or false")
        if str(cfg.runtime.get("precision")) in ("16", "16-mixed") and cfg.runtime.fused_optimizer:
            # fp16's gradient scaler: a fused AdamW unscales inside its step, after gradients were clipped
            raise ConfigError(f"runtime.precision={cfg.runtime.precision} with runtime.fused_optimizer=true is "
                              "not allowed: expected runtime.fused_optimizer=false (fp16's scaled gradients are "
                              "clipped before a fused AdamW unscales them), or runtime.precision=bf16-mixed")
        _check(cfg, "runtime.num_threads", lambda v: v is None or (_int(v) and v >= 1),
               "a positive integer or null (optional)")


def _check_distinct(cfg: DictConfig, key: str, what: str) -> None:
    """A list setting whose entries are runs (seeds, modes, variants): a repeated entry is refused, naming it."""
    values = list(_get(cfg, key) or [])
    repeated = next((v for i, v in enumerate(values) if v in values[:i]), None)
    if repeated is not None:
        raise ConfigError(f"{key}={values!r} is not allowed: {repeated!r} is listed {values.count(repeated)} times; "
                          f"expected distinct {what}")


def _check_procedure(cfg: DictConfig, group: str) -> None:
    """What a chosen piece becomes (``<group>.mask_token_prob``, ``random_token_prob``, ``keep_prob``): shares of 1."""
    for k in ("mask_token_prob", "random_token_prob", "keep_prob"):
        _check(cfg, f"{group}.{k}", lambda v: _number(v) and 0 <= v <= 1, "a probability in [0, 1]")
    m = cfg[group]
    total = m.mask_token_prob + m.random_token_prob + m.keep_prob
    if abs(total - 1) > 1e-6:
        raise ConfigError(
            f"{group}.mask_token_prob + random_token_prob + keep_prob = {total:g} is not allowed: expected 1 "
            f"(got {m.mask_token_prob}, {m.random_token_prob}, {m.keep_prob})")


def check_suite(cfg: DictConfig) -> None:
    """A suite's tasks, the modes it asks for, and the report columns it names."""
    suite = cfg.suite
    tasks = list(suite.get("tasks") or {})
    if not tasks:
        raise ConfigError(f"suite.tasks of suite {suite.get('name')!r} is empty: expected at least one task "
                          "(e.g. /task@suite.tasks.mrpc: mrpc in its defaults)")
    for task in tasks:
        length = suite.tasks[task].get("max_seq_length")
        if "model" in cfg and length is not None and length > cfg.model.max_position_embeddings:
            raise ConfigError(f"suite.tasks.{task}.max_seq_length={length} is not allowed: expected at most "
                              f"model.max_position_embeddings={cfg.model.max_position_embeddings} (the position table)")
    for task, modes in (suite.get("modes") or {}).items():
        if task not in tasks:
            raise ConfigError(f"suite.modes.{task}: not a task of the suite: expected one of {', '.join(tasks)}")
        _check(cfg, f"suite.modes.{task}", lambda v: len(v) > 0 and set(v) <= set(MODES),
               f"a non-empty list of: {', '.join(MODES)}")
        _check_distinct(cfg, f"suite.modes.{task}", "modes (each is fine-tuned once per seed)")
    for i, col in enumerate(suite.get("columns") or []):
        if col.get("task") not in tasks:
            raise ConfigError(f"suite.columns[{i}].task={col.get('task')!r} is not allowed: expected one of the "
                              f"suite's tasks ({', '.join(tasks)})")
        if col.get("mode") is not None and col.mode not in MODES:
            raise ConfigError(f"suite.columns[{i}].mode={col.mode!r} is not allowed: expected one of "
                              f"{', '.join(MODES)}")


def check_confidence(confidence: Any, key: str = "report.confidence") -> None:
    """A confidence level for the report's intervals."""
    if not (_number(confidence) and 0 < confidence < 1):
        raise ConfigError(f"{key}={confidence!r} is not allowed: expected a number in (0, 1), e.g. 0.95")


def check_pairs(format: str, max_seq_length: int, short_seq_prob: float, dupe_factor: int,
                shard_tokens: int, num_workers: int = 1) -> None:
    """The ``pairs`` settings (and the worker count) that example generation can work with."""
    def refuse(key: str, value: Any, expected: str):
        raise ConfigError(f"{key}={value!r} is not allowed: expected {expected}")

    if format not in FORMATS:
        refuse("pairs.format", format, f"one of {', '.join(FORMATS)}")
    if not (_int(max_seq_length) and max_seq_length >= 5):
        refuse("pairs.max_seq_length", max_seq_length,
               "an integer >= 5 ([CLS], two [SEP] and at least one token of A and of B)")
    if not (_number(short_seq_prob) and 0 <= short_seq_prob <= 1):
        refuse("pairs.short_seq_prob", short_seq_prob, "a probability in [0, 1]")
    if not (_int(dupe_factor) and dupe_factor >= 1):
        refuse("pairs.dupe_factor", dupe_factor, "an integer >= 1")
    if not (_int(shard_tokens) and shard_tokens >= 1):
        refuse("pairs.shard_tokens", shard_tokens, "an integer >= 1")
    if not (_int(num_workers) and num_workers >= 1):
        refuse("runtime.num_workers", num_workers, "an integer >= 1")


RECOMPOSE = "python -m pipeline.config"


def check_fresh(cfg: DictConfig, conf_dir: Path = CONF_DIR) -> None:
    """Settings composed from conf/ as it is now; a params.yaml composed before conf/ was edited is refused."""
    recorded = cfg.get("conf_hash")
    if recorded is not None and recorded != conf_hash(conf_dir):
        raise ConfigError("params.yaml was composed from an older conf/ (conf/ changed since; conf_hash "
                          f"{recorded} != {conf_hash(conf_dir)}): run `dvc exp run`, which recomposes it, or "
                          f"`{RECOMPOSE}` and then `dvc repro`")


def check_params(params: Path = CONF_DIR.parent / "params.yaml", conf_dir: Path = CONF_DIR) -> None:
    """The check_conf stage, before any other stage spends compute: ``params`` composed from conf/ as it is now,
    and its settings valid."""
    cfg = OmegaConf.load(params)
    check_fresh(cfg, conf_dir)
    validate(cfg)


def write_params(root: Path = CONF_DIR.parent) -> Path:
    """Recompose ``params.yaml`` from conf/ the way `dvc exp run` does (DVC's own Hydra composition)."""
    from dvc.utils.hydra import compose_and_dump

    out = root / "params.yaml"
    compose_and_dump(str(out), str(CONF_DIR), None, "config", str(root), [])
    return out


if __name__ == "__main__":  # `python -m pipeline.config [--check]`: recompose params.yaml, or only check it
    import sys

    try:
        if "--check" in sys.argv[1:]:
            check_params()
            print("params.yaml is composed from conf/ as it is, and its settings are valid")
        else:
            print(f"wrote {write_params()}")
    except LabError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
