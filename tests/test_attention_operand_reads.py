"""Attention's MMAs issue no faster than shared memory serves their operands, as a GEMM's do: with
a slow shared memory a run never beats its own shared-memory bound (it did: 2.47 ms against a
34.6 ms bound), and at the presets' bandwidths Hopper's times are unchanged."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tmasim import scenario as scenarios
from tmasim.simulation import simulate
from tmasim.workloads.attention_plan import mma_phase

SMALL = ["workload.seqlen_q=512", "workload.seqlen_kv=1024", "workload.batch=1", "workload.heads=4"]


@pytest.mark.parametrize("name", ["attention-h100", "attention-b200", "attention-b200-2sm"])
def test_a_slow_shared_memory_never_lets_a_run_beat_its_bound(name: str):
    run = simulate(scenarios.load(name, [*SMALL, "gpu.smem_bandwidth=20 GB/s"]))
    stats = run.stats
    assert stats["makespan_ns"] >= stats["bound_ns"] * (1 - 1e-9)
    fast = simulate(scenarios.load(name, SMALL)).stats
    assert stats["makespan_ns"] > 3 * fast["makespan_ns"]  # the reads bind: far slower than at the preset's


def test_hopper_at_its_preset_bandwidth_is_not_bound_by_operand_reads():
    # wgmma m64n128k16 reads 6 KiB (A and B from shared memory) in 48 cycles at 128 B a cycle, under
    # its issue interval: the shared memory does not set the pace; at 20 GB/s it does
    gpu = scenarios.load("attention-h100", SMALL).gpu
    latency, ii = gpu.mma.timing("workload.tile", "bf16", 64, 128)
    phase = mma_phase(gpu, "bf16", 128, 128, 128, 0.0)
    assert phase.occupancy == gpu.cycles_ps(2 * 8 * ii)  # 2 x 64 rows, 8 k-steps of 16
    slow = replace(gpu, smem_bandwidth=20e9 / 1e12)  # bytes per ps
    bound = mma_phase(slow, "bf16", 128, 128, 128, 0.0)
    assert bound.occupancy > 5 * phase.occupancy and bound.tail == 0  # the last completes as its reads end
