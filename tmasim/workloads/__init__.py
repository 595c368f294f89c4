"""Workloads: what a CTA does, turned into engine :class:`~tmasim.engine.program.Program` s.

Each workload kind is a module with a frozen ``Config`` dataclass (parsed and checked from the
scenario's ``[workload]`` table) and a ``build`` function that makes the programs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tmasim import fields as read
from tmasim.workloads import tiles

WorkloadConfig = tiles.TilesConfig
_KINDS = {"tiles": tiles}


def parse_workload(raw: Mapping[str, Any]) -> WorkloadConfig:
    kind = read.choice("workload.kind", raw.get("kind", "tiles"), tuple(_KINDS))
    return _KINDS[kind].parse(raw)
