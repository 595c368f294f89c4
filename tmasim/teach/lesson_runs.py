"""What each lesson runs and finds: one function per lesson, from its :class:`~tmasim.teach.lab.Lab`
to its :class:`~tmasim.teach.lab.Outcome` (the answer, the evidence table, the why, the figures).
Every number is simulated here; the tests check them against the closed forms."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tmasim import names
from tmasim.errors import DeadlockError, ModelError, ScenarioError
from tmasim.inputs.scenario import Scenario
from tmasim.output.result import Result
from tmasim.teach.explain import validity
from tmasim.teach.lab import Lab, Outcome, format_time, gantt, left, row, us
from tmasim.teach.prose import bullet, moment
from tmasim.values import format as fmt
from tmasim.values.units import PS_PER_US, parse


def overlap(lab: Lab) -> Outcome:
    piped, serial = lab.run(), lab.run(pipeline__stages=1)
    t2, t1 = piped.makespan_ps, serial.makespan_ps
    wide = (16, 14, 34)
    table = [row("stages", "time", "closed form", widths=wide),
             row(1, format_time(t1), "4 x (3 + 5) = 32 us", widths=wide),
             row(2, format_time(t2), "3 + 5 + 3 x max(3, 5) = 23 us", widths=wide)]
    why = (f"With one slot the copy engine and the tensor core take turns: every tile costs its load "
           f"plus its compute, {format_time(t1)} in all. With two, the copy of tile i + 1 runs while tile i "
           f"is computed; once the pipe is full only the slower stage (compute, 5 us) counts per tile. "
           f"The sum became a maximum: {format_time(t2)}, a {t1 / t2:.2f}x speedup.")
    figures = gantt(lab, piped, "lesson1-two-stages.png", f"Two stages: {format_time(t2)}")
    figures += gantt(lab, serial, "lesson1-one-stage.png", f"One stage: {format_time(t1)}")
    return Outcome(us(t2), table, why, figures, {"pipelined_us": us(t2), "serial_us": us(t1)})


def cadence(lab: Lab) -> Outcome:
    cases = [("5 us", "3 us"), ("3 us", "5 us"), ("6 us", "3 us"), ("5 us", "4 us"), ("5 us", "6 us")]
    table = [row("load l", "compute c", "time", "l + c + 7 max")]
    times = {}
    for load, comp in cases:
        t = lab.run(workload__load=load, workload__compute=comp).makespan_ps
        times[(load, comp)] = t
        formula = _anchor(8, load, comp)
        table.append(row(load, comp, format_time(t), format_time(formula)))
    base = times[("5 us", "3 us")]
    slow = times[("6 us", "3 us")] - base
    fast = times[("5 us", "4 us")] - base
    why = (f"Swapping load and compute changes nothing ({format_time(base)} both ways): only max(l, c) "
           f"repeats N - 1 = 7 times. One more microsecond on the slower stage (load 5 -> 6 us) costs "
           f"{format_time(slow)} (7 repeats plus the fill); one more on the faster stage (compute 3 -> 4 "
           f"us) costs {format_time(fast)}, paid once in the fill and drain. Raise the faster stage past "
           f"the slower (compute 6 us) and the roles swap.")
    figures = gantt(lab, lab.run(), "lesson2-cadence.png", "Load 5 µs, compute 3 µs: the copy sets the cadence")
    return Outcome(us(base), table, why, figures, {"base_us": us(base), "slower_plus_1_us": us(slow),
                                                   "faster_plus_1_us": us(fast)})


def _anchor(n: int, load: str, comp: str) -> int:
    from tmasim.values.units import time_ps
    from tmasim.workloads import analytic

    return analytic.anchor_time(n, time_ps(load, "load"), time_ps(comp, "compute"), 2)


def fill_drain(lab: Lab) -> Outcome:
    counts = (1, 2, 4, 16, 256)
    table = [row("tiles N", "pipelined", "serial", "ratio", "limit 5/8")]
    ratios = {}
    for n in counts:
        result = lab.run(workload__tiles=n)
        ratio = result.makespan_ps / (result.stats["serial_ns"] * 1000)
        ratios[n] = ratio
        table.append(row(n, format_time(result.makespan_ps), format_time(result.stats["serial_ns"] * 1000),
                         f"{ratio:.1%}", "62.5%"))
    why = ("One tile cannot overlap with anything: its ratio is 100%. The first copy (fill) and the last "
           "compute (drain) never overlap, but they are paid once, while the steady state costs max(l, c) "
           f"per tile. So the ratio (3 + 5 + (N - 1) 5) / (8 N) falls towards 5/8 = 62.5%: {ratios[256]:.2%} at "
           "N = 256. Short pipelines (few k-steps) keep more of their serial time.")
    figures = []
    if lab.out is not None:
        figures = lab.figure("lesson3-fill-drain.png", _ratio_figure(counts, [ratios[n] for n in counts]))
    return Outcome(100 * ratios[256], table, why, figures, {f"ratio_{n}": r for n, r in ratios.items()})


def _ratio_figure(counts: Sequence[int], ratios: Sequence[float]) -> Any:
    from tmasim.review.plot_style import styled

    with styled() as plt:
        fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
        ax.plot(counts, [100 * r for r in ratios], marker="o", label="simulated")
        ax.axhline(62.5, linestyle="--", color="#555555", label="max(l, c) / (l + c) = 62.5%")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tiles N")
        ax.set_ylabel("pipelined / serial time (%)")
        ax.set_title("Fill and drain: load 3 µs, compute 5 µs, 2 stages")
        ax.legend()
    return fig


def latency(lab: Lab) -> Outcome:
    from tmasim.workloads import analytic

    table = [row("stages", "time", "per tile", "bound", "binds")]
    per_tile, times = {}, {}
    for s in range(1, 9):
        result = lab.run(pipeline__stages=s)
        st = result.stats
        times[s] = result.makespan_ps
        per_tile[s] = result.makespan_ps / st["tiles"]
        table.append(row(s, format_time(result.makespan_ps), format_time(per_tile[s], 4),
                         format_time(st["interval_bound_ns"] * 1000, 4), names.bound(st["binding"])))
    best = min(times.values())
    enough = min(s for s, t in times.items() if t == best)
    bound = analytic.steady_state(2 * PS_PER_US, 1.5 * PS_PER_US, enough, 6 * PS_PER_US)
    why = ("Two different things: the copy latency is the 6 us from issuing a copy to its first byte, before "
           "its 2 us transfer; a slot's round trip is everything a slot goes through before it can be refilled: "
           "copy latency + transfer + compute = 6 + 2 + 1.5 = 9.5 us. With one slot every round trip is exposed: "
           f"32 x 9.5 us = {format_time(times[1])}. S slots keep S copies in flight, so a tile finishes every "
           "9.5 / S at best (the round-trip bound): the copy latency is "
           f"hidden, not removed. From {enough} stages on the copy engine's 2 us per tile binds (a bound of "
           f"{format_time(bound.interval)} per tile) and more stages change nothing: no number of stages beats "
           "the bandwidth (bytes per second) of the copy path.")
    figures = []
    if lab.out is not None:
        figures = lab.figure("lesson4-stages.png", _stage_figure(per_tile))
    return Outcome(float(enough), table, why, figures, {"stages_needed": float(enough),
                                                        **{f"time_{s}_us": us(t) for s, t in times.items()}})


def _stage_figure(per_tile: dict[int, float]) -> Any:
    from tmasim.review.plot_style import styled

    stages = sorted(per_tile)
    with styled() as plt:
        fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
        ax.plot(stages, [us(per_tile[s]) for s in stages], marker="o", label="simulated (time / tiles)")
        ax.plot(stages, [max(2.0, 9.5 / s) for s in stages], linestyle="--", color="#555555",
                label="bound max(2, 9.5 / S) µs")
        ax.set_xlabel("stages S")
        ax.set_ylabel("time per tile (µs)")
        ax.set_title("Latency 6 µs, transfer 2 µs, compute 1.5 µs")
        ax.legend()
    return fig


def residency(lab: Lab) -> Outcome:
    table = [row("stages", "SMEM/CTA", "CTAs/SM", "time", "limited by")]
    ctas = {}
    for s in range(2, 8):
        try:
            result = lab.run(pipeline__stages=s)
        except ScenarioError:
            table.append(f"  {s:>16}  does not fit: over the 227 KiB of shared memory a CTA may use")
            continue
        st = result.stats
        ctas[s] = st["ctas_per_sm"]
        table.append(row(s, fmt.size(st["smem_per_cta_bytes"]), st["ctas_per_sm"],
                         format_time(result.makespan_ps), st["residency_limit"]))
    lost = min(s for s in ctas if ctas[s] < ctas[min(ctas)])
    why = (f"Each stage holds a 16 KiB A box and a 16 KiB B box; the CTA also keeps 16 KiB for the "
           f"epilogue and 16 B of mbarriers per stage, and the system reserves 1 KiB per CTA. An H100 SM has "
           f"228 KiB, so {ctas[lost - 1]} CTAs fit up to {lost - 1} stages, and stage {lost} costs a resident "
           "CTA. A second CTA hides one CTA's copy latency under the other's compute; more stages hide it "
           "within one CTA. Here L2 bandwidth binds either way, so the times barely move: residency matters "
           "when latency, not bandwidth, binds." + _register_split(result))
    return Outcome(float(lost), table, why, [], {"stage_that_loses_a_cta": float(lost),
                                                 **{f"ctas_{s}": float(c) for s, c in ctas.items()}})


def _register_split(result: Result) -> str:
    """Why the lesson's scenario sets a leaner setmaxnreg split than CUTLASS's default: with the
    default, registers alone would keep a second CTA off the SM, hiding what shared memory does."""
    from tmasim.workloads.gemm_mma import CONSUMER_REGISTERS, WARPGROUP

    st, mma = result.stats, result.scenario.gpu.mma
    producer, consumer = st.get("registers_per_producer_thread"), st.get("registers_per_consumer_thread")
    if mma is None or not producer or not consumer or consumer >= CONSUMER_REGISTERS:
        return ""
    consumers = result.scenario.pipeline.consumers
    default = WARPGROUP * (producer + consumers * CONSUMER_REGISTERS)
    return (f"\nThe scenario sets a leaner register split (pipeline.registers: {producer} per producer thread, "
            f"{consumer} per consumer thread, instead of the default {CONSUMER_REGISTERS}): with the default a "
            f"CTA takes 128 x ({producer} + {consumers} x {CONSUMER_REGISTERS}) = {default:,} of the SM's "
            f"{mma.registers_per_sm:,} registers, so registers alone would allow "
            f"{mma.registers_per_sm // default} CTA per SM whatever the stages. {consumer} still holds the "
            f"accumulator ({st['registers_needed_per_thread']} needed per consumer thread) and lets "
            f"{mma.registers_per_sm // st['registers_per_cta']} CTAs share the register file, so shared memory "
            "alone decides here.")


def contention(lab: Lab) -> Outcome:
    per_box, box = 64, 8192          # boxes per SM, bytes per box (64 x 64 bf16)
    runs = {sms: lab.run(workload__ctas=sms, workload__shape=[64 * sms, 4096]) for sms in (1, 66, 100)}
    full = runs[132] = lab.run()
    more = lab.run(pipeline__stages=8)
    gpu = full.scenario.gpu
    compute = full.stats["compute_busy_ns"] * 1000 / full.stats["sms_used"] / per_box   # ps per box
    share = gpu.hbm_bandwidth / full.stats["sms_used"]
    even = gpu.hbm_bandwidth * compute / box     # SMs at which HBM's share lands a box in one compute
    table = [row("SMs", "stages", "time", "per box", "HBM busy")]
    for (sms, stages), result in [*(((n, 4), r) for n, r in sorted(runs.items())), ((132, 8), more)]:
        table.append(row(sms, stages, format_time(result.makespan_ps), format_time(result.makespan_ps / per_box),
                         f"{result.stats['hbm_utilization']:.0%}"))
    alone = runs[1]
    why = (f"Alone, an SM's copies land faster than it computes ({format_time(compute)} per box), so compute "
           f"binds and the copies hide under it: {format_time(alone.makespan_ps)}. HBM's 3.35 TB/s feeds one "
           f"box per compute time to {even:.0f} SMs at most (3.35 TB/s x {format_time(compute)} / 8 KiB); "
           f"beyond that the SMs' shares shrink: with 132, about {share * 1e3:.3g} GB/s each, "
           f"{format_time(box / share)} per box, longer than the compute. The copies set the pace "
           f"({format_time(full.makespan_ps)}, HBM {full.stats['hbm_utilization']:.0%} busy) and it is the "
           f"compute that hides. More stages cannot help: {format_time(more.makespan_ps)} with 8. Overlap only "
           "saves the shorter of the two stages; when shared bandwidth stretches the copies, what it saved on "
           "one SM is gone.")
    return Outcome(us(full.makespan_ps), table, why, [],
                   {"alone_us": us(alone.makespan_ps), "full_us": us(full.makespan_ps),
                    "sms_66_us": us(runs[66].makespan_ps), "sms_100_us": us(runs[100].makespan_ps),
                    "break_even_sms": even, "eight_stages_us": us(more.makespan_ps),
                    "hbm_bound_us": us(full.stats["hbm_bytes"] / gpu.hbm_bandwidth)})


def sync(lab: Lab) -> Outcome:
    good = lab.run()
    racy = lab.run(pipeline__consumer_waits_full=False)
    valid, reason = validity(racy.stats)
    table = [left("variant", "outcome"), left("correct (reference)", f"{format_time(good.makespan_ps)}, valid"),
             left("skip the full wait",
                  f"{format_time(racy.makespan_ps)}, INVALID: {fmt.plural(racy.stats['races'], 'race')}")]
    figures = gantt(lab, racy, "lesson7-missing-wait.png",
                    f"INVALID: no full-barrier wait, {racy.stats['races']} reads before data landed")
    notes = []
    for label, changes, name in (("empty expects 2 arrivals", {"pipeline__empty_arrivals": 2}, "deadlock"),
                                 ("expect_tx 8 KiB (copy 16)", {"pipeline__expect_tx": "8 KiB"}, "underflow"),
                                 ("expect_tx 32 KiB (copy 16)", {"pipeline__expect_tx": "32 KiB"}, "never")):
        try:
            lab.run(**changes)
            table.append(left(label, "finished (unexpected)"))
        except ModelError as err:
            kind = "deadlock" if isinstance(err, DeadlockError) else "mbarrier misuse"
            table.append(left(label, f"{kind} at {_when(err)}"))
            notes.append(bullet(f"{label}: {err}"))
            figures += _partial_gantt(lab, lab.scenario(**changes), err, f"lesson7-{name}.png", f"{label}: {kind}")
    first = racy.races[0]
    landed = "before its copy was issued" if first.landed_ps is None else (
        f"{format_time(first.landed_ps - first.read_ps)} before its bytes landed")
    tiles = racy.stats["tiles"]
    compute = racy.stats["compute_busy_ns"] * 1000 / tiles
    back_to_back = (f" The consumer never waits, so it computes the {tiles} tiles back to back: {tiles} x "
                    f"{format_time(compute)} = {format_time(tiles * compute)}, its compute alone."
                    if racy.makespan_ps == round(tiles * compute) else "")
    why = (f"Without the wait the consumer read tile {first.tile} {moment(first.read_ps)}, {landed}: the run "
           f"'finishes' in {format_time(racy.makespan_ps)}, faster than the correct {format_time(good.makespan_ps)} "
           f"and wrong ({'valid' if valid else 'invalid: ' + str(reason)}).{back_to_back} The other two breaks "
           "stop the program: a barrier expecting an arrival that never comes waits forever, and a byte count that "
           "does not match the copy either never returns to zero (the consumer waits forever) or would go "
           "below it (the hardware's rule is broken at the landing). What each one waited on:\n"
           + "\n".join(notes))
    return Outcome(us(racy.makespan_ps), table, why, figures,
                   {"racy_us": us(racy.makespan_ps), "correct_us": us(good.makespan_ps),
                    "races": float(racy.stats["races"])})


def _when(err: ModelError) -> str:
    found = re.search(r"at ([\d.]+ (?:ps|ns|us|µs|ms))", str(err))
    return found.group(1) if found else "the failure"


def _partial_gantt(lab: Lab, scenario: Scenario, err: ModelError, name: str, title: str) -> list[Path]:
    from tmasim.review import plots

    if lab.out is None or err.records is None or not err.records.span_count:
        return []
    partial = Result(scenario, {}, [], err.records)
    found = re.search(r"at ([\d.]+ (?:ps|ns|us|µs|ms))", str(err))
    stuck = f", stuck at {found.group(1)}" if found else ""
    fig = plots.gantt(partial.spans, partial.events, title=f"{title} (records up to the failure{stuck})")
    if found:
        ax = fig.axes[0]
        scale = plots.time_unit(float(partial.spans["end_ps"].max()))[0]
        stop = parse(found.group(1), "time", "error") / scale
        ax.axvline(stop, color="#C44E52", linewidth=2.5)
        ax.set_xlim(right=stop * 1.08)
    return lab.figure(name, fig)


def tmem(lab: Lab) -> Outcome:
    blackwell, hopper = lab.run(), lab.run(gpu="h100-sxm")
    from tmasim.workloads.gemm_config import GemmConfig

    w, p = blackwell.scenario.workload, blackwell.scenario.pipeline
    assert isinstance(w, GemmConfig)
    bm, bn, bk = w.tile
    acc_bytes = bm * bn * 4
    columns = bn * (bm // 128 if bm >= 128 else 1)       # 128 lanes x BN columns of 32 bits for M = 128
    regs = bm * bn // (128 * p.consumers)
    stage = (bm + bn) * bk * 2
    table = [row("", "B200 (Blackwell)", "H100 (Hopper)", widths=(34, 26, 26)),
             row("time", format_time(blackwell.makespan_ps), format_time(hopper.makespan_ps), widths=(34, 26, 26)),
             row("operands: SMEM per CTA (TMA)", fmt.size(blackwell.stats["smem_per_cta_bytes"]),
                 fmt.size(hopper.stats["smem_per_cta_bytes"]), widths=(34, 26, 26)),
             row("bytes the TMA moved", fmt.amount(blackwell.stats["memory_bytes"]),
                 fmt.amount(hopper.stats["memory_bytes"]), widths=(34, 26, 26)),
             row("accumulator (fp32)", f"TMEM: {columns} of 512 cols", f"regs: {regs}/thread", widths=(34, 26, 26))]
    why = (f"The TMA is a copy engine: it moves each k-step's A box ({bm}x{bk}) and B box ({bn}x{bk}), "
           f"{fmt.size(stage)} a stage, from global memory into shared memory, and its limit is shared "
           f"memory: {p.stages} stages x {fmt.size(stage)} plus the epilogue must fit in 227 KiB, which is "
           f"why a 5th stage does not. The accumulator, {bm}x{bn} fp32 = {fmt.size(acc_bytes)}, never "
           "travels through the TMA: the MMAs add into it in place. On Blackwell it lives in Tensor Memory "
           f"(TMEM, 128 lanes x 512 columns of 32 bits per SM): {columns} columns, so two such accumulators "
           "fit (one computing while the other is written out). On Hopper it lives in the consumer "
           f"warpgroups' registers: {bm}x{bn} / (128 threads x {p.consumers} warpgroups) = {regs} registers "
           "per thread of the 255 allowed (ping-pong, where each warpgroup holds a whole tile, would need "
           f"{bm * bn // 128}: too many). TMEM and registers limit the tile's output size; shared memory "
           "limits the stages. " + _where_reported(blackwell.stats, hopper.stats, regs))
    return Outcome(float(columns), table, why, [], {"tmem_columns": float(columns), "registers_per_thread":
                                                    float(regs), "b200_us": us(blackwell.makespan_ps),
                                                    "h100_us": us(hopper.makespan_ps)})


def _where_reported(blackwell: dict[str, Any], hopper: dict[str, Any], regs: int) -> str:
    """Where ``tmasim run`` shows each: SMEM for the TMA's operands; TMEM or registers for the
    accumulator, in the runs' own numbers."""
    text = "tmasim run shows them apart: SMEM per CTA for the operands the TMA moves"
    if blackwell.get("tmem_columns_per_cta"):
        text += f"; a TMEM row on the B200 ({blackwell['tmem_columns_per_cta']} columns per CTA)"
    needed, given = hopper.get("registers_needed_per_thread"), hopper.get("registers_per_consumer_thread")
    if needed and given:
        text += (f"; a registers row on the H100 ({needed} needed per consumer thread: {regs} for the "
                 f"accumulator and {needed - regs} for addressing and the epilogue, of the {given} that "
                 "setmaxnreg gives a consumer)")
    return text + "."
