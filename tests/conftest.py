"""Shared fixtures."""

from __future__ import annotations

import pytest

from tmasim.results import Result
from tmasim.simulation import simulate


@pytest.fixture
def reference() -> Result:
    from tmasim.scenario import load

    return simulate(load())
