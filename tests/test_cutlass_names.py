"""CUTLASS 3.x kernel names as scenarios (tmasim.cutlass_names): each part of the name read into
the field CUTLASS's generator built it from, both architectures, both forms of the name."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tmasim.cutlass_names import read, scenario
from tmasim.errors import ScenarioError
from tmasim.scenario import load

ROOT = Path(__file__).resolve().parents[1]
SM90 = ("cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_2x1x1_0_tnn_align8"
        "_warpspecialized_cooperative_epi_tma")
SM100 = "cutlass3x_sm100_tensorop_gemm_f16_f16_f32_f16_f16_64x128x64_4x4x1_0_nnn_align8_1sm"
SM90_OLD = ("cutlass3x_sm90_tensorop_s64x128x16gemm_f16_f16_f32_void_f16_64x128x64_1x2x1_3_tnn_align8"
            "_warpspecialized_pingpong_epi_tma")
# The older sm100 form: the tile is the instruction (256x128, a pair's) times (cluster M / 2, cluster N).
SM100_OLD_2SM = ("cutlass3x_sm100_tensorop_s256x128x16gemm_bf16_bf16_f32_void_bf16_512x256x64_4x2x1_0_tnn_align8"
                 "_2sm_epi_tma")
SM100_2SM = "cutlass3x_sm100_tensorop_gemm_e4m3_e4m3_f32_void_e4m3_256x256x128_2x1x1_0_tnn_align16_2sm_epi_tma"


def test_sm90_cooperative():
    s = load(f"cutlass:{SM90}")
    assert (s.gpu.name, s.workload.dtype, s.workload.out_dtype) == ("h100-sxm", "bf16", "bf16")
    assert s.workload.tile == (128, 256, 64) and (s.workload.m, s.workload.n, s.workload.k) == (8192,) * 3
    assert (s.pipeline.cluster, s.pipeline.consumers, s.pipeline.consumer_mode) == ((2, 1), 2, "cooperative")
    assert s.pipeline.stages_auto and s.pipeline.stages == 4  # the SM90 rule's count for this tile
    assert s.workload.launch == "persistent" and s.workload.epilogue_smem is None


def test_sm100_1sm_new_form_tile_is_the_ctas():
    s = load(f"cutlass:{SM100}", ["workload.m=4096"])
    assert (s.gpu.name, s.workload.dtype, s.workload.out_dtype) == ("b200", "fp16", "fp16")
    assert s.workload.tile == (64, 128, 64) and s.pipeline.cluster == (4, 4) and s.pipeline.mma_cta_group == 1
    assert s.workload.m == 4096 and s.pipeline.stages_auto


def test_sm100_2sm_new_form_halves_the_mma_tile():
    s = load(f"cutlass:{SM100_2SM}")
    assert s.workload.tile == (128, 256, 128) and s.pipeline.mma_cta_group == 2 and s.pipeline.cluster == (2, 1)
    assert (s.workload.dtype, s.workload.out_dtype) == ("fp8", "fp8")


def test_sm100_old_form_divides_by_the_cluster():
    kernel = read(SM100_OLD_2SM)
    assert kernel.inst == (256, 128, 16) and kernel.tile == (128, 128, 64) and kernel.cluster == (4, 2)


def test_sm90_old_form_pingpong_fixed_stages():
    s = load(f"cutlass:{SM90_OLD}")
    assert s.workload.tile == (64, 128, 64) and s.pipeline.stages == 3 and not s.pipeline.stages_auto
    assert (s.pipeline.consumers, s.pipeline.consumer_mode, s.pipeline.cluster) == (2, "pingpong", (1, 2))


def test_sm90_without_schedule_is_the_builders_auto_with_no_smem_epilogue():
    raw = scenario("cutlass3x_sm90_tensorop_tf32gemm_f32_f32_f32_f32_f32_128x128x32_2x1x1_0_tnn_align4")
    assert raw["workload"]["dtype"] == "tf32" and raw["workload"]["out_dtype"] == "fp32"
    assert raw["workload"]["epilogue_smem"] == 0 and raw["pipeline"]["consumer_mode"] == "cooperative"


def test_sm90_plain_warpspecialized_is_one_consumer_not_persistent():
    raw = scenario(SM90.replace("warpspecialized_cooperative", "warpspecialized"))
    assert raw["pipeline"]["consumers"] == 1 and raw["workload"]["launch"] == "grid"


def test_raster_follows_cutlass_heuristic_after_set():
    assert load(f"cutlass:{SM90}").workload.raster == "row"  # 64 tiles along M, 32 along N: along N
    assert load(f"cutlass:{SM90}", ["workload.n=32768"]).workload.raster == "column"  # 128 along N > 64
    assert load(f"cutlass:{SM90}", ["workload.raster=grouped"]).workload.raster == "grouped"


@pytest.mark.parametrize(("name", "part"), [
    (SM90.replace("_0_tnn", "_x_tnn"), "stages"),
    (SM90.replace("2x1x1", "2x1"), "cluster"),
    (SM90.replace("sm90", "sm80"), "architecture"),
    (SM90.replace("tensorop", "simt"), "operation class"),
    (SM90.replace("bf16_bf16_f32", "bf16_e4m3_f32"), "B type"),
    (SM90.replace("_tnn_", "_tnx_"), "layout"),
    (SM90.replace("cooperative", "sideways"), "kernel schedule"),
    (SM100.replace("4x4x1", "3x4x1").replace("1sm", "2sm"), "cluster"),
    (SM100_OLD_2SM.replace("512x256x64", "256x256x64"), "tile"),
    ("cutlass_tensorop_s1688gemm_f16_256x128_32x2_nt_align8", "prefix"),
])
def test_unreadable_names_name_the_part(name: str, part: str):
    with pytest.raises(ScenarioError, match=f": {part}: "):
        load(f"cutlass:{name}")


def test_cli_prints_toml_and_runs():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    shown = subprocess.run([sys.executable, "-m", "tmasim", "scenarios", f"cutlass:{SM100}"], capture_output=True,
                           text=True, env=env, check=True).stdout
    parsed = tomllib.loads(shown)
    assert parsed["workload"]["tile"] == [64, 128, 64] and parsed["pipeline"]["cluster"] == [4, 4]
    assert "layout nnn: modelled as tn" in shown
    pingpong_k = SM90.replace("align8_", "align8_stream_k_").replace("cooperative", "pingpong")
    pingpong_k = pingpong_k.replace("2x1x1", "1x1x1")
    bad = subprocess.run([sys.executable, "-m", "tmasim", "run", f"cutlass:{pingpong_k}"], capture_output=True,
                         text=True, env=env)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "ping-pong" in bad.stderr


def test_a_stream_k_name_runs_the_stream_k_scheduler():
    """TileSchedulerSuffixes: ``_stream_k`` between the alignment and the kernel schedule."""
    name = SM90.replace("align8_", "align8_stream_k_").replace("2x1x1", "1x1x1")
    scenario = load(f"cutlass:{name}", ["workload.m=128", "workload.n=4096", "workload.k=8192"])
    assert scenario.workload.scheduler == "stream-k" and scenario.pipeline.consumer_mode == "cooperative"
    auto = load(f"cutlass:{name.replace('_warpspecialized_cooperative', '').replace('128x256', '64x256')}")
    assert auto.workload.scheduler == "stream-k" and auto.pipeline.consumer_mode == "cooperative"  # not ping-pong
    from tmasim.simulation import simulate

    stats = simulate(scenario).stats
    assert stats["decomposition"] == "stream-K" and stats["sms_used"] == 132


def test_a_stream_k_name_with_a_2x1_cluster_runs_stream_k_per_cluster():
    """The cluster in the name stays: each cluster's CTAs share one k-range (tmasim.workloads.gemm_split)."""
    from tmasim.simulation import simulate

    name = SM90.replace("align8_", "align8_stream_k_")
    scenario = load(f"cutlass:{name}", ["workload.m=256", "workload.n=4096", "workload.k=8192"])
    assert scenario.pipeline.cluster == (2, 1) and scenario.workload.scheduler == "stream-k"
    stats = simulate(scenario).stats
    assert stats["decomposition"] == "stream-K" and stats["cluster"] == "2x1" and stats["sms_used"] == 132
    assert stats["stream_k_units"] == 132 and stats["stream_k_tiles"] == 2 * 16
    plain = simulate(load(f"cutlass:{SM90}", ["workload.m=256", "workload.n=4096", "workload.k=8192"])).stats
    assert stats["makespan_ps"] < plain["makespan_ps"] and plain["sms_used"] == 32
