"""ExactSum: the exact sum of fast-forward's per-cut parts, as math.fsum of them, in bounded memory."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from tmasim.engine.fast_forward import exact_sum
from tmasim.engine.fast_forward.exact_sum import ExactSum, scaled

finite = st.floats(min_value=-1e300, max_value=1e300, allow_nan=False)


def test_tenths_sum_to_one_exactly_where_a_running_float_sum_does_not():
    total = ExactSum()
    for _ in range(10):
        total.add(0.1)
    assert total.value() == math.fsum([0.1] * 10) == 1.0
    assert sum([0.1] * 10) == 0.9999999999999999  # what a plain running sum keeps


def test_every_float_is_a_whole_number_of_the_smallest_subnormal():
    assert scaled(5e-324) == 1 and scaled(1.0) == 2**1074 and scaled(-0.75) == -3 * 2**1072 and scaled(7) == 7 << 1074


@settings(max_examples=200, deadline=None)
@given(st.lists(finite, max_size=60))
def test_the_value_is_fsum_of_the_parts(parts):
    total = ExactSum()
    for part in parts:
        total.add(part)
    assert total.value() == math.fsum(parts)


@settings(max_examples=100, deadline=None)
@given(st.lists(finite, max_size=30), st.lists(finite, min_size=1, max_size=10), st.integers(1, 10**6))
def test_a_period_added_k_more_times_is_fsum_of_the_repeated_list(before, period, k):
    total = ExactSum()
    for part in before:
        total.add(part)
    start = total.fold()
    for part in period:
        total.add(part)
    total.add_units(k * (total.fold() - start))
    if k <= 1000:
        assert total.value() == math.fsum(before + period * (k + 1))
    else:  # too long a list to build: the same sum, from the exact rational
        assert total.value() == float(sum(map(Fraction, before)) + (k + 1) * sum(map(Fraction, period)))


def test_memory_stays_bounded_whatever_the_number_of_distinct_parts(monkeypatch):
    monkeypatch.setattr(exact_sum, "DISTINCT", 8)
    total = ExactSum()
    parts = [1.0 / n for n in range(1, 5001)]
    for part in parts:
        total.add(part)
        assert len(total.counts) <= 8
    assert total.value() == math.fsum(parts)

