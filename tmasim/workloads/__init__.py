"""Workloads: what a CTA does, turned into engine programs and placed on the chip.

Each workload kind is a module with a frozen ``Config`` dataclass (parsed and checked from the
scenario's ``[workload]`` table), a ``plan`` function that makes the CTAs' programs and
checks residency, and whatever analytic references apply to it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tmasim import fields as read
from tmasim.workloads import gemm, stream, tiles

WorkloadConfig = tiles.TilesConfig | stream.StreamConfig | gemm.GemmConfig
_KINDS = {"tiles": tiles, "stream": stream, "gemm": gemm}
KINDS = tuple(_KINDS)


def parse_workload(raw: Mapping[str, Any]) -> WorkloadConfig:
    kind = read.choice("workload.kind", raw.get("kind", "tiles"), KINDS)
    config: WorkloadConfig = _KINDS[kind].parse(raw)
    return config
