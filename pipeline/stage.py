"""What every stage entry point does around its pipeline function.

The rule for where settings are read: each stage has one function
``run(cfg) -> metrics`` in the module that implements it
(``pipeline/data/corpus.py``, ``data/wordpiece.py``, ``data/pairs.py``,
``pretrain/run.py``, ``finetune/run.py``, ``report/run.py``). It is the only
code of the stage that reads ``cfg``: it unpacks the settings into plain
arguments and small dataclasses for everything below it, and ``instantiate``s
what conf/ names by ``_target_``. Only the plumbing every stage shares takes the
whole ``cfg`` as well: this module, ``config`` (validation), ``variants`` and
``tracking`` (which logs the resolved config).

``run_stage`` applies an ablation variant (``variant=<name>``) and, in a Hydra
sweep, moves the outputs into the job's folder; then it validates the settings,
applies the runtime group, runs, and turns a user-fixable error (``LabError``)
into one line on stderr and exit status 2.
"""
from __future__ import annotations

import logging
import sys
import time
from typing import Any, Callable

from omegaconf import DictConfig

from pipeline.config import validate
from pipeline.errors import LabError
from pipeline.variants import apply_variant, sweep_outputs

log = logging.getLogger("pipeline")


def apply_runtime(cfg: DictConfig) -> None:
    rt = cfg.get("runtime")
    if rt is not None and rt.get("num_threads"):
        import torch  # only stages that train pay for importing torch

        torch.set_num_threads(int(rt.num_threads))


def run_stage(name: str, fn: Callable[[DictConfig], Any], cfg: DictConfig) -> Any:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    start = time.perf_counter()
    try:
        cfg = sweep_outputs(apply_variant(cfg, name), name)
        validate(cfg)
        apply_runtime(cfg)
        result = fn(cfg)
    except LabError as e:
        print(f"error: {name}: {e}", file=sys.stderr)
        sys.exit(2)
    log.info("%s finished in %.1f s", name, time.perf_counter() - start)
    return result
