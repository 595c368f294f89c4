"""Fast-forward with ragged tiles (tile sizes that do not divide M or N): SM classes whose edge
units fall at different places share every jump (the skip length is the least over CTAs of the
identical steps each has left), and agree with the full run in every figure, bit for bit."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_forward import both

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
    # while a class runs an edge unit (fewer row requests, faster k-steps) the chip's state does
    # not repeat (docs/design.md 9): a third of the k-steps are skipped here
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
