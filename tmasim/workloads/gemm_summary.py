"""The ``gemm`` workload's rows of ``tmasim run``'s summary and its one-sentence explanation
of what binds, from the run's stats."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tmasim import names
from tmasim.values import format as fmt
from tmasim.workloads.gemm_config import GemmConfig
from tmasim.workloads.summary_rows import chip_rows, cluster_rows, plural, reach_without_launch, share_of_peak, t

if TYPE_CHECKING:
    from tmasim.machine.hardware import GpuSpec
    from tmasim.settings.parts import ScenarioParts

BOUND_NAMES = tuple((key, names.bound(key)) for key in ("compute", "smem", "l2", "hbm", "port", "tma",
                                                                      "latency", "chain"))


def summary_rows(stats: Mapping[str, Any], scenario: ScenarioParts) -> list[tuple[str, str]]:
    config = scenario.workload
    assert isinstance(config, GemmConfig)
    rate = stats["achieved_flops_per_s"]
    bounds = ", ".join(f"{name} {t(stats[f'{key}_bound_ns'], zero='none')}" for key, name in BOUND_NAMES
                       if key != "chain" or stats.get("chain_bound_ns"))  # the chain: one consumer warpgroup only
    binding = names.bound(stats["binding"])
    return [
        ("predicted time", f"{t(stats['makespan_ns'])}   ({fmt.flop_rate(rate)}, "
                           f"{share_of_peak(rate, scenario, config.dtype, stats['sms_used'])})"),
        ("bound", f"{t(stats['bound_ns'])}, binding: {binding}   (the run reaches {fmt.percent(stats['efficiency'])} "
                  f"of it{reach_without_launch(stats)})"),
        ("bounds", bounds),
        ("no-overlap time", f"{t(stats['serial_ns'])} on the busiest SM"),
        *([("stages", f"{stats['stages']} (auto: {stats['stages_auto_rule']}; {stats['stages_auto_detail']})")]
          if stats.get("stages_auto_rule") else []),
        *_with_mma_rows(chip_rows(stats, scenario), stats, scenario),
        *(_cluster_rows(stats, scenario) if "cluster" in stats else []),
        *([("split tiles", split_text(stats, config))] if "decomposition" in stats else []),
    ]


def split_text(stats: Mapping[str, Any], config: GemmConfig) -> str:
    """Split-K or stream-K: how the k-loops were shared, the workspace, and the fix-ups' cost."""
    if stats["decomposition"] == "split-K":
        how = (f"split-K: {config.split_k} CTAs share each of the {stats['tiles']} tiles' {config.k_steps} k-tiles "
               f"({stats['work_units']} work units{_in_clusters(stats, stats['work_units'], ', ')})")
    else:
        how = (f"stream-K: the {config.k_steps} k-tiles of {plural(stats['stream_k_tiles'], 'tile')} spread over "
               f"{stats['stream_k_units']} CTAs ({_in_clusters(stats, stats['stream_k_units'], '', '; ')}"
               f"{plural(stats['stream_k_groups'], 'group')}), "
               f"{plural(stats['data_parallel_tiles'], 'data-parallel tile')} "
               "after them")
    return (f"{how}; workspace {fmt.size(stats['workspace_bytes'])} "
            f"(fp32 partials of {plural(stats['split_tiles'], 'tile')} and their flags), "
            f"{fmt.amount(stats['workspace_traffic_bytes'])} of partials written and read through "
            f"L2; consumers waited {t(stats['fixup_wait_ns'], zero='no time')} for peers' partials on average "
            f"(those of one CTA at most {t(stats['fixup_wait_max_ns'], zero='no time')})")


def _in_clusters(stats: Mapping[str, Any], ctas: int, before: str, after: str = "") -> str:
    """With clusters, ``ctas`` in clusters (each takes one k-range for all its CTAs); else nothing."""
    if "cluster" not in stats:
        return ""
    cx, cy = map(int, str(stats["cluster"]).split("x"))
    return f"{before}in {ctas // (cx * cy)} clusters of {stats['cluster']}, one k-range per cluster{after}"


def _box_row(stats: Mapping[str, Any]) -> str:
    """A k-step's TMA instructions: a box is at most the swizzle span wide (tmasim.workloads.gemm_layout)."""
    swizzle = "no swizzle: 16-byte box rows" if stats["swizzle"] == "none" else f"{stats['swizzle']} swizzle"
    return (f"{stats['tma_boxes_per_k_step']} TMA instructions per k-step (boxes of A {stats['tma_a_box']}, "
            f"B {stats['tma_b_box']}, rows x elements; {swizzle}), {stats['tma_requests_per_k_step']} requests "
            "(one per box row); --set workload.swizzle=none|32B|64B|128B to compare")


def _pace_note(stats: Mapping[str, Any], scenario: ScenarioParts) -> str:
    """Why the MMAs take longer than alone: under whole-chip load the tensor cores sustain only a
    share of their full rate (``gpu.tensor_sustained``)."""
    pace = stats.get("mma_pace")
    if not pace:
        return ""
    dtype = scenario.workload.dtype
    return (f" ({pace:.2f}x alone: the launch loads the whole chip, where {dtype}'s tensor cores sustain "
            f"{scenario.gpu.tensor_sustained[dtype]:.0%} of their full rate; gpu.tensor_sustained)")


def _with_mma_rows(rows: list[tuple[str, str]], stats: Mapping[str, Any],
                   scenario: ScenarioParts) -> list[tuple[str, str]]:
    """The MMA instructions of a k-step and where the accumulator lives (registers or TMEM:
    storage, shown beside SMEM right after the residency row, apart from the TMA traffic)."""
    mma_rows = []
    if stats.get("mma_instruction"):
        tail = stats["mma_completion_ns"]
        when = f"{t(tail)} later" if tail > 0 else "as its issue interval ends (latency = issue interval)"
        mma_rows.append(("MMA", f"{stats['mma_per_k_step']} x {stats['mma_instruction']} per k-step: tensor cores "
                                f"busy {t(stats['mma_k_step_ns'])}{_pace_note(stats, scenario)}, the last completes "
                                f"{when}"))
        mma_rows.append(("shared memory", _smem_row(stats, scenario)))
    if stats.get("tma_boxes_per_k_step"):
        mma_rows.append(("TMA boxes", _box_row(stats)))
    mma = scenario.gpu.mma
    if stats.get("registers_per_cta") and mma is not None:
        mma_rows.append(("registers", f"{stats['registers_per_consumer_thread']} per consumer thread (needs "
                                      f"{stats['registers_needed_per_thread']}), "
                                      f"{stats['registers_per_producer_thread']} per producer thread: "
                                      f"{stats['registers_per_cta']} of {mma.registers_per_sm} per SM"))
    if stats.get("tmem_columns_per_cta") and mma is not None:
        columns, lanes = stats["tmem_columns_per_cta"], mma.tmem_lanes
        mma_rows.append(("TMEM", f"{columns} columns ({fmt.size(columns * lanes * 4)}) per CTA for the accumulator, "
                                 f"of {mma.tmem_columns} ({fmt.size(mma.tmem_columns * lanes * 4)}) per SM"))
    if stats.get("epilogue_subtiles"):
        mma_rows.append(("epilogue", _epilogue_row(stats)))
    at = [name for name, _ in rows].index("residency") + 1
    return rows[:at] + mma_rows + rows[at:]


def _epilogue_binds(stats: Mapping[str, Any]) -> bool:
    """Whether a tile's Tensor Memory drain outlasts the next tile's MMAs (whole tiles only)."""
    mainloop = stats.get("epilogue_mainloop_ns")
    return mainloop is not None and stats["epilogue_drain_ns"] > mainloop


def _epilogue_row(stats: Mapping[str, Any]) -> str:
    """How a tile's Tensor Memory accumulator is drained and stored, and whether the next tile's
    MMAs hide it (tmasim.workloads.gemm: the tile's own cost, then one per C sub-tile)."""
    count, drain, mainloop = stats["epilogue_subtiles"], stats["epilogue_drain_ns"], stats["epilogue_mainloop_ns"]
    each = "each " if count > 1 else ""
    head = (f"{plural(count, 'C sub-tile')} of {stats['epilogue_subtile']} a tile, {each}TMA-stored as it is drained "
            f"from TMEM: {t(drain)} a tile (gpu.epilogue_tile_time + {count} x gpu.epilogue_subtile_time)")
    if mainloop is None:  # split-K, stream-K: the drain follows a tile's last share
        return f"{head}, after the last share of each tile's k-loop"
    if not _epilogue_binds(stats):
        return f"{head}, under the next tile's {t(mainloop)} of MMAs; a CTA's last tile waits for all of it"
    return (f"{head}, {t(drain - mainloop)} more than the next tile's {t(mainloop)} of MMAs: "
            "each tile's MMAs wait for the difference" + _chain_counts(stats))


def _chain_counts(stats: Mapping[str, Any]) -> str:
    """Which bound counts an epilogue's hold-up: the consumer chain, with one consumer warpgroup."""
    return f" ({names.bound('chain')} bound)" if stats.get("chain_bound_ns") else ""


_SOURCE_WORDS = {"SS": "A and B from shared memory", "TS": "A from Tensor Memory, B from shared memory",
                 "RS": "A from registers, B from shared memory"}


def _smem_row(stats: Mapping[str, Any], scenario: ScenarioParts) -> str:
    """What one k-step asks of one SM's shared memory, and at what bandwidth."""
    gpu = scenario.gpu
    a_copy = f" + A copied out {fmt.size(stats['smem_a_copy_bytes'])}" if stats.get("smem_a_copy_bytes") else ""
    starved = "; the MMAs issue at its pace, not the tensor cores'" if stats.get("mma_smem_bound") else ""
    return (f"{stats['operands']} ({_SOURCE_WORDS[stats['operands']]}): per k-step MMA reads "
            f"{fmt.size(stats['smem_mma_read_bytes'])} + TMA writes {fmt.size(stats['smem_tma_write_bytes'])}{a_copy} "
            f"at {fmt.rate(gpu.smem_bandwidth * 1e12)} per SM"
            f"{_writes_after(gpu, scenario.pipeline.mma_cta_group == 2)}{starved}")


def _writes_wait(s: Mapping[str, Any]) -> str:
    rate = s.get("smem_write_bytes_per_s")
    return "" if rate is None else f" (the writes wait for the MMAs, then stream at {fmt.rate(rate)})"


def _writes_after(gpu: GpuSpec, pair: bool = False) -> str:
    if gpu.smem_write_bandwidth is None:
        return ""
    rate = fmt.rate(gpu.smem_write_bandwidth * 1e12)
    if pair and gpu.pair_writes_overlap:
        return (f" (the writes, at {rate}, first in the time the pair's MMA reads leave idle, the rest after the "
                "MMAs; the slot is released after both)")
    return f" (the writes after the MMAs, at {rate}; the slot is released after both)"


def _cluster_rows(stats: Mapping[str, Any], scenario: ScenarioParts) -> list[tuple[str, str]]:
    cx, cy = scenario.pipeline.cluster
    config = scenario.workload
    assert isinstance(config, GemmConfig)
    chosen = "set" if config.multicast is not None else "default: what the shape allows"
    shares = {"none": "no operand shared", "a": f"A split over the {cy} CTAs of a cluster row",
              "b": f"B split over the {cx} CTAs of a cluster column", "both": "A over each row, B over each column"}
    if stats.get("mma_cta_group") == 2:
        chosen = "2-SM MMA"
        shares["none"] = "each CTA of the pair loads its A box and half of B; the leader's MMA reads both"
    coalesced = ""
    if scenario.gpu.cluster_l2_coalescing and stats["multicast"] != "both":
        coalesced = "; the cluster's same-address loads of what is not multicast merge before L2 (implicit sharing)"
    rows = cluster_rows(stats, f"multicast {stats['multicast']} ({chosen}; {shares[stats['multicast']]}{coalesced})",
                        scenario.gpu)
    if stats.get("tiles_past_edge"):
        rows.insert(1, ("tile grid", f"{stats['tile_grid']} tiles, launched as {stats['launched_tile_grid']}: the "
                                     f"cluster grid rounds up, so {plural(stats['tiles_past_edge'], 'CTA tile')} "
                                     f"{'lies' if stats['tiles_past_edge'] == 1 else 'lie'} past the "
                                     "problem's edge and run their k-loops on zero-filled boxes (no bytes from memory, "
                                     "no useful FLOPs, nothing stored), as CUTLASS's schedulers launch them"))
    return rows


def explain(stats: Mapping[str, Any]) -> str:
    """The bound that binds, in one sentence a reviewer can repeat."""
    s = stats
    binding, compute = names.bound_key(s["binding"]), t(s["compute_bound_ns"])
    if binding == "compute":
        others = ", ".join(f"{name} {t(s[f'{key}_bound_ns'], zero='none')}" for key, name in BOUND_NAMES[1:]
                           if key != "chain")  # the memory paths: the chain is the MMAs and the epilogues
        return (f"Compute binds: the busiest SM needs {compute} of tensor-core time, more than any memory path "
                f"needs ({others}).")
    if binding in ("l2", "hbm"):
        return _explain_link(s, binding)
    if binding == "smem":
        return _explain_smem(s)
    if binding == "port":
        return (f"The {names.bound('port')} binds: the busiest SM needs {t(s['port_bound_ns'])} to take its operands' "
                f"bytes in through its port from L2, more than its {compute} of tensor-core time; fewer bytes per "
                "FLOP (bigger tiles, or a 2-SM pair that halves each SM's B) would help.")
    if binding == "tma":
        return (f"The {names.bound('tma')} bind: the busiest SM's TMA unit needs {t(s['tma_bound_ns'])} to pass its "
                f"operands' row requests (one per row of at most 128 B), more than its {compute} of tensor-core "
                "time; fewer rows per k-step (multicast slices in a cluster) or more reuse per row (bigger tiles) "
                "would help.")
    if binding == "chain":
        return (f"The {names.bound('chain')} binds: the busiest CTA's one consumer warpgroup runs its MMAs, the "
                "shared-memory time each leaves and each tile's epilogue one after another, at least "
                f"{t(s['chain_bound_ns'])}, more than its {compute} of tensor-core time; the epilogues hold its MMAs "
                "up (the epilogue row): longer k-loops per tile, or a cheaper drain of each tile's accumulator "
                "(fewer C sub-tiles), would hide them.")
    return (f"The round trip binds: with {plural(s['stages'], 'stage')} x {plural(s['ctas_per_sm'], 'CTA')} per SM "
            "in flight, "
            f"the round trips of the busiest SM's busiest slot add up to at least {t(s['latency_bound_ns'])}, "
            f"more than its {compute} of compute; more stages, if shared memory allows, would hide it.")


def _explain_smem(s: Mapping[str, Any]) -> str:
    starved = " (they issue slower than the tensor cores could: SMEM-starved)" if s.get("mma_smem_bound") else ""
    extra = f" + {fmt.size(s['smem_a_copy_bytes'])} of A copied out once" if s.get("smem_a_copy_bytes") else ""
    return (f"Shared memory binds: each k-step the MMAs ({s.get('operands')}) read "
            f"{fmt.size(s['smem_mma_read_bytes'])} of operands{starved} and the TMA writes "
            f"{fmt.size(s['smem_tma_write_bytes'])}{extra} into one SM's shared memory{_writes_wait(s)}, so the "
            "busiest SM needs "
            f"{t(s['smem_bound_ns'])} of shared-memory time, more than its {t(s['compute_bound_ns'])} of tensor-core "
            "time; fewer bytes per FLOP (a larger tile, or a 2-SM pair that halves each SM's B) would help.")


def _explain_link(s: Mapping[str, Any], binding: str) -> str:
    link = "HBM" if binding == "hbm" else "L2"
    nbytes = _link_bytes(s, binding)
    supply = nbytes / (float(s[f"{binding}_bound_ns"]) * 1e-9)
    demand = nbytes / (float(s["compute_bound_ns"]) * 1e-9)
    what = "L2 traffic" if binding == "l2" else "HBM traffic"
    return (f"{link} bandwidth binds: to keep the tensor cores busy the SMs together would ask for "
            f"{fmt.rate(demand)} of {what}, and {link} supplies {fmt.rate(supply)}, so moving "
            f"{fmt.amount(nbytes)} takes at least {t(s[f'{binding}_bound_ns'])}.")


def _link_bytes(s: Mapping[str, Any], link: str) -> float:
    """What the bound moved over the link: the run's L2 or HBM traffic (tmasim.names.TRAFFIC)."""
    value = s.get(f"{link}_bytes")
    return 0.0 if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)
