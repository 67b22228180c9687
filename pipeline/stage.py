"""What every stage entry point does around its run.

The rule for where settings are read: each stage has one function ``run(lab)`` in the module named like it
(``pipeline/stages/<stage>.py``, the top floor). ``run_stage`` applies an ablation variant (``variant=<name>``)
and, in a Hydra sweep, moves the outputs into the job's folder; then it checks every setting
(``pipeline.config.validate``) and hands ``run`` the checked settings (``pipeline.settings.Lab``), never the
composed config. ``run`` passes settings objects, plain arguments or an architecture's parts to everything
below it, and ``instantiate``s what conf/ names by ``_target_``. Only the configuration floor reads the
composed config: this module, ``config`` (composition, validation, what the tracker records) and ``variants``
(a variant's and a grid's settings, written into the config before the check).

A user-fixable error (``LabError``, also when a ``_target_`` raised it inside Hydra's ``instantiate``) becomes one
line on stderr and exit status 2.
"""
from __future__ import annotations

import logging
import sys
import time
import warnings
from typing import Any, Callable

from hydra.errors import InstantiationException
from omegaconf import DictConfig
from omegaconf.errors import InterpolationResolutionError

from pipeline.config import check_fresh, validate
from pipeline.errors import LabError
from pipeline.memory import limit_kernel_cache
from pipeline.settings import Lab, RuntimeSettings
from pipeline.variants import apply_variant, sweep_outputs

log = logging.getLogger("pipeline")

# Lightning's start-up noise that says nothing about this run: an advertisement for another logger, a
# deprecation inside Lightning itself, and the absence of a validation loop where none is wanted.
QUIET = ("💡 Tip:", "GPU available:", "TPU available:", "HPU available:")
QUIET_WARNINGS = (r".*isinstance\(treespec, LeafSpec\).*", r".*no `val_dataloader`.*",
                  r".*smaller than the logging interval.*")


class _Quiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(QUIET)


def quiet_lightning() -> None:
    """Keep Lightning's start-up noise (``QUIET``, ``QUIET_WARNINGS``) from a stage's output."""
    for name in ("", "lightning.pytorch", "lightning.fabric", "lightning.pytorch.utilities.rank_zero",
                 "lightning.fabric.utilities.rank_zero"):
        for handler in logging.getLogger(name).handlers:
            handler.addFilter(_Quiet())
        logging.getLogger(name).addFilter(_Quiet())
    for pattern in QUIET_WARNINGS:
        warnings.filterwarnings("ignore", message=pattern)


def apply_runtime(runtime: RuntimeSettings | None) -> None:
    limit_kernel_cache()  # before the first kernel: what a stage trains never changes, its memory does
    if runtime is not None and runtime.num_threads:
        import torch  # only stages that train pay for importing torch

        torch.set_num_threads(runtime.num_threads)


def user_error(e: BaseException) -> LabError | None:
    """The ``LabError`` behind ``e``: ``e`` itself, or what a ``_target_`` (a task loader, a corpus source)
    raised inside ``instantiate``, or a resolver (the grid's runs) while the settings were read, each of which
    wraps it, once per level of nesting; None for a bug."""
    while isinstance(e, InstantiationException) and e.__cause__ is not None:
        e = e.__cause__
    while isinstance(e, InterpolationResolutionError) and e.__context__ is not None:  # OmegaConf chains implicitly
        e = e.__context__
    return e if isinstance(e, LabError) else None


def run_stage(name: str, fn: Callable[[Lab], Any], cfg: DictConfig) -> Any:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    quiet_lightning()
    start = time.perf_counter()
    try:
        check_fresh(cfg)
        cfg = sweep_outputs(apply_variant(cfg, name), name)
        lab = validate(cfg)
        apply_runtime(lab.runtime)
        result = fn(lab)
    except (LabError, InstantiationException, InterpolationResolutionError) as e:
        error = user_error(e)
        if error is None:
            raise
        print(f"error: {name}: {error}", file=sys.stderr)
        sys.exit(2)
    log.info("%s finished in %.1f s", name, time.perf_counter() - start)
    return result
