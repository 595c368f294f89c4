"""Derived durations within the engine's range, checked when the plan is made.

Typed times are read within (0, 1 s] (:mod:`tmasim.fields`). The durations a plan derives from
other fields must keep to the same rule: a k-step's MMA (from the tensor rate or the clock), a
copy's latency and its transfer over each link (bytes over the SM port, L2 and HBM bandwidths),
the shared-memory time of a step and of an epilogue. Otherwise a tensor rate of 1e30 TFLOP/s
rounds every MMA to 0 ps (a run that takes no time, reported as valid) and an HBM bandwidth of
1e-30 TB/s makes one copy take 10^27 s. The error names the field the duration came from.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from tmasim.errors import ScenarioError
from tmasim.values import fields as read
from tmasim.values import format as fmt

if TYPE_CHECKING:
    from tmasim.engine.chip import Plan
    from tmasim.engine.program import Copy, Epilogue, Segment
    from tmasim.inputs.scenario import Scenario

MAX_PS = read.MAX_TIME_PS
RULE = "must be at most 1 s, as typed times (the engine counts picoseconds in 64 bits)"


def check_plan(plan: Plan, scenario: Scenario, compute_field: str) -> None:
    """Every distinct step and epilogue of the plan's programs (``compute_field``: the field a
    step's compute time comes from, for the message)."""
    gpu = _Shown(scenario)
    seen: set[int] = set()
    copies: set[Copy] = set()  # each distinct copy once (equal segments may sit in tuples of their own)
    for unit in _units(plan.programs):
        segments = getattr(unit, "segments", None)
        if segments is None:  # a unit of another shape: its program's steps, through the protocol
            _steps(plan.programs, gpu, compute_field)
            return
        if id(segments) in seen:
            continue
        seen.add(id(segments))
        for segment in segments:
            _segment(segment, gpu, compute_field, copies)
        if unit.epilogue is not None:
            _epilogue(unit.epilogue, gpu)


def _steps(programs: Any, gpu: Any, field: str, limit: int = 4096) -> None:
    """The first program's steps (the representative's; at most ``limit``), read through the
    Program protocol: copies, compute, epilogue."""
    program = programs[0]
    copies, compute, epilogue = (getattr(program, name, None) for name in ("copies", "compute", "epilogue"))
    for step in range(min(int(getattr(program, "steps", 0)), limit)):
        for copy in copies(step) if copies is not None else ():
            _copy(copy, gpu)
        if compute is not None:
            _within(field, gpu, compute(step), "one step's compute")
        last = epilogue(step) if epilogue is not None else None
        if last is not None:
            _epilogue(last, gpu)


MAX_TOTAL_PS = 2**63 - 1  # the engine's clock and every record's times are 64-bit picoseconds
PARTIAL_STEPS = 100_000  # a program read step by step: its first steps' compute, a floor all the same


def check_total(plan: Plan, scenario: Scenario) -> None:
    """The run's simulated time within the engine's 64-bit picoseconds, from the plan: at least
    the serial work of its longest CTA (its compute, one step after another; a tiles run's
    copies too, one after another on the copy engine). Past it, a run would die late (after
    minutes and gigabytes of records) in the engine's arithmetic; a sweep point would be an
    error row. Refused here instead, the same way for both."""
    longest = max(plan.programs, key=lambda program: int(getattr(program, "steps", 0)), default=None)
    if longest is None:
        return
    floor = _serial_floor(longest)
    if floor > MAX_TOTAL_PS:
        workload = scenario.workload
        field, value = ("workload.tiles", workload.tiles) if hasattr(workload, "tiles") else \
            ("workload", getattr(workload, "kind", "?"))
        raise ScenarioError(field, value, f"makes the run take at least {_seconds(floor)} of simulated time (one "
                            f"CTA's work, one step after another): must be at most {_seconds(MAX_TOTAL_PS)} "
                            "(about 106 days; the engine counts picoseconds in 64 bits); give fewer or shorter steps")


def _serial_floor(program: Any) -> int:
    load, compute = getattr(program, "load", None), getattr(program, "compute_ps", None)
    if load is not None and compute is not None:  # typed times (tiles): the copy engine and the tensor core
        return max(_total(load), _total(compute))
    units = getattr(program, "units", None)
    if units and all(hasattr(unit, "segments") for unit in units):  # attention's units keep no segments
        return sum(segment.steps * segment.compute for unit in units for segment in unit.segments)
    step_compute = getattr(program, "compute", None)
    if step_compute is None:
        return 0
    return sum(step_compute(step) for step in range(min(int(getattr(program, "steps", 0)), PARTIAL_STEPS)))


def _total(times: Any) -> int:
    value, size = getattr(times, "value", None), getattr(times, "size", None)
    if isinstance(value, int) and isinstance(size, int):  # one value for every step (engine.program.Repeat)
        return value * size
    return int(sum(times))


def compute_field(scenario: Scenario) -> str:
    """Where a tensor-core step's time comes from: the MMA table's cycles at the clock, or the
    flat rate of an ideal machine."""
    return "gpu.clock" if scenario.gpu.mma is not None else "gpu.tensor_flops"


def _units(programs: Iterable[Any]) -> Iterable[Any]:
    for program in programs:
        yield from getattr(program, "units", ())  # programs of typed times (tiles) hold none


def _segment(segment: Segment, gpu: Any, field: str, checked: set[Copy]) -> None:
    if segment.flops > 0 and segment.compute <= 0:
        raise ScenarioError(field, _shown(field, gpu), f"makes a step of {segment.flops:.4g} FLOP take "
                            f"{segment.compute} ps, under the engine's 1 ps: must give a step at least 1 ps")
    # Shared memory first: operand reads at its bandwidth can stretch the MMA too.
    _within(_smem_field(gpu), gpu, getattr(segment, "hold", 0), "one step's shared-memory time")
    _within(_mma_field(field, gpu), gpu, segment.compute, "one step's compute")
    _within(_mma_field(field, gpu), gpu, segment.tail, "one step's MMA completion")
    for copy in segment.copies:
        if copy not in checked:
            checked.add(copy)
            _copy(copy, gpu)


def _smem_field(gpu: Any) -> str:
    """The field behind a step's shared-memory time past 1 s: the TMA's writes take
    ``smem_write_bandwidth`` where the preset gives one, the reads ``smem_bandwidth``; a step's
    bytes on the two are within a small factor, so the narrower of the two is the one to blame."""
    write = getattr(gpu, "smem_write_bandwidth", None)
    return "gpu.smem_write_bandwidth" if write is not None and write < gpu.smem_bandwidth else "gpu.smem_bandwidth"


SMEM_BOUND_BYTES_PER_CYCLE = 1.0  # far under any SM's (about 128): an MMA's II then follows from its reads


def _mma_field(field: str, gpu: Any) -> str:
    """An MMA of the table streams its operands from shared memory no faster than its bandwidth:
    an MMA past 1 s at a shared memory of under a byte per cycle is that bandwidth's doing, not
    the clock's."""
    if field != "gpu.clock":
        return field
    per_cycle = gpu.smem_bandwidth * 1e12 / gpu.clock_hz
    return "gpu.smem_bandwidth" if per_cycle < SMEM_BOUND_BYTES_PER_CYCLE else field


def _epilogue(epilogue: Epilogue, gpu: Any) -> None:
    _within("gpu.smem_bandwidth", gpu, epilogue.duration, "the epilogue's staging")
    if epilogue.store is not None:
        _copy(epilogue.store, gpu)


def _copy(copy: Copy, gpu: Any) -> None:
    if copy.latency > MAX_PS:
        _within(_latency_field(copy, gpu), gpu, copy.latency, "a copy's latency")
    links = (("gpu.sm_port_bandwidth", gpu.sm_port_bandwidth, copy.memory_bytes),
             ("gpu.l2_bandwidth", gpu.l2_bandwidth, copy.memory_bytes),
             ("gpu.hbm_bandwidth", gpu.hbm_bandwidth, copy.memory_bytes * copy.hbm_fraction))
    for field, bandwidth, nbytes in links:
        if nbytes and bandwidth != float("inf") and nbytes / bandwidth > MAX_PS:  # the message only when it fails
            _within(field, gpu, nbytes / bandwidth, f"a {fmt.amount(nbytes)} copy's transfer")


def _latency_field(copy: Copy, gpu: Any) -> str:
    """The field that makes most of a copy's latency: the base, the part per KiB of the box, or
    HBM's (where the copy misses L2), or L2's far part's (what the others leave of it)."""
    parts = {"gpu.copy_latency": gpu.copy_latency,
             "gpu.copy_latency_per_kib": gpu.copy_latency_per_kib * copy.smem_bytes / 1024,
             "gpu.hbm_latency": gpu.hbm_latency * copy.hbm_fraction}
    parts["gpu.l2_far_latency"] = copy.latency - sum(parts.values())
    return max(parts, key=lambda field: parts[field])


def _within(field: str, gpu: Any, ps: float, what: str) -> None:
    if ps > MAX_PS:
        raise ScenarioError(field, _shown(field, gpu), f"makes {what} take {_seconds(ps)}: {RULE}")


class _Shown:
    """The scenario's GPU (attributes pass through) and, for messages, each field's value as the
    user wrote it (the scenario's table), else as the preset gives it."""

    def __init__(self, scenario: Scenario) -> None:
        self._gpu, self._raw = scenario.gpu, scenario.raw

    def __getattr__(self, name: str) -> Any:
        return getattr(self._gpu, name)

    def value(self, field: str) -> Any:
        node: Any = self._raw
        for key in field.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            return node
        name, gpu = field.removeprefix("gpu."), self._gpu
        if name.endswith("bandwidth"):
            return f"{getattr(gpu, name):.4g} TB/s"  # bytes per ps
        if name == "tensor_flops":
            return ", ".join(f"{dtype} {rate:.4g} TFLOP/s" for dtype, rate in gpu.tensor_flops.items())
        if name == "clock":
            return f"{gpu.clock_hz / 1e9:.4g} GHz"
        return fmt.time(getattr(gpu, name, 0))


def _shown(field: str, gpu: Any) -> Any:
    return gpu.value(field)


def _seconds(ps: float) -> str:
    return fmt.time(ps) if ps < 1e15 else f"{ps / 1e12:.3g} s"
