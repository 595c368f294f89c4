"""tmasim: a discrete-event simulator of TMA load/compute pipelines on Hopper and Blackwell GPUs.

    >>> import tmasim
    >>> result = tmasim.simulate(tmasim.load_scenario())   # the reference scenario
    >>> result.stats["makespan_ns"]
    23000.0

The public API is ``simulate``, ``load_scenario``, ``run_sweep`` (a sweep over field values,
one tidy table out) and ``tune`` (a scenario's whole design space searched for its best design);
everything else lives in the subpackages. Heavy modules load on first use.
"""

import typing as _typing

from tmasim import old_paths as _old_paths
from tmasim.errors import ModelError, ResourceError, ScenarioError, TmasimError
from tmasim.version import __version__

_old_paths.install()  # tmasim.scenario, tmasim.hardware, ...: the modules' paths before the rooms

# The errors a caller may catch: a bad scenario (ScenarioError), a run past the limits
# (ResourceError), a model that deadlocks or misuses a barrier (ModelError); all TmasimError.
__all__ = ["simulate", "load_scenario", "run_sweep", "tune", "__version__", "TmasimError", "ScenarioError",
           "ResourceError", "ModelError"]

if _typing.TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    import pandas as pd

    from tmasim.inputs.scenario import Scenario
    from tmasim.output.result import Result
    from tmasim.tuning.run import TuneResult


def simulate(scenario: "Scenario", *, allow_large: bool = False) -> "Result":
    """Run one scenario and return its :class:`~tmasim.results.Result`. A run whose estimated time
    or memory is past the limits (:mod:`tmasim.budget`) is refused unless ``allow_large``."""
    from tmasim.simulation import simulate as _simulate

    return _simulate(scenario, allow_large=allow_large)


def load_scenario(source: "str | Path | None" = None, overrides: "Iterable[str]" = ()) -> "Scenario":
    """Read a scenario file or bundled scenario by name (the reference one by default)."""
    from tmasim.inputs.scenario import load

    return load(source, overrides)


def run_sweep(base: object, overrides: "Iterable[str]" = (), vary: object = (), **options: object) -> "pd.DataFrame":
    """Simulate a scenario over field values, one row per point: :func:`tmasim.sweep.runner.run_sweep`
    (``vary=["pipeline.stages=1,2,4"]``; options ``zip_``, ``jobs``, ``out``, ``executor``, ``progress``,
    ``allow_large``)."""
    from tmasim.sweep.runner import run_sweep as _run_sweep

    return _run_sweep(base, overrides, vary, **options)  # type: ignore[arg-type]


def tune(scenario: object, overrides: "Iterable[str]" = (), **options: object) -> "TuneResult":
    """Search a GEMM or attention scenario's whole design space for its best design:
    :func:`tmasim.tuning.run.tune` (options ``jobs``, ``out``, ``progress``, ``allow_large``); the
    result's ``best``, ``knee``, ``top()``, ``frame`` and ``text()`` say what it found."""
    from tmasim.tuning.run import tune as _tune

    return _tune(scenario, overrides, **options)  # type: ignore[arg-type]
