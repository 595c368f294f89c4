"""The ``tiles`` workload: N tiles whose load and compute times are given directly.

For teaching and for what-ifs without hardware detail. ``load`` is the copy engine's busy time
for a tile (transfers go one after another), ``compute`` the tensor-core time, ``latency`` an
optional delay before each transfer that overlaps other copies. Each is one time, a list with
one time per tile, or a distribution (``{dist = "normal", mean = "3 us", std = "0.3 us"}``)
drawn from its own random stream of the run's seed.
"""

from __future__ import annotations

import array
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from tmasim import names
from tmasim.engine.chip import Plan
from tmasim.engine.program import Repeat, TimedProgram
from tmasim.errors import ScenarioError
from tmasim.machine.residency import Residency, residency
from tmasim.values import fields as read
from tmasim.values.fields import Distribution, TimeSpec
from tmasim.workloads import analytic
from tmasim.workloads.summary_rows import plural, t

if TYPE_CHECKING:
    from tmasim.settings.parts import ScenarioParts

KIND = "tiles"
FIELDS = ("kind", "tiles", "load", "compute", "latency", "tile_bytes")
# The work itself (tmasim.field_roles): every field here is given, none is a design choice.
PROBLEM_FIELDS = ("tiles", "load", "compute", "latency", "tile_bytes")
# One fixed stream index per random source, so that adding a source never reshuffles another.
STREAMS = {"load": 0, "compute": 1, "latency": 2}
# The engine's memory and time grow with the tile count (about 0.3 KiB of records and a few
# microseconds of CPU per tile): 10^8 tiles run in about half an hour without records.
MAX_TILES = 10**8
MAX_RECORDED_TILES = 10**7
PER_TILE_BYTES = 128  # a drawn time per tile, with the draw's temporaries (measured: bench_memory.py)
TILES_WHY = " (every tile is simulated, one after another; see the README's limits)"


@dataclass(frozen=True)
class TilesConfig:
    kind: ClassVar[str] = KIND
    tiles: int
    load: TimeSpec
    compute: TimeSpec
    latency: TimeSpec = 0
    tile_bytes: int = 16384

    def __post_init__(self) -> None:
        """Checked on every construction, ``dataclasses.replace`` included."""
        read.integer("workload.tiles", self.tiles, minimum=1, maximum=MAX_TILES, why=TILES_WHY)
        for name in ("load", "compute", "latency"):
            spec = getattr(self, name)
            read.check_time_spec(f"workload.{name}", spec, positive=name != "latency")
            if isinstance(spec, tuple) and len(spec) != self.tiles:
                raise ScenarioError(f"workload.{name}", f"{len(spec)} entries",
                                    f"must have one entry per tile (workload.tiles = {self.tiles})")
        read.checked_size("workload.tile_bytes", self.tile_bytes)


def parse(raw: Mapping[str, Any]) -> TilesConfig:
    read.reject_unknown("workload", raw, FIELDS)
    tiles = read.integer("workload.tiles", read.required("workload", raw, "tiles", " for kind 'tiles'"),
                         minimum=1, maximum=MAX_TILES, why=TILES_WHY)
    specs = {}
    for name in ("load", "compute", "latency"):
        if name == "latency" and name not in raw:
            continue
        value = read.required("workload", raw, name, " for kind 'tiles'")
        spec = read.time_spec(f"workload.{name}", value, positive=name != "latency")
        if isinstance(spec, tuple) and len(spec) != tiles:
            raise ScenarioError(f"workload.{name}", value,
                                f"has {len(spec)} entries but workload.tiles = {tiles} (one per tile)")
        specs[name] = spec
    tile_bytes = read.size("workload.tile_bytes", raw.get("tile_bytes", "16 KiB"))
    return TilesConfig(tiles=tiles, tile_bytes=tile_bytes, **specs)


def per_tile(spec: TimeSpec, tiles: int, seed: int, stream: int) -> Sequence[int]:
    """The spec's value for each tile, in integer picoseconds (compact: see :class:`Repeat`)."""
    if isinstance(spec, int):
        return Repeat(spec, tiles)
    if isinstance(spec, tuple):
        return list(spec)
    return array.array("q", draw(spec, tiles, seed, stream).astype(np.int64).tobytes())


def draw(dist: Distribution, count: int, seed: int, stream: int) -> np.ndarray:
    """Positive draws, rounded to whole picoseconds; non-positive draws are redrawn."""
    entropy = dist.seed if dist.seed is not None else seed
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(stream,)))
    values = np.empty(0, dtype=np.int64)
    for _ in range(1000):
        batch = np.rint(_sample(rng, dist, count)).astype(np.int64)
        values = np.concatenate([values, batch[batch > 0]])
        if values.size >= count:
            return values[:count]
    raise ScenarioError("workload", dist.kind, "distribution almost never draws a positive time")


def _sample(rng: np.random.Generator, dist: Distribution, count: int) -> np.ndarray:
    p = dict(dist.params)
    if dist.kind == "normal":
        return rng.normal(p["mean"], p["std"], count)
    if dist.kind == "uniform":
        return rng.uniform(p["low"], p["high"], count)
    if dist.kind == "exponential":
        return rng.exponential(p["mean"], count)
    # lognormal with the given mean and standard deviation of the time itself
    mean, std = p["mean"], p["std"]
    sigma2 = np.log1p((std / mean) ** 2)
    return rng.lognormal(np.log(mean) - sigma2 / 2, np.sqrt(sigma2), count)


def times(config: TilesConfig, seed: int) -> dict[str, Sequence[int]]:
    """Per-tile load, compute and latency, in ps."""
    return {name: per_tile(getattr(config, name), config.tiles, seed, stream) for name, stream in STREAMS.items()}


def build(config: TilesConfig, seed: int) -> TimedProgram:
    t = times(config, seed)
    return TimedProgram(load=t["load"], compute_ps=t["compute"], latency=t["latency"], tile_bytes=config.tile_bytes)


def check(config: TilesConfig, scenario: ScenarioParts) -> None:
    """Per-event records are kept only for runs small enough to hold them."""
    if scenario.run.records and config.tiles > MAX_RECORDED_TILES:
        raise ScenarioError("run.records", True, f"keeps per-event records, at most for {MAX_RECORDED_TILES:,} "
                            f"tiles (workload.tiles = {config.tiles:,}); set run.records=false for bigger runs")


def plan_size(config: TilesConfig, scenario: ScenarioParts) -> tuple[int, int, int]:
    """(ring steps, work units, other bytes) of the plan, before it is built (tmasim.budget):
    a time given per tile or drawn from a distribution is an array of tiles (drawn in batches)."""
    varying = sum(not isinstance(getattr(config, name), int) for name in STREAMS)
    return config.tiles, 0, varying * config.tiles * PER_TILE_BYTES


def plan(config: TilesConfig, scenario: ScenarioParts) -> tuple[Plan, Residency]:
    """One CTA on one SM; its slots still have to fit in the GPU's shared memory."""
    p = scenario.pipeline
    res = residency(scenario.gpu, stage_bytes=config.tile_bytes, stages=p.stages, consumers=p.consumers)
    return Plan([build(config, scenario.run.seed)], persistent=True, ctas_per_sm=1, sms=1, flow=False, units=1), res


def work_units(config: TilesConfig, plan: Plan) -> int:
    return config.tiles


def describe(config: TilesConfig) -> str:
    return f"{config.tiles} tiles"


def lower_bound_ns(config: TilesConfig, scenario: ScenarioParts) -> float:
    """The copy engine's transfers go one after another, and so does one consumer's compute: a
    run takes at least the sum of either (with several consumers, only the transfers')."""
    t = times(config, scenario.run.seed)
    compute = sum(t["compute"]) if scenario.pipeline.consumers == 1 else 0
    return max(sum(t["load"]), compute) / 1000


def stats(config: TilesConfig, scenario: ScenarioParts, plan: Plan, res: Residency, makespan: int) -> dict[str, Any]:
    """The no-overlap time, the closed form and the max-plus recurrence where they apply, and
    the steady-state bound per tile with the term that binds."""
    gpu, stages = scenario.gpu, scenario.pipeline.stages
    t = times(config, scenario.run.seed)
    serial = analytic.serial_time(t["load"], t["compute"], t["latency"], gpu.tma_issue, gpu.barrier_wake)
    n = config.tiles
    bound = analytic.steady_state(sum(t["load"]) / n, sum(t["compute"]) / n, stages,
                                  sum(t["latency"]) / n, gpu.tma_issue, gpu.barrier_wake)
    exact = analytic.applies_anchor(t["load"], t["compute"], t["latency"], gpu.tma_issue, gpu.barrier_wake)
    closed = analytic.anchor_time(n, t["load"][0], t["compute"][0], stages) if exact else None
    recurrence = (analytic.maxplus_makespan(t["load"], t["compute"], stages, t["latency"], gpu.tma_issue,
                                            gpu.barrier_wake) if _standard_sync(scenario) else None)
    return {
        "serial_ns": serial / 1000,
        "closed_form_ns": None if closed is None else closed / 1000,
        "maxplus_ns": None if recurrence is None else recurrence / 1000,
        "speedup": serial / makespan if makespan else None,
        "interval_bound_ns": bound.interval / 1000,
        "binding": names.bound(bound.binding),
        **{f"{term}_term_ns": value / 1000 for term, value in bound.terms.items()},
    }


def _standard_sync(scenario: ScenarioParts) -> bool:
    """The recurrence models the correct protocol with one consumer."""
    p = scenario.pipeline
    return (p.consumer_waits_full and p.consumers == 1 and p.full_arrivals in (None, 1)
            and p.empty_arrivals in (None, p.consumers) and p.expect_tx is None)


# ------------------------------------------------------------------------------ presentation



def summary_rows(stats: Mapping[str, Any], scenario: ScenarioParts) -> list[tuple[str, str]]:
    closed = stats["closed_form_ns"]
    rows = [
        ("pipelined time", t(stats["makespan_ns"])),
        ("no-overlap time", f"{t(stats['serial_ns'])}   (speedup {stats['speedup']:.2f}x)"),
        ("closed form", t(closed) if closed is not None else "- (does not apply)"),
    ]
    if stats.get("maxplus_ns") is not None:
        rows.append(("max-plus recurrence", t(stats["maxplus_ns"])))
    # The "latency" term binds even with no latency at all: it is one slot's round trip over the stages.
    terms = ", ".join(f"{names.bound(k)}{' / stages' if k == 'latency' else ''} {t(stats[f'{k}_term_ns'])}"
                      for k in ("copy", "compute", "issue", "latency") if stats[f"{k}_term_ns"] or k != "issue")
    binding = names.bound(stats["binding"])
    rows.append(("bound per tile", f"{t(stats['interval_bound_ns'])}, binding: {binding}   ({terms})"))
    return rows


def explain(stats: Mapping[str, Any]) -> str:
    """The binding term of the steady-state bound, in one sentence a reviewer can repeat."""
    s = stats
    copy, compute, interval = t(s["copy_term_ns"]), t(s["compute_term_ns"]), t(s["interval_bound_ns"])
    binding, stages = names.bound_key(s["binding"]), int(s["stages"])
    if binding == "compute":
        return (f"The tensor core binds: each tile computes in {compute} and loads in {copy} (means), so the "
                f"pipeline delivers at best one tile every {interval}, a bound more stages cannot lower.")
    if binding == "copy":
        return (f"The copy engine binds: each tile takes {copy} to load and {compute} to compute (means), so the "
                f"pipeline delivers at best one tile every {interval}, a bound a faster copy would lower and more "
                "stages would not.")
    if binding == "issue":
        return (f"TMA issue binds: issuing each copy costs {t(s['issue_term_ns'])}, more than its load ({copy}) "
                f"or compute ({compute}), so at best one tile every {interval}.")
    round_trip = float(s["latency_term_ns"]) * stages
    needed = math.ceil(round_trip / max(float(s["copy_term_ns"]), float(s["compute_term_ns"]),
                                        float(s.get("issue_term_ns") or 0.0), 1e-9) - 1e-9)
    return (f"The round trip binds: one slot cycles in {t(round_trip)} (copy latency, load, compute and "
            f"barrier overheads), so {plural(stages, 'stage')} deliver{'s' if stages == 1 else ''} at best one tile "
            f"every {interval}; about "
            f"{needed} stages would hide it.")
