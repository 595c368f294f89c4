"""Units at the boundary: parsed with pint, rounded to the nearest engine unit."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tmasim import units
from tmasim.errors import UnitError
from tmasim.unit_factors import FACTORS, UNITS


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


def test_every_listed_factor_is_pints_own() -> None:
    """The units read without loading pint carry the factor pint computes for them, bit for bit
    (pint's own rounding included: its nanosecond is 1000.0000000000001 ps)."""
    assert {kind: tuple(factors) for kind, factors in FACTORS.items()} == UNITS
    assert units.pint_factors() == FACTORS
    assert FACTORS["time"]["ns"] == 1000.0000000000001


_LISTED = [(kind, text) for kind, texts in UNITS.items() for text in texts]


@given(listed=st.sampled_from(_LISTED), number=st.floats(min_value=0, max_value=1e30, allow_nan=False),
       space=st.sampled_from(["", " ", "  "]))
def test_a_listed_unit_reads_as_pint_reads_it(listed, number, space) -> None:
    kind, text = listed
    written = f"{number!r}{space}{text}"
    assert units.parse(written, kind, "f") == units._with_pint(number, text, kind, "f", written)


def test_a_unit_of_another_kind_or_unlisted_goes_through_pint_and_its_messages() -> None:
    assert "Gbit/s" not in UNITS["bandwidth"] and "min" not in UNITS["time"]
    assert units.parse("8 Gbit/s", "bandwidth", "f") == pytest.approx(1e-3)  # 1 GB/s in B/ps
    assert units.parse("1 min", "time", "f") == 60e12
    with pytest.raises(UnitError, match=r"f: '3 GB/s' is not a time"):
        units.parse("3 GB/s", "time", "f")


def test_reading_the_bundled_scenarios_does_not_load_pint() -> None:
    code = ("import sys; from tmasim.scenario import load, bundled_names\n"
            "[load(name, []) for name in bundled_names()]\n"
            "print('pint' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
