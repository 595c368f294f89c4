"""Figures a test builds are closed after it (tests/conftest.py), so the suite never piles up
more than pyproject's warning filter allows; the two tests run in this order."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def test_a_test_may_leave_figures_open():
    for _ in range(3):
        plt.subplots()
    assert len(plt.get_fignums()) >= 3


def test_the_next_test_finds_none_open():
    assert plt.get_fignums() == []


def test_more_than_twenty_open_figures_fail_the_suite():
    """pyproject.toml's warning filter makes matplotlib's warning an error."""
    with pytest.raises(RuntimeWarning, match="More than 20 figures"):
        for _ in range(plt.rcParams["figure.max_open_warning"] + 1):
            plt.figure()
