"""Quantities with units at the boundary, integers inside the engine.

The engine counts time in integer picoseconds, data in integer bytes and work in FLOPs.
Strings such as ``"3 us"``, ``"5 µs"``, ``"4.8 TB/s"``, ``"228 KiB"`` or ``"1.98 GHz"`` are
parsed with pint (over a small registry of our own, ``units.txt``, so that bytes are a
dimension of their own rather than pint's dimensionless ``byte``) and rounded to the nearest
integer unit, never truncated: ``"5 us"`` is 5 000 000 ps, not 4 999 999.

A quantity is exactly a finite number and a unit, nothing else: ``"3 us"``, ``"3us"``,
``"1e3 ns"``, ``"4.8 TB/s"``. The text is checked against :data:`QUANTITY` before pint sees it
(the usual units are read with pint's own factors without loading pint: :mod:`tmasim.unit_factors`),
so pint only converts a unit: arithmetic (``"3 us * 2"``, ``"2**10 us"``), a bare unit
(``"us"``), a trailing number (``"3 us 4"``), ``nan``, ``inf`` and numbers too big for a
float (``"1e400 us"``) are refused with a message naming the field.
"""

from __future__ import annotations

import functools
import math
import re
from importlib import resources
from typing import Any

from tmasim.errors import UnitError
from tmasim.values.unit_factors import FACTORS, UNITS

PS_PER_S = 10**12
PS_PER_NS = 1000
PS_PER_US = 10**6

# What each kind of quantity is called in messages, its pint dimensionality and the unit the
# engine counts it in.
_KINDS: dict[str, tuple[str, str]] = {
    "time": ("[time]", "ps"),
    "size": ("[data]", "B"),
    "bandwidth": ("[data] / [time]", "B/ps"),
    "frequency": ("1 / [time]", "Hz"),
    "flops": ("[arithmetic]", "FLOP"),
    "flop_rate": ("[arithmetic] / [time]", "FLOP/ps"),
    "cycles": ("[clock]", "cycle"),
    "bytes_per_cycle": ("[data] / [clock]", "B/cycle"),
}
_NOUNS = {"time": "time", "size": "size", "bandwidth": "bandwidth", "frequency": "frequency",
          "flops": "FLOP count", "flop_rate": "FLOP rate", "cycles": "cycle count",
          "bytes_per_cycle": "bandwidth per cycle"}
_EXAMPLES = {
    "time": "'3 us'",
    "size": "'228 KiB'",
    "bandwidth": "'3.35 TB/s'",
    "frequency": "'1.98 GHz'",
    "flops": "'4 GFLOP'",
    "flop_rate": "'989 TFLOP/s'",
    "cycles": "'690 cycles'",
    "bytes_per_cycle": "'128 B/cycle'",
}


# A number (decimal or scientific, optionally signed), optional spaces, then a unit: words of
# letters (µ and μ included) joined by at most one "/" (``TB/s``, ``FLOP/s``, ``B/clk``).
QUANTITY = re.compile(
    r"[ \t]*(?P<number>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
    r"[ \t]*(?P<unit>[A-Za-zµμ]+(?:[ \t]*/[ \t]*[A-Za-zµμ]+)?)[ \t]*", re.ASCII)  # digits 0-9 only
BARE_NUMBER = re.compile(r"[ \t]*[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?[ \t]*", re.ASCII)
RULE = "a finite number and a unit, nothing else"


@functools.cache
def _registry() -> Any:
    import pint

    definitions = resources.files("tmasim").joinpath("units.txt")
    with resources.as_file(definitions) as path:
        return pint.UnitRegistry(str(path), autoconvert_offset_to_baseunit=False)


def parse(text: Any, kind: str, field: str) -> float:
    """Return ``text`` (a string with a unit) in the engine's unit for ``kind``, as a float.

    Raises :class:`UnitError` naming ``field`` when ``text`` is not a quantity of that kind.
    Bare numbers are refused: a unit-less ``3`` for a time is a classic source of 10^6 errors.
    """
    if not isinstance(text, str):
        raise UnitError(field, text, f"is not a {_NOUNS[kind]}: give a string with a unit, like {_EXAMPLES[kind]}")
    match = QUANTITY.fullmatch(text)
    if match is None:
        if BARE_NUMBER.fullmatch(text):
            raise UnitError(field, text, f"is not a {_NOUNS[kind]}: it has no unit; give one, like {_EXAMPLES[kind]}")
        raise UnitError(field, text, f"is not a quantity: expected {RULE}, like {_EXAMPLES[kind]}")
    number = float(match["number"])
    if not math.isfinite(number):
        raise UnitError(field, text, f"is not a finite number: expected {RULE}, like {_EXAMPLES[kind]}")
    unit_text = re.sub(r"[ \t]", "", match["unit"])
    factor = FACTORS[kind].get(unit_text)  # pint's own factor for this unit (tmasim.unit_factors)
    value = number * factor if factor is not None else _with_pint(number, match["unit"], kind, field, text)
    if not math.isfinite(value):
        raise UnitError(field, text, f"is too large: expected {RULE}, like {_EXAMPLES[kind]}")
    return value


def _with_pint(number: float, unit: str, kind: str, field: str, text: str) -> float:
    """``number`` of ``unit`` (as written) in the engine's unit for ``kind``, converted by pint."""
    dimensionality, engine_unit = _KINDS[kind]
    ureg = _registry()
    try:
        unit_of_text = ureg.parse_units(re.sub(r"[ \t]", "", unit))
    except Exception:
        raise UnitError(field, text, f"is not a quantity: {unit!r} is not a unit; expected {RULE}, "
                                     f"like {_EXAMPLES[kind]}") from None
    if unit_of_text.dimensionality != ureg.get_dimensionality(dimensionality):
        raise UnitError(field, text, f"is not a {_NOUNS[kind]}: expected a quantity like {_EXAMPLES[kind]}")
    return float(ureg.Quantity(number, unit_of_text).to(engine_unit).magnitude)


def pint_factors() -> dict[str, dict[str, float]]:
    """Each unit of :data:`tmasim.unit_factors.UNITS` with the factor pint converts it to its
    kind's engine unit by (what :data:`~tmasim.unit_factors.FACTORS` must list)."""
    ureg = _registry()
    return {kind: {text: float(ureg.Quantity(1.0, ureg.parse_units(text)).to(_KINDS[kind][1]).magnitude)
                   for text in texts} for kind, texts in UNITS.items()}


def print_factors() -> None:
    """Print :func:`pint_factors` as the body of ``FACTORS`` in tmasim/unit_factors.py."""
    for kind, factors in pint_factors().items():
        print(f'    "{kind}": {{')
        for text, factor in factors.items():
            print(f'        "{text}": {factor!r},')
        print("    },")


def parse_int(text: Any, kind: str, field: str) -> int:
    """:func:`parse`, rounded to the nearest integer engine unit (picoseconds, bytes, FLOPs)."""
    return round(parse(text, kind, field))


def time_ps(text: Any, field: str) -> int:
    """A time string as integer picoseconds, rounded to the nearest picosecond."""
    return parse_int(text, "time", field)


def size_bytes(text: Any, field: str) -> int:
    """A data size as integer bytes; also accepts a plain non-negative integer count of bytes."""
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    return parse_int(text, "size", field)


# Deprecated: kept for code written before tmasim.format; use tmasim.format (time, size, rate).


def format_time(ps: float, digits: int = 4) -> str:
    """Deprecated: :func:`tmasim.format.time`."""
    from tmasim.values import format as fmt

    return fmt.time(ps, digits)


def format_bytes(n: float) -> str:
    """Deprecated: :func:`tmasim.format.size`."""
    from tmasim.values import format as fmt

    return fmt.size(n)


def format_rate(bytes_per_s: float) -> str:
    """Deprecated: :func:`tmasim.format.rate`."""
    from tmasim.values import format as fmt

    return fmt.rate(bytes_per_s)
