"""GEMM operand boxes as CUTLASS builds them: a box is at most the swizzle span wide, so a wider
k-step is several boxes, several TMA instructions (each with its issue cost), per operand."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tmasim.errors import ScenarioError
from tmasim.scenario import load
from tmasim.simulation import simulate
from tmasim.summary import describe
from tmasim.workloads.gemm_layout import GemmLayout, launched_ctas, tile_coord, tile_coords

ONE_CTA = ["workload.m=64", "workload.n=64", "workload.k=8192", "workload.dtype=fp8", "workload.tile=[64,64,512]",
           "pipeline.stages=3", "pipeline.consumers=1"]


def layout(overrides):
    return GemmLayout.of(load("gemm-b200", ONE_CTA + overrides).workload)


def test_a_512_wide_fp8_k_step_is_four_128_byte_boxes_per_operand():
    lay = layout([])
    assert len(lay.a) == len(lay.b) == 4
    assert [off for off, _ in lay.a.boxes] == [0, 128, 256, 384]
    assert lay.a.stage_bytes == 64 * 512 and lay.a.requests == 4 * 64


@pytest.mark.parametrize(("swizzle", "boxes"), [("128B", 4), ("64B", 8), ("32B", 16), ("none", 32)])
def test_narrower_swizzles_make_more_boxes_and_requests_for_the_same_bytes(swizzle, boxes):
    lay = layout([f"workload.swizzle={swizzle}"])
    assert len(lay.a) == boxes and lay.a.stage_bytes == 64 * 512 and lay.a.requests == boxes * 64


def test_a_k_step_that_is_not_a_whole_number_of_spans_ends_with_a_narrower_box():
    lay = layout(["workload.dtype=bf16", "workload.tile=[64,64,96]"])
    assert [d.box_dims[0] for _, d in lay.a.boxes] == [64, 32]
    assert lay.a.stage_bytes == 64 * 96 * 2


def test_each_box_is_a_copy_with_its_own_issue_cost():
    no_launch = ["gpu.launch_overhead=0 us"]  # the CTA's own time
    wide = simulate(load("gemm-b200", ONE_CTA + no_launch)).stats["makespan_ns"]
    narrow = simulate(load("gemm-b200", ONE_CTA + no_launch + ["workload.swizzle=none"])).stats["makespan_ns"]
    assert narrow > 4 * wide  # 8x the instructions and requests for the same bytes


def test_the_summary_shows_boxes_instructions_and_requests():
    scenario = load("gemm-b200", ONE_CTA)
    text = describe(simulate(scenario).stats, scenario)
    assert "8 TMA instructions per k-step (boxes of A 64x128, B 64x128" in text and "512 requests" in text


def test_an_unknown_swizzle_is_refused_naming_the_field():
    with pytest.raises(ScenarioError, match="workload.swizzle"):
        load("gemm-b200", ONE_CTA + ["workload.swizzle=256B"])


def test_explain_shows_the_boxes_and_what_the_swizzle_buys_where_requests_bind() -> None:
    """gemm-h100 is bound by its TMA row requests: explain names the boxes, and its what-ifs run
    the same GEMM with 16-byte boxes, which take one request per 16 bytes instead of 128."""
    from tmasim.teach.explain import explain_result

    text = " ".join(explain_result(simulate(load("gemm-h100"))).split())
    assert ("TMA: each k-step is 2 TMA instructions (boxes of A 128x64, B 256x64, rows x elements; 128B swizzle)"
            in text)
    slower = text.split("16-byte boxes (no swizzle): ")[1].split(",")[0]
    assert slower.endswith("ms") and float(slower.split()[0]) > 5 * 1.49  # the 128B-swizzled run takes 1.49 ms


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 3000), n=st.integers(1, 3000), tile=st.sampled_from([(64, 64), (128, 256), (256, 128)]),
       raster=st.sampled_from(["row", "column", "grouped"]), group=st.sampled_from([1, 3, 8, 16]),
       cluster=st.sampled_from([(1, 1), (2, 1), (1, 2), (4, 2), (2, 4)]))
def test_one_ctas_tile_is_its_place_in_the_walk_of_all(m, n, tile, raster, group, cluster):  # type: ignore[no-untyped-def]
    """tile_coord (a quick bound's look at a few CTAs) is tile_coords' walk, CTA by CTA."""
    config = dataclasses.replace(load("gemm-h100").workload, m=m, n=n, tile=(*tile, 64), raster=raster, group=group)
    walk = tile_coords(config, cluster)
    assert len(walk) == launched_ctas(config, cluster)
    assert [tile_coord(config, cluster, i) for i in range(len(walk))] == list(walk)
