"""MMA instructions and where their accumulators live (docs/design.md, section 8).

A preset's ``[mma]`` table lists the tensor-core instructions of its architecture, one row per
shape: ``[dtype, SMs, M, N, K, latency, II]``, latency and initiation interval (II) in cycles
of the preset's clock. ``SMs`` is 1, or 2 for Blackwell's ``cta_group::2`` (a CTA pair's MMA).
Hopper issues ``wgmma`` m64nNk16 per consumer warpgroup (k32 for fp8, k8 for tf32) and keeps
the fp32 accumulator in registers; Blackwell issues ``tcgen05.mma`` (M = 64 or 128 on one SM,
256 on two) from one thread and keeps the accumulator in Tensor Memory (TMEM).

A shape between two listed N (same dtype, SMs, M, K) takes the linear interpolation of its
neighbours; below the smallest listed N it takes the smallest's figures (no table shows small
N getting proportionally faster). A k-step of ``count`` instructions occupies the SM's tensor
cores ``count x II`` (they are one FIFO) and its last instruction completes ``latency - II``
after that: what the empty barrier waits for (``wgmma.wait_group`` / ``tcgen05.commit``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tmasim.errors import ScenarioError
from tmasim.values import fields as read
from tmasim.values import format as fmt

INSTRUCTIONS = ("wgmma", "tcgen05")
K_OF = {"bf16": 16, "fp16": 16, "fp8": 32, "tf32": 8}
MAX_N = 256
_FIELDS = ("instruction", "source", "shapes", "sources", "registers_per_sm", "registers_per_thread",
           "register_overhead", "tmem_lanes", "tmem_columns", "operands")


@dataclass(frozen=True)
class MmaShape:
    dtype: str
    sms: int
    m: int
    n: int
    k: int
    latency: float  # cycles, issue to result
    ii: float  # cycles between back-to-back instructions on the SM's tensor cores

    def __post_init__(self) -> None:
        """Every value within its rules, on every construction (as the other config dataclasses)."""
        _check_shape("gpu.mma.shape", self)

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k


@dataclass(frozen=True)
class MmaSpec:
    """An architecture's MMA instructions and accumulator storage."""

    instruction: str
    shapes: tuple[MmaShape, ...]
    source: str
    sources: Mapping[str, str]  # per dtype
    registers_per_sm: int
    registers_per_thread: int
    register_overhead: int  # registers per consumer thread besides the accumulator
    tmem_lanes: int  # 0: no Tensor Memory
    tmem_columns: int
    operands: str = "SS"  # where the rows' A operand was when measured (tmasim.operands): SS, TS or RS

    def __post_init__(self) -> None:
        """Every value within its rules, on every construction (``dataclasses.replace`` included)."""
        where = "gpu.mma"
        read.choice(f"{where}.instruction", self.instruction, INSTRUCTIONS)
        if not isinstance(self.shapes, tuple) or not self.shapes:
            raise ScenarioError(f"{where}.shapes", self.shapes, "must be a non-empty list of shapes")
        for i, shape in enumerate(self.shapes):
            if not isinstance(shape, MmaShape):
                raise ScenarioError(f"{where}.shapes[{i}]", shape, "must be [dtype, SMs, M, N, K, latency, II]")
            self.check_shape(f"{where}.shapes[{i}]", shape.dtype, shape.m, shape.n, shape.sms)
        read.text(f"{where}.source", self.source)
        for dtype, text in self.sources.items():
            read.choice(f"{where}.sources", dtype, tuple(K_OF))
            read.text(f"{where}.sources.{dtype}", text)
        for name, low, high in _LIMITS:
            read.integer(f"{where}.{name}", getattr(self, name), minimum=low, maximum=high)

    def timing(self, where: str, dtype: str, m: int, n: int, sms: int = 1) -> tuple[float, float]:
        """(latency, II) in cycles of the instruction ``dtype`` M x N x K_of[dtype] on ``sms`` SMs,
        or a one-line error naming the shape the architecture lacks."""
        k = K_OF[dtype]
        self.check_shape(where, dtype, m, n, sms)
        rows = sorted((s for s in self.shapes if (s.dtype, s.sms, s.m, s.k) == (dtype, sms, m, k)),
                      key=lambda s: s.n)
        if not rows:
            raise ScenarioError(where, f"{self.name(dtype, m, n, sms)}",
                                f"has no latency/II in the {self.instruction} table of this preset")
        if n <= rows[0].n:
            return rows[0].latency, rows[0].ii
        for low, high in zip(rows, rows[1:], strict=False):
            if low.n <= n <= high.n:
                f = (n - low.n) / (high.n - low.n)
                return low.latency + f * (high.latency - low.latency), low.ii + f * (high.ii - low.ii)
        raise ScenarioError(where, self.name(dtype, m, n, sms),
                            f"is wider than the widest listed shape (N = {rows[-1].n})")

    def check_shape(self, where: str, dtype: str, m: int, n: int, sms: int = 1) -> None:
        """The shape rules of the PTX ISA for ``wgmma`` and ``tcgen05.mma`` (dense)."""
        name = self.name(dtype, m, n, sms)
        if self.instruction == "wgmma":
            if m != 64 or sms != 1:
                raise ScenarioError(where, name, "is not a wgmma shape (M = 64 per warpgroup, one SM)")
            step = 8
        else:
            allowed = (64, 128) if sms == 1 else (128, 256)
            if m not in allowed:
                raise ScenarioError(where, name, f"is not a tcgen05.mma shape: M is {' or '.join(map(str, allowed))} "
                                                 f"on {fmt.plural(sms, 'SM')}"
                                                 + (" (M = 256 needs a CTA pair, cta_group::2)"
                                                    if sms == 1 and m == 256 else ""))
            step = 8 if m == 64 else 16
        if n > MAX_N or n < step or n % step:
            raise ScenarioError(where, name, f"has N = {n}: N must be a multiple of {step} from {step} to {MAX_N}")

    def name(self, dtype: str, m: int, n: int, sms: int = 1) -> str:
        pair = ", cta_group::2" if sms == 2 else ""
        return f"{self.instruction} {dtype} m{m}n{n}k{K_OF[dtype]}{pair}"

    def peak_per_cycle(self, dtype: str) -> float:
        """Dense FLOP per cycle of one SM for ``dtype``: the best one-SM shape, flops / II."""
        rates = [s.flops / s.ii for s in self.shapes if s.dtype == dtype and s.sms == 1]
        return max(rates) if rates else 0.0

    def dtypes(self) -> tuple[str, ...]:
        return tuple(d for d in K_OF if any(s.dtype == d for s in self.shapes))


# Whole-number fields: (name, minimum, maximum), far above any GPU.
_LIMITS = (("registers_per_sm", 1, 2**24), ("registers_per_thread", 1, 2**16), ("register_overhead", 0, 2**16),
           ("tmem_lanes", 0, 2**16), ("tmem_columns", 0, 2**20))


def _check_shape(where: str, shape: MmaShape) -> None:
    read.choice(f"{where}.dtype", shape.dtype, tuple(K_OF))
    read.integer(f"{where}.sms", shape.sms, minimum=1, maximum=2, why=" (SMs one MMA spans)")
    for name in ("m", "n", "k"):
        read.integer(f"{where}.{name}", getattr(shape, name), minimum=1, maximum=1024)
    if shape.k != K_OF[shape.dtype]:
        raise ScenarioError(f"{where}.k", shape.k, f"must be {K_OF[shape.dtype]} for {shape.dtype} "
                                                   "(K of one MMA instruction)")
    read.checked_quantity(f"{where}.latency", shape.latency)
    read.checked_quantity(f"{where}.ii", shape.ii)
    if shape.latency < shape.ii:
        raise ScenarioError(f"{where}.latency", shape.latency,
                            f"must be >= the II ({shape.ii} cycles): an instruction completes no sooner than "
                            "the next one may issue")


def parse(where: str, raw: Any) -> MmaSpec:
    table = read.table(where, raw)
    read.reject_unknown(where, table, _FIELDS)
    instruction = read.choice(f"{where}.instruction", read.required(where, table, "instruction"), INSTRUCTIONS)
    rows = read.required(where, table, "shapes")
    if not isinstance(rows, list) or not rows:
        raise ScenarioError(f"{where}.shapes", rows, "must be a non-empty list of [dtype, SMs, M, N, K, latency, II]")
    sources = read.table(f"{where}.sources", table.get("sources", {}))
    read.reject_unknown(f"{where}.sources", sources, tuple(K_OF))
    tmem = instruction == "tcgen05"
    spec = MmaSpec(
        instruction=instruction,
        shapes=tuple(_shape(f"{where}.shapes[{i}]", row) for i, row in enumerate(rows)),
        source=read.text(f"{where}.source", table.get("source", "")),
        sources={d: read.text(f"{where}.sources.{d}", s) for d, s in sources.items()},
        registers_per_sm=read.integer(f"{where}.registers_per_sm", table.get("registers_per_sm", 65536), minimum=1),
        registers_per_thread=read.integer(f"{where}.registers_per_thread", table.get("registers_per_thread", 255),
                                          minimum=1),
        register_overhead=read.integer(f"{where}.register_overhead", table.get("register_overhead", 0), minimum=0),
        tmem_lanes=read.integer(f"{where}.tmem_lanes", table.get("tmem_lanes", 128 if tmem else 0), minimum=0),
        tmem_columns=read.integer(f"{where}.tmem_columns", table.get("tmem_columns", 512 if tmem else 0), minimum=0),
        operands=read.choice(f"{where}.operands", table.get("operands", "SS"), ("SS", "TS", "RS")),
    )
    for i, shape in enumerate(spec.shapes):
        spec.check_shape(f"{where}.shapes[{i}]", shape.dtype, shape.m, shape.n, shape.sms)
    return spec


def _shape(where: str, row: Any) -> MmaShape:
    if not isinstance(row, list) or len(row) != 7:
        raise ScenarioError(where, row, "must be [dtype, SMs, M, N, K, latency cycles, II cycles]")
    dtype = read.choice(f"{where}[0]", row[0], tuple(K_OF))
    sms = read.integer(f"{where}[1]", row[1], minimum=1)
    if sms > 2:
        raise ScenarioError(f"{where}[1]", sms, "must be 1 or 2 (SMs one MMA spans)")
    m, n, k = (read.integer(f"{where}[{i}]", row[i], minimum=1) for i in (2, 3, 4))
    if k != K_OF[dtype]:
        raise ScenarioError(f"{where}[4]", k, f"must be {K_OF[dtype]} for {dtype} (K of one MMA instruction)")
    latency, ii = (_cycles(f"{where}[{i}]", row[i]) for i in (5, 6))
    if latency < ii:
        raise ScenarioError(f"{where}[5]", row[5], f"must be >= the II ({row[6]} cycles): an instruction "
                                                    "completes no sooner than the next one may issue")
    return MmaShape(dtype, sms, m, n, k, latency, ii)


def _cycles(where: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ScenarioError(where, value, "must be a number of cycles")
    if value <= 0:
        raise ScenarioError(where, value, "must be > 0 cycles")
    return float(value)
