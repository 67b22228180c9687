"""The pattern every group's settings follow (``Settings``), and the kinds of value more than one family uses.

Each field names the kinds of value it may take (``pipeline.values``: NaN and infinities are never numbers);
building the object checks every field and then ``check``, the rules between the group's own settings.
``read(node, key)`` builds it from the composed node and refuses, in one line naming the full key, a key the
group does not have and one that is missing. No field has a default: every value comes from conf/.
"""
from __future__ import annotations

from dataclasses import InitVar, dataclass, field, fields
from typing import Any, ClassVar, Mapping

from omegaconf import OmegaConf

from pipeline.errors import ConfigError
from pipeline.values import POSITIVE, TEXT, Distinct, Kind, distinct, list_of, shown

WORDS = Kind(lambda v: isinstance(v, (tuple, list)) and all(TEXT.allows(w) for w in v), "a list of words")


def grid_of(what: str) -> tuple[Kind, Distinct]:
    """A tuning grid of positive numbers: each value is one candidate run, so a repeat is refused."""
    return (list_of(POSITIVE, f"a non-empty list of positive numbers ({what})"),
            distinct(f"values ({what}: each is one candidate run)"))


def setting(*kinds: Kind, optional: bool = False) -> Any:
    """A field holding one value of ``kinds``; ``optional``: the key may be left out of the node (None)."""
    if optional:
        return field(default=None, metadata={"kinds": kinds, "optional": True})
    return field(metadata={"kinds": kinds})


def group(cls: type[Settings], each: bool = False, nullable: bool = False) -> Any:
    """A field holding a nested group of settings (``each``: a mapping or list of them); ``nullable``: or null
    (None)."""
    return field(metadata={"each" if each else "group": cls, "nullable": nullable})


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


def plain_node(value: Any) -> Any:
    """A composed node as plain values: interpolations resolved, lists as tuples (the settings are frozen)."""
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value, resolve=True)
    if isinstance(value, (list, tuple)):
        return tuple(plain_node(v) for v in value)
    if isinstance(value, dict):
        return {k: plain_node(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, kw_only=True)
class Settings:
    """A group's settings; ``KEY`` is where the group sits in the composed config (``key=``: elsewhere, such as
    a task inside a suite, for the messages)."""
    KEY: ClassVar[str]
    OPEN: ClassVar[bool] = False  # True: the node holds other owners' keys too (the root)
    key: InitVar[str | None] = None

    def __post_init__(self, key: str | None) -> None:
        at = self.KEY if key is None else key
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.metadata.get("optional"):
                continue
            for kind in f.metadata.get("kinds", ()):
                kind.check(_join(at, f.name), value)
        self.check(at)

    def check(self, key: str) -> None:
        """The rules between the group's own settings (``key``: where the group sits, for messages)."""

    @classmethod
    def read(cls, node: Mapping[str, Any], key: str | None = None) -> Settings:
        """The settings of ``node`` (a composed config node or a plain mapping) at ``key`` (default ``KEY``)."""
        at = cls.KEY if key is None else key
        declared = {f.name: f for f in fields(cls)}
        if cls.OPEN:
            node = {k: node[k] for k in declared if k in node}
        node = plain_node(node)
        if not isinstance(node, dict):
            raise ConfigError(f"{at}={shown(node)!r} is not allowed: expected a mapping of settings")
        unknown = [k for k in node if k not in declared]
        if unknown:
            raise ConfigError(f"{_join(at, unknown[0])} is not a setting: expected one of {', '.join(declared)}")
        values = {}
        for name, f in declared.items():
            if name in node:
                values[name] = _nested(f, node[name], _join(at, name))
            elif not f.metadata.get("optional"):
                kinds = f.metadata.get("kinds")
                raise ConfigError(f"{_join(at, name)} is missing: expected "
                                  f"{kinds[0].expected if kinds else 'a mapping of settings'}")
        return cls(**values, key=at)


def _nested(f, value: Any, key: str) -> Any:
    if value is None and f.metadata.get("nullable"):
        return None
    if "group" in f.metadata:
        return f.metadata["group"].read(value, key)
    if "each" in f.metadata:
        cls = f.metadata["each"]
        if isinstance(value, dict):
            return {k: cls.read(v, f"{key}.{k}") for k, v in value.items()}
        if isinstance(value, tuple):
            return tuple(cls.read(v, f"{key}[{i}]") for i, v in enumerate(value))
        raise ConfigError(f"{key}={shown(value)!r} is not allowed: expected a mapping or list of settings")
    return value
