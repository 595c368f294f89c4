"""Shared fixtures, and hypothesis settings.

Property tests draw the same examples on every run, so CI is deterministic; set
TMASIM_HYPOTHESIS_RANDOM=1 to explore new ones (what a developer does before a change lands).
"""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import settings

from tmasim.results import Result
from tmasim.simulation import simulate

settings.register_profile("deterministic", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("explore" if os.environ.get("TMASIM_HYPOTHESIS_RANDOM") else "deterministic")


@pytest.fixture
def reference() -> Result:
    from tmasim.scenario import load

    return simulate(load())


@pytest.fixture(autouse=True)
def _close_figures():
    """Close every matplotlib figure a test left open (a figure a test builds and never saves
    stays in pyplot's registry, and the registry warns past 20)."""
    yield
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close("all")
