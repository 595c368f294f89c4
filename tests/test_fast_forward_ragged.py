"""Fast-forward with ragged tiles (tile sizes that do not divide M or N): SM classes whose edge
units fall at different places share every jump (the skip length is the least over CTAs of the
identical steps each has left), and agree with the full run in every figure, bit for bit."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_forward import both

from tmasim.engine.fast_forward import jump as fast_forward
from tmasim.errors import ScenarioError
from tmasim.scenario import from_dict, load


def test_ragged_128x192_tiles_skip_most_k_steps_across_their_classes():
    raw = dict(load("gemm-h100").raw)  # 4096 = 21 x 192 + 64: the last column of tiles is 64 wide
    fast, full = both({**raw, "workload": {**raw["workload"], "m": 4096, "n": 4096, "tile": [128, 192, 64]}})
    # 32 x 22 tiles on 132 SMs: 5 or 6 each, the edge ones at different places in the SMs' walks
    assert fast["sm_classes"] >= 4
    assert full["simulated_steps"] % 128 == 0  # the classes' representatives' tiles, 128 k-steps each
    # the classes' first tiles are all full ones: one jump takes each of them most of the way
    first_jump = 108 * fast["sm_classes"]  # (127 - 16) // 4 periods of 4 k-steps after a 16-step transient
    assert fast["fast_forward_skipped_steps"] >= first_jump
    # a class running an edge unit (fewer row requests, faster k-steps) repeats only over a joint
    # period with the others, and its boundaries are staggered against theirs (docs/design.md 9):
    # a third of the k-steps are skipped here
    assert fast["fast_forward_skipped_steps"] > 0.3 * full["simulated_steps"]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 5), n=st.integers(1, 5), k=st.integers(8, 48), edge_m=st.sampled_from([0, 8, 56, 120]),
       edge_n=st.sampled_from([0, 16, 72]), raster=st.sampled_from(["row", "grouped"]),
       stages=st.integers(2, 4), sms=st.integers(3, 9), persistent=st.booleans())
def test_random_ragged_gemms_agree_exactly(m, n, k, edge_m, edge_n, raster, stages, sms, persistent):
    """Edges of any width in M, N or both (edge units: fewer bytes from memory, a smaller store),
    grouped or row raster, so SM classes differ in where their edge units fall."""
    raw = {"name": "ff-ragged", "gpu": {"preset": "h100-sxm", "sms": sms, "gpc_sms": [sms]},
           "workload": {"kind": "gemm", "m": m * 128 + edge_m, "n": n * 128 + edge_n, "k": k * 64, "dtype": "bf16",
                        "tile": [128, 128, 64], "raster": raster, "group": 2,
                        "launch": "persistent" if persistent else "grid"},
           "pipeline": {"stages": stages, "consumers": 2}}
    try:
        from_dict(raw)
    except ScenarioError:
        return
    both(raw)


def edge_gemm(sms: int, rows: int, columns: int, k: int, raster: str = "row", stages: int = 4) -> dict[str, Any]:
    """128 x 192 tiles on a small H100 whose N leaves a last column of tiles 128 wide: an edge
    unit's B copy makes 128 row requests a k-step instead of 192 (docs/design.md 12), so with
    A's 128 its k-steps make 256 requests against 320 and, request-bound, take 4/5 the time."""
    return {"name": "ff-edge", "gpu": {"preset": "h100-sxm", "sms": sms, "gpc_sms": [sms]},
            "workload": {"kind": "gemm", "m": rows * 128, "n": columns * 192 + 128, "k": k * 64, "dtype": "bf16",
                         "tile": [128, 192, 64], "raster": raster, "launch": "persistent"},
            "pipeline": {"stages": stages, "consumers": 2}}


def test_a_jump_inside_an_edge_unit_mid_program_moves_edge_and_full_ctas_at_their_joint_period(monkeypatch):
    """5 SMs walk 12 tiles of a 4 x 3 grid in row raster (SM q: tiles q, q + 5, q + 10; the
    third column is the edge), so SM 0's middle unit is an edge one while SMs 1 and 2 run full
    ones. Edge k-steps take 4/5 the time: over 16 full k-steps the edge CTA makes 20, both
    multiples of the 4 stages, and the chip's state repeats over that joint period; the jump
    takes the edge CTA 20 steps a period and the others 16."""
    jumps: list[tuple[list[int], list[int], list[bool]]] = []
    apply = fast_forward.FastForward._apply

    def recorded(self, j, delta, moves, k, ints, sums):
        requests = [sum(c.requests for c in cta.program.copies(min(b, cta.program.steps - 1))) for cta, b in
                    zip(self.ctas, j.base, strict=True)]
        middle = [0 < cta.program.unit_of(min(b, cta.program.steps - 1)) < len(cta.program.units) - 1
                  for cta, b in zip(self.ctas, j.base, strict=True)]
        jumps.append((list(moves), requests, middle))
        apply(self, j, delta, moves, k, ints, sums)

    monkeypatch.setattr(fast_forward.FastForward, "_apply", recorded)
    fast, full = both(edge_gemm(5, 4, 2, 64))
    assert fast["makespan_ps"] == full["makespan_ps"]
    inside = [(moves, requests, middle) for moves, requests, middle in jumps
              if any(r == 256 and m and p for p, r, m in zip(moves, requests, middle, strict=True))]
    assert inside, jumps  # a jump while a CTA stands mid-program in an edge unit
    for moves, requests, _ in inside:
        # every CTA moves in inverse proportion to its k-steps' requests: 20 x 256 = 16 x 320
        assert {p * r for p, r in zip(moves, requests, strict=True) if p} == {5120}, (moves, requests)
        assert {p for p, r in zip(moves, requests, strict=True) if p and r == 256} == {20}
    assert fast["fast_forward_skipped_steps"] >= sum(sum(m) for m, _, _ in inside)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sms=st.integers(3, 6), rows=st.integers(2, 4), columns=st.integers(1, 3), k=st.integers(24, 64),
       raster=st.sampled_from(["row", "grouped"]), stages=st.integers(2, 4))
def test_random_grids_with_edge_units_mid_program_agree_exactly(sms, rows, columns, k, raster, stages):
    """Persistent CTAs walking several tiles, some of them in the 128-wide edge column, at
    different places of their walks: edge units mid-program, jumped inside at the joint period."""
    both(edge_gemm(sms, rows, columns, k, raster, stages))


@pytest.mark.parametrize("tile", [[128, 192, 64], [64, 256, 64]])
@pytest.mark.parametrize("raster", ["row", "grouped"])
@pytest.mark.parametrize("cluster", [[1, 1], [2, 1]])
def test_the_design_sweeps_ragged_corners_agree_exactly_on_a_small_chip(tile, raster, cluster):
    """The 192-point sweep's axes (benchmarks/bench_sweep.py) at a small size: N = 1000 leaves
    edge tiles of 40 (128 x 192) and 232 (64 x 256) columns, M = 1000 one of 104 rows."""
    raw = {"name": "ff-sweep-corner", "gpu": {"preset": "h100-sxm", "sms": 6, "gpc_sms": [6]},
           "workload": {"kind": "gemm", "m": 1000, "n": 1000, "k": 4096, "dtype": "bf16", "tile": tile,
                        "raster": raster, "group": 2, "launch": "persistent"},
           "pipeline": {"stages": 3, "consumers": 2, "cluster": cluster}}
    fast, full = both(raw)
    assert fast["sm_classes"] > 1 and 0 < fast["fast_forward_skipped_steps"] < full["simulated_steps"]
