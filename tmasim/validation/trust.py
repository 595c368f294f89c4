"""How well the model did on the validated cases closest to a scenario, from the harness's
committed results (``validation/public/results/pipelines.json``). Reads a file, runs nothing, so
the review side (summary, reports) can quote it without reaching the engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BASELINE = Path(__file__).resolve().parents[2] / "validation" / "public" / "results" / "pipelines.json"


def baseline() -> dict[str, Any]:
    """The committed figures (``validation/public/results/pipelines.json``), or {} before any."""
    return json.loads(BASELINE.read_text()) if BASELINE.exists() else {}


def trust_for(scenario: Any) -> str:
    """How well the model did on the validated cases closest to ``scenario`` (from the committed
    results), or that nothing close to it was validated against a measured pipeline."""
    workload, gpu = scenario.workload, scenario.gpu
    kind = getattr(workload, "kind", "")
    if kind == "gemm" and gpu.name == "b200" and getattr(workload, "units", 0) == 1:
        line = trust_line("b200-mainloop")
        if line:
            return line
    if kind == "attention" and gpu.name == "h100-sxm":
        check = baseline().get("fa3-d128")
        if check:
            return (f"H100 FlashAttention-3 forward (d128, non-causal, a check of shape): mean error "
                    f"{check['mean_error']:.0%}, worst {check['max_error']:.0%}, optimistic at long sequences")
    what = {"gemm": "GEMM", "attention": "attention", "stream": "TMA stream"}.get(kind, kind)
    scope = "one-CTA" if getattr(workload, "units", 0) == 1 else "whole-chip"
    return (f"{gpu.name} {scope} {what}: not validated against a measured pipeline "
            "(tmasim validate public lists what is)")


def trust_line(table_name: str) -> str | None:
    """One line on how well the model did on a validated table, from the committed results."""
    result = baseline().get(table_name)
    if not result:
        return None
    part = result["all"]
    title = result["title"].split(" (")[0]
    return (f"{title}: knee right on {part['knee_right']} of {part['sweeps']} tiles "
            f"(within one stage on {part['knee_within_one']}), mean error {part['mean_error']:.0%}")
