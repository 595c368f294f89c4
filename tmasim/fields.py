"""Field readers: turn one raw TOML value into a checked Python value, or a precise error.

Each reader takes the dotted field name (for the message) and the raw value, and either
returns the engine's representation (integer picoseconds, bytes, ...) or raises
:class:`~tmasim.errors.ScenarioError` naming the field, the value and the rule it breaks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tmasim import units
from tmasim.errors import ScenarioError
from tmasim.suggest import did_you_mean


def integer(field: str, value: Any, *, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(field, value, "must be a whole number")
    if minimum is not None and value < minimum:
        raise ScenarioError(field, value, f"must be >= {minimum}")
    return value


def boolean(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(field, value, "must be true or false")
    return value


def text(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ScenarioError(field, value, "must be a string")
    return value


def choice(field: str, value: Any, options: tuple[str, ...]) -> str:
    if value not in options:
        raise ScenarioError(field, value, f"must be one of {', '.join(options)}{did_you_mean(value, options)}")
    return str(value)


def time(field: str, value: Any, *, positive: bool = True) -> int:
    """A time in integer picoseconds; ``positive`` refuses zero, else only negatives are refused."""
    ps = units.time_ps(value, field)
    if positive and ps <= 0:
        raise ScenarioError(field, value, "must be > 0")
    if ps < 0:
        raise ScenarioError(field, value, "must be >= 0")
    return ps


def size(field: str, value: Any, *, positive: bool = True) -> int:
    nbytes = units.size_bytes(value, field)
    if positive and nbytes <= 0:
        raise ScenarioError(field, value, "must be > 0")
    if nbytes < 0:
        raise ScenarioError(field, value, "must be >= 0")
    return nbytes


def quantity(field: str, value: Any, kind: str, *, positive: bool = True) -> float:
    """A quantity of ``kind`` (see :mod:`tmasim.units`) in engine units, as a float."""
    amount = units.parse(value, kind, field)
    if positive and amount <= 0:
        raise ScenarioError(field, value, "must be > 0")
    return amount


def table(field: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ScenarioError(field, value, "must be a table")
    return value


def reject_unknown(section: str, raw: Mapping[str, Any], known: tuple[str, ...]) -> None:
    """A mistyped key is an error, never a silently ignored default."""
    for key in raw:
        if key not in known:
            name = f"{section}.{key}" if section else key
            hint = did_you_mean(key, known)
            raise ScenarioError(name, raw[key], f"is not a known field{hint} (known: {', '.join(known)})")


def required(section: str, raw: Mapping[str, Any], key: str, context: str = "") -> Any:
    if key not in raw:
        name = f"{section}.{key}" if section else key
        raise ScenarioError(name, "(missing)", f"is required{context}")
    return raw[key]


@dataclass(frozen=True)
class Distribution:
    """A random per-tile quantity: ``kind`` with its parameters in picoseconds.

    Draws are redrawn while they are not positive (a truncated distribution), then rounded to
    whole picoseconds. ``seed`` overrides the run seed for this one source.
    """

    kind: str
    params: tuple[tuple[str, int], ...]
    seed: int | None = None

    def param(self, name: str) -> int:
        return dict(self.params)[name]


DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "normal": ("mean", "std"),
    "lognormal": ("mean", "std"),
    "uniform": ("low", "high"),
    "exponential": ("mean",),
}

# A per-tile time: one value for every tile, one value per tile, or a distribution.
TimeSpec = int | tuple[int, ...] | Distribution


def time_spec(field: str, value: Any, *, positive: bool = True) -> TimeSpec:
    """One time, a list with one time per tile, or ``{dist = "normal", mean = ..., std = ...}``."""
    if isinstance(value, list):
        if not value:
            raise ScenarioError(field, value, "must not be an empty list")
        return tuple(time(f"{field}[{i}]", v, positive=positive) for i, v in enumerate(value))
    if isinstance(value, Mapping):
        return distribution(field, value)
    return time(field, value, positive=positive)


def distribution(field: str, raw: Mapping[str, Any]) -> Distribution:
    kind = choice(f"{field}.dist", required(field, raw, "dist", " for a distribution"), tuple(DISTRIBUTIONS))
    names = DISTRIBUTIONS[kind]
    reject_unknown(field, raw, ("dist", "seed", *names))
    params = []
    for name in names:
        positive = name not in ("std", "low")
        value = required(field, raw, name, f" for dist = {kind!r}")
        params.append((name, time(f"{field}.{name}", value, positive=positive)))
    if kind == "uniform" and params[1][1] < params[0][1]:
        raise ScenarioError(f"{field}.high", raw["high"], f"must be >= low ({raw['low']})")
    seed = integer(f"{field}.seed", raw["seed"], minimum=0) if "seed" in raw else None
    return Distribution(kind, tuple(params), seed)
