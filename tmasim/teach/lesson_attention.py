"""Lesson 9's runs: the softmax hides under the tensor cores (ping-pong on and off, and the
overlap inside a warpgroup), with the per-block closed forms from the block's own costs."""

from __future__ import annotations

from tmasim import names
from tmasim.teach.lab import Lab, Outcome, format_time, left, us


def softmax(lab: Lab) -> Outcome:
    from tmasim.engine.attention.program import AttentionProgram
    from tmasim.simulation import plan_scenario

    records = lab.out is not None
    pingpong = lab.run(run__records=records)
    lockstep = lab.run(pipeline__consumer_mode="cooperative", run__records=records)
    overlapped = lab.run(pipeline__consumer_mode="cooperative", workload__softmax_overlap=True)
    small = lab.run(workload__head_dim=64)  # the same blocks at head dim 64: half the MMA, the same softmax
    one = plan_scenario(pingpong.scenario)[0].programs[0]
    pair = plan_scenario(lockstep.scenario)[0].programs[0]
    half = plan_scenario(small.scenario)[0].programs[0]
    assert isinstance(one, AttentionProgram) and isinstance(pair, AttentionProgram)
    assert isinstance(half, AttentionProgram)
    blocks = one.steps
    wg, both, wg64 = one.block(0), pair.block(0), half.block(0)
    g, m = wg.qk.occupancy + wg.pv.occupancy, (wg.softmax + wg.correction).time   # one warpgroup's 64 rows
    g2, m2 = both.qk.occupancy + both.pv.occupancy, (both.softmax + both.correction).time  # both, 128 rows at once
    serial = g2 + m2
    lead = wg.softmax.lead + wg.correction.lead  # the row max: no shared unit, under the other's exponentials
    alternating = max(2 * g, 2 * m - lead, g + m)
    g64, work64 = wg64.qk.occupancy + wg64.pv.occupancy, wg64.softmax + wg64.correction
    table = [left("variant", "time      per block   steady state (closed form)   tensor cores busy"),
             *[left(label, f"{format_time(r.makespan_ps):<9} {format_time(r.makespan_ps / blocks):<11} "
                           f"{form:<28} {r.stats['compute_utilization']:.0%}")
               for label, r, form in (("ping-pong (two warpgroups)", pingpong, format_time(alternating)),
                                      ("ping-pong off (lockstep)", lockstep, format_time(serial)),
                                      ("off, softmax overlap on", overlapped, "-"),
                                      ("head dim 64, ping-pong", small, "-"))]]
    gap = lockstep.makespan_ps - pingpong.makespan_ps
    recovered = (lockstep.makespan_ps - overlapped.makespan_ps) / gap if gap else 0.0
    why = (f"Per K/V block a warpgroup (64 query rows) keeps the tensor cores busy {format_time(g)} (S = Q·Kᵀ "
           f"and O += P·V) and its softmax {format_time(m)} (first the row max, {format_time(lead)}, then the "
           "exponentials beside the FP32 sums, the conversion of P and the rescale of O): "
           f"the softmax is {m / g:.0%} of its GEMMs, because an SM does 16 exponentials a clock against about "
           "4000 FLOP of MMA. In lockstep both warpgroups run the same phase at once, so the tensor cores wait "
           "out every softmax: a block costs both warpgroups' GEMMs, issued together "
           f"({format_time(g2)}), then both softmaxes, run together ({format_time(m2)}): {format_time(g2)} + "
           f"{format_time(m2)} = {format_time(serial)}, and the "
           f"tensor cores are busy {lockstep.stats['compute_utilization']:.0%} of the time. In ping-pong a "
           "named barrier makes the warpgroups take turns on the tensor cores, so one's softmax runs under the "
           f"other's GEMMs: a block costs max(2 x {format_time(g)}, 2 x {format_time(m)} - {format_time(lead)}, "
           f"{format_time(g)} + {format_time(m)}) = "
           f"{format_time(alternating)} in steady state, and the run (copies, fill and drain included) "
           f"{format_time(pingpong.makespan_ps / blocks)} a block: {lockstep.makespan_ps / pingpong.makespan_ps:.2f}x "
           "faster. Inside one warpgroup, overlapping the softmax of block j with P·V of block j - 1 (FA3's "
           f"second trick) recovers {recovered:.0%} of that gap even without ping-pong: "
           f"{format_time(overlapped.makespan_ps)}. "
           f"At head dim 64 each GEMM halves ({format_time(g64)} a warpgroup's block) but the softmax does not: "
           f"its work grows with the scores, not the head dim. Per block a warpgroup needs "
           f"{format_time(work64.xu)} on the multi-function unit (the exponentials), {format_time(work64.alu)} on "
           f"the ALU (converting P to 16 bits) and {format_time(work64.issue)} of issue slots, after a row max of "
           f"{format_time(work64.lead)}: the exponentials alone outlast the warpgroup's GEMMs, so the two "
           f"warpgroups' exponentials ({format_time(2 * work64.xu)} a block) no longer fit under each other's GEMMs "
           f"({format_time(2 * g64)}), and the conversions need their own pipe besides: the run's binding bound is "
           f"{names.bound(small.stats['binding'])}, the tensor cores are busy "
           f"{small.stats['compute_utilization']:.0%} of the time and a block takes "
           f"{format_time(small.makespan_ps / blocks)}, not half of head dim 128's.")
    figures: list = []
    if records:
        from tmasim.review import plots

        for result, name, title in ((pingpong, "lesson9-pingpong.png", "ping-pong: one softmax under the "
                                     "other's GEMMs"), (lockstep, "lesson9-lockstep.png",
                                                        "ping-pong off: the tensor cores wait out the softmax")):
            figures += lab.figure(name, plots.gantt(result.spans, result.events, title=title))
    return Outcome(us(lockstep.makespan_ps), table, why, figures,
                   {"pingpong_us": us(pingpong.makespan_ps), "lockstep_us": us(lockstep.makespan_ps),
                    "overlapped_us": us(overlapped.makespan_ps), "head_dim_64_us": us(small.makespan_ps),
                    "blocks": float(blocks), "pingpong_block_ps": float(alternating),
                    "lockstep_block_ps": float(serial)})
