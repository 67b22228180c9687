"""The check_conf stage (``python -m pipeline.check_conf``), before any other stage spends compute: params.yaml
composed from conf/ as it is now, every setting valid (``pipeline.config.validate``) with each variant of the
grid applied too, and the rules that need the task loaders: each suite column's metric one its task reports.

A module of its own so that only this stage depends on the task loaders' code: editing a loader reruns the
check and the fine-tuning, not the corpus or the tokenizer.
"""
from __future__ import annotations

import sys
from pathlib import Path

from omegaconf import OmegaConf

from pipeline.conf import CONF_DIR
from pipeline.config import check_fresh, validate
from pipeline.errors import LabError
from pipeline.finetune.tasks import check_columns
from pipeline.variants import apply_variant


def check_params(params: Path = CONF_DIR.parent / "params.yaml", conf_dir: Path = CONF_DIR) -> None:
    """``params`` composed from conf/ as it is now and its settings valid, with each variant of the grid applied
    too (its own stages would only find a bad setting of its after the baseline's compute)."""
    cfg = OmegaConf.load(params)
    check_fresh(cfg, conf_dir)
    settings = validate(cfg)
    if settings.suite:
        check_columns(settings.suite)
    for variant in cfg.grid.pretrain if "grid" in cfg else ():
        validate(apply_variant(OmegaConf.merge(cfg, {"variant": variant}), "pretrain"))


if __name__ == "__main__":
    try:
        check_params()
        print("params.yaml is composed from conf/ as it is, and its settings are valid")
    except LabError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
