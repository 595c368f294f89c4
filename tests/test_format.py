"""One formatter for quantities: the same digits, units and spellings everywhere."""

from __future__ import annotations

import io
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tmasim import format as fmt


@pytest.mark.parametrize(("ps", "text"), [
    (23_000_000, "23 µs"), (23_028_300, "23.03 µs"), (1_842_000_000, "1.842 ms"), (219_300_000, "219.3 µs"),
    (640_000, "640 ns"), (12, "12 ps"), (0, "0 ps"), (999_970_000, "1 ms"), (999_949_000, "999.9 µs"),
    (5 * 10**15, "5000 s"), (-5_000, "-5 ns"),
])
def test_times_take_four_significant_digits_in_the_largest_unit(ps, text):
    assert fmt.time(ps, unicode=True) == text


def test_missing_and_nothing():
    assert fmt.time(None) == fmt.time(math.nan) == fmt.size(None) == "-"
    assert fmt.time(0, zero="none") == "none"
    assert fmt.time(7, zero="none") == "7 ps"
    assert fmt.rate(math.inf) == "unlimited"


def test_micro_falls_back_to_ascii_where_stdout_cannot_print_it(monkeypatch):
    monkeypatch.setattr("sys.stdout", io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    assert fmt.time(23_000_000) == "23 us"
    assert fmt.arrow() == "->"
    monkeypatch.setattr("sys.stdout", io.TextIOWrapper(io.BytesIO(), encoding="utf-8"))
    assert fmt.time(23_000_000) == "23 µs"
    assert fmt.arrow() == "→"
    assert fmt.time(23_000_000, unicode=False) == "23 us"


def test_sizes_are_binary_and_amounts_moved_are_decimal():
    assert fmt.size(228 * 1024) == "228 KiB"
    assert fmt.size(50 * 2**20) == "50 MiB"
    assert fmt.size(160) == "160 B"
    assert fmt.amount(1_610_612_736) == "1.611 GB"
    assert fmt.rate(3.35e12) == "3.35 TB/s"
    assert fmt.flop_rate(989.4e12) == "989.4 TFLOP/s"
    assert fmt.flop_rate(1978.9e12) == "1.979 PFLOP/s"


@pytest.mark.parametrize(("share", "text"), [(0.4537, "45%"), (0.045, "4.5%"), (0.0002, "0.02%"), (1.0, "100%"),
                                             (0.0, "0%")])
def test_percent_never_rounds_a_small_share_to_zero(share, text):
    assert fmt.percent(share) == text


@given(st.integers(min_value=1, max_value=10**16))
def test_a_time_reads_back_to_four_digits(ps):
    number, unit = fmt.scaled(ps, "time")
    scale = dict((u, s) for s, u in fmt.UNITS["time"])[unit]
    assert 1 <= abs(float(number)) < 1000 or unit == "s"
    assert float(number) * scale == pytest.approx(ps, rel=5e-4)


def test_axis_units():
    assert fmt.unit_for("time", 5e6) == (10**6, "µs")
    assert fmt.unit_for("time", 1.5e6) == (10**3, "ns")
    assert fmt.unit_for("size", 3 * 2**20) == (2**20, "MiB")
