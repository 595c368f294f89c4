"""Units at the boundary: parsed with pint, rounded to the nearest engine unit."""

from __future__ import annotations

import pytest

from tmasim import units
from tmasim.errors import UnitError


@pytest.mark.parametrize(("text", "ps"), [
    ("3 us", 3_000_000), ("5 µs", 5_000_000), ("5 μs", 5_000_000), ("0.1 us", 100_000),
    ("3 ns", 3_000), ("1e3 ns", 1_000_000), ("12 ms", 12 * 10**9), ("7 ps", 7), ("1.0000005 us", 1_000_000 + 1),
])
def test_times_round_to_the_nearest_picosecond(text, ps):
    assert units.time_ps(text, "f") == ps


@pytest.mark.parametrize(("text", "kind", "value"), [
    ("228 KiB", "size", 233472), ("3 kB", "size", 3000), ("4.8 TB/s", "bandwidth", 4.8),
    ("3.35 TB/s", "bandwidth", 3.35), ("1.98 GHz", "frequency", 1.98e9), ("989 TFLOP/s", "flop_rate", 989.0),
])
def test_other_kinds(text, kind, value):
    assert units.parse(text, kind, "f") == pytest.approx(value)


@pytest.mark.parametrize(("text", "kind", "message"), [
    ("3 GB", "time", "is not a time"), ("3 us", "size", "is not a size"), ("3 uss", "time", "is not a quantity"),
    ("", "time", "is not a"), (3.0, "time", "give a string with a unit"), ("3", "time", "is not a time"),
])
def test_wrong_kinds_are_refused(text, kind, message):
    with pytest.raises(UnitError, match=message):
        units.parse(text, kind, "field.name")


def test_the_deprecated_formatters_are_tmasim_format():
    assert units.format_time(23_028_300) == "23.03 µs"
    assert units.format_bytes(233472) == "228 KiB"
    assert units.format_rate(3.35e12) == "3.35 TB/s"
