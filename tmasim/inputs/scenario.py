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

from tmasim.errors import ScenarioError
from tmasim.inputs import cutlass_names, field_use
from tmasim.inputs import raw as scenario_raw
from tmasim.machine.hardware import GpuSpec, load_gpu
from tmasim.settings.drift import Drift
from tmasim.settings.parts import AUTO
from tmasim.settings.parts import CONSUMER_MODES as CONSUMER_MODES
from tmasim.settings.parts import MAX_ARRIVALS as MAX_ARRIVALS
from tmasim.settings.parts import MAX_CLUSTER_DIM as MAX_CLUSTER_DIM
from tmasim.settings.parts import MAX_CONSUMERS as MAX_CONSUMERS
from tmasim.settings.parts import MAX_STAGES as MAX_STAGES
from tmasim.settings.parts import Pipeline as Pipeline
from tmasim.settings.parts import RunOptions as RunOptions
from tmasim.suggest import did_you_mean
from tmasim.values import fields as read
from tmasim.values import format as fmt
from tmasim.workloads import WORKLOADS, WorkloadConfig, parse_workload

TOP_LEVEL = ("name", "description", "gpu", "workload", "pipeline", "run")
REFERENCE = "reference"
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
    # The parts ``raw`` was read into: a part edited since (dataclasses.replace) is written back
    # into ``raw`` on construction (tmasim.scenario_raw), so result files and what-ifs see it.
    raw_parts: tuple[Any, ...] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        read.name("name", self.name)
        read.text("description", self.description)
        for name, kind in (("gpu", GpuSpec), ("pipeline", Pipeline), ("run", RunOptions)):
            if not isinstance(getattr(self, name), kind):
                _unchecked(name, getattr(self, name))
        if not dataclasses.is_dataclass(self.workload) or not isinstance(getattr(self.workload, "kind", None), str):
            _unchecked("workload", self.workload)
        if self.workload.kind not in WORKLOADS:
            raise ScenarioError("workload.kind", self.workload.kind, f"must be one of {', '.join(WORKLOADS)}")
        field_use.check_pipeline(self.workload.kind, self.pipeline)  # what the workload reads (field_use)
        _check_cluster(self.pipeline, self.gpu, self.workload)  # cross-field rules, on every construction
        check = getattr(WORKLOADS.get(self.workload.kind), "check", None)  # optional for a new workload
        if check is not None:
            check(self.workload, self)
        self._keep_raw_true()
        field_use.check_gpu(self.workload.kind, self.raw.get("gpu"), self.gpu)  # the table as written, kept true

    def _keep_raw_true(self) -> None:
        now = scenario_raw.parts(self)
        before = self.raw_parts
        if self.raw and before is not None and not _same_parts(before, now):
            object.__setattr__(self, "raw", scenario_raw.updated(self.raw, before, self, from_dict))
        object.__setattr__(self, "raw_parts", now)

    def validate(self) -> None:
        """Check every part again (``simulate`` calls this): one rule, wherever a scenario came from."""
        for part in (self.gpu, self.workload, self.pipeline, self.run, self):
            check = getattr(part, "__post_init__", None)
            if check is not None:
                check()

    def to_dict(self) -> dict[str, Any]:
        """The scenario as TOML-shaped data (after overrides): what result files carry."""
        return copy.deepcopy(dict(self.raw))


def _same_parts(before: tuple[Any, ...], now: tuple[Any, ...]) -> bool:
    return all(type(a) is type(b) and a == b for a, b in zip(before, now, strict=True))


def require_switches(caller: str, **switches: Any) -> None:
    """Each switch True or False, nothing else: ``allow_large="no"`` must not lift the limits."""
    for name, value in switches.items():
        if not isinstance(value, bool):
            raise TypeError(f"{caller}(): {name}={value!r:.40} must be True or False")


def require_scenario(value: Any, caller: str) -> Scenario:
    """``value`` itself if it is a Scenario; a clear TypeError (with the way to make one) if not."""
    if isinstance(value, Scenario):
        return value
    hint = (" (a scenario's name, file or table: call tmasim.load_scenario(...) first and pass what it returns)"
            if isinstance(value, (str, Path, Mapping)) else "")
    raise TypeError(f"{caller}() takes a Scenario, not {type(value).__name__} {value!r:.60}{hint}")


def _unchecked(name: str, value: Any) -> None:
    raise ScenarioError(name, type(value).__name__, "is not a checked configuration (build it with "
                        "tmasim.load_scenario or tmasim's configuration dataclasses)")


def load(source: str | Path | None = None, overrides: Iterable[str] | Mapping[str, Any] = ()) -> Scenario:
    """Read a scenario file (or a bundled scenario by name, ``reference`` or ``reference.toml``;
    the reference one if ``None``), with overrides: ``["pipeline.stages=3"]`` or
    ``{"pipeline.stages": 3}``."""
    raw, base_dir = read_raw(source)
    merged = apply_overrides(raw, overrides)
    if cutlass_names.is_name(source):
        merged = cutlass_names.settle(merged, overrides)
    scenario = from_dict(merged, base_dir)
    return dataclasses.replace(scenario, origin=raw)


def read_raw(source: str | Path | None) -> tuple[dict[str, Any], Path | None]:
    if source is None:
        source = REFERENCE
    if not isinstance(source, (str, Path)):
        raise ScenarioError("scenario", source, "must be a file path or the name of a bundled scenario")
    text = str(source)
    if cutlass_names.is_name(source) and not read.is_file(text):
        return read.toml_text("scenario", text, cutlass_names.toml_text(text)), None
    bundled = _bundled(text)
    if bundled is not None and not read.is_file(text):
        return read.toml_text("scenario", text, bundled.read_text(encoding="utf-8")), None
    if not read.is_file(text):
        names = bundled_names()
        raise ScenarioError("scenario", text, f"is not a file or a bundled scenario{did_you_mean(text, names)} "
                                              f"(bundled: {', '.join(names)})")
    return read.toml_file("scenario", text), Path(text).parent


def _bundled(name: str) -> Any:
    """The bundled scenario ``name`` (``reference``, ``reference.toml``, ``lessons/01-overlap``), or None."""
    parts = name.split("/")
    if "\\" in name or not name or len(name) > 200 or any(part in ("", ".", "..") for part in parts):
        return None
    parts[-1] = parts[-1] if parts[-1].endswith(".toml") else f"{parts[-1]}.toml"
    resource = resources.files("tmasim").joinpath("scenarios", *parts)
    return resource if resource.is_file() else None


def source_text(source: str | Path | None) -> str | None:
    """The scenario file as written (comments included), where ``source`` names one (a file or a
    bundled scenario; the reference one if None); None when it does not."""
    text = str(REFERENCE if source is None else source)
    if read.is_file(text):
        return Path(text).read_text(encoding="utf-8")
    if cutlass_names.is_name(source):
        return cutlass_names.toml_text(text)
    bundled = _bundled(text) if isinstance(source, (str, Path)) or source is None else None
    return bundled.read_text(encoding="utf-8") if bundled is not None else None


def bundled_text(name: str) -> str:
    """A bundled scenario's file as written (comments included), to start a scenario of one's own;
    ``cutlass:NAME`` a CUTLASS kernel's (tmasim.cutlass_names)."""
    if cutlass_names.is_name(name):
        return cutlass_names.toml_text(name)
    resource = _bundled(name)
    if resource is not None:
        return str(resource.read_text(encoding="utf-8"))
    if read.is_file(name):  # a scenario file of one's own: printed once it loads as one (never any other file)
        load(name)
        return Path(name).read_text(encoding="utf-8")
    names = bundled_names()
    raise ScenarioError("scenario", name, f"is not a bundled scenario{did_you_mean(name, names)} "
                                          f"(bundled: {', '.join(names)})")


def bundled_names() -> list[str]:
    folder = resources.files("tmasim").joinpath("scenarios")
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


def apply_overrides(raw: Mapping[str, Any], overrides: Iterable[str] | Mapping[str, Any]) -> dict[str, Any]:
    """Apply ``FIELD=VALUE`` settings (VALUE read as TOML, else taken as a plain string), or a
    dict ``{FIELD: value}`` whose values are taken as they are. One string is refused: it is
    not a list of settings (iterating it would set one field per character)."""
    result = copy.deepcopy(dict(raw))
    if isinstance(overrides, (str, bytes)):
        raise ScenarioError("overrides", overrides, "must be a list of 'FIELD=VALUE' strings or a dict "
                            "{FIELD: value}, not one string (write [\"pipeline.stages=3\"])")
    if isinstance(overrides, Mapping):
        for name, value in overrides.items():
            if not isinstance(name, str) or not name.strip():
                raise ScenarioError("overrides", name, "must be a field name like 'pipeline.stages'")
            set_field(result, name.strip(), value)
        return result
    for item in overrides:
        if not isinstance(item, str):
            raise ScenarioError("--set", item, "must be a string FIELD=VALUE (e.g. pipeline.stages=3)")
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
    except RecursionError:
        raise ScenarioError("--set", text[:60], "is nested too deeply to read as TOML") from None
    except ValueError:  # Python refuses to read an integer of more than 4300 digits
        raise ScenarioError("--set", f"{text[:20]}... ({len(text):,} characters)",
                            "is a number of more than 4300 digits, which no field takes") from None


MAX_FIELD_DEPTH = 16


def set_field(raw: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in nested tables. A preset name under ``gpu`` becomes ``{preset = name}``."""
    keys = dotted.split(".")
    if len(keys) > MAX_FIELD_DEPTH:  # no scenario field is this deep; nesting it would exhaust the stack
        shown = f"{dotted[:60]}... ({len(keys):,} parts)"
        raise ScenarioError("--set", shown, f"is not a field: a field path has at most {MAX_FIELD_DEPTH} parts "
                            "(like pipeline.stages)")
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
    workload_raw = read.table("workload", read.required("", raw, "workload"))
    pipeline_raw = read.table("pipeline", raw.get("pipeline", {}))
    gpu = load_gpu(raw.get("gpu", "ideal"), base_dir)
    if workload_raw.get("kind") == "attention":  # no tile: FA3's (and its warpgroups)
        from tmasim.workloads.attention import defaults

        hopper = gpu.mma is not None and gpu.mma.instruction == "wgmma"
        workload_raw, pipeline_raw = defaults(workload_raw, pipeline_raw, hopper)
    workload = parse_workload(workload_raw)
    pipeline = _pipeline(pipeline_raw)
    field_use.check_pipeline(workload.kind, pipeline)
    _check_cluster(pipeline, gpu, workload)
    if pipeline.stages_auto:
        pipeline = dataclasses.replace(pipeline, stages=auto_stage_count(workload, gpu, pipeline))
    return Scenario(
        name=read.name("name", raw.get("name", "unnamed")),
        description=read.text("description", raw.get("description", "")),
        gpu=gpu,
        workload=workload,
        pipeline=pipeline,
        run=_run(read.table("run", raw.get("run", {}))),
        raw=copy.deepcopy(dict(raw)),
    )


def _pipeline(raw: Mapping[str, Any]) -> Pipeline:
    known = ("stages", "consumers", "consumer_mode", "consumer_waits_full", "full_arrivals", "empty_arrivals",
             "expect_tx", "cluster", "mma_cta_group", "registers", "warp_specialized")
    read.reject_unknown("pipeline", raw, known)
    # checked by Pipeline
    values = {k: raw[k] for k in known if k in raw and k not in ("expect_tx", "cluster", "registers")}
    if values.get("stages") == AUTO:  # a placeholder count until the workload's rule chooses it (from_dict)
        values.update(stages=1, stages_auto=True)
    if "expect_tx" in raw:
        values["expect_tx"] = read.size("pipeline.expect_tx", raw["expect_tx"])
    if "cluster" in raw:
        values["cluster"] = _cluster_shape(raw["cluster"])
    if "registers" in raw:
        values["registers"] = _registers(raw["registers"])
    return Pipeline(**values)


def auto_stage_count(workload: WorkloadConfig, gpu: GpuSpec, pipeline: Pipeline) -> int:
    """The count ``pipeline.stages = "auto"`` stands for: the workload's rule (gemm: what CUTLASS
    would choose, tmasim.workloads.gemm_stages)."""
    rule = getattr(WORKLOADS.get(workload.kind), "auto_stages", None)
    if rule is None:
        raise ScenarioError("pipeline.stages", AUTO, f"is modelled for the gemm workload only (this one is "
                            f"{workload.kind!r}): give a whole number")
    return int(rule(workload, gpu, pipeline).stages)


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
                            f"is not available on {gpu.name}: its MMA spans at most "
                            f"{fmt.plural(gpu.max_mma_cta_group, 'SM')} "
                            "(the 2-SM MMA, tcgen05.mma.cta_group::2, is Blackwell's; Hopper has none)")
    if group == 2 and pipeline.cluster[0] % 2:
        raise ScenarioError("pipeline.mma_cta_group", group, f"pairs CTAs along M, so pipeline.cluster[0] must be "
                                                             f"even (it is {pipeline.cluster[0]})")
    pair = group == 2 and pipeline.cluster == (2, 1)  # attention's 2-SM pair (other workloads: tmasim.field_use)
    if pipeline.cluster != (1, 1) and workload.kind == "attention" and not pair:
        raise ScenarioError("pipeline.cluster", list(pipeline.cluster),
                            f"is modelled for the gemm workload only (this one is {workload.kind!r}; attention "
                            "takes [2, 1] with pipeline.mma_cta_group = 2)")


def _registers(raw: Any) -> tuple[int | None, int | None]:
    """``registers = {producer = 40, consumer = 232}``: setmaxnreg's per-thread counts, each a
    multiple of 8 from 24 to 256 (PTX ISA); unset ones take the defaults (see residency)."""
    table = read.table("pipeline.registers", raw)
    read.reject_unknown("pipeline.registers", table, ("producer", "consumer"))
    counts: list[int | None] = []
    for role in ("producer", "consumer"):
        if role not in table:
            counts.append(None)
            continue
        count = read.integer(f"pipeline.registers.{role}", table[role], minimum=24)
        if count > 256 or count % 8:
            raise ScenarioError(f"pipeline.registers.{role}", count,
                                "must be a multiple of 8 from 24 to 256 (setmaxnreg)")
        counts.append(count)
    return counts[0], counts[1]


def _run(raw: Mapping[str, Any]) -> RunOptions:
    read.reject_unknown("run", raw, ("seed", "records", "aggregate", "drift", "fast_forward"))
    values = {k: v for k, v in raw.items() if k != "drift"}
    if "drift" in raw:
        values["drift"] = _drift(raw["drift"])
    return RunOptions(**values)  # checked by RunOptions itself


def _drift(raw: Any) -> Drift:
    """``drift = { start = "200 ns", latency_cv = 0.05 }``: per-SM start skew U(0, start) and
    per-copy latency x Gamma(mean 1, CV latency_cv); either may be left out (0: off). Checked
    by Drift."""
    table = read.table("run.drift", raw)
    read.reject_unknown("run.drift", table, ("start", "latency_cv"))
    start = read.time("run.drift.start", table["start"], positive=False) if "start" in table else 0
    return Drift(start, table.get("latency_cv", 0.0))
