"""The bound figures every workload with a bounds table reports, from one place.

A workload computes its lower bounds (picoseconds, keyed by the names in ``tmasim.names``);
this turns them into the summary's keys: which binds, each bound in ns, and the rate the
binding one allows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tmasim.engine.program import Copy
    from tmasim.hardware import GpuSpec


def transfer_ps(gpu: GpuSpec, copy: Copy) -> float:
    """The least time a load takes through its SM: its bytes at the port's rate or its row
    requests at the TMA unit's rate, whichever is longer (the engine caps the copy's flow the
    same way, engine/sm/copy_engine.py)."""
    return max(copy.memory_bytes / gpu.sm_port_bandwidth, copy.requests * gpu.tma_request_time)


def bound_figures(bounds: Mapping[str, float], serial_ps: float, flops: float) -> dict[str, Any]:
    """Summary keys from bounds in ps: binding, ``<name>_bound_ns``, bound_ns, the bound's FLOP/s."""
    binding = max(bounds, key=lambda k: bounds[k])
    return {
        "serial_ns": serial_ps / 1000,
        "closed_form_ns": None,
        "flops": flops,
        "binding": binding,
        **{f"{name}_bound_ns": value / 1000 for name, value in bounds.items()},
        "bound_ns": bounds[binding] / 1000,
        "bound_flops_per_s": flops / bounds[binding] * 1e12 if bounds[binding] else None,
    }
