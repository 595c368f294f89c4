"""How well the model did on the validated cases closest to a scenario, from the harness's
committed results (``validation/public/results/pipelines.json``). Reads a file, runs nothing, so
the review side (summary, reports) can quote it without reaching the engine."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

BASELINE = Path(__file__).resolve().parents[2] / "validation" / "public" / "results" / "pipelines.json"


def baseline() -> dict[str, Any]:
    """The committed figures (``validation/public/results/pipelines.json``), or {} before any."""
    return json.loads(BASELINE.read_text()) if BASELINE.exists() else {}


def trust_for(scenario: Any) -> str:
    """How well the model did on the validated cases closest to ``scenario`` (from the committed
    results), or that nothing close to it was validated against a measured pipeline."""
    return trust(getattr(scenario.workload, "kind", ""), scenario.gpu.name, getattr(scenario.workload, "units", 0))


def trust_for_row(row: Mapping[str, Any]) -> str | None:
    """:func:`trust_for` from a run's stats or a sweep's row (workload, gpu, work units); None for
    a row that does not say which workload on which preset."""
    if not row.get("gpu") or not row.get("workload"):
        return None
    units = row.get("tiles")
    return trust(str(row.get("workload", "")), str(row.get("gpu", "")), int(units) if units == units and units else 0)


def trust(kind: str, gpu: str, units: int) -> str:
    """The trust line for a workload kind on a preset with that many work units."""
    if kind == "tiles":
        return ("tiles of given load and compute times: exact against the closed forms and the max-plus "
                "recurrence (the test suite); the times are the scenario's, not a measurement")
    if kind == "gemm" and gpu == "b200" and units == 1:
        line = trust_line("b200-mainloop")
        if line:
            return line
    if kind == "attention" and gpu == "h100-sxm":
        check = baseline().get("fa3-d128")
        if check:
            return (f"H100 FlashAttention-3 forward (d128, non-causal, a check of shape): mean error "
                    f"{check['mean_error']:.0%}, worst {check['max_error']:.0%}, optimistic at long sequences")
    if not BASELINE.exists():  # an installed package: the results ship with the repository
        return ("the validation results are not installed (they ship with the repository: "
                "validation/public/results/pipelines.json)")
    what = {"gemm": "GEMM", "attention": "attention", "stream": "TMA stream"}.get(kind, kind)
    scope = "one-CTA" if units == 1 else "whole-chip"
    return f"{gpu} {scope} {what}: not validated against a measured pipeline (tmasim validate public lists what is)"


def trust_line(table_name: str) -> str | None:
    """One line on how well the model did on a validated table, from the committed results."""
    result = baseline().get(table_name)
    if not result:
        return None
    part = result["all"]
    title = result["title"].split(" (")[0]
    return (f"{title}: knee (fewest stages within 2% of the best) right on {part['knee_right']} of "
            f"{part['sweeps']} tiles "
            f"(within one stage on {part['knee_within_one']}), mean error {part['mean_error']:.0%}")
