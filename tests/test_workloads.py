"""The workload protocol: every workload implements it, and a new one needs only registering."""

from __future__ import annotations

import dataclasses
import inspect
import types
from pathlib import Path
from typing import ClassVar

import pytest

from tmasim import scenario, workloads
from tmasim.simulation import simulate
from tmasim.workloads import base, tiles


@pytest.mark.parametrize("kind", sorted(workloads.WORKLOADS))
def test_every_workload_implements_the_protocol(kind):
    module = workloads.WORKLOADS[kind]
    assert kind == module.KIND
    for name, member in inspect.getmembers(base.Workload, inspect.isfunction):
        if not name.startswith("_"):
            params = list(inspect.signature(member).parameters)[1:]  # without self
            assert list(inspect.signature(getattr(module, name)).parameters) == params, name


def test_describe_follows_the_effective_config():
    s = scenario.load("gemm-h100", ["workload.k=512", "workload.tile=[128,128,64]"])
    text = workloads.workload_of(s.workload).describe(s.workload)
    assert text.startswith("8192x8192x512 ") and "tile 128x128x64" in text


@dataclasses.dataclass(frozen=True)
class _DoubledConfig(tiles.TilesConfig):
    kind: ClassVar[str] = "doubled"


def _doubled_module() -> types.SimpleNamespace:
    """A new workload built from the tiles one: every tile's load takes twice as long."""
    def parse(raw):
        config = tiles.parse({k: v for k, v in raw.items() if k != "kind"})
        return _DoubledConfig(**{f.name: getattr(config, f.name) for f in dataclasses.fields(config)})

    def plan(config, s):
        doubled = dataclasses.replace(config, load=config.load * 2)
        return tiles.plan(doubled, s)

    def stats(config, s, plan_, res, makespan):
        return {"doubled_load_ns": config.load * 2 / 1000}

    return types.SimpleNamespace(KIND="doubled", parse=parse, plan=plan, work_units=tiles.work_units,
                                 stats=stats, describe=lambda config: f"{config.tiles} doubled tiles")


def test_a_new_workload_is_one_registration(monkeypatch):
    monkeypatch.setitem(workloads.WORKLOADS, "doubled", _doubled_module())
    s = scenario.from_dict({"workload": {"kind": "doubled", "tiles": 4, "load": "1 us", "compute": "1 us"}})
    stats = simulate(s).stats
    assert stats["workload"] == "doubled"
    assert stats["doubled_load_ns"] == 2000.0
    # 4 tiles, load 2 us, compute 1 us, 2 stages: load-bound, 4 x 2 + 1 = 9 us
    assert stats["makespan_ns"] == pytest.approx(9000.0)
    assert stats["tiles"] == 4


def test_simulation_never_asks_which_workload_it_has():
    source = (Path(__file__).resolve().parents[1] / "tmasim" / "simulation.py").read_text()
    assert "isinstance" not in source
    assert not any(f"{kind}." in source for kind in ("tiles", "stream", "gemm"))
