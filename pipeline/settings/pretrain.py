"""The pretraining groups' settings: what is learnt (objective), the network (model), the optimiser and its
schedule (optim), and the training loop (trainer)."""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, ClassVar, Mapping

from pipeline.errors import ConfigError
from pipeline.model_config import LM_OBJECTIVES, config_class
from pipeline.names import OPTIMIZERS, SCHEDULES
from pipeline.settings.base import Settings, plain_node, setting
from pipeline.values import (BETAS, BOOL, DURATION, FINITE, MAPPING, NON_NEGATIVE, POSITIVE, POSITIVE_INT, TEXT, Kind,
                             is_int, number, one_of)


@dataclass(frozen=True, kw_only=True)
class ObjectiveSettings(Settings):
    KEY = "objective"
    name: str = setting(TEXT)
    lm: str = setting(one_of(LM_OBJECTIVES))
    nsp: bool = setting(BOOL)
    nsp_weight: float | None = setting(POSITIVE.or_null(" (no NSP loss)"))  # the NSP loss's weight in the total

    def check(self, key: str) -> None:
        if self.lm == "left_to_right" and self.nsp:
            raise ConfigError(f"{key}.nsp=true is not allowed with {key}.lm=left_to_right: expected false "
                              "(a left-to-right model has no bidirectional [CLS] to classify pairs with)")
        if not self.nsp and self.nsp_weight is not None:
            raise ConfigError(f"{key}.nsp_weight={self.nsp_weight} is not allowed with {key}.nsp=false: expected null "
                              f"(objective {self.name} has no NSP loss to weigh)")
        if self.nsp and self.nsp_weight is None:
            raise ConfigError(f"{key}.nsp_weight=null is not allowed with {key}.nsp=true: expected a positive number "
                              "(BERT's: 1.0, the two losses summed)")


@dataclass(frozen=True, kw_only=True)
class ModelSettings(Settings):
    """The keys every architecture has; ``shape`` holds the architecture's own (its config class's fields,
    whose values that class checks: ``pipeline.model_config``, built by the validator with the vocabulary
    and the objective)."""
    KEY = "model"
    name: str = setting(TEXT)
    architecture: str = setting(TEXT)
    init_from: str | None = setting(TEXT.or_null(" (fresh weights)"))
    max_position_embeddings: int = setting(POSITIVE_INT)  # the examples' length limit (a position table for BERT)
    shape: dict = setting(MAPPING)

    COMMON: ClassVar[tuple[str, ...]] = ("name", "architecture", "init_from", "max_position_embeddings")

    @classmethod
    def read(cls, node: Mapping[str, Any], key: str | None = None) -> ModelSettings:
        at = cls.KEY if key is None else key
        node = plain_node(node)
        missing = [k for k in cls.COMMON if k not in node]
        if missing:
            raise ConfigError(f"{at}.{missing[0]} is missing: expected a setting of every model")
        config = config_class(node["architecture"])
        own = {f.name for f in fields(config)} - {"vocab_size", *config.objective_fields(next(iter(config.objectives)))}
        unknown = [k for k in node if k not in (*cls.COMMON, *own)]
        if unknown:
            raise ConfigError(f"{at}.{unknown[0]} is not a setting of model.architecture={node['architecture']}: "
                              f"expected one of {', '.join(sorted((*cls.COMMON, *own)))}")
        return cls(**{k: node[k] for k in cls.COMMON}, shape={k: v for k, v in node.items() if k not in cls.COMMON},
                   key=at)

    def check(self, key: str) -> None:
        for name, value in self.shape.items():  # their ranges are the architecture's config's to check
            if isinstance(value, float):
                FINITE.check(f"{key}.{name}", value)

    def values(self) -> dict:
        """The settings as the model's config takes them (``pipeline.model_config.build_config``)."""
        return {"architecture": self.architecture, "max_position_embeddings": self.max_position_embeddings,
                **self.shape}


@dataclass(frozen=True, kw_only=True)
class OptimSettings(Settings):
    KEY = "optim"
    name: str = setting(one_of(OPTIMIZERS))
    lr: float = setting(POSITIVE)
    betas: tuple[float, float] = setting(BETAS)
    eps: float = setting(POSITIVE)
    weight_decay: float = setting(NON_NEGATIVE)
    warmup_ratio: float = setting(number(0, 1, high_open=True))
    schedule: str = setting(one_of(SCHEDULES))
    decay_ratio: float = setting(number(0, 1, low_open=True, expected="a share of the steps in (0, 1]"))
    gradient_clip_val: float = setting(POSITIVE)

    def check(self, key: str) -> None:
        if self.schedule == "wsd" and self.warmup_ratio + self.decay_ratio > 1:
            raise ConfigError(f"{key}.warmup_ratio + {key}.decay_ratio = {self.warmup_ratio + self.decay_ratio:g} "
                              f"is not allowed with {key}.schedule=wsd: expected at most 1 (warm-up and decay share "
                              "the steps)")


DEVICES = Kind(lambda v: v == "auto" or (is_int(v) and (v >= 1 or v == -1)) or
               (isinstance(v, (tuple, list)) and len(v) > 0 and all(is_int(d) and d >= 0 for d in v)),
               '"auto", a count of devices (-1: all), or a list of device ids')


@dataclass(frozen=True, kw_only=True)
class TrainerSettings(Settings):
    KEY = "trainer"
    max_steps: int = setting(POSITIVE_INT)
    max_time: str | None = setting(DURATION.or_null(" (optional)"))
    batch_size: int = setting(POSITIVE_INT)
    accumulate_grad_batches: int = setting(POSITIVE_INT)
    length_grouped: bool = setting(BOOL)
    val_check_interval: int = setting(POSITIVE_INT)
    checkpoint_every_n_steps: int = setting(POSITIVE_INT)
    limit_val_batches: int = setting(POSITIVE_INT)
    log_every_n_steps: int = setting(POSITIVE_INT)
    accelerator: str = setting(TEXT)
    devices: Any = setting(DEVICES)
    strategy: str = setting(TEXT)
    num_nodes: int = setting(POSITIVE_INT)

    def devices_per_node(self) -> int | None:
        """Processes per node, or None where only the machine knows (``devices=auto`` or -1 on GPUs)."""
        if isinstance(self.devices, tuple):
            return len(self.devices)
        if is_int(self.devices) and self.devices >= 1:
            return self.devices
        return 1 if self.accelerator == "cpu" else None

    def device_batch_size(self, found: int | None = None, key: str = KEY) -> int:
        """Sequences per device per forward pass: ``batch_size`` split over devices x nodes x accumulation.

        ``found``: the devices the machine has, where ``devices`` leaves the count to it (``auto``, -1 on GPUs);
        unknown (None) at start-up, when the split over the nodes and accumulation is checked alone."""
        per_node = self.devices_per_node() or found
        parts = (per_node or 1) * self.num_nodes * self.accumulate_grad_batches
        if self.batch_size % parts:
            factors = "devices x nodes x accumulate_grad_batches" if per_node else \
                f"nodes x accumulate_grad_batches (and of the devices {key}.devices={self.devices} finds)"
            raise ConfigError(f"{key}.batch_size={self.batch_size} is not allowed: expected a multiple of "
                              f"{factors} = {parts}")
        return self.batch_size // parts

    def check(self, key: str) -> None:
        self.device_batch_size(key=key)
