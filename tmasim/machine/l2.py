"""What fraction of a repeatedly read data set misses in L2: the capacity side of the L2 model.

A kernel that reads a data set of D bytes again and again (an L2 bandwidth benchmark, a GEMM's
operands re-read by many CTAs) finds it in L2 while it fits, and in HBM once it does not. On
Hopper the fall is not a cliff at the L2's nominal size: the L2 is two partitions, the hash
that places lines is not perfect, and data sets from about 80% of the nominal size on start to
evict each other. Measured bandwidth (validation/public/h200/l2_bandwidth.csv) falls from the
L2 plateau to HBM's over 40-80 MB on a 50 MB part. The model, with two preset fields:

    miss(D) = 0                                      for D <= l2_fit_size
    miss(D) = 1 - exp(-(D - l2_fit_size) / l2_miss_scale)   above it

and never less than 1 - l2_size / D, the share no L2 of ``l2_size`` bytes can hold (the fitted
sizes are capped at ``l2_size`` too: a GPU set to a smaller L2, or none, misses accordingly).

The missed share of each copy's bytes crosses HBM (and pays ``hbm_latency``); all bytes cross
L2. First-touch (cold) misses are not counted: the model describes the steady state of
repeated reads, as the benchmarks measure it.

A far part (B200: the L2 is two dies' halves). Where a preset sets ``l2_far_fit_size`` above
``l2_fit_size``, the data set the SMs re-read stays near them up to ``l2_fit_size`` and in L2 as a
whole up to ``l2_far_fit_size``: past the first, its L2 hits come from the far part and pay
``l2_far_latency`` more, without crossing HBM; the miss share above counts from the second.
"""

from __future__ import annotations

import math

from tmasim.machine.hardware import GpuSpec


def holds(gpu: GpuSpec) -> int:
    """The largest data set L2 holds under repeated reads, near and far parts together: never
    more than the L2 itself (a GPU whose ``l2_size`` was set below its fitted sizes)."""
    return min(gpu.l2_size, max(gpu.l2_fit_size, gpu.l2_far_fit_size))


def far_latency(gpu: GpuSpec, data_set: int) -> int:
    """The extra latency of an L2 hit in a repeatedly read ``data_set`` (bytes): the far part's
    where the data set is larger than what stays near (0 without a far part)."""
    return gpu.l2_far_latency if gpu.l2_far_fit_size > gpu.l2_fit_size and data_set > gpu.l2_fit_size else 0


def miss_fraction(gpu: GpuSpec, data_set: int) -> float:
    """The steady-state share of a repeatedly read ``data_set`` (bytes) that comes from HBM."""
    over = data_set - holds(gpu)
    if over <= 0:
        return 0.0
    if gpu.l2_miss_scale <= 0:
        return 1.0
    # at least the share that cannot be in an L2 of l2_size bytes (all of it for a GPU without L2)
    return max(1.0 - math.exp(-over / gpu.l2_miss_scale), 1.0 - gpu.l2_size / data_set)
