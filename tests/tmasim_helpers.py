"""Helpers shared by the tests: build scenarios from plain dicts, run them, read per-tile times.

(A uniquely named module rather than conftest.py: tests/gpu/sim has a conftest of its own.)
"""

from __future__ import annotations

from typing import Any

from tmasim.results import Result
from tmasim.scenario import Scenario, from_dict
from tmasim.simulation import simulate

US = 10**6  # picoseconds per microsecond


def ps(value: int) -> str:
    return f"{value} ps"


def tiles_scenario(tiles: int = 4, load: Any = "3 us", compute: Any = "5 us", stages: int = 2,
                   gpu: Any = "ideal", records: bool = True, seed: int = 0, **workload: Any) -> Scenario:
    raw: dict[str, Any] = {
        "name": "test",
        "gpu": gpu,
        "workload": {"kind": "tiles", "tiles": tiles, "load": load, "compute": compute, **workload},
        "pipeline": {"stages": stages},
        "run": {"seed": seed, "records": records},
    }
    return from_dict(raw)


def costly_gpu(issue_ps: int, wake_ps: int) -> dict[str, Any]:
    """The ideal machine with a TMA issue cost and an mbarrier round trip."""
    return {"preset": "ideal", "tma_issue": ps(issue_ps), "barrier_wake": ps(wake_ps)}


def compute_ends(result: Result) -> list[int]:
    spans = result.spans
    compute = spans[spans["kind"] == "compute"].sort_values("tile")
    return compute["end_ps"].tolist()


def run(**kwargs: Any) -> Result:
    return simulate(tiles_scenario(**kwargs))
