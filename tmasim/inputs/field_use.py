"""Which ``[pipeline]``, ``[gpu]`` and ``[run]`` fields each workload reads: the one table.

A field a workload's planner and engine path never read changes nothing in its run, so a value
given for it would be silently dropped (a sweep over it draws a flat line; a synchronization bug
set up on attention's barriers never happens). Such a value is refused where the scenario is
built, naming the field, the value and why the workload does not read it.

*Given* means: a ``[pipeline]`` value other than the dataclass's default, or a ``[gpu]`` table
override (``[gpu] preset = "h100-sxm"`` + ``hbm_bandwidth = ...``, ``--set gpu.FIELD=...``) other
than the preset's own value. A preset itself sets every field for every workload and is never
refused. Every workload reads every ``[run]`` field (the engine's: seed, records, aggregate,
drift, fast_forward), so none is listed.

Reads that depend on the GPU as well as the workload stay with their own checks: register counts
(``pipeline.registers``) only where the accumulator lives in registers (tmasim.simulation), and
attention's cluster only as its 2-SM pair (tmasim.inputs.scenario).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from tmasim.errors import ScenarioError
from tmasim.machine import hardware
from tmasim.settings.parts import Pipeline

# Fields every workload reads: the stage ring, the SM's residency, its TMA unit's issue and caps,
# the barriers' wake-up, the clock and the launch.
_RING = frozenset({"stages", "consumers", "consumer_mode"})
_SYNC = frozenset({"consumer_waits_full", "full_arrivals", "empty_arrivals", "expect_tx"})
_EVERY_GPU = frozenset({"name", "description", "clock", "boost_clock", "power_limited_clock", "smem_per_sm",
                        "smem_per_cta", "smem_reserved_per_cta", "max_ctas_per_sm", "max_threads_per_sm",
                        "tma_issue", "tma_max_in_flight", "tma_max_bytes_in_flight",
                        "copy_latency_per_kib_in_flight", "barrier_wake", "launch_overhead",
                        "launch_per_sm"})
# Copies that flow through the fabric (every workload but tiles, whose copy times are given).
_FLOW = frozenset({"sms", "hbm_bandwidth", "l2_bandwidth", "sm_port_bandwidth", "copy_latency",
                   "copy_latency_per_kib", "hbm_latency", "tma_request_time", "hbm_request_overhead",
                   "tma_transfer_lanes", "l2_size"})
_L2_MODEL = frozenset({"l2_fit_size", "l2_miss_scale", "l2_far_fit_size", "l2_far_latency"})
_MMA = frozenset({"tensor_flops", "mma", "smem_bandwidth"})
_CLUSTERS = frozenset({"gpc_sms", "max_cluster_size", "max_cluster_size_opt_in", "max_active_clusters",
                       "cluster_arrive_latency", "max_mma_cta_group"})
_GEMM_ONLY = frozenset({"cluster_l2_coalescing", "l2_merge_bytes", "cluster_l2_merge_bytes",
                        "smem_write_bandwidth", "pair_writes_overlap", "epilogue_subtile_time", "epilogue_tile_time",
                        "tensor_sustained"})
_SOFTMAX = frozenset({"exp_per_clock", "fp32_per_clock", "minmax_per_clock", "convert_per_clock", "convert_pipe",
                      "shuffle_per_clock", "issue_per_clock", "fp32_latency", "minmax_latency", "exp_latency",
                      "shuffle_latency"})


@dataclasses.dataclass(frozen=True)
class Reads:
    """The ``[pipeline]`` and ``[gpu]`` fields one workload reads; ``why`` says, per field it does
    not, what the workload models instead (its refusal's reason)."""

    pipeline: frozenset[str]
    gpu: frozenset[str]
    why: Mapping[str, str]


_WHY_TILES = ("its copies take the times workload.load and workload.latency give, on one SM, with no "
              "bandwidth, latency, L2 or tensor-core model")
_WHY_STREAM = "it streams TMA loads with no MMA, softmax, clusters or shared-memory reads"
_WHY_SOFTMAX = "the softmax's FP32 and exponential units are modelled for attention only"
_WHY_GEMM = "modelled for the gemm workload's k-steps, L2 merging, epilogue and sustained tensor rate only"
_WHY_CLUSTER = "clusters are modelled for the gemm workload only, and attention's 2-SM pair"

READS: dict[str, Reads] = {
    "tiles": Reads(pipeline=_RING | _SYNC, gpu=_EVERY_GPU,
                   why={"cluster": _WHY_CLUSTER, "mma_cta_group": "the 2-SM MMA is modelled for gemm and attention",
                        "registers": "it has no register model", "warp_specialized": "a producer warpgroup "
                        "issues every copy; the switch is modelled for attention only", "*": _WHY_TILES}),
    "stream": Reads(pipeline=_RING | _SYNC, gpu=_EVERY_GPU | _FLOW | _L2_MODEL,
                    why={"cluster": _WHY_CLUSTER, "mma_cta_group": "the 2-SM MMA is modelled for gemm and attention",
                         "registers": "it has no register model", "warp_specialized": "a producer warpgroup "
                         "issues every copy; the switch is modelled for attention only", "*": _WHY_STREAM}),
    "gemm": Reads(pipeline=_RING | _SYNC | {"cluster", "mma_cta_group", "registers"},
                  gpu=_EVERY_GPU | _FLOW | _L2_MODEL | _MMA | _CLUSTERS | _GEMM_ONLY,
                  why={"warp_specialized": "a producer warpgroup issues every copy; the switch is modelled for "
                                           "attention only", "*": _WHY_SOFTMAX}),
    "attention": Reads(pipeline=_RING | {"cluster", "mma_cta_group", "registers", "warp_specialized"},
                       gpu=_EVERY_GPU | _FLOW | _MMA | _CLUSTERS | _SOFTMAX,
                       why={**dict.fromkeys(_SYNC, "its K, V and Q barriers expect their own copies' bytes and "
                                                   "arrivals, and its consumers always wait on them"),
                            **dict.fromkeys(_L2_MODEL, "its L2 holds K and V up to gpu.l2_size, with no miss curve "
                                                       "or far part"),
                            "*": _WHY_GEMM}),
}

PIPELINE_FIELDS = tuple(f.name for f in dataclasses.fields(Pipeline) if f.name != "stages_auto")
GPU_FIELDS = (*hardware.FIELD_NAMES, hardware.MMA)
_GPU_ATTRS = {"clock": "clock_hz"}


def ignored(kind: str) -> dict[str, tuple[str, ...]]:
    """The fields ``kind`` does not read, by table: {"pipeline": (...), "gpu": (...)}."""
    reads = READS[kind]
    return {"pipeline": tuple(f for f in PIPELINE_FIELDS if f not in reads.pipeline),
            "gpu": tuple(f for f in GPU_FIELDS if f not in reads.gpu)}


def why(kind: str, field: str) -> str:
    """Why ``kind`` does not read ``field`` (a bare name: ``expect_tx``, ``hbm_bandwidth``)."""
    return READS[kind].why.get(field, READS[kind].why["*"])


def check_pipeline(kind: str, pipeline: Pipeline) -> None:
    """A ``[pipeline]`` value other than its default for a field ``kind`` does not read: refused."""
    reads = READS.get(kind)
    if reads is None:  # a workload not in the table (a new one) is not checked until it is added
        return
    for field in dataclasses.fields(Pipeline):
        if field.name in reads.pipeline or field.name == "stages_auto":
            continue
        value = getattr(pipeline, field.name)
        if value != field.default:
            refuse(kind, f"pipeline.{field.name}", _shown(field.name, value))


def check_gpu(kind: str, raw_gpu: Any, gpu: hardware.GpuSpec) -> None:
    """A ``[gpu]`` table's override of a field ``kind`` does not read, other than the preset's own
    value: refused. ``raw_gpu`` is the scenario's ``gpu`` entry as written (a preset name: nothing
    overridden)."""
    reads = READS.get(kind)
    if reads is None or not isinstance(raw_gpu, Mapping):
        return
    given = [key for key in raw_gpu if key != "preset" and key in GPU_FIELDS and key not in reads.gpu]
    if not given:
        return
    base = _preset(raw_gpu.get("preset", "ideal"))
    for key in given:
        attr = _GPU_ATTRS.get(key, key)
        if base is None or getattr(base, attr) != getattr(gpu, attr):
            refuse(kind, f"gpu.{key}", raw_gpu[key])


def refuse(kind: str, field: str, value: Any) -> None:
    name = field.partition(".")[2]
    raise ScenarioError(field, value, f"would be ignored: the {kind} workload does not read it "
                                      f"({why(kind, name)}); remove it")


def _preset(name: Any) -> hardware.GpuSpec | None:
    """The preset a ``[gpu]`` table overrides, to compare with (None where it cannot be read
    alone: a preset file named relative to the scenario's folder; every override then counts)."""
    try:
        return hardware.load_gpu(name) if isinstance(name, str) else None
    except ScenarioError:
        return None


def _shown(name: str, value: Any) -> Any:
    """A value as a scenario writes it: a cluster or register pair as a list or table."""
    if name == "cluster":
        return list(value)
    if name == "registers":
        return {role: count for role, count in zip(("producer", "consumer"), value, strict=True) if count}
    return value
