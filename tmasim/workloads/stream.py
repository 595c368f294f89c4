"""The ``stream`` workload: read a tensor through the stage ring, box by box.

The bandwidth experiment. Each box (a TMA copy described by a tensor descriptor) is one ring
step; the consumer spends ``compute_per_byte`` on each byte (zero: a pure copy-in). With S
stages and c CTAs per SM, an SM keeps up to S x c boxes in flight, and by Little's law its
bandwidth is bytes in flight / round trip until a link saturates:

    achieved = min(HBM, L2, SMs x port, SMs x bytes in flight / round trip)

(see :func:`littles_law` for the round trip).

By default every byte is read once, so all of it comes from HBM. With ``data_set`` the boxes
walk a data set of that many bytes again and again (the tensor is the total read, the data
set the distinct bytes, as an L2 bandwidth benchmark reads them; the run stands for a window
of the steady state, so the data set may be larger than what the run reads); the share of each
box that misses in L2 then follows the preset's L2 model (:mod:`tmasim.l2`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from tmasim import names
from tmasim.engine.chip import Plan
from tmasim.engine.program import Copy, Segment, Unit, UnitProgram
from tmasim.errors import DescriptorError, ScenarioError
from tmasim.machine import l2
from tmasim.machine.descriptor import ELEMENT_BYTES, TensorDescriptor
from tmasim.machine.hardware import GpuSpec
from tmasim.machine.residency import Residency, residency
from tmasim.values import fields as read
from tmasim.values import format as fmt
from tmasim.values.units import PS_PER_S
from tmasim.workloads.summary_rows import chip_rows, t

if TYPE_CHECKING:
    from tmasim.settings.parts import ScenarioParts

KIND = "stream"
FIELDS = ("kind", "dtype", "shape", "box", "compute_per_byte", "launch", "ctas", "ctas_per_sm", "data_set")
# The work (tmasim.field_roles); the box, the launch and the grid are how it is done.
PROBLEM_FIELDS = ("dtype", "shape", "compute_per_byte", "data_set")
ELEMENT_DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp64")
MAX_BOXES = 10**7  # each box is a work unit the engine builds and simulates
MAX_DIM = 2**32    # a tensor map's largest global dimension


@dataclass(frozen=True)
class StreamConfig:
    kind: ClassVar[str] = KIND
    dtype: str
    shape: tuple[int, ...]      # outermost first, as people write shapes: [rows, cols]
    box: tuple[int, ...]
    compute_per_byte: float = 0.0  # ps per byte
    launch: str = "persistent"
    ctas: int | None = None        # persistent grid size (default: as many as are resident)
    ctas_per_sm: int | None = None
    data_set: int | None = None    # distinct bytes read again and again (None: the tensor, read once)

    def hbm_fraction(self, gpu: GpuSpec) -> float:
        """The share of each box's bytes that comes from HBM: all of it when read once."""
        return 1.0 if self.data_set is None else l2.miss_fraction(gpu, self.data_set)

    def copy_latency(self, gpu: GpuSpec, box_bytes: int) -> int:
        """A box's latency: the L2 hit's, the HBM share's extra and, where the data set sits in
        L2's far part (tmasim.l2), the extra of the hits there."""
        hbm = self.hbm_fraction(gpu)
        far = l2.far_latency(gpu, self.data_set) if self.data_set is not None else 0
        return gpu.copy_latency_for(box_bytes) + round(hbm * gpu.hbm_latency + (1.0 - hbm) * far)

    def __post_init__(self) -> None:
        """Checked on every construction, ``dataclasses.replace`` included."""
        read.choice("workload.dtype", self.dtype, ELEMENT_DTYPES)
        for name in ("shape", "box"):
            value = getattr(self, name)
            if not isinstance(value, tuple) or not value:
                raise ScenarioError(f"workload.{name}", value, "must be a non-empty list of whole numbers")
            for i, v in enumerate(value):
                read.integer(f"workload.{name}[{i}]", v, minimum=1, maximum=MAX_DIM)
        if len(self.box) != len(self.shape):
            raise ScenarioError("workload.box", list(self.box),
                                f"must have one entry per dimension of shape ({len(self.shape)})")
        boxes = math.prod(-(-s // b) for s, b in zip(self.shape, self.box, strict=True))
        if boxes > MAX_BOXES:
            raise ScenarioError("workload.shape", list(self.shape),
                                f"makes {boxes:,} boxes of {list(self.box)}, over the {MAX_BOXES:,} the engine "
                                "simulates (each box is a work unit); use bigger boxes or a smaller tensor")
        read.checked_quantity("workload.compute_per_byte", self.compute_per_byte, positive=False)
        if self.compute_per_byte > read.MAX_TIME_PS:
            raise ScenarioError("workload.compute_per_byte", self.compute_per_byte, "must be at most 1 s per byte")
        read.choice("workload.launch", self.launch, ("persistent", "grid"))
        for name in ("ctas", "ctas_per_sm"):
            if getattr(self, name) is not None:
                read.integer(f"workload.{name}", getattr(self, name), minimum=1, maximum=MAX_BOXES)
        if self.data_set is not None:
            read.checked_size("workload.data_set", self.data_set)

    def descriptor(self) -> TensorDescriptor:
        """Row-major, innermost dim last in ``shape``; the descriptor wants innermost first."""
        dims = tuple(reversed(self.shape))
        strides: list[int] = []
        extent = ELEMENT_BYTES[self.dtype]
        for d in dims[:-1]:
            extent *= d
            strides.append(extent)
        try:
            return TensorDescriptor(self.dtype, dims, tuple(strides), tuple(reversed(self.box)))
        except DescriptorError as err:
            raise self._as_written(err) from None

    def _as_written(self, err: DescriptorError) -> DescriptorError:
        """A descriptor's rule in the scenario's words: ``box_dims[0]`` (innermost first) is
        ``workload.box[1]`` of a 2-D box; a row stride is what the shape's inner extents make."""
        name, _, index = err.field.partition("[")
        rank = len(self.shape)
        i = int(index.rstrip("]")) if index.rstrip("]").isdigit() else -1
        if name in ("box_dims", "global_dims") and 0 <= i < rank:
            field = "workload.box" if name == "box_dims" else "workload.shape"
            return DescriptorError(f"{field}[{rank - 1 - i}]", err.value, f"{err.rule} (a TMA box's rule)")
        if name == "global_strides_bytes" and 0 <= i < rank - 1:
            inner = " × ".join(map(str, self.shape[rank - 1 - i:]))
            return DescriptorError("workload.shape", list(self.shape),
                                   f"makes a stride of {err.value} bytes between the rows of shape[{rank - 1 - i}:] "
                                   f"({inner} × {ELEMENT_BYTES[self.dtype]} bytes, {self.dtype}): a TMA tensor's "
                                   f"strides {err.rule}")
        return err


def parse(raw: Mapping[str, Any]) -> StreamConfig:
    read.reject_unknown("workload", raw, FIELDS)
    shape = _int_list("workload.shape", read.required("workload", raw, "shape", " for kind 'stream'"))
    box = _int_list("workload.box", read.required("workload", raw, "box", " for kind 'stream'"))
    if len(box) != len(shape):
        raise ScenarioError("workload.box", list(box), f"must have one entry per dimension of shape ({len(shape)})")
    per_byte = raw.get("compute_per_byte", "0 ps")
    optional: dict[str, Any] = {k: read.integer(f"workload.{k}", raw[k], minimum=1)
                                for k in ("ctas", "ctas_per_sm") if k in raw}
    if "data_set" in raw:
        optional["data_set"] = read.size("workload.data_set", raw["data_set"])
    config = StreamConfig(
        dtype=read.choice("workload.dtype", raw.get("dtype", "bf16"), ELEMENT_DTYPES),
        shape=shape, box=box,
        compute_per_byte=read.quantity("workload.compute_per_byte", per_byte, "time", positive=False),
        launch=read.choice("workload.launch", raw.get("launch", "persistent"), ("persistent", "grid")),
        **optional,
    )
    config.descriptor()  # every TMA rule checked now, with its message
    return config


def _int_list(field: str, value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise ScenarioError(field, value, "must be a non-empty list of whole numbers")
    return tuple(read.integer(f"{field}[{i}]", v, minimum=1, maximum=MAX_DIM) for i, v in enumerate(value))


def check(config: StreamConfig, scenario: ScenarioParts) -> None:
    """No rules between this workload and the rest of the scenario beyond what ``plan`` checks."""


def plan(config: StreamConfig, scenario: ScenarioParts) -> tuple[Plan, Residency]:
    gpu, p = scenario.gpu, scenario.pipeline
    descriptor = config.descriptor()
    res = residency(gpu, stage_bytes=descriptor.box_bytes, stages=p.stages, consumers=p.consumers,
                    requested_ctas_per_sm=config.ctas_per_sm)
    hbm = config.hbm_fraction(gpu)
    latency = config.copy_latency(gpu, descriptor.box_bytes)
    compute = round(config.compute_per_byte * descriptor.box_bytes)
    steps = _units(descriptor, latency, compute, hbm)
    if config.launch == "persistent":
        grid = min(len(steps), config.ctas or gpu.sms * res.ctas_per_sm)
        programs = [UnitProgram(steps[g::grid]) for g in range(grid)]
    else:
        programs = [UnitProgram([unit]) for unit in steps]
    sms = min(gpu.sms, len(programs))
    return Plan(programs, config.launch == "persistent", res.ctas_per_sm, sms, flow=True, units=len(steps)), res


def compute_field(config: StreamConfig, scenario: ScenarioParts) -> str:
    """The field a box's compute time comes from (tmasim.ranges names it when out of range)."""
    return "workload.compute_per_byte"


def plan_size(config: StreamConfig, scenario: ScenarioParts) -> tuple[int, int, int]:
    """(ring steps, work units, other bytes) of the plan, before it is built (tmasim.budget)."""
    boxes = math.prod(-(-s // b) for s, b in zip(config.shape, config.box, strict=True))
    return boxes, boxes, 0


def work_units(config: StreamConfig, plan: Plan) -> int:
    return plan.units


def describe(config: StreamConfig) -> str:
    return f"stream {'x'.join(map(str, config.shape))} {config.dtype} in {'x'.join(map(str, config.box))} boxes"


def stats(config: StreamConfig, scenario: ScenarioParts, plan: Plan, res: Residency, makespan: int) -> dict[str, Any]:
    law = littles_law(config, scenario.gpu, scenario.pipeline.stages, res.ctas_per_sm, plan.sms)
    return {"serial_ns": None, "closed_form_ns": None, **law}


def _units(descriptor: TensorDescriptor, latency: int, compute: int, hbm_fraction: float) -> list[Unit]:
    """One unit per box. Boxes inside the tensor share one segment (only edge boxes read fewer
    bytes), which keeps planning a stream of many boxes cheap."""
    box = descriptor.box_bytes
    interior = (Segment(1, (Copy(box, box, hbm_fraction, latency, requests=descriptor.requests),), compute, 0.0),)
    segments: dict[tuple[int, int], tuple[Segment, ...]] = {(box, descriptor.requests): interior}
    last = tuple(d - b for d, b in zip(descriptor.global_dims, descriptor.box_dims, strict=True))  # last inner start
    units = []
    for index, coord in enumerate(descriptor.boxes()):
        if all(c <= end for c, end in zip(coord, last, strict=True)):
            units.append(Unit(index, interior, None))
            continue
        nbytes, requests = descriptor.bytes_from_memory(coord), descriptor.requests_from_memory(coord)
        edge = segments.get((nbytes, requests))
        if edge is None:
            copy = Copy(box, nbytes, hbm_fraction, latency, requests=requests)
            edge = segments[nbytes, requests] = (Segment(1, (copy,), compute, 0.0),)
        units.append(Unit(index, edge, None))
    return units


def littles_law(config: StreamConfig, gpu: GpuSpec, stages: int, ctas_per_sm: int, sms: int) -> dict[str, object]:
    """Little's law as a bound (bytes/s): the lesser of the links' capacities and
    SMs x bytes in flight / the unloaded round trip.

    The unloaded round trip of a slot is the issue cost, the latency, one box crossing the SM's
    port alone (or its requests passing the TMA unit, if slower), the consumer's compute and two
    barrier wake-ups (full, then empty). Under load
    the round trip grows (copies share the port and HBM), so the run can only fall short of
    this bound; with one stage it meets it exactly. The run's measured mean round trip
    (``slot_round_trip_ns``) satisfies Little's law itself: bandwidth = bytes in flight / it."""
    descriptor = config.descriptor()
    box = descriptor.box_bytes
    # An SM takes in a box no faster than its port carries the bytes or its TMA unit passes the requests.
    requests = box / (descriptor.requests * gpu.tma_request_time or 1e-300)
    port = min(gpu.sm_port_bandwidth, requests)
    in_flight = stages * box * ctas_per_sm
    hbm = config.hbm_fraction(gpu)
    latency = config.copy_latency(gpu, box) + gpu.in_flight_latency(box)  # its own bytes in flight, at least
    round_trip = (gpu.tma_issue + latency + box / port
                  + config.compute_per_byte * box + 2 * gpu.barrier_wake)
    limits = {  # keyed as tmasim.names.BOUNDS: "latency" is the round trip (bytes in flight / it)
        "hbm": gpu.hbm_bandwidth / hbm if hbm > 0 else float("inf"),
        "l2": gpu.l2_bandwidth,
        "port": sms * gpu.sm_port_bandwidth,
        "tma": sms * requests,
        "latency": sms * in_flight / round_trip if round_trip else float("inf"),
    }
    binding = min(limits, key=lambda k: limits[k])
    return {"bytes_in_flight_per_sm": in_flight, "round_trip_ns": round_trip / 1000,
            "littles_law_bytes_per_s": limits[binding] * PS_PER_S, "binding": names.bound(binding)}


# ------------------------------------------------------------------------------ presentation


def summary_rows(stats: Mapping[str, Any], scenario: ScenarioParts) -> list[tuple[str, str]]:
    return [
        ("predicted time", t(stats["makespan_ns"])),
        ("achieved bandwidth", f"{fmt.rate(stats['achieved_bytes_per_s'])} into the SMs   (TMA loads; Little's law: "
                               f"{fmt.rate(stats['littles_law_bytes_per_s'])}, binding: "
                               f"{names.bound(stats['binding'])})"),
        ("bytes in flight", f"{fmt.size(stats['bytes_in_flight_per_sm'])} per SM; a slot's round trip "
                            f"{t(stats['slot_round_trip_ns'])} (unloaded: {t(stats['round_trip_ns'])})"),
        *chip_rows(stats, scenario),
    ]


def explain(stats: Mapping[str, Any]) -> str:
    """What Little's law says binds, in one sentence."""
    s = stats
    sms, in_flight, trip = int(s["sms_used"]), float(s["bytes_in_flight_per_sm"]), float(s["round_trip_ns"])
    offered = sms * in_flight / (trip * 1e-9)
    achieved = f" (the run achieves {fmt.rate(s['achieved_bytes_per_s'])})" if s.get("achieved_bytes_per_s") else ""
    binding = names.bound(s["binding"])
    flight = f"{sms} SMs x {fmt.size(in_flight)} in flight over a {t(trip)} round trip"
    if binding == names.bound("latency"):
        return (f"Little's law binds: {flight} move at most {fmt.rate(offered)}, less than the memory links "
                f"supply; more stages or bigger boxes would help{achieved}.")
    if names.bound_key(s["binding"]) == "tma":
        return (f"The {binding} bind: {flight} could move {fmt.rate(offered)}, but the SMs' TMA units pass "
                f"requests for only {fmt.rate(s['littles_law_bytes_per_s'])} of boxes this shape; wider rows "
                f"(up to 128 B) would help{achieved}.")
    return (f"{binding} bandwidth binds: {flight} could move {fmt.rate(offered)}, but {binding} supplies "
            f"{fmt.rate(s['littles_law_bytes_per_s'])}, so more stages would only queue{achieved}.")
