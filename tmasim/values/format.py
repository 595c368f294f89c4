"""One formatter for quantities, used by the CLI, the report, the figures and the benchmarks.

Rules, the same everywhere:

* Four significant digits, trailing zeros dropped: ``23 µs``, ``1.842 ms``, ``219.3 µs``; the
  unit is the largest that keeps the number at 1 or more (a value that rounds up to 1000 moves
  to the next unit: ``1 ms``, not ``1000 µs``).
* Microseconds are spelled ``µs``; where standard output cannot print ``µ`` (an ASCII
  terminal), ``us``. Text meant for files (HTML, figures) asks for ``µs`` with ``unicode=True``.
* Sizes of memories and buffers (shared memory, L2, a box, bytes in flight) take binary
  prefixes, as the hardware is sized: ``228 KiB``, ``50 MiB``. Amounts moved over a link and
  bandwidths take decimal prefixes, as datasheets give bandwidths, so that an amount over a
  bandwidth reads directly: ``HBM 1.61 GB`` at ``3.35 TB/s``.
* A zero that means "nothing happened" (a stall that never occurred) is given as ``zero="none"``
  by the caller; a missing value (``None`` or NaN) is ``-``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from typing import Any

PS_PER_S = 10**12

MISSING = "-"
DIGITS = 4

# (scale, unit) from the largest down; times are in picoseconds.
_TIME = ((10**12, "s"), (10**9, "ms"), (10**6, "µs"), (10**3, "ns"), (1, "ps"))
_SIZE = ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB"), (1, "B"))
_AMOUNT = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1, "B"))
_RATE = ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1, "B/s"))
_FLOP_RATE = ((1e15, "PFLOP/s"), (1e12, "TFLOP/s"), (1e9, "GFLOP/s"), (1e6, "MFLOP/s"), (1, "FLOP/s"))
_FLOPS = ((1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"), (1, "FLOP"))
UNITS = {"time": _TIME, "size": _SIZE, "amount": _AMOUNT, "rate": _RATE, "flop_rate": _FLOP_RATE,
         "flops": _FLOPS}


def printable(text: str, unicode: bool | None = None) -> bool:
    """Whether ``text`` can be printed: ``unicode=None`` asks standard output's encoding."""
    if unicode is not None:
        return unicode
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def escaped(text: str) -> str:
    """``text`` with each control character written as its escape (``\\x1b``): a value from a
    file or a ``--vary`` is shown, never acted on by the terminal."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def micro(unicode: bool | None = None) -> str:
    """``µ``, or ``u`` where it cannot be printed."""
    return "µ" if printable("µ", unicode) else "u"


def arrow(unicode: bool | None = None) -> str:
    """``→``, or ``->`` where it cannot be printed."""
    return "→" if printable("→", unicode) else "->"


def missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def whole(value: Any) -> Any:
    """A whole-valued float as the int it was: a count read back from a table column that also
    holds missing values (Parquet, CSV and pandas store such a column as floats) prints as
    ``2``, not ``2.0``. Anything else is returned as it is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def plural(count: int | float, noun: str) -> str:
    """``1 stage``, ``4 stages``; a count read back from a table as a float prints as an int."""
    count = whole(count)
    return f"{count} {noun}" if count == 1 else f"{count} {noun}{'es' if noun.endswith('s') else 's'}"


def as_written(row: Mapping[str, Any]) -> dict[str, Any]:
    """A table row with every whole-valued float back to an int (:func:`whole`), so that a
    sentence made from it reads as the run's own summary does (``2 stages``, ``1 CTA``)."""
    return {key: whole(value) for key, value in row.items()}


def scaled(value: float, kind: str, digits: int = DIGITS) -> tuple[str, str]:
    """(number, unit) of ``value`` in the largest unit of ``kind`` that keeps it at 1 or more."""
    table = UNITS[kind]
    magnitude = abs(value)
    for i, (scale, unit) in enumerate(table):
        if magnitude >= scale or i == len(table) - 1:
            number = _number(value / scale, digits)
            if i > 0 and abs(float(number)) >= 1000:  # 999.97 µs rounds to 1000: say 1 ms
                scale, unit = table[i - 1]
                number = _number(value / scale, digits)
            return number, unit
    raise AssertionError("unreachable")


def _number(x: float, digits: int) -> str:
    text = f"{x:.{digits}g}"
    if "e" in text:  # 12345 in units of the largest: write it out
        text = f"{x:.0f}"
    return "0" if text == "-0" else text


def _quantity(value: Any, kind: str, digits: int, zero: str | None, unicode: bool | None = True) -> str:
    if missing(value):
        return MISSING
    if math.isinf(value):
        return "unlimited" if value > 0 else "-unlimited"
    if zero is not None and value == 0:
        return zero
    number, unit = scaled(float(value), kind, digits)
    if unit == "µs":
        unit = f"{micro(unicode)}s"
    return f"{number} {unit}"


def time(ps: Any, digits: int = DIGITS, *, zero: str | None = None, unicode: bool | None = None) -> str:
    """A time given in picoseconds: ``23 µs``, ``1.842 ms``, ``640 ns``."""
    return _quantity(ps, "time", digits, zero, unicode)


def time_ns(ns: Any, digits: int = DIGITS, *, zero: str | None = None, unicode: bool | None = None) -> str:
    """A time given in nanoseconds (the summary's ``*_ns`` figures)."""
    return time(None if missing(ns) else float(ns) * 1000, digits, zero=zero, unicode=unicode)


def size(nbytes: Any, digits: int = DIGITS, *, zero: str | None = None) -> str:
    """A memory or buffer size, binary prefixes: ``228 KiB``, ``50 MiB``, ``160 B``."""
    return _quantity(nbytes, "size", digits, zero)


def amount(nbytes: Any, digits: int = DIGITS, *, zero: str | None = None) -> str:
    """Bytes moved over a link, decimal prefixes (as its bandwidth): ``1.61 GB``."""
    return _quantity(nbytes, "amount", digits, zero)


def rate(bytes_per_s: Any, digits: int = DIGITS, *, zero: str | None = None) -> str:
    """A bandwidth, decimal prefixes as datasheets give them: ``3.35 TB/s``."""
    return _quantity(bytes_per_s, "rate", digits, zero)


def flop_rate(flops_per_s: Any, digits: int = DIGITS, *, zero: str | None = None) -> str:
    """A compute rate: ``989.4 TFLOP/s``."""
    return _quantity(flops_per_s, "flop_rate", digits, zero)


def flops(count: Any, digits: int = DIGITS) -> str:
    """An amount of work: ``1.1 TFLOP``."""
    return _quantity(count, "flops", digits, None)


def percent(fraction: Any, *, zero: str | None = None) -> str:
    """A share: whole percent from 10% on (``45%``), two significant digits below (``4.5%``,
    ``0.02%``), so that a small share never reads as ``0%``."""
    if missing(fraction):
        return MISSING
    if zero is not None and fraction == 0:
        return zero
    value = float(fraction) * 100
    if value == 0 or abs(value) >= 10:
        return f"{value:.0f}%"
    return f"{value:.2g}%"


def unit_for(kind: str, peak: float) -> tuple[float, str]:
    """(scale, unit) for an axis whose largest value is ``peak`` (in the kind's base unit):
    the unit keeps the axis's numbers between about 1 and 2000."""
    table = UNITS[kind]
    for scale, unit in table:
        if abs(peak) >= 2 * scale:
            return scale, unit
    return table[-1]
