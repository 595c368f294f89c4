"""The attention workload: FLOP convention, causal blocks, bytes, the GEMM-like special case,
ping-pong against cooperative in closed form, aggregation, and the register check."""

from __future__ import annotations

from typing import Any

import pytest
import simpy

from tmasim.engine.chip import Chip, Plan
from tmasim.engine.program import Segment, Unit, UnitProgram
from tmasim.errors import ScenarioError
from tmasim.scenario import from_dict
from tmasim.simulation import _sync, plan_scenario, simulate
from tmasim.workloads.attention_config import AttentionConfig

# The ideal machine with a copy latency, a finite SM port, issue and barrier costs, and the
# H100's vector-unit rates: every mechanism of the pipeline costs something, no MMA table.
COSTLY = {"preset": "ideal", "copy_latency": "300 ns", "sm_port_bandwidth": "100 GB/s", "tma_issue": "10 ns",
          "barrier_wake": "20 ns", "exp_per_clock": 16, "fp32_per_clock": 128}


def scenario(gpu: Any = None, pipeline: dict[str, Any] | None = None, **workload: Any):
    raw = {"name": "att", "gpu": gpu or COSTLY,
           "workload": {"kind": "attention", "batch": 1, "heads": 2, "seqlen_q": 512, "head_dim": 128,
                        "tile": [128, 128], **workload},
           "pipeline": {"stages": 2, "consumers": 2, "consumer_mode": "pingpong", **(pipeline or {})},
           "run": {"records": False}}
    return from_dict(raw)


def test_flop_convention_counts_the_unmasked_pairs_exactly():
    config = AttentionConfig(batch=4, heads=16, seqlen_q=8448, head_dim=128, tile=(128, 128))
    assert config.useful_flops == 4 * 8448 * 8448 * 128 * 16 * 4
    causal = AttentionConfig(batch=4, heads=16, seqlen_q=8448, head_dim=128, tile=(128, 128), causal=True)
    assert causal.useful_flops == 4 * (8448 * 8449 // 2) * 128 * 16 * 4  # rows see 1 .. 8448 keys


@pytest.mark.parametrize(("q", "kv"), [(4096, 128), (128, 4096), (129, 129), (300, 1000), (1000, 300), (1, 7)])
def test_causal_flops_are_the_pairs_under_the_bottom_right_diagonal(q, kv):
    config = AttentionConfig(batch=2, heads=3, seqlen_q=q, seqlen_kv=kv, head_dim=64, tile=(128, 128), causal=True)
    pairs = sum(config.visible_keys(row) for row in range(q))
    assert pairs == sum(max(0, min(kv, row + 1 + kv - q)) for row in range(q))
    assert config.visible_pairs == pairs
    assert config.useful_flops == 4 * pairs * 64 * 3 * 2
    if (q, kv) == (4096, 128):  # 32 x fewer pairs than a square half would say
        assert config.useful_flops * 32 < 4 * 4096 * 128 * 64 * 3 * 2 / 2 * 1.01


def test_causal_skips_the_blocks_above_the_diagonal():
    config = AttentionConfig(batch=1, heads=1, seqlen_q=1024, head_dim=64, tile=(128, 128), causal=True)
    assert [config.blocks_of(m) for m in range(8)] == [(m + 1, m) for m in range(8)]
    narrow = AttentionConfig(batch=1, heads=1, seqlen_q=1024, head_dim=64, tile=(128, 64), causal=True)
    assert [narrow.blocks_of(m) for m in range(3)] == [(2, 0), (4, 2), (6, 4)]  # two masked blocks each
    # Bottom-right alignment: 256 queries against 512 keys see the first 256 keys in full.
    longer = AttentionConfig(batch=1, heads=1, seqlen_q=256, seqlen_kv=512, head_dim=64, tile=(128, 128), causal=True)
    assert [longer.blocks_of(m) for m in range(2)] == [(3, 2), (4, 3)]


@pytest.mark.parametrize("causal", [False, True])
def test_flops_and_bytes_are_conserved(causal):
    s = scenario(causal=causal, batch=2, seqlen_q=1024)
    stats = simulate(s).stats
    config = s.workload
    executed = stats["achieved_flops_per_s"] * stats["makespan_ps"] / 1e12
    assert executed == pytest.approx(config.useful_flops, rel=1e-12)  # masked blocks count half
    blocks = sum(config.blocks_of(m)[0] for m in range(config.m_blocks)) * config.batch * config.heads
    assert sum(program.steps for program in plan_scenario(s)[0].programs) == blocks
    kv = 128 * 128 * 2 * 2  # one K box and one V box
    q = 128 * 128 * 2
    assert stats["memory_bytes"] == config.units * q + blocks * kv  # Q once per unit, K and V once per block
    assert stats["memory_bytes"] == stats["bytes"]


def _gemm_like(program) -> UnitProgram:
    """The attention program as a GEMM ring: step 2j copies K_j (and Q with K_0) and runs S,
    step 2j + 1 copies V_j and runs P·V; 2S slots stand for the K and V rings of S slots."""
    units = []
    for u, unit in enumerate(program.units):
        segments = []
        for j, kv in enumerate(unit.expanded()):
            k_copies = (unit.q, kv.k) if j == 0 else (kv.k,)
            segments.append(Segment(1, k_copies, kv.qk.occupancy, kv.qk.flops))
            segments.append(Segment(1, (kv.v,), kv.pv.occupancy, kv.pv.flops))
        units.append(Unit(u, tuple(segments), unit.epilogue))
    return UnitProgram(units)


def test_without_softmax_one_consumer_is_a_gemm_pipeline_to_the_picosecond():
    s = scenario(pipeline={"consumers": 1, "consumer_mode": "cooperative"}, softmax_scale=0.0,
                 softmax_overlap=False, seqlen_q=128, heads=1, seqlen_kv=1024, launch="grid")
    plan, _ = plan_scenario(s)
    assert len(plan.programs) == 1
    attention = simulate(s).stats["makespan_ps"]
    gemm_plan = Plan([_gemm_like(plan.programs[0])], False, 1, 1, flow=True)
    env = simpy.Environment()
    sync = _sync(s)
    chip = Chip(env, s.gpu, gemm_plan, sync.__class__(**{**sync.__dict__, "stages": 2 * sync.stages}), None,
                aggregate=True)
    env.run()
    assert attention == chip.ctas[0].finished_at
    assert attention > 8 * 2 * plan.programs[0].block(0).qk.occupancy  # copies and barriers cost something


def _period(s, n: int) -> int:
    """Per-block steady-state time: the run with 2n K/V blocks less the run with n."""
    short = simulate(s(seqlen_kv=128 * n)).stats["makespan_ps"]
    long = simulate(s(seqlen_kv=256 * n)).stats["makespan_ps"]
    assert (long - short) % n == 0
    return (long - short) // n


@pytest.mark.parametrize("exp_per_clock", [16, 8, 4])
def test_pingpong_hides_the_softmax_in_closed_form(exp_per_clock):
    """Ideal memory, no overlap inside a warpgroup. Cooperative (lockstep) warpgroups run S, the
    softmax and P·V one after another: a block takes 2·(qk + m + pv) of the pair. Ping-pong:
    one warpgroup's softmax under the other's GEMMs: max(2·(qk + pv), 2·m, qk + m + pv), with
    m the softmax (and rescale) of one warpgroup of 64 rows; of m, the lead (the row max and
    its all-reduce) holds no shared pipe, so with the units saturated one warpgroup's lead runs
    under the other's exponentials: 2·m - lead."""
    gpu = {"preset": "ideal", "exp_per_clock": exp_per_clock, "fp32_per_clock": 128}

    def make(mode: str):
        return lambda **w: scenario(gpu=gpu, pipeline={"consumer_mode": mode}, softmax_overlap=False,
                                    seqlen_q=128, heads=1, launch="grid", **w)

    block = plan_scenario(make("pingpong")())[0].programs[0].block(0)
    g, m = block.qk.occupancy, (block.softmax + block.correction).time
    assert block.qk.occupancy == block.pv.occupancy
    pair = plan_scenario(make("cooperative")())[0].programs[0].block(0)  # the lockstep pair's 128 rows
    assert pair.qk.occupancy == pytest.approx(2 * g, abs=1)
    pingpong, cooperative = _period(make("pingpong"), 8), _period(make("cooperative"), 8)
    assert cooperative == pair.qk.occupancy + (pair.softmax + pair.correction).time + pair.pv.occupancy
    lead = block.softmax.lead + block.correction.lead
    assert pingpong == max(4 * g, 2 * m - lead, 2 * g + m)
    assert pingpong <= cooperative


def test_equal_softmax_and_gemm_times_pingpong_nearly_halves_the_block():
    """A warpgroup's softmax pipes as long as its two GEMMs (m - lead = 2g): cooperative takes
    2·(2g) + the pair's softmax a block, ping-pong 2g + m (one lead, the row max, exposed)."""
    gpu = {"preset": "ideal", "exp_per_clock": 4, "fp32_per_clock": 128, "minmax_per_clock": 64,
           "shuffle_latency": "30 cycles", "clock": "1 GHz", "tensor_flops": {"bf16": "262.144 TFLOP/s"}}
    # 64 rows x 128 keys: 8192 exponentials, and 256 more for the rows' rescale factors (each of a
    # row's four threads), at 4 a clock = 2112 cycles; before them the row max, 8192 FMNMX and 512
    # of the all-reduce at 64 a clock and two shuffle rounds of 30 cycles: 196 cycles of lead. One
    # GEMM of 2 x 64 x 128 x 128 FLOP at 262.144 TFLOP/s over 132 SMs takes g = 1.056 us.
    make = {mode: (lambda mode=mode, **w: scenario(gpu=gpu, pipeline={"consumer_mode": mode},
                                                   softmax_overlap=False, seqlen_q=128, heads=1, launch="grid",
                                                   **w)) for mode in ("pingpong", "cooperative")}
    block = plan_scenario(make["pingpong"]())[0].programs[0].block(0)
    g, m = block.qk.occupancy, (block.softmax + block.correction).time
    assert (block.softmax.lead, block.softmax.xu) == (196_000, 2_112_000)
    assert m - block.softmax.lead - block.correction.lead == 2 * g  # the FP32 work (and the rescale) runs beside
    pair = plan_scenario(make["cooperative"]())[0].programs[0].block(0)
    assert _period(make["cooperative"], 8) == 2 * pair.qk.occupancy + (pair.softmax + pair.correction).time
    assert _period(make["pingpong"], 8) == 2 * g + m
    assert _period(make["pingpong"], 8) < 0.55 * _period(make["cooperative"], 8)


@pytest.mark.parametrize("causal", [False, True])
def test_aggregation_is_exact(causal):
    s = scenario(causal=causal, batch=2, heads=3, seqlen_q=1024, gpu="h100-sxm")
    on = simulate(s).stats
    off = simulate(from_dict({**s.to_dict(), "run": {"records": False, "aggregate": False}})).stats
    assert on["makespan_ps"] == off["makespan_ps"]
    assert on["memory_bytes"] == off["memory_bytes"]
    assert on["sm_finish_mean_ns"] == pytest.approx(off["sm_finish_mean_ns"])


def test_causal_persistent_reports_load_imbalance_longest_first():
    s = scenario(causal=True, batch=1, heads=4, seqlen_q=4096, gpu="h100-sxm")
    plan, _ = plan_scenario(s)
    first = [p.units[0].blocks for p in plan.programs]
    assert max(first) == 32 and first == sorted(first, reverse=True)  # longest units start first
    stats = simulate(s).stats
    assert stats["sm_finish_max_ns"] > stats["sm_finish_mean_ns"]
    assert stats["makespan_ns"] == stats["sm_finish_max_ns"]


def test_registers_that_do_not_fit_are_one_line_with_the_numbers():
    with pytest.raises(ScenarioError) as err:
        simulate(scenario(gpu="h100-sxm", head_dim=256))
    message = str(err.value)
    assert "\n" not in message
    assert "256 registers per consumer thread (O 128 + S 64 + P 32 (softmax_overlap) + 32 overhead" in message
    assert "over the 240 allowed" in message
    simulate(scenario(gpu="h100-sxm", head_dim=256, tile=[128, 80]))  # FA3's hdim-256 tile fits


@pytest.mark.parametrize(("field", "value", "rule"), [
    ("head_dim", 100, "must be one of 64, 96, 128, 192, 256"),
    ("kv_heads", 3, "must divide workload.heads = 2"),
    ("tile", [128, 100], "must be a multiple of 16"),
    ("softmax_scale", -1.0, "from 0"),
])
def test_bad_fields_name_the_field_the_value_and_the_rule(field, value, rule):
    with pytest.raises(ScenarioError) as err:
        scenario(**{field: value})
    assert f"workload.{field}" in str(err.value) and rule in str(err.value)


def test_warp_specialized_off_is_attention_only_and_costs_time():
    with pytest.raises(ScenarioError, match="pipeline.warp_specialized"):
        from_dict({"workload": {"kind": "tiles", "tiles": 2, "load": "1 us", "compute": "1 us"},
                   "pipeline": {"warp_specialized": False}})
    on = simulate(scenario(gpu="h100-sxm", seqlen_q=2048)).stats["makespan_ps"]
    off = simulate(scenario(gpu="h100-sxm", seqlen_q=2048, pipeline={"warp_specialized": False})).stats
    assert off["makespan_ps"] > on


def test_gantt_shows_each_warpgroup_on_the_tensor_cores_and_the_softmax_units(tmp_path):
    from tmasim.review import plots
    from tmasim.review.attention_gantt import attention_window, is_attention

    s = from_dict({**scenario(gpu="h100-sxm").to_dict(), "run": {"records": True}})
    result = simulate(s)
    spans = result.spans
    assert is_attention(spans)
    tensor = spans[spans["lane"] == "tensor"].sort_values("start_ps")
    assert set(tensor["stage"]) == {0, 1}  # both warpgroups' GEMMs
    assert set(spans.loc[spans["lane"] == "softmax", "kind"]) == {"softmax", "correction"}
    lo, hi = attention_window(spans, 3)
    assert lo == 0 and 0 < hi < result.stats["makespan_ps"]
    fig = plots.gantt(spans, result.events, title="attention")
    assert "the first 6 K/V blocks" in fig.axes[0].get_title()
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()][:5] == [
        "TMA copies", "tensor cores", "softmax units", "warpgroup 0", "warpgroup 1"]
    plots.save(fig, tmp_path / "gantt.png")
    assert (tmp_path / "gantt.png").stat().st_size > 10_000
    # Every K and V slot use, from landing to its last release, for the slot-occupancy figure.
    one = spans[(spans["sm"] == 0) & (spans["cta"] == spans.loc[spans["sm"] == 0, "cta"].min())]
    blocks = plan_scenario(s)[0].programs[0].steps
    assert len(one[(one["lane"] == "slot") & (one["kind"] == "use")]) == 2 * blocks


def test_explain_names_what_binds_and_simulates_pingpong_off():
    from tmasim.teach.explain import explain

    text = explain(scenario(gpu="h100-sxm", seqlen_q=1024))
    assert "Each resource alone would need" in text and "exponentials" in text
    assert "- ping-pong off (cooperative warpgroups in lockstep):" in text
    assert "- softmax overlap off:" in text


@pytest.mark.parametrize("name", ["attention-h100", "attention-h100-causal", "attention-h100-hdim256"])
def test_bundled_attention_scenarios_plan(name):
    from tmasim import scenario as scenarios

    s = scenarios.load(name)
    plan, res = plan_scenario(s)
    assert plan.units == s.workload.units and res.ctas_per_sm == 1


def test_fast_forward_on_or_off_gives_the_same_run():
    s = scenario(gpu="h100-sxm", seqlen_q=1024)
    on = simulate(s).stats
    off = simulate(from_dict({**s.to_dict(), "run": {"records": False, "fast_forward": False}})).stats
    for key in ("makespan_ps", "memory_bytes", "hbm_bytes", "achieved_flops_per_s", "sm_finish_mean_ns"):
        assert on[key] == off[key], key
    assert on["fast_forward"].startswith("on") and off["fast_forward"] == "off: run.fast_forward = false"


def test_blackwell_keeps_s_and_o_in_tensor_memory():
    from tmasim import scenario as scenarios

    s = scenarios.load("attention-b200", ["workload.batch=1", "workload.heads=2", "workload.seqlen_q=1024"])
    plan, res = plan_scenario(s)
    assert res.accumulator is not None and res.accumulator.tmem_columns == 2 * (128 + 128)  # two tiles x (S + O)
    block = plan.programs[0].block(0)
    table = s.gpu.mma
    latency, ii = table.timing("t", "bf16", 128, 128)
    # tcgen05 M = 128, one per K = 16, each no faster than shared memory serves its A and B (SS):
    # 2 x 128 rows x 32 B at 124.3 B a cycle, 65.9 cycles, just above the instruction's 64.0
    stream = 2 * 128 * 32 / (s.gpu.smem_bandwidth * s.gpu.cycles_ps(1e6) / 1e6)
    assert stream > ii
    assert block.qk.occupancy == s.gpu.cycles_ps(128 // 16 * stream)
    with pytest.raises(ScenarioError) as err:
        plan_scenario(scenarios.load("attention-b200", ["workload.head_dim=256"]))
    assert "needs 768 TMEM columns (2 Q tiles x (S 128 + O 256), fp32)" in str(err.value)
    with pytest.raises(ScenarioError, match="over the 128 lanes of Tensor Memory"):
        plan_scenario(scenarios.load("attention-b200", ["pipeline.consumer_mode=cooperative"]))
    # The tensor cores doubled, the exponential units did not: with every exponential on them they
    # come within 1% of the MMAs' bound (the MMAs paced by shared memory serving S's operands);
    # FA4 moves a share to an FMA polynomial (workload.exp_emulated, 0.2 by default), and then the
    # tensor cores' bound stands above the exponentials' with a margin. Above both, one softmax
    # warpgroup's own chain (its S, softmax and P·V, each waited for) binds.
    emulated = simulate(s).stats
    assert emulated["exponentials_bound_ns"] < 0.9 * emulated["compute_bound_ns"]
    assert emulated["binding"] == "consumer chain"
    assert emulated["compute_bound_ns"] < emulated["chain_bound_ns"] <= emulated["makespan_ns"]
    all_on_mufu = simulate(scenarios.load("attention-b200", ["workload.batch=1", "workload.heads=2",
                                                             "workload.seqlen_q=1024", "workload.exp_emulated=0"]))
    exps, mma = all_on_mufu.stats["exponentials_bound_ns"], all_on_mufu.stats["compute_bound_ns"]
    assert 0.99 * mma < exps <= mma
    assert emulated["exponentials_bound_ns"] < 0.9 * exps


@pytest.mark.parametrize("changes", [{}, {"pipeline.consumer_mode": "cooperative"},
                                     {"pipeline.consumer_mode": "cooperative", "workload.softmax_overlap": False},
                                     {"workload.causal": True}, {"pipeline.stages": 3},
                                     {"pipeline.warp_specialized": False}])
def test_never_faster_than_any_bound(changes):
    from tmasim.workloads.attention_bounds import BOUND_NAMES

    raw = scenario(gpu="h100-sxm", seqlen_q=1024).to_dict()
    for dotted, value in changes.items():
        section, key = dotted.split(".")
        raw[section] = {**raw[section], key: value}
    stats = simulate(from_dict(raw)).stats
    for key, _ in BOUND_NAMES:
        assert stats["makespan_ns"] >= stats[f"{key}_bound_ns"], key


@pytest.mark.parametrize("changes", [{"head_dim": 256, "tile": [128, 80]},
                                     {"causal": True, "launch": "grid"}, {"kv_heads": 1},
                                     {"softmax_overlap": False, "head_dim_v": 64}])
def test_variants_run_and_conserve_flops(changes):
    s = scenario(gpu="h100-sxm", seqlen_q=512, **changes)
    stats = simulate(s).stats
    executed = stats["achieved_flops_per_s"] * stats["makespan_ps"] / 1e12
    assert executed == pytest.approx(s.workload.useful_flops, rel=1e-12)
    assert stats["o_staged_over"] == "v"  # Hopper: over V's ring, as FA3, whatever the head dim
    for key in ("compute", "exponentials", "l2", "hbm", "port", "tma", "latency"):
        assert stats["makespan_ns"] >= stats[f"{key}_bound_ns"], key


def test_copies_are_charged_per_row_request_as_gemm_boxes_are():
    """Q, K and V copies carry one request per in-bounds row segment of at most 128 bytes, and
    the SM port bound charges the copies' bytes at the port's rate and the TMA requests bound their
    requests at the TMA unit's rate (the engine caps each copy's flow by the slower of the two)."""
    from tmasim.workloads.bound_figures import transfer_ps

    s = scenario(batch=1, seqlen_q=1000, head_dim=64)  # 64 bf16 = 128-byte rows; 1000 = 7 x 128 + 104
    plan, _ = plan_scenario(s)
    units = [unit for program in plan.programs for unit in program.units]
    assert {unit.q.requests for unit in units} == {128, 104}  # the edge tile requests its 104 rows only
    blocks = {block for unit in units for block, _ in unit.runs}
    assert {(b.k.requests, b.v.requests) for b in blocks} == {(128, 128), (104, 104)}
    gpu = s.gpu
    wide = scenario(batch=1, seqlen_q=1024, head_dim=128)  # 256-byte rows: two requests a row
    block = plan_scenario(wide)[0].programs[0].units[0].runs[0][0]
    assert (block.k.requests, block.v.requests) == (256, 256)
    assert transfer_ps(gpu, block.k) == max(block.k.memory_bytes / gpu.sm_port_bandwidth,
                                         256 * gpu.tma_request_time)
    # Requests slow enough to bind: a K or V box's 256 requests take 256 x 20 ns = 5.12 us, the
    # port's 32 KiB at 100 GB/s 0.33 us; the run is then bound by them, 4 boxes a block.
    slow = scenario(gpu={**COSTLY, "tma_request_time": "20 ns"}, batch=1, seqlen_q=1024, head_dim=128)
    stats = simulate(slow).stats
    assert stats["binding"] == "TMA requests"
    assert stats["makespan_ps"] > simulate(wide).stats["makespan_ps"]
    per_sm = max(sum(2 * 256 * 20_000 * count for _, count in unit.runs) + unit.q.requests * 20_000
                 for program in plan_scenario(slow)[0].programs for unit in program.units)
    assert stats["tma_bound_ns"] * 1000 == pytest.approx(per_sm, rel=1e-9)
    assert stats["port_bound_ns"] < stats["tma_bound_ns"]


@pytest.mark.parametrize("gpu, changes, tight", [
    ("h100-sxm", {"pipeline.consumer_mode": "cooperative", "workload.softmax_overlap": False}, 0.98),
    ("h100-sxm", {"pipeline.consumer_mode": "cooperative"}, 0.98),
    ("h100-sxm", {"pipeline.consumers": 1, "workload.tile": [64, 128], "workload.causal": True}, 0.0),
    ("b200", {"workload.tile": [256, 128]}, 0.8),  # FA4: P·V first, a correction warpgroup apart
    ("b200", {"workload.tile": [256, 128], "workload.softmax_overlap": False}, 0.0),
])
def test_one_consumers_chain_bounds_the_run_from_below(gpu, changes, tight):
    """A consumer's own steps (S waited for, softmax and rescale, P·V; overlapped as FA3 and FA4
    order them) bound the run from below; where the tensor cores wait on the softmax (cooperative
    warpgroups on Hopper) they are nearly all of it and bind: the search prunes such designs by it."""
    raw = scenario(gpu={"preset": gpu, "sms": 4}, seqlen_q=2048).to_dict()
    for dotted, value in changes.items():
        section, key = dotted.split(".")
        raw[section] = {**raw[section], key: value}
    stats = simulate(from_dict(raw)).stats
    assert tight * stats["makespan_ns"] < stats["chain_bound_ns"] <= stats["makespan_ns"]
    if tight > 0.9:
        assert stats["binding"] == "consumer chain"


def test_a_pair_claims_no_chain():
    raw = scenario(gpu={"preset": "b200", "sms": 4}, seqlen_q=2048, tile=[128, 128]).to_dict()
    raw["pipeline"] = {**raw["pipeline"], "mma_cta_group": 2, "cluster": [2, 1]}
    stats = simulate(from_dict(raw)).stats
    assert stats["chain_bound_ns"] == 0
