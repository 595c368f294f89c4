"""The GEMM's L2 reuse across waves: LRU reuse distances of A and B panels in the scheduler's
order (tmasim.workloads.gemm_layout.ReuseDistance), against a brute-force count."""

from __future__ import annotations

import random

from tmasim.scenario import load
from tmasim.simulation import simulate
from tmasim.workloads.gemm_layout import ReuseDistance


def brute(history: list[list[tuple[int, float]]], key: int, now: list[tuple[int, float]]) -> float:
    """Bytes of the distinct other panels read since ``key``'s last read, this wave's included."""
    last = max(i for i, wave in enumerate(history) if key in dict(wave))
    latest: dict[int, float] = {}
    for wave in history[last + 1:]:
        latest.update(wave)
    latest.update(now)
    return sum(b for k, b in latest.items() if k != key)


def test_reuse_distances_are_the_distinct_bytes_read_since_the_last_read():
    rng = random.Random(7)
    reuse, history = ReuseDistance(), []
    for _ in range(300):
        wave = list(dict((rng.randrange(40), float(rng.randrange(1, 9))) for _ in range(rng.randrange(1, 9))).items())
        got = reuse.wave(wave, lambda distance: distance)
        for key, _ in wave:
            seen = any(key in dict(w) for w in history)
            assert got[key] == (brute(history, key, wave) if seen else 1.0)
        history.append(wave)


def test_a_large_gemm_rereads_a_from_l2_when_a_column_of_tiles_fits():
    """7168 x 8192 x 4096 fp16 on B200 with 64 x 128 tiles, M first: A (59 MB) and B (67 MB) do not
    fit in L2 together, but A's panels come back after one column of tiles (59 MB), within L2."""
    sets = ["workload.m=7168", "workload.n=8192", "workload.k=4096", "workload.dtype=fp16",
            "workload.tile=[64,128,64]", "workload.raster=column", "pipeline.consumers=1",
            "pipeline.mma_cta_group=2", "pipeline.cluster=[2,1]", "pipeline.stages=auto"]
    stats = simulate(load("gemm-b200", sets)).stats
    operands = (7168 + 8192) * 4096 * 2
    assert stats["hbm_bytes"] < 1.2 * operands + 7168 * 8192 * 2
