"""Fast-forward with ping-pong consumers (engine/fast_forward/turns.py): a warpgroup waiting for
its turn waits for a unit, before it takes that unit's first step, so the state repeats while
the other warpgroup runs its mainloop and the skip drops steps ahead of both, exactly."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fast_forward import both

from tmasim.errors import ScenarioError
from tmasim.scenario import from_dict, load
from tmasim.simulation import plan_scenario


def small(m: int, n: int, k: int, *, sms: int = 4, stages: int = 4, consumers: int = 2, bm: int = 128,
          cluster: tuple[int, int] = (1, 1), launch: str = "persistent", aggregate: bool = True) -> dict[str, object]:
    """An m x n x k bf16 GEMM of bm x 128 x 64 tiles on a small H100, ping-pong warpgroups."""
    return {"name": "ff-pingpong", "gpu": {"preset": "h100-sxm", "sms": sms, "gpc_sms": [sms]},
            "workload": {"kind": "gemm", "m": m, "n": n, "k": k, "dtype": "bf16", "tile": [bm, 128, 64],
                         "launch": launch},
            "pipeline": {"stages": stages, "consumers": consumers, "consumer_mode": "pingpong",
                         "cluster": list(cluster)},
            "run": {"aggregate": aggregate}}


def test_the_b200_gemm_in_ping_pong_skips_most_k_steps_and_agrees_in_every_figure():
    raw = dict(load("gemm-b200").raw)
    fast, full = both({**raw, "pipeline": {**raw["pipeline"], "consumer_mode": "pingpong"}})
    # 32 x 64 tiles of 128 k-steps on 148 SMs: classes of 14 and 13 tiles, one SM each
    assert full["simulated_steps"] == fast["simulated_steps"] == (14 + 13) * 128
    assert fast["fast_forward_skipped_steps"] > 0.8 * fast["simulated_steps"]  # 108 of 3,456 when turns waited by step
    assert fast["fast_forward"].startswith("on: ")


def test_several_units_per_warpgroup_skip_inside_each_unit():
    # 16 tiles of 96 k-steps on 4 SMs: each CTA walks 4 units, each warpgroup 2 of them
    fast, full = both(small(4 * 128, 4 * 128, 96 * 64))
    assert full["simulated_steps"] == 4 * 96
    assert fast["fast_forward_skipped_steps"] > 0.6 * 4 * 96


def test_three_warpgroups_taking_turns_skip_too():
    # 64-row tiles: three warpgroups' accumulators fit in the registers
    fast, _ = both(small(3 * 64, 4 * 128, 96 * 64, consumers=3, bm=64))
    assert fast["fast_forward_skipped_steps"] > 0.5 * fast["simulated_steps"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(m=st.integers(1, 5), n=st.integers(1, 5), k=st.integers(1, 48), ragged=st.booleans(),
       stages=st.integers(1, 5), consumers=st.integers(2, 3), sms=st.integers(1, 6), persistent=st.booleans(),
       aggregate=st.booleans(), cluster=st.sampled_from([(1, 1), (1, 1), (2, 1), (1, 2)]))
def test_random_ping_pong_gemms_with_several_units_per_cta_agree_exactly(m, n, k, ragged, stages, consumers, sms,
                                                                        persistent, aggregate, cluster):
    """Persistent CTAs walk several units (more tiles than SMs), ragged edges give edge units
    and ragged last waves, clusters multicast; two or three warpgroups take turns."""
    extra = 40 if ragged else 0
    # a cluster that does not divide the grid of output tiles launches CTAs past its edge
    bm = 128 if consumers == 2 else 64  # three warpgroups' accumulators fit in the registers at 64 rows
    raw = small(m * bm + extra, n * 128 + extra, k * 64, sms=sms, stages=stages, consumers=consumers, bm=bm,
                cluster=cluster, launch="persistent" if persistent else "grid", aggregate=aggregate)
    try:
        plan_scenario(from_dict(raw))
    except ScenarioError:
        return  # a shape the GPU refuses (too many stages for shared memory, a cluster over a GPC)
    both(raw)
