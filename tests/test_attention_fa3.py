"""FA3's published d128 non-causal forward row against the model (a check of shape, not a fit)."""

from __future__ import annotations

from tmasim.validation.attention_check import fa3_rows, read_table


def test_the_table_reads_and_every_row_runs():
    table = read_table()
    assert [row["seqlen"] for row in table] == [512, 1024, 2048, 4096, 8192, 16384]
    assert all(row["batch"] * row["seqlen"] == 16384 and row["heads"] * row["head_dim"] == 2048 for row in table)
    rows = fa3_rows()
    assert [set(row) for row in rows] == [{"name", "measured", "predicted", "error"}] * len(table)
    for row in rows:
        assert row["predicted"] > 0
        assert row["error"] == row["predicted"] / row["measured"] - 1


def test_the_ablation_order_comes_out_of_the_mechanisms():
    """FA3's two switches: ping-pong of the warpgroups and the softmax of block j under the GEMMs
    of block j + 1 inside a warpgroup. Full pipeline faster than without the intra-warpgroup
    overlap, faster than neither (cooperative warpgroups, no overlap)."""
    from tmasim.scenario import load
    from tmasim.simulation import simulate

    base = ["workload.dtype=fp16", "workload.batch=1", "workload.heads=8", "workload.seqlen_q=8192"]

    def tflops(*extra: str) -> float:
        return simulate(load("attention-h100", [*base, *extra])).stats["achieved_flops_per_s"]

    full = tflops()
    no_intra = tflops("workload.softmax_overlap=false")
    neither = tflops("workload.softmax_overlap=false", "pipeline.consumer_mode=cooperative")
    assert full > no_intra > neither


def _plain(head_dim: int, causal: bool = False, **pipeline):
    from tmasim.scenario import from_dict

    return from_dict({"name": "plain", "gpu": "h100-sxm", "pipeline": pipeline, "run": {"records": False},
                      "workload": {"kind": "attention", "batch": 1, "heads": 4, "seqlen_q": 1024,
                                   "head_dim": head_dim, "causal": causal}})


def test_without_a_tile_fa3s_heuristic_picks_it_and_its_warpgroups():
    """hopper/tile_size.h (fp16/bf16): hdim 64 and 96 take 192-row tiles (96: 192 x 96, P kept in
    registers) (three consumer
    warpgroups), hdim 128 128 x 176 (causal 128 x 128), 192 128 x 112 (d_v > 128), 256 128 x 80."""
    expect = {(64, False): (192, 128), (96, False): (192, 96), (128, False): (128, 176),
              (128, True): (128, 128), (192, False): (128, 112), (256, False): (128, 80), (256, True): (128, 80)}
    for (d, causal), tile in expect.items():
        s = _plain(d, causal)
        assert s.workload.tile == tile
        assert (s.pipeline.consumers, s.pipeline.consumer_mode) == (tile[0] // 64, "pingpong")
    assert _plain(64, consumers=1, consumer_mode="cooperative").pipeline.consumers == 1  # the user's choice stays


def test_three_warpgroups_run_in_ping_pong_with_fa3s_register_split():
    from tmasim.simulation import simulate

    result = simulate(_plain(64))
    residency = result.stats
    assert result.stats["makespan_ps"] > 0
    from tmasim.simulation import plan_scenario

    plan, res = plan_scenario(_plain(64))
    assert plan.info["processes"] == 3 and plan.programs[0].schedule.pingpong
    assert (res.accumulator.producer, res.accumulator.consumer) == (32, 160)  # FA3's 3-warpgroup setmaxnreg split
    assert residency["achieved_flops_per_s"] > 0


def test_three_warpgroups_refuse_a_tile_over_their_registers():
    import pytest

    from tmasim.errors import ResidencyError
    from tmasim.scenario import from_dict
    from tmasim.simulation import plan_scenario

    raw = {"name": "big", "gpu": "h100-sxm", "pipeline": {"consumers": 3, "consumer_mode": "pingpong"},
           "workload": {"kind": "attention", "batch": 1, "heads": 1, "seqlen_q": 1024, "head_dim": 128,
                        "tile": [192, 128]}}
    with pytest.raises(ResidencyError, match="over the 160 allowed"):
        plan_scenario(from_dict(raw))


def test_a_section_of_heads_reads_its_k_and_v_from_hbm_once():
    """FA3's scheduler sizes sections of heads so their K and V fit 32 MB of L2: later rounds of
    a section find them there. At seqlen 512 (4 query blocks a head, each round of 132 units a
    different query block of 132 heads) K and V then come from HBM once, not once a round."""
    from tmasim.simulation import simulate
    from tmasim.validation.attention_check import read_table, scenario_for

    row = read_table()[0]
    stats = simulate(scenario_for(row)).stats
    once = 4 * row["batch"] * row["heads"] * row["seqlen"] * row["head_dim"] * 2  # Q, K, V and O, 16 bits
    assert once <= stats["hbm_bytes"] < 1.05 * once


def test_one_warpgroup_runs_and_four_are_refused():
    import pytest

    from tmasim.errors import ScenarioError
    from tmasim.simulation import plan_scenario, simulate

    one = _plain(128, consumers=1, consumer_mode="cooperative")
    plan, res = plan_scenario(one)
    assert (res.accumulator.producer, res.accumulator.consumer) == (56, 256)  # FA3's one-warpgroup split
    assert simulate(one).stats["makespan_ps"] > 0
    with pytest.raises(ScenarioError, match="must be 1, 2 or 3 for attention"):
        simulate(_plain(64, consumers=4, consumer_mode="pingpong"))


def test_hopper_converts_p_after_the_previous_pv():
    """FA3's fwd_step: P_j goes into the registers P·V_{j-1} reads (wgmma RS), so with the overlap
    the conversion is its own phase after that P·V; on Blackwell (P in TMEM) and without the
    overlap the softmax job holds it."""
    from tmasim.simulation import plan_scenario

    def first_block(scenario):
        return plan_scenario(scenario)[0].programs[0].block(0)

    hopper = first_block(_plain(128))
    assert hopper.early is not None and hopper.convert.time > 0
    assert hopper.early.xu == hopper.softmax.xu and hopper.early.lead == hopper.softmax.lead
    assert hopper.early.alu < hopper.softmax.alu  # the F2FP (on the ALU) left the softmax job
    assert hopper.early.issue < hopper.softmax.issue  # and its issue slots
    serial = first_block(_no_overlap(128))
    assert serial.early is None and serial.convert.time == 0

    from tmasim.scenario import load

    blackwell = first_block(load("attention-b200", ["workload.seqlen_q=1024", "workload.batch=1"]))
    assert blackwell.early is None and blackwell.convert.time == 0


def _no_overlap(head_dim: int):
    from tmasim.scenario import from_dict

    return from_dict({"name": "plain", "gpu": "h100-sxm", "run": {"records": False},
                      "workload": {"kind": "attention", "batch": 1, "heads": 4, "seqlen_q": 1024,
                                   "head_dim": head_dim, "softmax_overlap": False}})
