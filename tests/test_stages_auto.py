"""``pipeline.stages = "auto"``: the stage count CUTLASS would choose, with counts worked out by
hand from each rule (tmasim.workloads.gemm_stages) in the comments."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from tmasim.errors import ResidencyError, ScenarioError
from tmasim.scenario import load
from tmasim.simulation import plan_scenario, simulate
from tmasim.summary import describe
from tmasim.workloads.gemm_stages import CUTEDSL_RULE, SM90_RULE, auto_stages

ROOT = Path(__file__).resolve().parents[1]


def chosen(name: str, *overrides: str) -> tuple[int, int]:
    """(stages, the epilogue's shared memory) that "auto" chose."""
    scenario = load(name, [*overrides, "pipeline.stages=auto"])
    auto = auto_stages(scenario.workload, scenario.gpu, scenario.pipeline)
    assert auto.stages == scenario.pipeline.stages and scenario.pipeline.stages_auto
    return auto.stages, auto.epilogue_smem


def test_b200_pair_128x256_fp16():
    # CTA tile 128 x 256 (the pair's 256 x 256), BK 64 fp16: A + half of B = (128 + 256/2) x 128 B = 32768;
    # epilogue sub-tile: warps (4, 1), tile_m = min(128, 32 x 4) = 128, n_perf = 4096 // 128 = 32 divides 256,
    # tile_n = min(256, max(32, 8, 128 // 16)) = 32: 2 x 128 x 32 x 2 B = 16384.
    # (232448 - 1024 - 16384) // 32768 = 215040 // 32768 = 6; left over (232448 - 6 x 32768 - 17408) // 8192 = 2
    # more C sub-tiles: 4 x 8192 = 32768 B of epilogue.
    assert chosen("gemm-b200-2sm", "workload.dtype=fp16", "workload.out_dtype=fp16") == (6, 32768)


def test_b200_pair_64x64_fp16():
    # A + half of B = (64 + 32) x 128 B = 12288; warps (2, 2) (cta_m 64 in a pair): tile_m = min(64, 64) = 64,
    # n_perf = 4096 // 64 = 64, tile_n = min(64, max(64, 16, 16)) = 64: C 2 x 64 x 64 x 2 = 16384.
    # (232448 - 1024 - 16384) // 12288 = 215040 // 12288 = 17; left over 215040 - 17 x 12288 = 6144 < 8192.
    assert chosen("gemm-b200-2sm", "workload.dtype=fp16", "workload.out_dtype=fp16",
                  "workload.tile=[64,64,64]") == (17, 16384)


def test_b200_one_sm_128x256_bf16_and_two_ctas_per_sm():
    # A + B = (128 + 256) x 128 B = 49152: (232448 - 17408) // 49152 = 4; left over 18432 // 8192 = 2 more sub-tiles.
    assert chosen("gemm-b200") == (4, 32768)
    # Occupancy 2, tile 128 x 128: (232448 // 2 - 17408) // 32768 = 98816 // 32768 = 3; left over
    # (232448 - 2 x 3 x 32768 - 2 x 17408) // (2 x 8192) = 1024 // 16384 = 0.
    assert chosen("gemm-b200", "workload.tile=[128,128,64]", "workload.ctas_per_sm=2") == (3, 16384)


def test_b200_fp8_output_narrows_the_c_sub_tile_bytes():
    # fp8 in and out, pair, tile 128 x 256 x 128: A + half of B = (128 + 128) x 128 B = 32768; C sub-tile 128 x 32
    # (n_min_d = 128 // 8 = 16 < 32) x 1 B = 4096: (232448 - 1024 - 8192) // 32768 = 6; left over
    # (232448 - 196608 - 9216) // 4096 = 6 more: 8 x 4096 = 32768.
    assert chosen("gemm-b200-2sm", "workload.dtype=fp8", "workload.out_dtype=fp8",
                  "workload.tile=[128,256,128]") == (6, 32768)


def test_h100_cooperative_128x256_and_128x128():
    # Epilogue tile (cooperative) min(128, 128) x gcd(min(32, 256), 256) = 128 x 32, 8 sub-tiles: StagesD 2,
    # StagesC 4. D 2 x 128 x 32 x 2 = 16384 B, rows of 64 B: 64-byte swizzle, 512-byte aligned; with the fusion's
    # empty struct (1 B) 16896; + 4 x 16 B of C-load barriers = 16960, rounded to 512: 17408 carveout.
    # Stage round_up((128 + 256) x 128, 128) + 16 = 49168: (232448 - 17408) // 49168 = 4.
    assert chosen("gemm-h100") == (4, 17408)
    # 128 x 128: stage 32768 + 16: 215040 // 32784 = 6.
    assert chosen("gemm-h100", "workload.tile=[128,128,64]") == (6, 17408)


def test_h100_pingpong_64x128():
    # Ping-pong epilogue tile min(64, 64) x 32, 4 sub-tiles: D 2 x 64 x 32 x 2 = 8192 (+1 -> 8704, 512-aligned),
    # + 4 x 16 = 8768 -> 9216. Stage (64 + 128) x 128 + 16 = 24592: (232448 - 9216) // 24592 = 223232 // 24592 = 9.
    assert chosen("gemm-h100", "workload.tile=[64,128,64]", "pipeline.consumer_mode=pingpong") == (9, 9216)


def test_a_set_epilogue_smem_is_the_carveout():
    # H100: (232448 - round_up(40000, 128) = 40064) // 49168 = 3; B200 pair: (232448 - 1024 - 40000) // 32768 = 5.
    assert chosen("gemm-h100", "workload.epilogue_smem=40000") == (3, 40000)
    assert chosen("gemm-b200-2sm", "workload.epilogue_smem=40000") == (5, 40000)


def test_the_run_uses_the_chosen_count_and_the_rules_epilogue_and_says_so():
    result = simulate(load("gemm-b200-2sm", ["pipeline.stages=auto", "workload.k=512"]))
    assert result.stats["stages"] == 6 and result.stats["stages_auto_rule"] == CUTEDSL_RULE
    # 6 stages of 32768 B, 32768 B of epilogue (4 C sub-tiles), 2 x 6 barriers of 8 B.
    assert result.stats["smem_per_cta_bytes"] == 6 * 32768 + 32768 + 2 * 6 * 8
    assert "stages           6 (auto: CuTeDSL dense_gemm_persistent rule;" in describe(result.stats, result.scenario)
    hopper = simulate(load("gemm-h100", ["pipeline.stages=auto", "workload.k=512"]))
    assert hopper.stats["stages_auto_rule"] == SM90_RULE and hopper.stats["epilogue_smem_bytes"] == 17408


def test_a_numbered_count_leaves_the_summary_without_the_rule():
    assert "stages_auto_rule" not in simulate(load("gemm-h100", ["workload.k=512"])).stats


def test_auto_from_a_scenario_file(tmp_path):
    text = (ROOT / "scenarios" / "gemm-h100.toml").read_text(encoding="utf-8").replace("stages = 4", 'stages = "auto"')
    path = tmp_path / "auto.toml"
    path.write_text(text, encoding="utf-8")
    assert load(path).pipeline.stages == 4


def test_auto_from_the_command_line():
    run = subprocess.run([sys.executable, "-m", "tmasim", "run", "gemm-b200-2sm", "--set", "pipeline.stages=auto",
                          "--set", "workload.k=512"], capture_output=True, text=True, cwd=ROOT, check=False)
    assert run.returncode == 0, run.stderr
    assert "6 stages" in run.stdout.splitlines()[0]


@pytest.mark.parametrize(("name", "match"), [
    ("reference", "pipeline.stages: 'auto' is modelled for the gemm workload only \\(this one is 'tiles'\\)"),
    ("gemm-ideal", "pipeline.stages: 'auto' follows CUTLASS's rules for Hopper \\(wgmma\\) and Blackwell"),
])
def test_auto_where_no_rule_applies_is_an_error_naming_it(name, match):
    with pytest.raises(ScenarioError, match=match):
        load(name, ["pipeline.stages=auto"])


def test_a_count_the_residency_check_refuses_says_auto_chose_it():
    with pytest.raises(ResidencyError, match=r"workload.ctas_per_sm: 2 is more than fit .* \(pipeline.stages = "
                                             r"\"auto\" chose 4 by the CUTLASS SM90 StageCountAutoCarveout rule"):
        plan_scenario(load("gemm-h100", ["pipeline.stages=auto", "workload.ctas_per_sm=2"]))


def test_a_stale_auto_count_is_refused():
    scenario = load("gemm-h100", ["pipeline.stages=auto"])
    with pytest.raises(ScenarioError, match=r"pipeline.stages: 5 is marked as chosen by \"auto\" \(stages_auto\), but "
                                            r"the CUTLASS SM90 StageCountAutoCarveout rule gives 4"):
        dataclasses.replace(scenario, pipeline=dataclasses.replace(scenario.pipeline, stages=5))
