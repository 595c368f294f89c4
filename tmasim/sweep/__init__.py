"""Parameter sweeps: one base scenario, some fields varied over values, one tidy table out.

    >>> from tmasim.sweep import run_sweep
    >>> frame = run_sweep("reference", [], ["pipeline.stages=1,2"], progress=False)
    >>> frame[["pipeline.stages", "status", "makespan_ns"]].values.tolist()
    [[1, 'ok', 32000.0], [2, 'ok', 23000.0]]

Modules: ``spec`` (axes, points, checks), ``points`` (one point, in any worker), ``executors``
(in-process, process pool, Dask), ``store`` (result file, journal, resume), ``table`` (columns),
``runner`` (:func:`run_sweep`), ``command`` (``tmasim sweep``). ``run_sweep`` is imported on
first use so that ``tmasim --help``, which registers the subcommand, does not load pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tmasim.sweep.command import register

if TYPE_CHECKING:
    from tmasim.sweep.runner import run_sweep

__all__ = ["register", "run_sweep"]


def __getattr__(name: str) -> Any:
    if name == "run_sweep":
        from tmasim.sweep.runner import run_sweep

        return run_sweep
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
