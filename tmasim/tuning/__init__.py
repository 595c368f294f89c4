"""``tmasim tune``: a scenario's whole design space searched for its best design.

Modules: ``space`` (the candidate designs of a GEMM or attention problem), ``run`` (:func:`tune`:
bound every candidate, leave out the invalid ones, search the rest as ``sweep --search`` does),
``command`` (``tmasim tune``). Imports nothing heavy at module level: ``tmasim --help`` registers
the subcommand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tmasim.tuning.command import register

if TYPE_CHECKING:
    from tmasim.tuning.run import TuneResult, tune

__all__ = ["TuneResult", "register", "tune"]


def __getattr__(name: str) -> Any:
    if name in ("tune", "TuneResult"):
        from tmasim.tuning import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
