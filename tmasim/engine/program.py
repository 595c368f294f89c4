"""A CTA's program as the engine sees it: per step, what lands in the slot and what is computed.

Workloads (``tmasim.workloads``) build programs; the engine runs them. Per-step values are
plain lists (indexing a list is the cheapest lookup in CPython's event loop).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Program:
    """``steps`` ring steps. Step i copies ``copy_bytes[i]`` bytes into its slot, each copy
    waiting ``latency[i]`` ps before its transfer, which keeps the copy engine busy
    ``copy_busy[i]`` ps; then the consumer computes ``compute[i]`` ps on the tensor core."""

    steps: int
    copy_bytes: list[int]
    copy_busy: list[int]
    latency: list[int]
    compute: list[int]
    flops: list[float] | None = None

    def __post_init__(self) -> None:
        for name in ("copy_bytes", "copy_busy", "latency", "compute"):
            if len(getattr(self, name)) != self.steps:
                raise ValueError(f"Program.{name} has {len(getattr(self, name))} entries, not {self.steps}")
