"""Field readers: turn one raw TOML value into a checked Python value, or a precise error.

Each reader takes the dotted field name (for the message) and the raw value, and either
returns the engine's representation (integer picoseconds, bytes, ...) or raises
:class:`~tmasim.errors.ScenarioError` naming the field, the value and the rule it breaks.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tmasim.errors import ScenarioError
from tmasim.suggest import did_you_mean
from tmasim.values import units

# Upper bounds that keep every engine count inside 64 bits and every run inside memory:
# no copy, tile, latency or cost on a GPU is anywhere near a second, and no buffer near a PiB.
MAX_TIME_PS = units.PS_PER_S
MAX_SIZE_BYTES = 2**50


def integer(field: str, value: Any, *, minimum: int | None = None, maximum: int | None = None,
            why: str = "") -> int:
    """A whole number (``3``, never ``3.0``, ``1.5`` or ``true``) within the given bounds."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(field, value, "must be a whole number")
    if minimum is not None and value < minimum:
        raise ScenarioError(field, value, f"must be >= {minimum}")
    if maximum is not None and value > maximum:
        raise ScenarioError(field, value, f"must be <= {maximum:,}{why}")
    return value


def boolean(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ScenarioError(field, value, "must be true or false")
    return value


MAX_NAME = 200  # characters of a name: it titles summaries, figures and report pages


def text(field: str, value: Any, *, allowed: str = "\n\t", max_length: int | None = None) -> str:
    """A string that prints as itself: a control character (a terminal escape, a bell, a NUL, a
    carriage return) would act rather than show, so it is refused, shown escaped; ``allowed``
    lists the ones a longer text may hold (new lines and tabs in a description)."""
    if not isinstance(value, str):
        raise ScenarioError(field, value, "must be a string")
    bad = next((c for c in value if not c.isprintable() and c not in allowed), None)
    if bad is not None:
        raise ScenarioError(field, value, f"must not contain control characters (it has {bad!r} at position "
                                          f"{value.index(bad)})")
    if max_length is not None and len(value) > max_length:
        raise ScenarioError(field, value, f"is {len(value):,} characters long; a name has at most {max_length}")
    return value


def name(field: str, value: Any) -> str:
    """A name (a scenario's, a GPU's): one printable line of at most :data:`MAX_NAME` characters."""
    return text(field, value, allowed="", max_length=MAX_NAME)


def choice(field: str, value: Any, options: tuple[str, ...]) -> str:
    if value not in options:
        raise ScenarioError(field, value, f"must be one of {', '.join(options)}{did_you_mean(value, options)}")
    return str(value)


def time(field: str, value: Any, *, positive: bool = True) -> int:
    """A time in integer picoseconds; ``positive`` refuses zero, else only negatives are refused."""
    return checked_time(field, units.time_ps(value, field), positive=positive, shown=value)


def checked_time(field: str, ps: Any, *, positive: bool = True, shown: Any = None) -> int:
    """An engine time (integer ps) within the rules; ``shown`` is what the user wrote."""
    shown = ps if shown is None else shown
    if isinstance(ps, bool) or not isinstance(ps, int):
        raise ScenarioError(field, shown, "must be a whole number of picoseconds")
    if positive and ps <= 0:
        raise ScenarioError(field, shown, "must be > 0")
    if ps < 0:
        raise ScenarioError(field, shown, "must be >= 0")
    if ps > MAX_TIME_PS:
        raise ScenarioError(field, shown, "must be at most 1 s (the engine counts picoseconds in 64 bits)")
    return ps


def size(field: str, value: Any, *, positive: bool = True) -> int:
    return checked_size(field, units.size_bytes(value, field), positive=positive, shown=value)


def checked_size(field: str, nbytes: Any, *, positive: bool = True, shown: Any = None) -> int:
    """An engine size (integer bytes) within the rules; ``shown`` is what the user wrote."""
    shown = nbytes if shown is None else shown
    if isinstance(nbytes, bool) or not isinstance(nbytes, int):
        raise ScenarioError(field, shown, "must be a whole number of bytes")
    if positive and nbytes <= 0:
        raise ScenarioError(field, shown, "must be > 0")
    if nbytes < 0:
        raise ScenarioError(field, shown, "must be >= 0")
    if nbytes > MAX_SIZE_BYTES:
        raise ScenarioError(field, shown, "must be at most 1 PiB")
    return nbytes


def quantity(field: str, value: Any, kind: str, *, positive: bool = True) -> float:
    """A quantity of ``kind`` (see :mod:`tmasim.units`) in engine units, as a float."""
    return checked_quantity(field, units.parse(value, kind, field), positive=positive, shown=value)


def checked_quantity(field: str, amount: Any, *, positive: bool = True, shown: Any = None) -> float:
    """An engine quantity (a float in engine units): finite, and > 0 or >= 0."""
    shown = amount if shown is None else shown
    if isinstance(amount, bool) or not isinstance(amount, (int, float)) or not math.isfinite(amount):
        raise ScenarioError(field, shown, "must be a finite number")
    if positive and amount <= 0:
        raise ScenarioError(field, shown, "must be > 0")
    if amount < 0:
        raise ScenarioError(field, shown, "must be >= 0")
    return float(amount)


def table(field: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ScenarioError(field, value, "must be a table")
    return value


MAX_DIGITS = 4300  # Python's limit on reading an integer from text (sys.get_int_max_str_digits)


def toml_text(field: str, where: str, text: str) -> dict[str, Any]:
    """TOML text as a table; a UTF-8 byte-order mark is accepted, nesting too deep for the
    parser is an error like any other."""
    import tomllib

    try:
        table = tomllib.loads(text.removeprefix("\ufeff"))
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(field, where, f"is not valid TOML ({err})") from None
    except RecursionError:
        raise ScenarioError(field, where, "is not valid TOML (nested too deeply)") from None
    except ValueError:  # Python refuses to read an integer of more than 4300 digits
        raise ScenarioError(field, where, f"holds a number of more than {MAX_DIGITS} digits, which no field "
                                          "takes") from None
    depth = _depth(table)
    if depth > MAX_TOML_DEPTH:  # no scenario nests this deep; copying such a table would exhaust the stack
        raise ScenarioError(field, where, f"nests tables {depth:,} deep, where no scenario field is deeper than "
                                          f"{MAX_TOML_DEPTH}")
    return table


MAX_TOML_DEPTH = 16


def _depth(value: Any) -> int:
    """How deep tables and lists nest in ``value`` (counted without recursion)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(item, Mapping):
            stack.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, level + 1) for v in item)
    return deepest


def is_file(path: Any) -> bool:
    """``Path.is_file`` that says False, rather than raising, for names the OS refuses."""
    from pathlib import Path

    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def toml_file(field: str, path: Any) -> dict[str, Any]:
    """A TOML file as a table: unreadable files and bytes that are not UTF-8 are errors naming it."""
    from pathlib import Path

    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ScenarioError(field, str(path), f"is not UTF-8 text ({err.reason} at byte {err.start})") from None
    except (OSError, ValueError) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise ScenarioError(field, str(path), f"cannot be read: {reason}") from None
    return toml_text(field, str(path), text)


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
    where: str = dataclasses.field(default="workload", compare=False)  # the field, for messages

    def __post_init__(self) -> None:
        names = DISTRIBUTIONS.get(self.kind) if isinstance(self.kind, str) else None
        if names is None:
            raise ScenarioError(f"{self.where}.dist", self.kind, f"must be one of {', '.join(DISTRIBUTIONS)}")
        pairs = isinstance(self.params, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in self.params)
        given = tuple(name for name, _ in self.params) if pairs else None
        if given != names:
            shown = dict(self.params) if pairs else self.params
            raise ScenarioError(self.where, shown, f"must give {', '.join(names)} for dist = {self.kind!r} (as "
                                "(name, picoseconds) pairs, in that order)")
        for name, ps in self.params:
            checked_time(f"{self.where}.{name}", ps, positive=name not in ("std", "low"))
        if self.kind == "uniform" and self.params[1][1] < self.params[0][1]:
            raise ScenarioError(f"{self.where}.high", self.params[1][1], f"must be >= low ({self.params[0][1]} ps)")
        if self.seed is not None:
            integer(f"{self.where}.seed", self.seed, minimum=0)

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
    return Distribution(kind, tuple(params), seed, field)


def check_time_spec(field: str, spec: Any, *, positive: bool = True) -> None:
    """A parsed :data:`TimeSpec` (as a config holds it) within the rules: for configs that
    validate themselves, so that one edited with ``dataclasses.replace`` is checked too."""
    if isinstance(spec, Distribution):
        return
    if isinstance(spec, tuple):
        if not spec:
            raise ScenarioError(field, list(spec), "must not be an empty list")
        for i, ps in enumerate(spec):
            checked_time(f"{field}[{i}]", ps, positive=positive)
        return
    checked_time(field, spec, positive=positive)
