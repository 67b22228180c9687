"""What every stage entry point does around its pipeline function.

Apply an ablation variant (``variant=<name>``) and, in a Hydra sweep, move the
outputs into the job's folder; validate the settings, apply the runtime group,
run, and turn a user-fixable error (``LabError``) into one line on stderr and
exit status 2.
"""
from __future__ import annotations

import logging
import os
import sys
import time
from typing import Any, Callable

from omegaconf import DictConfig

from pipeline.config import validate
from pipeline.errors import LabError
from pipeline.grid import apply_variant, sweep_outputs

log = logging.getLogger("pipeline")


def apply_runtime(cfg: DictConfig) -> None:
    rt = cfg.get("runtime")
    if rt is not None and rt.get("num_threads"):
        import torch  # only stages that train pay for importing torch

        torch.set_num_threads(int(rt.num_threads))


def worker_count(cfg: DictConfig) -> int:
    """Processes for data stages: ``runtime.num_workers``, or every core this process may use."""
    n = cfg.get("runtime", {}).get("num_workers")
    return int(n) if n else len(os.sched_getaffinity(0))


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
