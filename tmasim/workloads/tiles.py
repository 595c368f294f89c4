"""The ``tiles`` workload: N tiles whose load and compute times are given directly.

For teaching and for what-ifs without hardware detail. ``load`` is the copy engine's busy time
for a tile (transfers go one after another), ``compute`` the tensor-core time, ``latency`` an
optional delay before each transfer that overlaps other copies. Each is one time, a list with
one time per tile, or a distribution (``{dist = "normal", mean = "3 us", std = "0.3 us"}``)
drawn from its own random stream of the run's seed.
"""

from __future__ import annotations

import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from tmasim import fields as read
from tmasim.engine.chip import Plan
from tmasim.engine.program import Repeat, TimedProgram
from tmasim.errors import ScenarioError
from tmasim.fields import Distribution, TimeSpec
from tmasim.hardware import GpuSpec
from tmasim.residency import Residency, residency

FIELDS = ("kind", "tiles", "load", "compute", "latency", "tile_bytes")
# One fixed stream index per random source, so that adding a source never reshuffles another.
STREAMS = {"load": 0, "compute": 1, "latency": 2}
# The engine's memory and time grow with the tile count (about 0.3 KiB of records and a few
# microseconds of CPU per tile): 10^8 tiles run in about half an hour without records.
MAX_TILES = 10**8
MAX_RECORDED_TILES = 10**7
TILES_WHY = " (every tile is simulated, one after another; see the README's limits)"


@dataclass(frozen=True)
class TilesConfig:
    kind: ClassVar[str] = "tiles"
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


def plan(config: TilesConfig, gpu: GpuSpec, stages: int, consumers: int, seed: int) -> tuple[Plan, Residency]:
    """One CTA on one SM; its slots still have to fit in the GPU's shared memory."""
    res = residency(gpu, stage_bytes=config.tile_bytes, stages=stages, consumers=consumers)
    return Plan([build(config, seed)], persistent=True, ctas_per_sm=1, sms=1, flow=False, units=1), res
