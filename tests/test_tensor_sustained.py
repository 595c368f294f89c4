"""The tensor cores' sustained rate under whole-chip load (``gpu.tensor_sustained``): a launch that
keeps every SM its clusters can use busy runs each MMA of a listed dtype 1 / share as long; a
launch on fewer SMs, and every other dtype, at the full rate."""

from __future__ import annotations

import pytest

from tmasim.errors import ScenarioError
from tmasim.hardware import load_gpu
from tmasim.scenario import load
from tmasim.simulation import simulate
from tmasim.summary import describe

B200 = load_gpu("b200")
SHARE = B200.tensor_sustained["fp8"]


def pair_gemm(m: int, n: int, dtype: str = "fp8", cluster: tuple[int, int] = (2, 1), *extra: str) -> dict:
    bk = 128 if dtype == "fp8" else 64
    sets = [f"workload.m={m}", f"workload.n={n}", f"workload.k={4 * bk}", f"workload.dtype={dtype}",
            f"workload.tile=[128,256,{bk}]", "workload.launch=persistent", "pipeline.consumers=1",
            "pipeline.mma_cta_group=2", f"pipeline.cluster=[{cluster[0]},{cluster[1]}]", "pipeline.stages=4",
            "run.records=false", *extra]
    return simulate(load("gemm-b200", sets)).stats


def test_b200_states_a_share_for_fp8_only_and_hopper_none() -> None:
    assert 0.8 < SHARE < 1 and set(B200.tensor_sustained) == {"fp8"}
    assert "fitted: validation/public/b200/wholechip_train.csv" in B200.sources["tensor_sustained"]
    assert load_gpu("h100-sxm").tensor_sustained == {}


def test_the_pace_is_one_over_the_share_under_whole_chip_load_only() -> None:
    assert B200.mma_pace("fp8", whole_chip=True) == pytest.approx(1 / SHARE)
    assert B200.mma_pace("fp8", whole_chip=False) == 1.0
    assert B200.mma_pace("fp16", whole_chip=True) == 1.0


def test_a_launch_that_fills_the_chip_runs_its_fp8_mmas_slower_than_one_that_does_not() -> None:
    full = pair_gemm(4096, 4096)  # 256 tiles of 256x256 on 74 pairs: every SM busy
    few = pair_gemm(512, 512)  # 4 pairs
    assert full["mma_pace"] == pytest.approx(1 / SHARE) and "mma_pace" not in few
    assert full["mma_k_step_ns"] == pytest.approx(few["mma_k_step_ns"] / SHARE, rel=1e-3)
    assert full["mma_k_step_ns"] > few["mma_k_step_ns"] * 1.05


def test_fp16_keeps_its_full_rate_on_the_whole_chip() -> None:
    full, few = pair_gemm(4096, 4096, "fp16"), pair_gemm(512, 512, "fp16")
    assert "mma_pace" not in full and full["mma_k_step_ns"] == few["mma_k_step_ns"]


def test_a_2x2_cluster_on_every_sm_it_can_use_is_whole_chip_load() -> None:
    stats = pair_gemm(4096, 4096, "fp8", (2, 2), "workload.multicast=a")
    assert stats["idle_sms"] > 0 and stats["mma_pace"] == pytest.approx(1 / SHARE)


def test_the_summary_says_why_the_mmas_take_longer() -> None:
    scenario = load("gemm-b200", ["workload.dtype=fp8", "workload.tile=[128,256,128]", "pipeline.mma_cta_group=2",
                                  "pipeline.cluster=[2,1]", "pipeline.consumers=1", "run.records=false"])
    text = describe(simulate(scenario).stats, scenario)
    assert f"the launch loads the whole chip, where fp8's tensor cores sustain {SHARE:.0%} of their full rate" in text


def test_the_share_also_bounds_the_run() -> None:
    full = pair_gemm(4096, 4096, "fp8", (2, 1), "gpu.tensor_sustained={fp8=0.5}")
    free = pair_gemm(4096, 4096, "fp8", (2, 1), "gpu.tensor_sustained={}")
    assert full["compute_bound_ns"] == pytest.approx(2 * free["compute_bound_ns"], rel=1e-3)
    assert full["bound_ns"] <= full["makespan_ns"]


@pytest.mark.parametrize(("value", "message"), [
    ({"fp8": 0}, "gpu.tensor_sustained.fp8: 0 must be a number above 0 and at most 1"),
    ({"fp8": 1.5}, "gpu.tensor_sustained.fp8: 1.5 must be a number above 0 and at most 1"),
    ({"fp8": "most"}, "gpu.tensor_sustained.fp8: 'most' must be a number above 0 and at most 1"),
    ({"fp9": 0.5}, "gpu.tensor_sustained"),
])
def test_bad_shares_are_one_line_errors(value: dict, message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        load_gpu({"preset": "b200", "tensor_sustained": value})
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_attention_refuses_the_field_it_does_not_read() -> None:
    with pytest.raises(ScenarioError, match="gpu.tensor_sustained: .* would be ignored"):
        load("attention-b200", ["gpu.tensor_sustained={fp8=0.9}"])
