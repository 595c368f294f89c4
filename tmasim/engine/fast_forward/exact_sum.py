"""Exact sums of floats in bounded memory, rounded once at the end.

Fast-forward's cuts (engine/fast_forward/jump.py) split every float counter into one part per cut
and need the exact sum of the parts: equal to :func:`math.fsum` of the list of parts, but
without the list, which grew by one float per counter per cut (about 45 MB per 500,000 laps).

Every finite float is an integer multiple of 2**-1074 (the smallest subnormal), so an exact sum
of floats is one Python integer in those units, rounded to the nearest float once, by integer
true division (correctly rounded, ties to even, as ``fsum`` rounds). Parts are first counted by
value (a steady state adds the same few values cut after cut: one dictionary update each) and
folded into the integer when the values seen exceed :data:`DISTINCT`, so memory stays bounded
whatever the run's length.
"""

from __future__ import annotations

SCALE = 1074  # every finite float is a whole number of 2**-SCALE
DISTINCT = 1024  # distinct part values kept by count before they are folded into the integer
_UNIT = 1 << SCALE


def scaled(value: float) -> int:
    """``value`` as an exact whole number of 2**-1074."""
    numerator, denominator = value.as_integer_ratio()  # the denominator is a power of two
    return numerator << (SCALE + 1 - denominator.bit_length())


class ExactSum:
    """A sum of floats kept exactly: parts by count, and an integer of 2**-1074 units."""

    __slots__ = ("counts", "units")

    def __init__(self) -> None:
        self.counts: dict[float, int] = {}  # part value -> times added since the last fold
        self.units = 0

    def add(self, value: float) -> None:
        counts = self.counts
        counts[value] = counts.get(value, 0) + 1
        if len(counts) > DISTINCT:
            self.fold()

    def fold(self) -> int:
        """Move the counted parts into the integer; the exact sum so far, in 2**-1074 units."""
        if self.counts:
            self.units += sum(scaled(value) * times for value, times in self.counts.items())
            self.counts.clear()
        return self.units

    def add_units(self, units: int) -> None:
        """Add an exact amount (a difference of two :meth:`fold` results, times a count)."""
        self.units += units

    def value(self) -> float:
        """The exact sum, rounded once to the nearest float."""
        return self.fold() / _UNIT
