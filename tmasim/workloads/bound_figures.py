"""The bound figures every workload with a bounds table reports, from one place.

A workload computes its lower bounds (picoseconds, keyed by the names in ``tmasim.names``);
this turns them into the summary's keys: which binds, each bound in ns, and the rate the
binding one allows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tmasim import names

if TYPE_CHECKING:
    from tmasim.engine.chip import Plan
    from tmasim.engine.program import Copy
    from tmasim.machine.hardware import GpuSpec


def busiest_sm(per_cta: Sequence[float], plan: Plan) -> float:
    """The least load (time on one of an SM's resources) that the busiest SM can carry, from each
    CTA's own load. Placement fixed before the run (persistent): the loads summed per SM. A grid:
    the block scheduler may place CTAs in any order, so only what holds for every placement is a
    lower bound: the largest CTA, the mean per SM, and for each k the k+1 smallest of the
    k·#SMs + 1 largest CTAs (some SM runs k + 1 of them)."""
    from tmasim.engine.chip import static_sms

    placed = static_sms(plan)
    if placed is not None:
        per_sm = [0.0] * plan.sms
        for sm, load in zip(placed, per_cta, strict=True):
            per_sm[sm] += load
        return max(per_sm, default=0.0)
    return any_placement_bound(per_cta, plan.sms)


def any_placement_bound(loads: Sequence[float], sms: int) -> float:
    """A lower bound on the busiest of ``sms`` machines' total, for any assignment of ``loads``."""
    ordered = sorted(loads, reverse=True)
    bound = max(ordered[0] if ordered else 0.0, sum(ordered) / sms)
    for k in range(1, (len(ordered) - 1) // sms + 1):
        bound = max(bound, sum(ordered[k * sms - k: k * sms + 1]))
    return bound


def transfer_ps(gpu: GpuSpec, copy: Copy) -> float:
    """The least time a load takes through its SM: its bytes at the port's rate or its row
    requests at the TMA unit's rate, whichever is longer (the engine caps the copy's flow the
    same way, engine/sm/copy_engine.py)."""
    return max(copy.memory_bytes / gpu.sm_port_bandwidth, copy.requests * gpu.tma_request_time)


def bound_figures(bounds: Mapping[str, float], serial_ps: float, flops: float) -> dict[str, Any]:
    """Summary keys from bounds in ps: binding (the bound's name, tmasim.names), ``<key>_bound_ns``,
    bound_ns, the bound's FLOP/s."""
    binding = max(bounds, key=lambda k: bounds[k])
    return {
        "serial_ns": serial_ps / 1000,
        "closed_form_ns": None,
        "flops": flops,
        "binding": names.bound(binding),
        **{f"{name}_bound_ns": value / 1000 for name, value in bounds.items()},
        "bound_ns": bounds[binding] / 1000,
        "bound_flops_per_s": flops / bounds[binding] * 1e12 if bounds[binding] else None,
    }
