"""tmasim: a discrete-event simulator of TMA load/compute pipelines on Hopper and Blackwell GPUs.

    >>> import tmasim
    >>> result = tmasim.simulate(tmasim.load_scenario())   # the reference scenario
    >>> result.stats["makespan_ns"]
    23000.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["simulate", "load_scenario", "__version__"]

if TYPE_CHECKING:
    from tmasim.results import Result
    from tmasim.scenario import Scenario


def simulate(scenario: Scenario) -> Result:
    """Run one scenario and return its :class:`~tmasim.results.Result`."""
    from tmasim.simulation import simulate as _simulate

    return _simulate(scenario)


def load_scenario(source: Any = None, overrides: Any = ()) -> Scenario:
    """Read a scenario file or bundled scenario by name (the reference one by default)."""
    from tmasim.scenario import load

    return load(source, overrides)
