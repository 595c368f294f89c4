"""The GPU description: one frozen :class:`GpuSpec` per machine, read from preset TOML files.

A preset file (``tmasim/presets/NAME.toml``, or any path) holds one value per field, either
plain (``sms = 132``) or with its provenance (``sms = { value = 132, source = "datasheet" }``).
Sources are kept so that ``tmasim presets`` and result files can say where a number came from.
A scenario picks a preset by name or path (``gpu = "h100-sxm"``) or as a table that overrides
fields of one (``[gpu] preset = "h100-sxm"`` + ``hbm_bandwidth = "3 TB/s"``).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from tmasim import suggest
from tmasim.errors import ScenarioError
from tmasim.machine import mma as mma_table
from tmasim.machine.mma import MmaSpec
from tmasim.values import fields as read
from tmasim.values import format as fmt
from tmasim.values import units

UNLIMITED = "unlimited"
DTYPES = ("bf16", "fp16", "fp8", "tf32")


@dataclass(frozen=True)
class GpuSpec:
    """What the engine needs to know about a GPU. Times in ps, sizes in bytes, rates per ps."""

    name: str
    description: str
    sms: int
    clock_hz: float
    smem_per_sm: int
    smem_per_cta: int
    smem_reserved_per_cta: int
    max_ctas_per_sm: int
    max_threads_per_sm: int
    l2_size: int
    l2_fit_size: int
    l2_miss_scale: int
    hbm_bandwidth: float
    l2_bandwidth: float
    sm_port_bandwidth: float
    smem_bandwidth: float
    copy_latency: int
    copy_latency_per_kib: int
    hbm_latency: int
    tma_issue: int
    tma_request_time: int
    hbm_request_overhead: int
    tma_max_in_flight: int
    tma_max_bytes_in_flight: int
    barrier_wake: int
    tensor_flops: Mapping[str, float]
    gpc_sms: tuple[int, ...] = ()  # SMs in each GPC; () = one GPC of all SMs
    max_cluster_size: int = 8
    max_cluster_size_opt_in: int = 8
    max_active_clusters: Mapping[int, int] = field(default_factory=dict)  # cluster size -> the driver's count
    cluster_arrive_latency: int = 0
    max_mma_cta_group: int = 1
    cluster_l2_coalescing: bool = False  # same-address TMA loads of one cluster's CTAs merge before L2
    l2_merge_bytes: int = 0  # pending reads a GPC tracks to merge other clusters' same-address loads; 0: none
    cluster_l2_merge_bytes: int = 0  # the same inside one cluster (with cluster_l2_coalescing); 0: every load merges
    l2_far_fit_size: int = 0  # past l2_fit_size, the data set L2 still holds in its far part; 0: no far part
    l2_far_latency: int = 0  # extra latency of a copy whose bytes hit in that far part
    copy_latency_per_kib_in_flight: int = 0  # ps of latency per KiB the SM's TMA unit has in flight at issue
    boost_clock: float = 0.0  # Hz, the part's max boost (for reference; the run assumes clock_hz); 0: not stated
    power_limited_clock: float = 0.0  # Hz, what dense kernels were measured to sustain at the power limit; 0: none
    exp_per_clock: int = 0  # exponentials (MUFU ex2) per clock per SM; 0: not given (attention refuses)
    fp32_per_clock: int = 0  # FP32 FMA results per clock per SM; 0: not given
    # attention's softmax as instructions on the SM's pipes (tmasim.workloads.attention_softmax); 0: not charged
    minmax_per_clock: int = 0  # FMNMX per clock per SM (ALU)
    convert_per_clock: int = 0  # F2FP.PACK_AB (two 16-bit results each) per clock per SM
    convert_pipe: str = "alu"  # the pipe F2FP.PACK_AB runs on: "alu" or "xu" (the multi-function unit's)
    shuffle_per_clock: int = 0  # SHFL per clock per SM
    issue_per_clock: int = 0  # thread instructions the warp schedulers issue per clock per SM
    fp32_latency: int = 0  # ps from a dependent FFMA/FADD/FMUL's issue to its result
    minmax_latency: int = 0  # the same for FMNMX
    exp_latency: int = 0  # the same for MUFU.EX2
    shuffle_latency: int = 0  # the same for SHFL (a round of a warp all-reduce)
    tma_transfer_lanes: int = 1  # copies the TMA unit streams at once, each at its own request pace
    smem_write_bandwidth: float | None = None  # TMA writes after a k-step's MMAs; None: shared (tmasim.operands)
    pair_writes_overlap: bool = False  # a 2-SM pair's TMA writes use the SMEM time its MMAs' reads leave idle
    launch_overhead: int = 0  # ps a kernel costs outside its CTAs' work: launch, prologue, end
    launch_per_sm: int = 0  # ps more the launch costs for each SM it uses after the first
    epilogue_subtile_time: int = 0  # ps per C sub-tile of a TMEM accumulator's epilogue; 0: SMEM staging only
    epilogue_tile_time: int = 0  # ps per tile of that epilogue, before its first sub-tile is stored
    tensor_sustained: Mapping[str, float] = field(default_factory=dict)  # dtype -> share of the MMA rate, whole chip
    mma: MmaSpec | None = None  # instruction table; None: a flat tensor_flops rate (ideal machine)
    sources: Mapping[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        """Every value within its rules, on every construction (``dataclasses.replace`` included)."""
        if not isinstance(self.gpc_sms, tuple):
            raise ScenarioError("gpu.gpc_sms", self.gpc_sms, "must be a list of whole numbers (SMs per GPC)")
        for key, (kind, _) in _FIELDS.items():
            attr = "clock_hz" if key == "clock" else key
            value = getattr(self, attr)
            if (key not in _ZERO_UNSTATED or value) and not (key in _UNSET_ALLOWED and value is None):
                _check(f"gpu.{key}", kind, value)
        if self.smem_per_cta > self.smem_per_sm:
            raise ScenarioError("gpu.smem_per_cta", fmt.size(self.smem_per_cta),
                                f"must be <= gpu.smem_per_sm ({fmt.size(self.smem_per_sm)}): "
                                "a CTA cannot use more shared memory than its SM has")
        if self.convert_pipe not in CONVERT_PIPES:
            raise ScenarioError("gpu.convert_pipe", self.convert_pipe,
                                f"must be one of {', '.join(CONVERT_PIPES)} (the pipe F2FP.PACK_AB runs on)")
        if self.mma is not None and not isinstance(self.mma, MmaSpec):
            raise ScenarioError("gpu.mma", self.mma, "must be an MMA instruction table (tmasim.mma.MmaSpec)")
        _check_gpcs("gpu", {"sms": self.sms, "gpc_sms": self.gpc_sms, "max_cluster_size": self.max_cluster_size,
                            "max_cluster_size_opt_in": self.max_cluster_size_opt_in})

    @property
    def gpcs(self) -> tuple[int, ...]:
        """SMs per GPC (a cluster is scheduled inside one GPC)."""
        return self.gpc_sms or (self.sms,)

    def sm_flop_rate(self, dtype: str) -> float:
        """Dense tensor-core FLOP per picosecond of one SM for ``dtype``."""
        return self.tensor_flops[dtype] / self.sms

    def mma_pace(self, dtype: str, whole_chip: bool) -> float:
        """How much longer each MMA of ``dtype`` takes than alone: 1 / ``tensor_sustained``'s share
        under whole-chip load (``whole_chip``), else 1."""
        share = self.tensor_sustained.get(dtype)
        return 1.0 / share if share is not None and whole_chip else 1.0

    def peak_flops_per_s(self, dtype: str | None, sms_used: int) -> float | None:
        """The dense tensor-core peak, in FLOP/s, of the SMs a run uses (all of them, or fewer for a
        run that leaves some idle): what a run's share of peak is taken against. None for a dtype
        without a rate (or none)."""
        if dtype is None or dtype not in self.tensor_flops:
            return None
        sms = min(sms_used, self.sms) or self.sms
        return self.tensor_flops[dtype] * 1e12 * sms / self.sms

    def clock_text(self) -> str:
        """The clock the run assumed, what it is, and the part's max boost (the summary's line)."""
        what = self.sources.get("clock", "").split(":")[0].split(";")[0].strip()
        boost = f"; max boost {_ghz(self.boost_clock)}" if self.boost_clock else ""
        if self.power_limited_clock and self.power_limited_clock != self.clock_hz:
            boost += f"; measured at the power limit: {_ghz(self.power_limited_clock)}, --set gpu.clock={POWER_LIMITED}"
        return _ghz(self.clock_hz) + (f" ({what}{boost})" if what or boost else "")

    def cycles_ps(self, cycles: float) -> int:
        """``cycles`` of this GPU's clock in whole picoseconds."""
        return round(cycles / self.clock_hz * units.PS_PER_S)

    def smem_bytes_per_cycle(self) -> float:
        """One SM's shared-memory bandwidth in bytes per cycle of this GPU's clock (inf: unlimited)."""
        return self.smem_bandwidth * self.cycles_ps(1e6) / 1e6

    def copy_latency_for(self, nbytes: int) -> int:
        """Latency before a copy's bytes stream: a base plus a part that grows with the box."""
        return self.copy_latency + round(self.copy_latency_per_kib * nbytes / 1024)

    def in_flight_latency(self, nbytes: int) -> int:
        """The part of a copy's latency its SM's bytes in flight add (``nbytes``, its own included;
        the copy engine adds it at issue, tmasim.engine.sm.copy_engine)."""
        return round(self.copy_latency_per_kib_in_flight * nbytes / 1024)



# field -> (kind, description). Kinds: int, text, time, size, bandwidth, frequency, flop_rates, shares,
# cluster_counts.
_FIELDS: dict[str, tuple[str, str]] = {
    "name": ("text", "preset name"),
    "description": ("text", "what the preset describes"),
    "sms": ("int", "streaming multiprocessors"),
    "clock": ("frequency", "the SM clock the run assumes (values given in cycles are SM cycles at it); "
                           "each preset says where its clock comes from (power_limited_clock: under the power limit)"),
    "boost_clock": ("frequency", "the part's max boost clock, for reference (the run assumes gpu.clock)"),
    "power_limited_clock": ("frequency", "the clock dense kernels were measured to sustain at the power limit "
                                         "(--set gpu.clock=power-limited runs at it); not stated: no measurement"),
    "smem_per_sm": ("size", "shared memory per SM"),
    "smem_per_cta": ("size", "largest shared memory one CTA may use"),
    "smem_reserved_per_cta": ("size", "shared memory the system reserves per CTA"),
    "max_ctas_per_sm": ("int", "resident CTAs per SM"),
    "max_threads_per_sm": ("int", "resident threads per SM"),
    "l2_size": ("size", "L2 cache capacity"),
    "l2_fit_size": ("size", "largest data set that stays in L2 under repeated reads (tmasim.l2)"),
    "l2_miss_scale": ("size", "past l2_fit_size, the L2 miss share rises as 1 - exp(-excess / this)"),
    "l2_far_fit_size": ("size", "largest data set L2 holds near and far together (B200: both dies' halves): past "
                                "l2_fit_size and up to this, a GEMM's or stream's L2 hits come from the far part, at "
                                "l2_far_latency more, without crossing HBM (tmasim.l2); 0 B: no far part"),
    "l2_far_latency": ("time", "extra latency of a copy whose bytes hit in L2's far part (l2_far_fit_size)"),
    "hbm_bandwidth": ("bandwidth", "HBM bandwidth"),
    "l2_bandwidth": ("bandwidth", "L2 bandwidth (chip)"),
    "sm_port_bandwidth": ("bandwidth", "ingest bandwidth of one SM from L2 ('64 B/cycle' follows gpu.clock)"),
    "smem_bandwidth": ("bandwidth", "shared-memory bandwidth of one SM: MMA operand reads, TMA writes, epilogue "
                                    "('128 B/cycle' follows gpu.clock)"),
    "smem_write_bandwidth": ("bandwidth", "the TMA's writes into one SM's shared memory where they do not overlap "
                                          "the k-step's MMAs (they follow them); not set: they share "
                                          "smem_bandwidth with the MMAs' reads (tmasim.operands)"),
    "copy_latency": ("time", "TMA load latency before bytes stream (L2 hit)"),
    "copy_latency_per_kib": ("time", "extra latency per KiB of box"),
    "copy_latency_per_kib_in_flight": ("time", "extra latency of a copy per KiB its SM's TMA unit has in flight "
                                               "when it is issued, itself included (queueing on the way back "
                                               "to the SM): round trips grow with the stages in flight"),
    "hbm_latency": ("time", "extra latency of a copy whose bytes come from HBM"),
    "tma_issue": ("time", "TMA unit's issue cost per copy instruction"),
    "tma_request_time": ("time", "TMA unit's time per request (one per <= 128 B row segment of a box): "
                                 "a copy streams no faster than its requests pass"),
    "hbm_request_overhead": ("size", "HBM cost of each TMA request beyond its bytes, relative to 128-byte "
                                     "requests: rows narrower than 128 B cost HBM more per byte"),
    "tma_max_in_flight": ("int", "copies in flight per SM (0: unlimited)"),
    "tma_transfer_lanes": ("int", "copies the TMA unit streams at once, each no faster than one request per "
                                  "tma_request_time (1: one copy after another)"),
    "tma_max_bytes_in_flight": ("size", "bytes in flight per SM (0: unlimited)"),
    "barrier_wake": ("time", "from an mbarrier phase flip until its waiters run"),
    "tensor_flops": ("flop_rates", "dense tensor-core rate per dtype (chip); with an [mma] table, the peak "
                                   "its II gives (the table wins)"),
    "gpc_sms": ("int_list", "SMs in each GPC (a thread-block cluster runs inside one GPC)"),
    "max_cluster_size": ("int", "CTAs per cluster, portable limit"),
    "max_cluster_size_opt_in": ("int", "CTAs per cluster with the kernel's non-portable opt-in"),
    "max_active_clusters": ("cluster_counts", "per cluster size (CTAs), the clusters resident at once with one CTA "
                                              "an SM, as the driver reports them (cudaOccupancyMaxActiveClusters, "
                                              "what a persistent kernel sizes its grid by): caps what gpc_sms "
                                              "places; not stated: gpc_sms alone"),
    "cluster_arrive_latency": ("time", "a remote mbarrier arrival across the cluster (DSMEM)"),
    "max_mma_cta_group": ("int", "SMs one MMA instruction can span (2: Blackwell's cta_group::2)"),
    "cluster_l2_coalescing": ("bool", "same-address TMA loads by the CTAs of one cluster merge in the GPC before "
                                      "L2 (window: cluster_l2_merge_bytes): implicit sharing, without multicast"),
    "l2_merge_bytes": ("size", "pending reads a GPC tracks to merge the same-address loads of CTAs of different "
                               "clusters (launch-order neighbours) before L2; 0 B: none (tmasim.l2_merge)"),
    "cluster_l2_merge_bytes": ("size", "pending reads a GPC tracks to merge the same-address loads of one cluster's "
                                       "CTAs (with cluster_l2_coalescing); 0 B: every one merges (tmasim.l2_merge)"),
    "exp_per_clock": ("int", "exponentials (MUFU ex2) per clock per SM: attention's softmax"),
    "pair_writes_overlap": ("bool", "a 2-SM MMA pair's TMA writes use the shared-memory time its MMAs' operand "
                                    "reads leave idle, before the k-step's smem_write_bandwidth time "
                                    "(tmasim.operands)"),
    "epilogue_subtile_time": ("time", "per C sub-tile of an epilogue that drains a Tensor Memory accumulator (TMEM "
                                      "load, convert, SMEM write, TMA store issue); the epilogue warps overlap the "
                                      "next tile's mainloop (two accumulators), so only what exceeds it delays the "
                                      "MMAs; 0: the SMEM staging of C only"),
    "epilogue_tile_time": ("time", "per tile of an epilogue that drains a Tensor Memory accumulator in C sub-tiles "
                                   "(epilogue_subtile_time), before its first sub-tile is stored: the wait for the "
                                   "accumulator, the first TMEM load's latency, the accumulator's release; read only "
                                   "where epilogue_subtile_time is set"),
    "launch_overhead": ("time", "what a kernel costs outside its CTAs' simulated work: the launch, the prologue "
                                "(barrier init, TMEM allocation, descriptor fetch) and the kernel's end; added to "
                                "the makespan"),
    "launch_per_sm": ("time", "what a launch costs besides for each SM it uses after the first: added to the "
                              "makespan as launch_overhead is, so a kernel that fills every SM pays more than one "
                              "on a few"),
    "tensor_sustained": ("shares", "per dtype, the share of their full MMA rate the tensor cores sustain under "
                                   "whole-chip load (the launch keeps every SM its clusters can use busy): each "
                                   "MMA then takes 1 / share as long; a launch on fewer SMs runs at the full rate; "
                                   "not stated: the full rate"),
    "fp32_per_clock": ("int", "FP32 fused multiply-adds per clock per SM: attention's softmax"),
    "minmax_per_clock": ("int", "FMNMX (fp32 max) per clock per SM, on the ALU: the softmax's row max; not "
                                "stated: not charged"),
    "convert_per_clock": ("int", "F2FP.PACK_AB (two fp32 to a packed 16-bit pair) per clock per SM: the "
                                 "conversion of P; not stated: not charged"),
    "convert_pipe": ("text", "the pipe F2FP.PACK_AB runs on: alu (as on Ampere) or xu (beside the "
                             "exponentials)"),
    "shuffle_per_clock": ("int", "SHFL per clock per SM: the row max's all-reduce; not stated: not charged"),
    "issue_per_clock": ("int", "thread instructions the SM's warp schedulers issue per clock (4 schedulers x "
                               "one warp instruction of 32): every softmax instruction takes a slot, shared "
                               "with the other warpgroups; not stated: no issue limit"),
    "fp32_latency": ("time", "a dependent FFMA, FADD or FMUL: the softmax's serial row-sum chain"),
    "minmax_latency": ("time", "a dependent FMNMX: the softmax's serial row-max chain"),
    "exp_latency": ("time", "a dependent MUFU.EX2: the last exponential before the row sum ends"),
    "shuffle_latency": ("time", "a SHFL round of the row max's all-reduce"),
}
FIELD_NAMES = tuple(_FIELDS)  # the fields a preset or a [gpu] table sets
CONVERT_PIPES = ("alu", "xu")
MMA = "mma"  # optional section: the MMA instruction table (tmasim.mma)
# Optional fields (a preset written before clusters were modelled still loads): their defaults.
_OPTIONAL: dict[str, Any] = {"tma_request_time": "0 ns", "hbm_request_overhead": "0 B", "boost_clock": None,
                             "power_limited_clock": None, "tma_transfer_lanes": 1,
                             "gpc_sms": None, "max_cluster_size": 8, "max_cluster_size_opt_in": None,
                             "max_active_clusters": {},
                             "cluster_arrive_latency": "0 ns", "max_mma_cta_group": 1, "cluster_l2_coalescing": False,
                             "l2_merge_bytes": "0 B", "cluster_l2_merge_bytes": "0 B",
                             "exp_per_clock": None, "fp32_per_clock": None, "smem_write_bandwidth": None,
                             "l2_far_fit_size": "0 B", "l2_far_latency": "0 ns",
                             "copy_latency_per_kib_in_flight": "0 ns", "pair_writes_overlap": False,
                             "launch_overhead": "0 ns", "launch_per_sm": "0 ns",
                             "epilogue_subtile_time": "0 ns", "epilogue_tile_time": "0 ns", "tensor_sustained": {},
                             "minmax_per_clock": None, "convert_per_clock": None, "convert_pipe": "alu",
                             "shuffle_per_clock": None, "issue_per_clock": None, "fp32_latency": "0 ns",
                             "minmax_latency": "0 ns", "exp_latency": "0 ns", "shuffle_latency": "0 ns"}
_UNSET_ALLOWED = {"smem_write_bandwidth"}  # None is a value: the mechanism is off
_ZERO_UNSTATED = {"boost_clock", "power_limited_clock"}  # 0 Hz: the preset does not state it
POWER_LIMITED = "power-limited"  # gpu.clock's keyword: run at the preset's power_limited_clock



def preset_names() -> list[str]:
    folder = resources.files("tmasim").joinpath("presets")
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


def load_gpu(spec: Any, base_dir: Path | None = None, field_name: str = "gpu") -> GpuSpec:
    """Resolve a scenario's ``gpu`` value: a preset name, a path, or a table with overrides."""
    if isinstance(spec, str):
        if _is_path(spec):
            return _from_raw(_read_preset(spec, base_dir, field_name), field_name)
        return _bundled_gpu(spec, field_name)
    table = read.table(field_name, spec)
    base_name = table.get("preset", "ideal")
    base = _read_preset(read.text(f"{field_name}.preset", base_name), base_dir, f"{field_name}.preset")
    overrides = {k: v for k, v in table.items() if k != "preset"}
    read.reject_unknown(field_name, overrides, (*_FIELDS, MMA))
    if "tensor_flops" in overrides and MMA in {**base, **overrides}:
        raise ScenarioError(f"{field_name}.tensor_flops", overrides["tensor_flops"],
                            f"cannot be set on a preset with an MMA table: the peak follows from the "
                            f"instructions' II (set {field_name}.mma or {field_name}.clock instead)")
    merged = {**base, **{k: v if k == MMA else {"value": v, "source": "scenario override"}
                         for k, v in overrides.items()}}
    regroup = "sms" in overrides and "gpc_sms" not in overrides and "gpc_sms" in base
    if regroup:
        del merged["gpc_sms"]
    gpu = _from_raw(merged, field_name)
    if regroup:
        # Fewer (or more) SMs of the same kind: GPCs of the preset's largest GPC size, the last one smaller.
        size = max(_from_raw(base, field_name).gpcs)
        gpu = dataclasses.replace(gpu, gpc_sms=tuple(min(size, gpu.sms - s) for s in range(0, gpu.sms, size)))
    if "sms" in overrides and "tensor_flops" not in overrides and gpu.mma is None:
        # tensor_flops is a chip rate: fewer SMs of the same kind have proportionally less of it.
        base_sms = _from_raw(base, field_name).sms
        scaled = {dtype: rate * gpu.sms / base_sms for dtype, rate in gpu.tensor_flops.items()}
        gpu = dataclasses.replace(gpu, tensor_flops=scaled)
    return gpu


def raw_preset(name: str) -> dict[str, Any]:
    """A preset file's contents as written (values with their sources)."""
    return _read_preset(name, None, "gpu")


@functools.cache
def _bundled_gpu(name: str, field_name: str) -> GpuSpec:
    """A bundled preset, as named: read once per process (a sweep or a tune bounds thousands of
    points on one GPU, and parsing its TOML cost two thirds of a quick bound). GpuSpec is frozen:
    callers make changed copies (dataclasses.replace), never change it."""
    return _from_raw(_read_preset(name, None, field_name), field_name)


@functools.cache
def _bundled_text(name: str, field_name: str) -> dict[str, Any]:
    return read.toml_text(field_name, name, resources.files("tmasim").joinpath("presets", f"{name}.toml")
                          .read_text(encoding="utf-8"))


def _is_path(name: str) -> bool:
    return name.endswith(".toml") or "/" in name


def _read_preset(name: str, base_dir: Path | None, field_name: str) -> dict[str, Any]:
    """A preset's contents as written, a fresh copy (callers may change it)."""
    if _is_path(name):
        path = Path(name)
        if not path.is_absolute() and base_dir is not None and not read.is_file(path):
            path = base_dir / path
        if not read.is_file(path):
            raise ScenarioError(field_name, name, "is not a preset file that exists")
        return read.toml_file(field_name, path)
    resource = resources.files("tmasim").joinpath("presets", f"{name}.toml") if len(name) < 200 else None
    if resource is None or not resource.is_file():
        known = preset_names()
        match = next((k for k in known if k.startswith(f"{name}-")), None) or suggest.nearest(name, known)
        hint = f"; did you mean {match!r}?" if match else ""
        raise ScenarioError(field_name, name, f"is not a known GPU preset{hint} (known: {', '.join(known)})")
    return copy.deepcopy(_bundled_text(name, field_name))


def _from_raw(raw: Mapping[str, Any], where: str) -> GpuSpec:
    read.reject_unknown(where, raw, (*_FIELDS, MMA))
    mma = mma_table.parse(f"{where}.{MMA}", raw[MMA]) if MMA in raw else None
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key in _FIELDS:
        if key == "tensor_flops" and mma is not None and key not in raw:
            continue
        if key in _OPTIONAL and key not in raw:
            values[key] = _OPTIONAL[key]
            continue
        entry = read.required(where, raw, key, " in a GPU preset")
        if isinstance(entry, Mapping) and "value" in entry:
            sources[key] = str(entry.get("source", ""))
            entry = entry["value"]
        values[key] = entry
    named = "clock"  # the field the run's clock came from
    if values["clock"] == POWER_LIMITED:
        named = "power_limited_clock"
        if values.get("power_limited_clock") is None:
            raise ScenarioError(f"{where}.clock", POWER_LIMITED, "needs a preset that states power_limited_clock "
                                "(this one has no measurement of it): give a frequency, e.g. 1.6 GHz")
        values["clock"] = values["power_limited_clock"]
        sources["clock"] = f"power-limited: {sources.get('power_limited_clock', '')}"
    clock_hz = read.quantity(f"{where}.{named}", values["clock"], "frequency")
    _check(f"{where}.{named}", "frequency", clock_hz)  # before any value in cycles is converted at it
    parsed = {key: _parse(f"{where}.{key}", kind, values[key], clock_hz) for key, (kind, _) in _FIELDS.items()
              if key in values and values[key] is not None}
    parsed["clock_hz"] = parsed.pop("clock")
    parsed.setdefault("max_cluster_size_opt_in", parsed["max_cluster_size"])
    _check_gpcs(where, parsed)
    if mma is not None:
        # The table wins over a stated rate: the peak is what the instructions' II allow.
        parsed["tensor_flops"] = {d: mma.peak_per_cycle(d) * parsed["sms"] * clock_hz / units.PS_PER_S
                                  for d in mma.dtypes()}
        sources["tensor_flops"] = f"from the {mma.instruction} II table at the clock ({mma.source})"
    return GpuSpec(**parsed, mma=mma, sources=sources)


# Bounds of the whole-number fields: far above any GPU, low enough to keep the engine in memory.
_INT_LIMITS = {"sms": (1, 4096), "max_ctas_per_sm": (1, 1024), "max_threads_per_sm": (1, 2**16),
               "tma_max_in_flight": (0, 2**20), "max_cluster_size": (1, 64), "max_cluster_size_opt_in": (1, 64),
               "max_mma_cta_group": (1, 2), "tma_transfer_lanes": (1, 64), "exp_per_clock": (0, 2**16),
               "fp32_per_clock": (0, 2**16), "minmax_per_clock": (0, 2**16), "convert_per_clock": (0, 2**16),
               "shuffle_per_clock": (0, 2**16), "issue_per_clock": (0, 2**16)}


MIN_BANDWIDTH = 1e-12  # bytes per ps: 1 B/s; slower, one byte would take longer than any typed time


def _check(name: str, kind: str, value: Any) -> None:
    """A parsed value (engine units) within the rules of its kind."""
    if kind == "text":
        _text(name, value)
    elif kind == "int":
        low, high = _INT_LIMITS[name.rpartition(".")[2]]
        read.integer(name, value, minimum=low, maximum=high)
    elif kind == "size":
        read.checked_size(name, value, positive=False)
    elif kind == "time":
        read.checked_time(name, value, positive=False)
    elif kind == "frequency":
        read.checked_quantity(name, value)
        if not 1.0 <= value <= 1e12:  # a cycle becomes a time in whole ps (tmasim.ranges)
            raise ScenarioError(name, f"{value / 1e9:.4g} GHz", "must be from 1 Hz to 1 THz (one cycle from 1 ps to "
                                                              "1 s, the engine's range of times)")
    elif kind == "bandwidth":
        if value != math.inf:
            read.checked_quantity(name, value)
            if value < MIN_BANDWIDTH:
                raise ScenarioError(name, f"{value:.4g} TB/s", "must be at least 1 B/s (1e-12 TB/s): one byte "
                                                               "within 1 s, the engine's range of times")
    elif kind == "bool":
        read.boolean(name, value)
    elif kind == "int_list":
        for i, v in enumerate(value):
            read.integer(f"{name}[{i}]", v, minimum=1, maximum=_INT_LIMITS["sms"][1])
    elif kind == "flop_rates":
        read.reject_unknown(name, read.table(name, value), DTYPES)
        for dtype, rate in value.items():
            read.checked_quantity(f"{name}.{dtype}", rate)
    elif kind == "shares":
        read.reject_unknown(name, read.table(name, value), DTYPES)
        for dtype, share in value.items():
            _share(f"{name}.{dtype}", share)
    elif kind == "cluster_counts":
        _cluster_counts(name, value)


def _check_gpcs(where: str, parsed: Mapping[str, Any]) -> None:
    gpcs = parsed.get("gpc_sms", ())
    if gpcs and sum(gpcs) != parsed["sms"]:
        raise ScenarioError(f"{where}.gpc_sms", list(gpcs), f"adds up to {sum(gpcs)} SMs, not the preset's "
                                                            f"sms = {parsed['sms']}")
    if parsed["max_cluster_size_opt_in"] < parsed["max_cluster_size"]:
        raise ScenarioError(f"{where}.max_cluster_size_opt_in", parsed["max_cluster_size_opt_in"],
                            f"must be at least max_cluster_size = {parsed['max_cluster_size']}")


def _text(name: str, value: Any) -> str:
    """A preset's name is one line (it titles summaries); its description may have several."""
    return read.name(name, value) if name.rpartition(".")[2] == "name" else read.text(name, value)


def _parse(name: str, kind: str, value: Any, clock_hz: float) -> Any:
    if kind == "text":
        return _text(name, value)
    if kind == "int":
        low, high = _INT_LIMITS[name.rpartition(".")[2]]
        return read.integer(name, value, minimum=low, maximum=high)
    if kind == "size":
        return read.size(name, value, positive=False)
    if kind == "frequency":
        return read.quantity(name, value, "frequency")
    if kind == "bandwidth":
        return _bandwidth_or_per_cycle(name, value, clock_hz)
    if kind == "time":
        return _time_or_cycles(name, value, clock_hz)
    if kind == "bool":
        return read.boolean(name, value)
    if kind == "int_list":
        if not isinstance(value, list) or not value:
            raise ScenarioError(name, value, "must be a non-empty list of whole numbers")
        return tuple(read.integer(f"{name}[{i}]", v, minimum=1) for i, v in enumerate(value))
    if kind == "flop_rates":
        rates = read.table(name, value)
        read.reject_unknown(name, rates, DTYPES)
        return {d: read.quantity(f"{name}.{d}", r, "flop_rate") for d, r in rates.items()}
    if kind == "shares":
        shares = read.table(name, value)
        read.reject_unknown(name, shares, DTYPES)
        return {d: _share(f"{name}.{d}", v) for d, v in shares.items()}
    if kind == "cluster_counts":
        return _cluster_counts(name, value)
    raise AssertionError(kind)


def _cluster_counts(name: str, value: Any) -> dict[int, int]:
    """Cluster size (CTAs, a table key) -> clusters resident at once: whole numbers from 1."""
    counts = {}
    for size, count in read.table(name, value).items():
        where = f"{name}.{size}"
        cluster = int(size) if isinstance(size, str) and size.isdigit() else size  # (a TOML key is a string)
        if isinstance(cluster, bool) or not isinstance(cluster, int) or not 2 <= cluster <= _INT_LIMITS["sms"][1]:
            raise ScenarioError(where, size, "must be a cluster size: a whole number of CTAs, from 2")
        counts[cluster] = read.integer(where, count, minimum=1, maximum=_INT_LIMITS["sms"][1])
    return counts


def _share(name: str, value: Any) -> float:
    """A share of a whole: a number above 0 and at most 1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ScenarioError(name, value, "must be a number above 0 and at most 1 (a share of the full rate)")
    return float(value)


def _bandwidth_or_per_cycle(name: str, value: Any, clock_hz: float) -> float:
    """An SM's own bandwidths (shared memory, its port) are so many bytes per SM cycle:
    ``"128 B/cycle"`` is converted at the run's clock, so it follows ``gpu.clock`` as latencies
    in cycles do; ``"234 GB/s"`` stays that rate at any clock."""
    if value == UNLIMITED:
        return math.inf
    if isinstance(value, str) and ("cycle" in value or "clk" in value):
        return read.quantity(name, value, "bytes_per_cycle") * clock_hz / units.PS_PER_S
    return read.quantity(name, value, "bandwidth")


def _time_or_cycles(name: str, value: Any, clock_hz: float) -> int:
    """Latencies are often measured in cycles: ``"690 cycles"`` is converted at the preset's clock."""
    if isinstance(value, str) and "cycle" in value:
        cycles = read.checked_quantity(name, units.parse(value, "cycles", name), positive=False, shown=value)
        return read.checked_time(name, round(cycles / clock_hz * units.PS_PER_S), positive=False, shown=value)
    return read.time(name, value, positive=False)


def describe(gpu: GpuSpec) -> dict[str, str]:
    """The key figures of a preset, formatted for people (``tmasim presets``)."""
    bf16 = gpu.tensor_flops.get("bf16")
    return {
        "name": gpu.name,
        "SMs": str(gpu.sms),
        "SMEM/SM": fmt.size(gpu.smem_per_sm),
        "L2": fmt.size(gpu.l2_size),
        "HBM": _rate(gpu.hbm_bandwidth),
        "L2 BW": _rate(gpu.l2_bandwidth),
        "SM port": _rate(gpu.sm_port_bandwidth),
        "bf16": fmt.flop_rate(None if bf16 is None else bf16 * units.PS_PER_S),
        "clock": _ghz(gpu.clock_hz) + (f" (boost {_ghz(gpu.boost_clock)})" if gpu.boost_clock else ""),
        "copy latency": fmt.time(gpu.copy_latency),
        "description": gpu.description,
    }


def describe_mma(gpu: GpuSpec) -> list[str]:
    """The MMA table in a few lines: per dtype and SM count, the shapes, II and latency ranges
    and the peak they give, with the source (``tmasim presets NAME``)."""
    mma = gpu.mma
    if mma is None:
        return []
    where = {"SS": "A and B in shared memory", "TS": "A in Tensor Memory", "RS": "A in registers"}[mma.operands]
    lines = [f"{'mma':<30} {mma.instruction + ' table':<22} latency and II per shape, in cycles, {where} "
             f"({mma.operands}; other sources follow from smem_bandwidth)  [{mma.source}]"]
    for dtype in mma.dtypes():
        for sms in (1, 2):
            rows = [s for s in mma.shapes if s.dtype == dtype and s.sms == sms]
            if not rows:
                continue
            ms = "/".join(str(m) for m in sorted({s.m for s in rows}))
            what = f"{dtype}{' x2 SMs' if sms == 2 else ''}"
            peak = f"; peak {fmt.flop_rate(gpu.tensor_flops[dtype] * units.PS_PER_S)}" if sms == 1 else ""
            lines.append(f"  {what:<28} m{ms} n{min(s.n for s in rows)}-{max(s.n for s in rows)} k{rows[0].k}: "
                         f"II {min(s.ii for s in rows):g}-{max(s.ii for s in rows):g}, latency "
                         f"{min(s.latency for s in rows):g}-{max(s.latency for s in rows):g}{peak}"
                         + (f"  [{mma.sources[dtype]}]" if dtype in mma.sources else ""))
    return lines


def _ghz(hz: float) -> str:
    return f"{hz / 1e9:.4g} GHz"


def _rate(bytes_per_ps: float) -> str:
    return UNLIMITED if math.isinf(bytes_per_ps) else fmt.rate(bytes_per_ps * units.PS_PER_S)


def field_names() -> tuple[str, ...]:
    return tuple(_FIELDS)


def field_descriptions() -> dict[str, str]:
    return {k: d for k, (_, d) in _FIELDS.items()}
