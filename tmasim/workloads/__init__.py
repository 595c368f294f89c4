"""Workloads: what a CTA does, turned into engine programs and placed on the chip.

Each workload kind is a module implementing :class:`~tmasim.workloads.base.Workload`: a frozen
config dataclass (parsed and checked from the scenario's ``[workload]`` table), a ``plan`` that
makes the CTAs' programs and checks residency, the summary figures and analytic references that
apply to it, and a short description. ``WORKLOADS`` below is the one place they are registered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tmasim.values import fields as read
from tmasim.workloads import attention, gemm, stream, tiles
from tmasim.workloads.base import Workload

WorkloadConfig = tiles.TilesConfig | stream.StreamConfig | gemm.GemmConfig | attention.AttentionConfig
WORKLOADS: dict[str, Workload] = {module.KIND: module for module in (tiles, stream, gemm, attention)}
KINDS = tuple(WORKLOADS)


def parse_workload(raw: Mapping[str, Any]) -> WorkloadConfig:
    kind = read.choice("workload.kind", raw.get("kind", "tiles"), tuple(WORKLOADS))
    config: WorkloadConfig = WORKLOADS[kind].parse(raw)
    return config


def workload_of(config: Any) -> Workload:
    """The module that implements ``config``'s kind."""
    return WORKLOADS[config.kind]
