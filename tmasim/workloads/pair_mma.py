"""The 2-SM MMA's time (Blackwell ``tcgen05.mma.cta_group::2``), from measured instructions.

A CTA pair computes a (2·BM) x BN tile: each k-step of BK is BK / K instructions of shape
M = 2·BM, N = BN, K = 16 (bf16, fp16) or 32 (fp8), issued by the leader CTA. Back-to-back
instructions run one initiation interval (II) apart, so a k-step keeps both SMs' tensor cores
busy for (BK / K) x II cycles; the last one's result is ready ``latency - II`` cycles later,
which delays the accumulator (the epilogue), not the next k-step.

The table: ``tcgen05.mma`` with both operands in shared memory (SS), CTAGroup 2, latency and
II fitted from single-instruction measurements on a B200 (SemiAnalysisAI/microbench-blackwell,
commit 9a068d8, Apache-2.0, umma_latency_fit_results.csv). N between two listed widths is
interpolated linearly. This is a small stand-in for an MMA instruction model, which can absorb
it.
"""

from __future__ import annotations

from tmasim.errors import ScenarioError
from tmasim.hardware import GpuSpec

# (format, M, N, K) -> (latency cycles, II cycles)
PAIR_MMA = {
    ("BF16", 128, 64, 16): (173, 25.02),
    ("BF16", 128, 80, 16): (179, 27.02),
    ("BF16", 128, 96, 16): (185, 29.02),
    ("BF16", 128, 112, 16): (191, 30.02),
    ("BF16", 128, 128, 16): (197, 32.01),
    ("BF16", 128, 256, 16): (229, 64.02),
    ("BF16", 256, 64, 16): (202, 43.02),
    ("BF16", 256, 80, 16): (210, 45.34),
    ("BF16", 256, 96, 16): (218, 49.36),
    ("BF16", 256, 112, 16): (226, 56.02),
    ("BF16", 256, 128, 16): (234, 64.03),
    ("BF16", 256, 256, 16): (298, 128.03),
    ("E4M3", 128, 64, 32): (173, 25.02),
    ("E4M3", 128, 80, 32): (179, 27.02),
    ("E4M3", 128, 96, 32): (185, 29.02),
    ("E4M3", 128, 112, 32): (191, 30.02),
    ("E4M3", 128, 128, 32): (197, 32.01),
    ("E4M3", 128, 256, 32): (229, 64.02),
    ("E4M3", 256, 64, 32): (202, 43.02),
    ("E4M3", 256, 80, 32): (210, 45.35),
    ("E4M3", 256, 96, 32): (218, 49.35),
    ("E4M3", 256, 112, 32): (226, 56.02),
    ("E4M3", 256, 128, 32): (234, 64.02),
    ("E4M3", 256, 256, 32): (298, 128.02),
}
_FORMAT = {"bf16": ("BF16", 16), "fp16": ("BF16", 16), "fp8": ("E4M3", 32)}


def instruction(dtype: str, m: int, n: int) -> tuple[float, float]:
    """(latency, II) in cycles of one pair instruction of M = ``m``, N = ``n``."""
    if dtype not in _FORMAT:
        raise ScenarioError("workload.dtype", dtype, "has no measured 2-SM MMA (pipeline.mma_cta_group = 2 is "
                                                     f"modelled for {', '.join(_FORMAT)})")
    fmt, k = _FORMAT[dtype]
    widths = sorted(n_ for (f, m_, n_, _) in PAIR_MMA if f == fmt and m_ == m)
    if not widths or not widths[0] <= n <= widths[-1]:
        raise ScenarioError("workload.tile", f"BM = {m // 2}, BN = {n}",
                            f"has no measured 2-SM MMA: the pair's M = 2·BM must be one of 128, 256 and BN within "
                            f"{widths[0] if widths else 64}..{widths[-1] if widths else 256}")
    low = max(w for w in widths if w <= n)
    high = min(w for w in widths if w >= n)
    lat0, ii0 = PAIR_MMA[(fmt, m, low, k)]
    lat1, ii1 = PAIR_MMA[(fmt, m, high, k)]
    share = 0.0 if high == low else (n - low) / (high - low)
    return lat0 + share * (lat1 - lat0), ii0 + share * (ii1 - ii0)


def step_times(gpu: GpuSpec, dtype: str, bm: int, bn: int, bk: int) -> tuple[int, int]:
    """(busy ps of one k-step on both SMs' tensor cores, extra ps until the last result is ready)."""
    latency, ii = instruction(dtype, 2 * bm, bn)
    k = _FORMAT[dtype][1]
    count = -(-bk // k)
    cycle_ps = 1e12 / gpu.clock_hz
    return round(count * ii * cycle_ps), round((latency - ii) * cycle_ps)
