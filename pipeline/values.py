"""What a setting's value may be: kinds of number, true/false, names from a closed set, lists.

The one set of helpers every check uses (the settings of ``pipeline.settings``, the model's config, the
report's statistics). A number is never NaN or infinite: ``is_number`` refuses both, so a range check
such as "a positive number" cannot be passed by ``inf`` or slip through on ``nan``'s failed comparisons.
A ``Kind`` says what is allowed in the words a message gives after "expected", and ``Kind.check`` raises
the lab's one-line ``ConfigError`` naming the key, the value and that. Torch-free: the validator imports it.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from pipeline.errors import ConfigError


def is_int(v: Any) -> bool:
    """An integer (true and false are not numbers here, though Python counts them as ints)."""
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    """A finite integer or float: NaN and infinities are refused."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def shown(value: Any) -> Any:
    """A value as a message shows it: a list as a list (settings hold tuples), a mapping as a dict."""
    if isinstance(value, (tuple, list)):
        return [shown(v) for v in value]
    if isinstance(value, dict):
        return {k: shown(v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Kind:
    """What a setting may be: ``ok(value)`` and, for the message, the words after "expected"."""
    ok: Callable[[Any], bool]
    expected: str

    def allows(self, value: Any) -> bool:
        try:
            return bool(self.ok(value))
        except TypeError:  # a comparison of the wrong type: not allowed
            return False

    def problem(self, value: Any) -> str | None:
        """Why ``value`` is not allowed (the message after "is not allowed: "), or None."""
        return None if self.allows(value) else f"expected {self.expected}"

    def check(self, key: str, value: Any) -> None:
        problem = self.problem(value)
        if problem is not None:
            raise ConfigError(f"{key}={shown(value)!r} is not allowed: {problem}")

    def or_null(self, why: str = "") -> Kind:
        """The same, or null (``why``: what null means, e.g. " (optional: all cores)")."""
        return Kind(lambda v: v is None or self.allows(v), f"{self.expected} or null{why}")

    def saying(self, expected: str) -> Kind:
        """The same rule in the words of ``expected``."""
        return Kind(self.ok, expected)


def integer(at_least: int | None = None, at_most: int | None = None, expected: str | None = None) -> Kind:
    if expected is None:
        expected = ("an integer" if at_least is None else f"an integer >= {at_least}") + \
                   ("" if at_most is None else f" and <= {at_most}")
    return Kind(lambda v: is_int(v) and (at_least is None or v >= at_least) and (at_most is None or v <= at_most),
                expected)


def number(low: float, high: float | None = None, *, low_open: bool = False, high_open: bool = False,
           expected: str | None = None) -> Kind:
    """A finite number from ``low`` up to ``high`` (either end open; no ``high``: no upper bound)."""
    def ok(v: Any) -> bool:
        return is_number(v) and (v > low if low_open else v >= low) and \
            (high is None or (v < high if high_open else v <= high))

    if expected is None and high is None:
        expected = f"a number {'>' if low_open else '>='} {low:g}"
    elif expected is None:
        expected = f"a number in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    return Kind(ok, expected)


POSITIVE_INT = integer(1, expected="a positive integer")
NON_NEGATIVE_INT = integer(0, expected="a non-negative integer")
POSITIVE = number(0, low_open=True, expected="a positive number")
NON_NEGATIVE = number(0, expected="a number >= 0")
PROBABILITY = number(0, 1, expected="a probability in [0, 1]")
FINITE = Kind(is_number, "a finite number")
BOOL = Kind(lambda v: isinstance(v, bool), "true or false")
TEXT = Kind(lambda v: isinstance(v, str) and v != "", "a non-empty string")
MAPPING = Kind(lambda v: isinstance(v, dict), "a mapping of settings")
BETAS = Kind(lambda v: isinstance(v, (tuple, list)) and len(v) == 2 and all(number(0, 1, high_open=True).allows(b)
                                                                           for b in v), "two numbers in [0, 1)")
DURATION = Kind(lambda v: isinstance(v, str) and re.fullmatch(r"\d+:\d\d:\d\d:\d\d", v) is not None,
                'a wall-clock budget "DD:HH:MM:SS"')  # Lightning's max_time format


def one_of(names: Sequence[str]) -> Kind:
    return Kind(lambda v: isinstance(v, str) and v in names, f"one of {', '.join(names)}")


def list_of(item: Kind, expected: str) -> Kind:
    """A non-empty list whose every entry is an ``item``."""
    return Kind(lambda v: isinstance(v, (tuple, list)) and len(v) > 0 and all(item.allows(x) for x in v), expected)


@dataclass(frozen=True)
class Distinct(Kind):
    """A list whose entries are runs (seeds, modes, variants): a repeated entry is refused, naming it."""

    def problem(self, value: Any) -> str | None:
        values = list(value or ())
        repeated = next((v for i, v in enumerate(values) if v in values[:i]), None)
        if repeated is None:
            return None
        return f"{repeated!r} is listed {values.count(repeated)} times; expected distinct {self.expected}"


def distinct(what: str) -> Distinct:
    return Distinct(lambda v: True, what)
