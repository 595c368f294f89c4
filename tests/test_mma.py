"""MMA instructions: the preset tables, the k-step mapping, latency and II in the pipeline."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmasim import hardware, units
from tmasim.errors import ScenarioError
from tmasim.hardware import load_gpu
from tmasim.scenario import from_dict
from tmasim.simulation import simulate
from tmasim.workloads import gemm as gemm_workload
from tmasim.workloads import gemm_mma

B200 = load_gpu("b200")
H100 = load_gpu("h100-sxm")

# A machine whose memory side costs nothing: only the tensor cores and the barriers' MMA waits.
FREE_MEMORY = {"hbm_bandwidth": "unlimited", "l2_bandwidth": "unlimited", "sm_port_bandwidth": "unlimited",
               "smem_bandwidth": "unlimited", "copy_latency": "0 ns", "copy_latency_per_kib": "0 ns",
               "copy_latency_per_kib_in_flight": "0 ns",
               "hbm_latency": "0 ns", "tma_issue": "0 ns", "barrier_wake": "0 ns", "tma_request_time": "0 ns"}


def one_cta(tile: tuple[int, int, int], k_steps: int, stages: int = 4, gpu: Any = "b200", consumers: int = 1,
            dtype: str = "bf16") -> dict[str, Any]:
    bm, bn, bk = tile
    raw = {"gpu": gpu, "workload": {"kind": "gemm", "m": bm, "n": bn, "k": bk * k_steps, "dtype": dtype,
                                    "tile": list(tile)},
           "pipeline": {"stages": stages, "consumers": consumers}, "run": {"records": False}}
    return simulate(from_dict(raw)).stats


def k_step_interval(tile: tuple[int, int, int], stages: int = 4, gpu: Any = "b200") -> float:
    """Steady-state time per k-step: the makespan's growth per added k-step (ps)."""
    short, long = (one_cta(tile, steps, stages, gpu)["makespan_ps"] for steps in (16, 48))
    return (long - short) / 32


# --- the tables ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["h100-sxm", "h200", "b200"])
def test_the_stated_peak_follows_from_the_ii_at_the_largest_n(name: str) -> None:
    gpu = load_gpu(name)
    assert gpu.mma is not None
    stated = hardware.raw_preset(name)["tensor_flops"]["value"]
    for dtype, text in stated.items():
        widest = max((s for s in gpu.mma.shapes if s.dtype == dtype and s.sms == 1), key=lambda s: (s.n, s.m))
        peak = widest.flops / widest.ii * gpu.sms * gpu.clock_hz  # FLOP/s
        assert peak == pytest.approx(units.parse(text, "flop_rate", dtype) * units.PS_PER_S, rel=2e-3)
        assert gpu.tensor_flops[dtype] * units.PS_PER_S == pytest.approx(peak)


def test_b200_table_is_the_measured_umma_fit_with_a_in_tensor_memory() -> None:
    assert B200.mma is not None and B200.mma.operands == "TS"
    assert B200.mma.timing("t", "bf16", 128, 256) == (232.0, 128.03)
    assert B200.mma.timing("t", "bf16", 128, 128) == (168.0, 64.02)
    assert B200.mma.timing("t", "bf16", 256, 256, sms=2) == (266.0, 128.02)
    assert B200.mma.timing("t", "fp8", 64, 64) == (136.0, 32.02)


def test_a_shape_between_two_listed_n_is_interpolated_and_a_narrower_one_held() -> None:
    assert B200.mma is not None
    latency, ii = B200.mma.timing("t", "bf16", 128, 192)
    assert (latency, ii) == (pytest.approx(200.0), pytest.approx(96.025))
    assert B200.mma.timing("t", "bf16", 128, 16) == B200.mma.timing("t", "bf16", 128, 64)


def test_hopper_k_step_maps_to_wgmma_per_warpgroup() -> None:
    config = gemm_workload.parse({"kind": "gemm", "m": 8192, "n": 8192, "k": 8192, "tile": [128, 256, 64]})
    step = gemm_mma.mma_step(config, H100, consumers=2, mode="cooperative")
    assert (step.instruction, step.count) == ("wgmma bf16 m64n256k16", 8)  # 2 row blocks x 4 k16
    assert step.occupancy == H100.cycles_ps(8 * 128) and step.tail == 0  # measured II 128 = latency (Luo et al.)
    narrow = gemm_workload.parse({"kind": "gemm", "m": 64, "n": 128, "k": 64, "tile": [64, 128, 64]})
    split = gemm_mma.mma_step(narrow, H100, consumers=2, mode="cooperative")
    assert (split.instruction, split.count) == ("wgmma bf16 m64n64k16", 8)  # one row block: split N


# --- acceptance: the single-CTA Blackwell mainloop ----------------------------------------------

def test_b200_single_cta_k_step_is_never_faster_than_four_mma_intervals() -> None:
    interval = k_step_interval((128, 256, 64))
    assert interval >= B200.cycles_ps(4 * 128.0)


@pytest.mark.parametrize(("bn", "ii"), [(256, 128.03), (128, 64.02), (64, 32.02)])
def test_b200_steady_state_follows_the_ii_table(bn: int, ii: float) -> None:
    gpu = {"preset": "b200", **FREE_MEMORY}  # shared memory unlimited too: the tensor cores' own pace
    assert k_step_interval((128, bn, 64), gpu=gpu) == B200.cycles_ps(4 * ii)


@settings(max_examples=12, deadline=None)
@given(bm=st.sampled_from([64, 128]), bn=st.integers(4, 16).map(lambda x: 16 * x),
       bk=st.sampled_from([16, 32, 64, 128]), stages=st.integers(1, 4))
def test_a_k_step_never_beats_its_instructions_on_the_tensor_cores(bm: int, bn: int, bk: int, stages: int) -> None:
    assert B200.mma is not None
    latency, ii = B200.mma.timing("t", "bf16", bm, bn)
    interval = k_step_interval((bm, bn, bk), stages=stages)
    assert interval >= B200.cycles_ps(bk // 16 * ii) - 1
    if stages == 1:  # nothing overlaps the MMAs' completion
        assert interval >= B200.cycles_ps((bk // 16 - 1) * ii + latency) - 1


def test_one_stage_pays_the_mma_latency_before_the_slot_is_released() -> None:
    gpu = {"preset": "b200", **FREE_MEMORY}
    # Serial: 4 instructions back to back, then the last one's latency - II before the refill.
    assert k_step_interval((128, 256, 64), stages=1, gpu=gpu) == B200.cycles_ps(3 * 128.03 + 232.0)


# --- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("tile", "message"), [
    ((256, 128, 64), "workload.tile: 'tcgen05 bf16 m256n128k16' is not a tcgen05.mma shape: M is 64 or 128 on 1 SM"),
    ((128, 248, 64), "N must be a multiple of 16 from 16 to 256"),
    ((128, 200, 64), "N must be a multiple of 16 from 16 to 256"),
    ((128, 128, 40), "workload.tile: 'BK = 40' is not a multiple of K = 16"),
])
def test_shapes_the_architecture_lacks_are_one_line_errors(tile: tuple[int, int, int], message: str) -> None:
    with pytest.raises(ScenarioError, match=None) as err:
        one_cta(tile, 2)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_n_over_256_is_no_mma_shape() -> None:
    assert B200.mma is not None and H100.mma is not None
    with pytest.raises(ScenarioError, match="has N = 264: N must be a multiple of 8 from 8 to 256"):
        H100.mma.timing("workload.tile", "bf16", 64, 264)
    with pytest.raises(ScenarioError, match="has N = 512: N must be a multiple of 16 from 16 to 256"):
        B200.mma.timing("workload.tile", "bf16", 128, 512)


@pytest.mark.parametrize(("row", "message"), [
    (["bf16", 1, 64, 256, 16, 250, 0], "must be > 0 cycles"),
    (["bf16", 1, 64, 256, 16, 250, -3.5], "must be > 0 cycles"),
    (["bf16", 1, 64, 256, 16, 100, 138.5], "must be >= the II"),
    (["bf16", 1, 128, 256, 16, 300, 138.5], "is not a wgmma shape"),
    (["bf16", 1, 64, 260, 16, 300, 138.5], "N must be a multiple of 8"),
    (["bf16", 1, 64, 256, 32, 300, 138.5], "must be 16 for bf16"),
])
def test_bad_mma_rows_are_one_line_errors(row: list[Any], message: str) -> None:
    raw = hardware.raw_preset("h100-sxm")
    table = {**raw["mma"], "shapes": [row]}
    with pytest.raises(ScenarioError) as err:
        load_gpu({"preset": "h100-sxm", "mma": table})
    assert message in str(err.value) and str(err.value).startswith("gpu.mma.shapes[0]")


def test_tensor_flops_cannot_be_set_beside_an_mma_table() -> None:
    with pytest.raises(ScenarioError, match="gpu.tensor_flops: .* follows from the instructions' II"):
        load_gpu({"preset": "h100-sxm", "tensor_flops": {"bf16": "2000 TFLOP/s"}})


def test_cli_exits_2_with_one_line_for_an_mma_shape_the_gpu_lacks() -> None:
    command = [sys.executable, "-m", "tmasim.cli", "run", "gemm-b200", "--set", "workload.tile=[256,256,64]"]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "cta_group::2" in proc.stderr


# --- where the accumulator lives ----------------------------------------------------------------

def small_gemm(gpu: str = "h100-sxm", tile: tuple[int, int, int] = (64, 128, 64), stages: int = 2,
               consumers: int = 1, **pipeline: Any) -> dict[str, Any]:
    raw = {"gpu": gpu, "workload": {"kind": "gemm", "m": 512, "n": 512, "k": 256, "tile": list(tile)},
           "pipeline": {"stages": stages, "consumers": consumers, **pipeline}, "run": {"records": False}}
    return simulate(from_dict(raw)).stats


def test_acceptance_a_256x256_tile_over_two_warpgroups_does_not_fit_in_registers() -> None:
    command = [sys.executable, "-m", "tmasim.cli", "run", "gemm-h100", "--set", "workload.tile=[256,256,64]",
               "--set", "pipeline.stages=2"]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and proc.stdout == ""
    line = proc.stderr.strip()
    assert "\n" not in line
    assert "needs 288 registers per consumer thread (256 for the fp32 accumulator" in line
    assert "over the 232 allowed" in line and "at most 255 per thread" in line


def test_registers_bound_ctas_per_sm_and_setmaxnreg_redistributes_them() -> None:
    default = small_gemm()
    assert (default["ctas_per_sm"], default["residency_limit"]) == (1, "registers")
    assert default["registers_per_cta"] == 128 * (40 + 232)
    assert default["registers_needed_per_thread"] == 64 * 128 // 128 + 32
    lean = small_gemm(registers={"producer": 40, "consumer": 96})
    assert lean["registers_per_cta"] == 128 * (40 + 96) and lean["ctas_per_sm"] == 65536 // (128 * 136) == 3


def test_pingpong_holds_a_whole_tile_per_warpgroup() -> None:
    with pytest.raises(ScenarioError, match="needs 288 registers per consumer thread .* 128x256 per warpgroup"):
        small_gemm(tile=(128, 256, 64), consumers=2, consumer_mode="pingpong")
    fits = small_gemm(tile=(128, 256, 64), consumers=2)  # cooperative: 128 each
    assert fits["registers_needed_per_thread"] == 160


@pytest.mark.parametrize(("registers", "message"), [
    ({"producer": 40, "consumer": 248}, "gives a CTA 128 x (40 + 2 x 248) = 68608 registers, over the 65536"),
    ({"consumer": 230}, "pipeline.registers.consumer: 230 must be a multiple of 8 from 24 to 256"),
    ({"consumer": 16}, "pipeline.registers.consumer: 16 must be >= 24"),
    ({"warp": 8}, "pipeline.registers.warp: 8 is not a known field"),
])
def test_register_budgets_are_checked(registers: dict[str, int], message: str) -> None:
    with pytest.raises(ScenarioError, match=None) as err:
        small_gemm(tile=(128, 128, 64), consumers=2, registers=registers)
    assert message in str(err.value)


def test_tmem_holds_the_blackwell_accumulator_and_bounds_ctas_per_sm() -> None:
    stats = small_gemm(gpu="b200", tile=(128, 256, 64), stages=1)
    assert stats["tmem_columns_per_cta"] == 256 and stats["registers_per_cta"] is None
    assert small_gemm(gpu="b200", tile=(128, 96, 64), stages=1)["tmem_columns_per_cta"] == 128  # power of two
    with pytest.raises(ScenarioError, match=r"3 is more than fit on an SM of b200: 2 \(limited by tensor memory: "
                                            r"256 TMEM columns per CTA, 512 per SM\)"):
        simulate(from_dict({"gpu": "b200", "workload": {"kind": "gemm", "m": 1024, "n": 1024, "k": 128,
                                                        "tile": [128, 256, 64], "ctas_per_sm": 3},
                            "pipeline": {"stages": 1}, "run": {"records": False}}))
    with pytest.raises(ScenarioError, match="needs 1024 TMEM columns for 3 fp32 accumulator"):
        small_gemm(gpu="b200", tile=(128, 256, 64), consumers=3, consumer_mode="pingpong")


# --- held-out check of the transcribed UMMA table ------------------------------------------------

def measured_umma(name: str) -> list[dict[str, str]]:
    import csv
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "validation" / "public" / "b200" / name
    return [row for row in csv.DictReader(path.open())
            if row["ABLayout"] == "SS" and row["CTAGroup"] == "1" and row["Format"] in ("BF16", "E4M3")]


# The memory side free, shared memory at the preset's bandwidth: SS instructions read from it.
SMEM_ONLY = {k: v for k, v in FREE_MEMORY.items() if k != "smem_bandwidth"}


def test_single_cta_back_to_back_mmas_reproduce_the_directly_measured_ii() -> None:
    """The preset transcribes the fit's TS II and derives SS from the shared-memory bandwidth;
    the pipeline-depth table measured the SS II directly and is used by neither: the MMAs of a
    single CTA's k-step (A and B from shared memory) must reproduce it, shape by shape, within
    2 % MAPE."""
    gpu = {"preset": "b200", **SMEM_ONLY}
    errors = []
    for row in measured_umma("umma_latency_pipeline_depth.csv"):
        m, n, k = int(row["M"]), int(row["N"]), int(row["K"])
        dtype = "bf16" if row["Format"] == "BF16" else "fp8"
        ns = one_cta((m, n, 4 * k), 2, 4, gpu, dtype=dtype)["mma_k_step_ns"]
        ii_cycles = ns * 1000 / 4 * B200.clock_hz / units.PS_PER_S
        errors.append(abs(ii_cycles - float(row["InitiationInterval"])) / float(row["InitiationInterval"]))
    assert len(errors) == 24
    assert sum(errors) / len(errors) < 0.02


def test_one_stage_of_one_mma_takes_the_measured_latency() -> None:
    """SS latency = the TS row's + A's bytes at the shared-memory bandwidth (within 2 cycles). The
    benchmark's operands sit in shared memory already: no TMA writes wait before the release."""
    gpu = {"preset": "b200", **SMEM_ONLY, "smem_write_bandwidth": "unlimited"}
    for row in measured_umma("umma_latency_lat_results_full.csv")[::5]:
        m, n, k = int(row["M"]), int(row["N"]), int(row["K"])
        dtype = "bf16" if row["Format"] == "BF16" else "fp8"
        short, long = (one_cta((m, n, k), steps, 1, gpu, dtype=dtype)["makespan_ps"] for steps in (4, 12))
        assert (long - short) / 8 == pytest.approx(B200.cycles_ps(float(row["MedianCycles"])), abs=B200.cycles_ps(2))


def test_presets_command_shows_the_mma_table_with_its_sources() -> None:
    proc = subprocess.run([sys.executable, "-m", "tmasim.cli", "presets", "b200"], capture_output=True, text=True,
                          check=True)
    assert re.search(r"^  mma +tcgen05 table ", proc.stdout, re.M)
    assert re.search(r"^    bf16 +m64/128 n64-256 k16: II 32.02-128.03, latency 136-232; peak 2.382 PFLOP/s",
                     proc.stdout, re.M)
    assert "[measured (UMMA fit, TS: Latency, a (II))]" in proc.stdout
    assert "A in Tensor Memory (TS; other sources follow from smem_bandwidth)" in proc.stdout
    assert re.search(r"^  smem_bandwidth +124.268193 B/cycle ", proc.stdout, re.M)  # 244.187 GB/s at 1.965 GHz
    assert "umma_throughput_tput_results_max.csv" in proc.stdout


def test_a_calibrated_preset_keeps_the_mma_table(tmp_path: Any) -> None:
    import tomllib

    from tmasim.validation.preset import calibrated_text

    text = calibrated_text("b200", None, name="b200-fit", fitted={"copy_latency": "900 ns"}, source="fitted")
    path = tmp_path / "preset.toml"
    path.write_text(text)
    gpu = load_gpu(str(path))
    assert gpu.mma == B200.mma and gpu.copy_latency == 900_000
    assert tomllib.loads(text)["mma"]["instruction"] == "tcgen05"
