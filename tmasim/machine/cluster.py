"""Thread-block clusters: how many fit on the chip at once, and which SMs that leaves idle.

A cluster of CX x CY CTAs (CX along M, CY along N) is scheduled whole onto one GPC (CUDA
guide, compute capability 9.0), so a GPC of g SMs holding k CTAs each runs floor(g·k / C)
clusters of C CTAs; the rest of its CTA slots stay empty. Where the preset states the driver's
count for a size at one CTA an SM (``gpu.max_active_clusters``: B200 places 33 clusters of 4,
fewer than its GPCs' SMs would hold), that count caps the layout's. GPCs of unequal size (H100 SXM's
132 SMs sit in 8 of them) can leave SMs idle for a given cluster size: that is reported.
The size is limited to ``max_cluster_size`` CTAs (8, portable) or, with the kernel's
non-portable opt-in, ``max_cluster_size_opt_in`` (16 on Hopper); a larger one is an error,
as is one that does not fit in the largest GPC.
"""

from __future__ import annotations

from dataclasses import dataclass

from tmasim.errors import ResidencyError, ScenarioError
from tmasim.machine.hardware import GpuSpec
from tmasim.values import format as fmt

MULTICAST = ("none", "a", "b", "both")


@dataclass(frozen=True)
class ClusterPlacement:
    shape: tuple[int, int]
    per_gpc: tuple[int, ...]  # clusters resident in each GPC at once
    idle_sms: int             # SMs no resident cluster uses
    portable: bool            # within the portable size (no opt-in needed)

    @property
    def size(self) -> int:
        return self.shape[0] * self.shape[1]

    @property
    def clusters(self) -> int:
        return sum(self.per_gpc)


def place(gpu: GpuSpec, shape: tuple[int, int], ctas_per_sm: int, limited_by: str = "") -> ClusterPlacement:
    """Clusters of ``shape`` resident on ``gpu`` with ``ctas_per_sm`` CTAs per SM."""
    size = shape[0] * shape[1]
    if size > gpu.max_cluster_size_opt_in:
        raise ScenarioError("pipeline.cluster", list(shape),
                            f"has {size} CTAs, over the {gpu.max_cluster_size_opt_in} a cluster may hold on {gpu.name} "
                            f"({gpu.max_cluster_size} portable, {gpu.max_cluster_size_opt_in} with the non-portable "
                            "opt-in)")
    largest = max(gpu.gpcs)
    if size > largest * ctas_per_sm:
        why = f", limited by {limited_by}" if limited_by else ""
        raise ResidencyError("pipeline.cluster", list(shape),
                             f"needs {size} CTAs in one GPC, but the largest GPC of {gpu.name} holds "
                             f"{largest * ctas_per_sm}: {largest} SMs x {fmt.plural(ctas_per_sm, 'CTA')} per SM{why}")
    per_gpc = tuple(g * ctas_per_sm // size for g in gpu.gpcs)
    if driver_cap(gpu, size, ctas_per_sm) is not None:
        per_gpc = _capped(per_gpc, gpu.max_active_clusters[size])
    used = sum(-(-n * size // ctas_per_sm) for n in per_gpc)
    return ClusterPlacement(shape, per_gpc, gpu.sms - used, size <= gpu.max_cluster_size)


def driver_cap(gpu: GpuSpec, size: int, ctas_per_sm: int) -> tuple[int, int] | None:
    """(the driver's count, what the GPCs would hold) for clusters of ``size`` CTAs where the
    driver's count (``gpu.max_active_clusters``, stated at one CTA an SM) is the lower; else None."""
    driver = gpu.max_active_clusters.get(size) if ctas_per_sm == 1 else None
    layout = sum(g * ctas_per_sm // size for g in gpu.gpcs)
    return (driver, layout) if driver is not None and driver < layout else None


def _capped(per_gpc: tuple[int, ...], count: int) -> tuple[int, ...]:
    """``per_gpc`` with ``count`` clusters in all: one fewer from the GPC holding the most (the
    first of equals) until the count is met. Which GPCs give them up no source says; the largest
    keep as many as the others then."""
    per = list(per_gpc)
    while sum(per) > count:
        per[per.index(max(per))] -= 1
    return tuple(per)


def default_multicast(shape: tuple[int, int]) -> str:
    """What the cluster shape allows: A is shared along a cluster row (CY > 1), B along a
    column (CX > 1)."""
    cx, cy = shape
    return {(False, False): "none", (False, True): "a", (True, False): "b", (True, True): "both"}[(cx > 1, cy > 1)]


def check_multicast(multicast: str, shape: tuple[int, int], cluster: tuple[int, int] | None = None) -> None:
    """``shape`` counts what shares operands: CTAs, or the 2-SM MMA's CTA pairs (two CTAs along
    M of ``cluster``)."""
    cx, cy = shape
    what = f"pipeline.cluster = [{', '.join(map(str, cluster or shape))}]" + (" (CTA pairs)" if cluster else "")
    fits = default_multicast(shape)  # the most this shape shares: a suggestion that passes
    if multicast in ("a", "both") and cy == 1:
        raise ScenarioError("workload.multicast", multicast,
                            f"shares A along N, but {what} has one along N (use '{fits}', or a cluster with CY > 1)")
    if multicast in ("b", "both") and cx == 1:
        raise ScenarioError("workload.multicast", multicast,
                            f"shares B along M, but {what} has one along M (use '{fits}', or a cluster with more "
                            "along M)")
