"""Scenarios: one frozen dataclass tree, read from TOML, with ``--set a.b=c`` overrides.

A scenario names the GPU, the workload (what each CTA does), the pipeline (stages, consumers)
and run options (seed, records). Every field is checked here, once, with messages that name
the field, the value and the rule; the engine trusts what it is given.
"""

from __future__ import annotations

import copy
import dataclasses
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from tmasim import fields as read
from tmasim.errors import ScenarioError
from tmasim.hardware import GpuSpec, load_gpu
from tmasim.suggest import did_you_mean
from tmasim.workloads import WorkloadConfig, parse_workload

TOP_LEVEL = ("name", "description", "gpu", "workload", "pipeline", "run")
REFERENCE = "reference"


@dataclass(frozen=True)
class Pipeline:
    """The stage ring and who synchronizes on it.

    ``full_arrivals``, ``empty_arrivals`` and ``expect_tx`` exist to study synchronization bugs:
    left unset they take the values a correct kernel uses (1; the number of consumers; the
    bytes the stage's copies carry).
    """

    stages: int = 2
    consumers: int = 1
    consumer_mode: str = "cooperative"
    consumer_waits_full: bool = True
    full_arrivals: int | None = None
    empty_arrivals: int | None = None
    expect_tx: int | None = None
    cluster: tuple[int, int] = (1, 1)  # CTAs per thread-block cluster along M and along N
    mma_cta_group: int = 1  # 2: Blackwell's 2-SM MMA, a CTA pair along M computes one 2·BM x BN tile


@dataclass(frozen=True)
class RunOptions:
    seed: int = 0
    records: bool = True
    aggregate: bool = True


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    gpu: GpuSpec
    workload: WorkloadConfig
    pipeline: Pipeline
    run: RunOptions
    raw: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)
    # The file as written, before --set overrides ({} when built from data): what the header
    # compares against, so that it never repeats what an override made untrue.
    origin: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The scenario as TOML-shaped data (after overrides): what result files carry."""
        return copy.deepcopy(dict(self.raw))


def load(source: str | Path | None = None, overrides: Iterable[str] = ()) -> Scenario:
    """Read a scenario file (or a bundled scenario by name; the reference one if ``None``)."""
    raw, base_dir = read_raw(source)
    scenario = from_dict(apply_overrides(raw, overrides), base_dir)
    return dataclasses.replace(scenario, origin=raw)


def read_raw(source: str | Path | None) -> tuple[dict[str, Any], Path | None]:
    if source is None:
        source = REFERENCE
    path = Path(source)
    if not path.exists() and path.suffix != ".toml" and not path.is_absolute() and ".." not in path.parts:
        bundled = resources.files("tmasim").joinpath("scenarios", *path.parent.parts, f"{path.name}.toml")
        if bundled.is_file():
            return _parse_toml(bundled.read_text(), str(source)), None
    if not path.is_file():
        names = bundled_names()
        hint = did_you_mean(str(source), names)
        raise ScenarioError("scenario", str(source), f"is not a file or a bundled scenario{hint} "
                                                     f"(bundled: {', '.join(names)})")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ScenarioError("scenario", str(source), f"cannot be read: {err}") from None
    return _parse_toml(text, str(source)), path.parent


def bundled_text(name: str) -> str:
    """A bundled scenario's file as written (comments included), to start a scenario of one's own."""
    resource = resources.files("tmasim").joinpath("scenarios", f"{name}.toml")
    if not resource.is_file():
        names = bundled_names()
        raise ScenarioError("scenario", name, f"is not a bundled scenario{did_you_mean(name, names)} "
                                              f"(bundled: {', '.join(names)})")
    return resource.read_text(encoding="utf-8")


def bundled_names() -> list[str]:
    folder = resources.files("tmasim").joinpath("scenarios")
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


def _parse_toml(text: str, where: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError("scenario", where, f"is not valid TOML ({err})") from None


def apply_overrides(raw: Mapping[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """Apply ``FIELD=VALUE`` settings; VALUE is read as TOML, else taken as a plain string."""
    result = copy.deepcopy(dict(raw))
    for item in overrides:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ScenarioError("--set", item, "must look like FIELD=VALUE (e.g. pipeline.stages=3)")
        set_field(result, name, parse_value(text.strip()))
    return result


def parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def set_field(raw: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in nested tables. A preset name under ``gpu`` becomes ``{preset = name}``."""
    keys = dotted.split(".")
    node = raw
    for depth, key in enumerate(keys[:-1]):
        child = node.get(key)
        if isinstance(child, str) and depth == 0 and key == "gpu":
            child = {"preset": child}
        elif child is None:
            child = {}
        elif not isinstance(child, dict):
            raise ScenarioError(".".join(keys[: depth + 1]), child, f"is not a table, so {dotted} cannot be set")
        node[key] = child
        node = child
    node[keys[-1]] = value


def from_dict(raw: Mapping[str, Any], base_dir: Path | None = None) -> Scenario:
    read.reject_unknown("", raw, TOP_LEVEL)
    workload = parse_workload(read.table("workload", read.required("", raw, "workload")))
    pipeline = _pipeline(read.table("pipeline", raw.get("pipeline", {})))
    gpu = load_gpu(raw.get("gpu", "ideal"), base_dir)
    _check_cluster(pipeline, gpu, workload)
    return Scenario(
        name=read.text("name", raw.get("name", "unnamed")),
        description=read.text("description", raw.get("description", "")),
        gpu=gpu,
        workload=workload,
        pipeline=pipeline,
        run=_run(read.table("run", raw.get("run", {}))),
        raw=copy.deepcopy(dict(raw)),
    )


def _pipeline(raw: Mapping[str, Any]) -> Pipeline:
    known = ("stages", "consumers", "consumer_mode", "consumer_waits_full", "full_arrivals", "empty_arrivals",
             "expect_tx", "cluster", "mma_cta_group")
    read.reject_unknown("pipeline", raw, known)
    optional = {k: read.integer(f"pipeline.{k}", raw[k], minimum=1)
                for k in ("full_arrivals", "empty_arrivals") if k in raw}
    return Pipeline(
        stages=read.integer("pipeline.stages", raw.get("stages", 2), minimum=1),
        consumers=read.integer("pipeline.consumers", raw.get("consumers", 1), minimum=1),
        consumer_mode=read.choice("pipeline.consumer_mode", raw.get("consumer_mode", "cooperative"),
                                  ("cooperative", "pingpong")),
        consumer_waits_full=read.boolean("pipeline.consumer_waits_full", raw.get("consumer_waits_full", True)),
        expect_tx=read.size("pipeline.expect_tx", raw["expect_tx"]) if "expect_tx" in raw else None,
        cluster=_cluster_shape(raw.get("cluster", [1, 1])),
        mma_cta_group=read.integer("pipeline.mma_cta_group", raw.get("mma_cta_group", 1), minimum=1),
        **optional,
    )


def _cluster_shape(value: Any) -> tuple[int, int]:
    if not isinstance(value, list) or len(value) != 2:
        raise ScenarioError("pipeline.cluster", value, "must be a list of two whole numbers [CX, CY] (CTAs along M, "
                                                       "along N)")
    cx, cy = (read.integer(f"pipeline.cluster[{i}]", v, minimum=1) for i, v in enumerate(value))
    return cx, cy


def _check_cluster(pipeline: Pipeline, gpu: GpuSpec, workload: WorkloadConfig) -> None:
    """What the GPU or the workload rules out, whatever the rest of the scenario."""
    group = pipeline.mma_cta_group
    if group > gpu.max_mma_cta_group:
        raise ScenarioError("pipeline.mma_cta_group", group,
                            f"is not available on {gpu.name}: its MMA spans at most {gpu.max_mma_cta_group} SM(s) "
                            "(the 2-SM MMA, tcgen05.mma.cta_group::2, is Blackwell's; Hopper has none)")
    if group == 2 and pipeline.cluster[0] % 2:
        raise ScenarioError("pipeline.mma_cta_group", group, f"pairs CTAs along M, so pipeline.cluster[0] must be "
                                                             f"even (it is {pipeline.cluster[0]})")
    if pipeline.cluster != (1, 1) and workload.kind != "gemm":
        raise ScenarioError("pipeline.cluster", list(pipeline.cluster),
                            f"is modelled for the gemm workload only (this one is {workload.kind!r})")


def _run(raw: Mapping[str, Any]) -> RunOptions:
    read.reject_unknown("run", raw, ("seed", "records", "aggregate"))
    return RunOptions(
        seed=read.integer("run.seed", raw.get("seed", 0), minimum=0),
        records=read.boolean("run.records", raw.get("records", True)),
        aggregate=read.boolean("run.aggregate", raw.get("aggregate", True)),
    )
