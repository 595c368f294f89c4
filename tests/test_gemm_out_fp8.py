"""fp8 (e4m3) output: one byte an element of C, in the store and in the epilogue's staging."""

from __future__ import annotations

import pytest

from tmasim.errors import ScenarioError
from tmasim.scenario import load
from tmasim.simulation import plan_scenario, simulate


def test_fp8_output_halves_the_store_bytes_against_fp16():
    runs = {out: simulate(load("gemm-h100", [f"workload.out_dtype={out}", "workload.k=512"])).stats
            for out in ("fp16", "fp8")}
    assert runs["fp16"]["store_bytes"] == 8192 * 8192 * 2
    assert runs["fp8"]["store_bytes"] == 8192 * 8192 * 1


def test_fp8_output_halves_the_epilogues_shared_memory():
    # CUTLASS-style staging: two BM x 32 sub-tiles of C, 2 x 128 x 32 elements.
    _, fp16 = plan_scenario(load("gemm-h100", ["workload.out_dtype=fp16"]))
    _, fp8 = plan_scenario(load("gemm-h100", ["workload.out_dtype=fp8"]))
    assert (fp16.other_smem, fp8.other_smem) == (2 * 128 * 32 * 2, 2 * 128 * 32 * 1)


def test_an_fp8_c_box_narrower_than_16_bytes_is_refused():
    with pytest.raises(ScenarioError, match=r"workload.tile: .*box of C.* must be a multiple of 16"):
        plan_scenario(load("gemm-h100", ["workload.out_dtype=fp8", "workload.tile=[128,8,64]"]))
