"""The ledger's claims (``claims.yaml``), read and checked: each claim's practical margin before any training.

A claim reads "level" when the difference lies inside its margin (``stats.with_margin``), so the margin is part of
the claim, stated in the yaml with its reason, never chosen after the numbers are in. ``check`` refuses a margin
that is missing, not a number above zero, in a unit that does not fit what the claim reads (points of a score, or
similarity for the polysemy probe), or without its reason; and a fixed-set margin where a claim has no fixed-set
reading, or lacks one where it does. The check_conf stage runs it before any other stage, and the report again
when it loads the claims. Light on purpose (yaml and the lab's errors, no numpy, no torch): check_conf imports it.
"""
from __future__ import annotations

from pathlib import Path

import yaml

from pipeline.conf import CONF_DIR
from pipeline.errors import ConfigError
from pipeline.names import FAMILIES
from pipeline.values import TEXT, Kind, is_number, one_of

CLAIMS = Path(__file__).with_name("claims.yaml")
# a margin's unit -> its size in the metric's own units: a point is a hundredth of a share (accuracy 0.61) or of a
# correlation; the probe's corrected self-similarity is read as it is
UNITS = {"points": 0.01, "similarity": 1.0}
MARGIN_KEYS = ("value", "unit", "reason")
LEVEL = ("shown", "not shown")  # claims.yaml's ``level``: a level reading is the paper's direction, or it is not


def load(path: Path = CLAIMS) -> list[dict]:
    """The claims of ``path`` in order, each margin checked (``check``)."""
    claims = yaml.safe_load(path.read_text(encoding="utf-8"))
    check(claims, path)
    return claims


def in_units(margin: dict) -> float:
    """A margin of ``claims.yaml`` in the metric's own units (2 points of accuracy: 0.02)."""
    return margin["value"] * UNITS[margin["unit"]]


def unit_of(spec: dict) -> str:
    """The unit a claim's margin is stated in: similarity where it reads the polysemy probe, else points."""
    return "similarity" if any(m.get("probe") for m in spec["measure"]) else "points"


def reads_fixed(spec: dict, families: Path = FAMILIES) -> bool:
    """Whether a claim is also read on the fixed evaluation set: a measure of it names a family of pretraining
    variants (rows with ``variant:``), whose rows the report tests there too."""
    for m in spec["measure"]:
        table = families / f"{m.get('family')}.yaml"
        if "family" in m and table.exists():
            if any("variant" in row for row in yaml.safe_load(table.read_text(encoding="utf-8"))["rows"]):
                return True
    return False


def check(claims: list[dict], path: Path = CLAIMS, families: Path = FAMILIES) -> None:
    """Refuse, in one line naming the file and the key, a claim whose margins are missing or do not fit it."""
    where = _shown(path)
    for spec in claims:
        name = spec.get("id", "?")
        check_margin(f"{where}: {name}.margin", spec.get("margin"), unit_of(spec))
        fixed = reads_fixed(spec, families)
        if fixed:
            check_margin(f"{where}: {name}.fixed_margin", spec.get("fixed_margin"), "points")
        elif spec.get("fixed_margin") is not None:
            raise ConfigError(f"{where}: {name}.fixed_margin is not allowed: the claim has no fixed-set reading "
                              "(none of its measures is a family of pretraining variants)")
        if "level" in spec:
            one_of(LEVEL).check(f"{where}: {name}.level", spec["level"])


def check_margin(key: str, margin: object, unit: str) -> None:
    """One margin: a mapping of a value above zero, the claim's ``unit`` and a reason."""
    expected = f"{{value: a number > 0, unit: {unit}, reason: why a smaller difference is no practical one}}"
    if margin is None:
        raise ConfigError(f"{key} is missing: expected {expected}")
    if not isinstance(margin, dict):
        raise ConfigError(f"{key}={margin!r} is not allowed: expected {expected}")
    if missing := [k for k in MARGIN_KEYS if k not in margin]:
        raise ConfigError(f"{key}.{missing[0]} is missing: expected {expected}")
    if unknown := sorted(set(margin) - set(MARGIN_KEYS)):
        raise ConfigError(f"{key}.{unknown[0]} is not allowed: expected only {', '.join(MARGIN_KEYS)}")
    Kind(lambda v: is_number(v) and v > 0, f"a number > 0 ({unit})").check(f"{key}.value", margin["value"])
    Kind(lambda v: v == unit, f"{unit} (the unit of what the claim reads)").check(f"{key}.unit", margin["unit"])
    TEXT.check(f"{key}.reason", margin["reason"])


def _shown(path: Path) -> str:
    """``path`` relative to the repository where it lies in it (``pipeline/report/claims.yaml``)."""
    path, root = Path(path).resolve(), CONF_DIR.parent
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
