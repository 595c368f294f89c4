"""MMA operand sources and the shared-memory bandwidth they share with TMA writes (tmasim.operands)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from tmasim.engine.sm.tensor_core import TensorCore
from tmasim.errors import ScenarioError
from tmasim.hardware import load_gpu
from tmasim.operands import instruction_smem_bytes, k_step_smem_hold, operand_timing
from tmasim.scenario import from_dict
from tmasim.simulation import simulate
from tmasim.workloads import gemm

B200 = load_gpu("b200")
PER_CYCLE = B200.smem_bandwidth * 1e12 / B200.clock_hz  # bytes per cycle of one SM's shared memory
# Only shared memory costs anything on the memory side: what binds is the MMA or shared memory.
SMEM_ONLY = {"hbm_bandwidth": "unlimited", "l2_bandwidth": "unlimited", "sm_port_bandwidth": "unlimited",
             "copy_latency": "0 ns", "copy_latency_per_kib": "0 ns",
             "copy_latency_per_kib_in_flight": "0 ns", "hbm_latency": "0 ns", "tma_issue": "0 ns",
             "barrier_wake": "0 ns", "tma_request_time": "0 ns"}


def one_cta(tile: tuple[int, int, int], k_steps: int, stages: int = 4, operands: str = "SS",
            gpu: Any = None) -> dict[str, Any]:
    bm, bn, bk = tile
    raw = {"gpu": gpu or {"preset": "b200", **SMEM_ONLY},
           "workload": {"kind": "gemm", "m": bm, "n": bn, "k": bk * k_steps, "tile": list(tile),
                        "operands": operands, "epilogue_smem": 0},
           "pipeline": {"stages": stages, "consumers": 1}, "run": {"records": False}}
    return simulate(from_dict(raw)).stats


def k_step_ps(tile: tuple[int, int, int], operands: str = "SS", stages: int = 4) -> float:
    short, long = (one_cta(tile, steps, stages, operands)["makespan_ps"] for steps in (16, 48))
    return (long - short) / 32


def test_the_fitted_bandwidth_is_about_128_bytes_per_cycle() -> None:
    assert pytest.approx(124.27, abs=0.01) == PER_CYCLE


def test_ss_reads_both_operands_ts_only_b_and_a_pair_half_of_each() -> None:
    assert instruction_smem_bytes(128, 64, 1, "SS") == (128 + 64) * 32
    assert instruction_smem_bytes(128, 64, 1, "TS") == 64 * 32
    assert instruction_smem_bytes(256, 64, 2, "SS") == (256 + 64) * 32 / 2


def test_ss_at_small_n_issues_at_the_shared_memory_pace_and_pays_for_a_in_its_latency() -> None:
    """B200 UMMA table, M = 128, N = 64: TS 32.5 cycles apart, SS 48.6 (6 KiB at ~124 B/cycle)."""
    ss = operand_timing(136.0, 32.02, 128, 64, 1, "SS", PER_CYCLE)
    assert ss.ii == pytest.approx(6144 / PER_CYCLE) and ss.smem_bound
    assert ss.latency == pytest.approx(136.0 + 4096 / PER_CYCLE)
    ts = operand_timing(136.0, 32.02, 128, 64, 1, "TS", PER_CYCLE)
    assert (ts.ii, ts.latency, ts.smem_bound) == (32.02, 136.0, False)
    wide = operand_timing(232.0, 128.03, 128, 256, 1, "SS", PER_CYCLE)  # 12 KiB in 98.9 cycles: the II binds
    assert wide.ii == 128.03 and not wide.smem_bound


def test_a_table_measured_with_a_in_shared_memory_keeps_its_latency() -> None:
    assert operand_timing(128.0, 128.0, 64, 256, 1, "SS", PER_CYCLE, measured_with="SS").latency == 128.0


def test_the_tensor_cores_wait_for_shared_memory_the_slot_release_does_not() -> None:
    import simpy

    env = simpy.Environment()
    tc = TensorCore(env, "tc")
    start, done = tc.run(100, wait=20, hold=50)
    second, _ = tc.run(10)
    env.run(until=done)
    assert (start, env.now, second) == (0, 120, 150)


def test_a_smem_bound_k_step_takes_its_mmas_then_its_writes_on_b200() -> None:
    """128x256x64 bf16: the MMAs read 48 KiB (396 cycles at ~124.3 B/cycle, inside their own
    4 x 128.03 cycles), then the TMA's 48 KiB of writes at smem_write_bandwidth (193 cycles at
    254 B/cycle): 705 cycles a k-step, and shared memory binds."""
    interval = k_step_ps((128, 256, 64))
    assert interval == pytest.approx(B200.cycles_ps(4 * 128.03) + 49152 / B200.smem_write_bandwidth, abs=2)
    assert B200.smem_write_bandwidth * 1e12 / B200.clock_hz == pytest.approx(500e9 / 1.965e9)
    stats = one_cta((128, 256, 64), 32)
    assert stats["binding"] == "shared memory" and stats["smem_bytes_per_k_step"] == 98304
    assert gemm.explain(stats).startswith("Shared memory binds: each k-step the MMAs (SS) read 48 KiB")


def test_ts_moves_a_off_the_mmas_path_but_not_out_of_shared_memory() -> None:
    """128x64x64: SS MMAs are SMEM-starved (4 x 49.4 cycles); TS ones run at the TS II, and A's
    16 KiB is still read once (tcgen05.cp): the steady k-step, SMEM-bound, is the same."""
    ss, ts = one_cta((128, 64, 64), 8, operands="SS"), one_cta((128, 64, 64), 8, operands="TS")
    assert ss["mma_smem_bound"] and not ts["mma_smem_bound"]
    assert ts["mma_k_step_ns"] * 1000 == B200.cycles_ps(4 * 32.02)
    assert ss["smem_bytes_per_k_step"] == ts["smem_bytes_per_k_step"] == 2 * 24576
    assert k_step_ps((128, 64, 64), "SS") == pytest.approx(k_step_ps((128, 64, 64), "TS"), abs=1)


def test_unlimited_shared_memory_leaves_the_tensor_cores_alone() -> None:
    gpu = {"preset": "b200", **SMEM_ONLY, "smem_bandwidth": "unlimited"}
    stats = one_cta((128, 256, 64), 32, gpu=gpu)
    assert stats["binding"] == "compute" and stats["smem_bound_ns"] == stats["compute_bound_ns"]


def test_the_summary_shows_the_operand_source_and_its_shared_memory_traffic() -> None:
    proc = subprocess.run([sys.executable, "-m", "tmasim.cli", "run", "gemm-b200", "--set", "workload.operands=TS"],
                          capture_output=True, text=True, check=True)
    assert ("shared memory    TS (A from Tensor Memory, B from shared memory): per k-step MMA reads 32 KiB + "
            "TMA writes 48 KiB + A copied out 16 KiB at 244.2 GB/s per SM (the writes after the MMAs, at "
            "500 GB/s; the slot is released after both)") in proc.stdout


def test_without_a_write_bandwidth_the_writes_share_the_mmas_spare_time() -> None:
    """The shared rule (Hopper, where no pipeline table says otherwise): reads + writes at the
    bandwidth, less what the MMAs' time covers; with a write bandwidth, the writes follow the MMAs."""
    bw = 0.125  # bytes per ps
    assert k_step_smem_hold(49152, 49152, 0, 500_000, bw) == round(98304 / bw) - 500_000
    assert k_step_smem_hold(49152, 49152, 0, 900_000, bw) == 0  # the MMAs' time covers it all
    assert k_step_smem_hold(49152, 49152, 0, 500_000, bw, 0.25) == round(49152 / 0.25)
    assert k_step_smem_hold(8192, 24576, 16384, 100_000, bw, 0.25) == round(24576 / bw) - 100_000 + round(24576 / 0.25)


@pytest.mark.parametrize(("gpu", "source", "message"), [
    ("b200", "RS", "workload.operands: 'RS' must be one of SS, TS for tcgen05 instructions"),
    ("h100-sxm", "TS", "workload.operands: 'TS' must be one of SS, RS for wgmma instructions"),
    ("b200", "XS", "workload.operands: 'XS' must be one of"),
])
def test_an_operand_source_the_instruction_lacks_is_a_one_line_error(gpu: str, source: str, message: str) -> None:
    raw = {"gpu": gpu, "workload": {"kind": "gemm", "m": 128, "n": 128, "k": 128, "tile": [128, 128, 64],
                                    "operands": source}}
    with pytest.raises(ScenarioError) as err:
        simulate(from_dict(raw))
    assert message in str(err.value) and "\n" not in str(err.value)
