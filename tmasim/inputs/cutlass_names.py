"""CUTLASS 3.x kernel names as scenarios: ``cutlass:NAME`` wherever a scenario is accepted.

The grammar is CUTLASS's own generator's (``python/cutlass_library/gemm_operation.py``,
``GemmOperation._procedural_name``)::

    cutlass3x_sm{arch}_{opclass}_{core}_{A}_{B}_{acc}_{C}_{D}_{tile}_{cluster}_{stages}_{layout}
        _align{n}{tile scheduler}{kernel schedule}{epilogue schedule}

``core`` is ``gemm`` (CUTLASS 4.0 on), or, in the older form, the accumulator's short name and
the MMA instruction's shape before it (``s64x128x16gemm``); a ``tf32`` before ``gemm`` says f32
operands rounded to tf32. The suffixes are ``library.py``'s ``TileSchedulerSuffixes``,
``KernelScheduleSuffixes`` and ``EpilogueScheduleSuffixes``. What the name leaves out (the problem
size, the GPU) gets a default the scenario's comments name; ``--set`` overrides it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tmasim.errors import ScenarioError

PREFIX = "cutlass:"
DEFAULT_PROBLEM = 8192  # m = n = k when the run does not set them
GPUS = {90: "h100-sxm", 100: "b200"}
# DataTypeNames -> tmasim's operand dtypes (tmasim.hardware.DTYPES) and output dtypes (gemm OUT_DTYPES)
OPERANDS = {"bf16": "bf16", "f16": "fp16", "e4m3": "fp8", "e5m2": "fp8", "tf32": "tf32"}
OUTPUTS = {"bf16": "bf16", "f16": "fp16", "f32": "fp32", "e4m3": "fp8", "e5m2": "fp8"}
ACCUMULATORS = ("f32", "f16")
# KernelScheduleSuffixes (without the leading '_') that tmasim models: (consumers, mode, launch)
SM90_SCHEDULES = {
    "warpspecialized_cooperative": (2, "cooperative", "persistent"),
    "warpspecialized_pingpong": (2, "pingpong", "persistent"),
    "warpspecialized": (1, "cooperative", "grid"),  # KernelTmaWarpSpecialized: one consumer, not persistent
}
SM100_SCHEDULES = {"1sm": 1, "2sm": 2}  # the MMA's CTA group (tcgen05.mma.cta_group::N)
EPILOGUES = ("epi_tma", "epi_nosmem")
CORE = re.compile(r"(?:(?P<acc>[a-z]+)(?P<inst>\d+x\d+x\d+))?(?P<fast>fastaccum)?(?P<mid>tf32)?gemm")
SHAPE = re.compile(r"(\d+)x(\d+)x(\d+)")


@dataclass
class Kernel:
    """A kernel name read part by part; ``notes`` says what tmasim models differently."""

    name: str
    arch: int = 0
    dtype: str = ""
    out_dtype: str = ""
    inst: tuple[int, int, int] | None = None  # the old form's MMA instruction shape
    tile: tuple[int, int, int] = (0, 0, 0)  # the CTA's tile, as tmasim's workload.tile
    cluster: tuple[int, int] = (1, 1)
    stages: int | str = "auto"
    layout: str = ""
    pipeline: dict[str, Any] = field(default_factory=dict)
    launch: str = "persistent"
    epilogue_smem: int | None = None
    scheduler: str = "data-parallel"  # "stream-k": the _stream_k tile scheduler (tmasim.workloads.gemm_split)
    notes: list[str] = field(default_factory=list)


def is_name(source: object) -> bool:
    return isinstance(source, str) and source.startswith(PREFIX)


def error(name: str, part: str, value: str, rule: str) -> ScenarioError:
    return ScenarioError(f"{name[:60]}{'...' if len(name) > 60 else ''}: {part}", value, rule)


def read(name: str) -> Kernel:
    """The kernel ``name`` (``cutlass3x_sm90_...``, with or without ``cutlass:``), part by part."""
    name = name.removeprefix(PREFIX)
    kernel = Kernel(name)
    parts = name.split("_")
    if len(parts) < 13 or parts[0] != "cutlass3x":
        raise error(name, "prefix", parts[0], "must begin a CUTLASS 3.x kernel name: cutlass3x_sm90_tensorop_gemm_"
                    "A_B_ACC_C_D_MxNxK_CMxCNxCK_STAGES_LAYOUT_alignN[_schedule][_epilogue]")
    _arch(kernel, parts[1])
    _opclass(kernel, parts[2])
    _core(kernel, parts[3])
    _types(kernel, parts[4:9])
    rest = _shapes(kernel, parts[9:])
    _schedule(kernel, "_".join(rest))
    _cta_tile(kernel)
    return kernel


def _arch(kernel: Kernel, text: str) -> None:
    number = text.removeprefix("sm")
    if not number.isdigit() or int(number) not in GPUS:
        raise error(kernel.name, "architecture", text, "must be sm90 (Hopper, runs on h100-sxm) or sm100 "
                    "(Blackwell, runs on b200)")
    kernel.arch = int(number)


def _opclass(kernel: Kernel, text: str) -> None:
    if text != "tensorop":
        raise error(kernel.name, "operation class", text, "is not modelled: tmasim models dense tensor-core GEMMs "
                    "(tensorop; not sparse, block-scaled or SIMT kernels)")


def _core(kernel: Kernel, text: str) -> None:
    match = CORE.fullmatch(text)
    if match is None:
        raise error(kernel.name, "kind", text, "must be gemm (or the older s64x128x16gemm form); grouped, sparse "
                    "and other kinds are not modelled")
    if match["inst"]:
        kernel.inst = _shape(kernel, "instruction shape", match["inst"])
    kernel.notes += ["fp8 fast accumulation: modelled as plain fp8 MMAs"] if match["fast"] else []
    if match["mid"]:
        kernel.notes.append("f32 operands rounded to tf32 as they are loaded: modelled as tf32 operands")


def _types(kernel: Kernel, types: list[str]) -> None:
    a, b, acc, c, d = types
    if kernel.name.split("_")[3].endswith("tf32gemm"):
        a, b = ("tf32" if t == "f32" else t for t in (a, b))
    for part, value in (("A type", a), ("B type", b)):
        if value not in OPERANDS:
            raise error(kernel.name, part, value, f"is not modelled (operands: {', '.join(OPERANDS)})")
    if OPERANDS[a] != OPERANDS[b]:
        raise error(kernel.name, "B type", b, f"differs from the A type {a}: mixed-input GEMMs are not modelled")
    if acc not in ACCUMULATORS:
        raise error(kernel.name, "accumulator type", acc, f"must be one of {', '.join(ACCUMULATORS)}")
    if d not in OUTPUTS:
        raise error(kernel.name, "D type", d, f"is not modelled (outputs: {', '.join(OUTPUTS)})")
    if c != "void" and c not in OUTPUTS:
        raise error(kernel.name, "C type", c, f"must be void or one of {', '.join(OUTPUTS)}")
    kernel.dtype, kernel.out_dtype = OPERANDS[a], OUTPUTS[d]
    if c != "void":
        kernel.notes.append(f"the epilogue's source C ({c}): tmasim's epilogue reads no C (as C = void)")
    if acc == "f16":
        kernel.notes.append("f16 accumulation: modelled at the operand type's MMA rate")


def _shapes(kernel: Kernel, parts: list[str]) -> list[str]:
    """Tile, cluster, stages, layout and alignment; returns the schedule's parts after them."""
    tile = _shape(kernel, "tile", parts[0])
    cm, cn, ck = _shape(kernel, "cluster", parts[1], minimum=0)
    if ck != 1 or (cm == 0) != (cn == 0):
        raise error(kernel.name, "cluster", parts[1], "must be CMxCNx1 (or 0x0x1, a cluster chosen at run time)")
    kernel.cluster, kernel.tile = (cm, cn), tile
    if not parts[2].isdigit():
        raise error(kernel.name, "stages", parts[2], "must be a whole number (0: CUTLASS chooses)")
    kernel.stages = int(parts[2]) or "auto"
    _layout(kernel, parts[3])
    if len(parts) < 5 or not re.fullmatch(r"align\d+", parts[4]):
        raise error(kernel.name, "alignment", parts[4] if len(parts) > 4 else "", "must be alignN after the layout")
    return parts[5:]


def _shape(kernel: Kernel, part: str, text: str, minimum: int = 1) -> tuple[int, int, int]:
    match = SHAPE.fullmatch(text)
    if match is None or min(int(g) for g in match.groups()) < minimum:
        raise error(kernel.name, part, text, "must be three whole numbers MxNxK" + (" (each >= 1)" if minimum else ""))
    x, y, z = (int(g) for g in match.groups())
    return x, y, z


def _layout(kernel: Kernel, text: str) -> None:
    """t: row-major, n: column-major (ShortLayoutTypeNames), for A, B and C. tmasim's operands are
    K-major (A row-major, B column-major: ``tn``); the others move the same bytes per k-step."""
    if not re.fullmatch(r"[tn]{3}", text):
        raise error(kernel.name, "layout", text, "must be three of t (row-major) and n (column-major): A, B, C")
    kernel.layout = text
    if text[:2] != "tn":
        kernel.notes.append(f"layout {text}: modelled as tn (K-major A and B, the only layout tmasim models; "
                            "an MN-major box moves the same bytes, in other rows)")


def _schedule(kernel: Kernel, text: str) -> None:
    if text == "stream_k" or text.startswith("stream_k_"):  # TileSchedulerSuffixes[StreamK]
        text = text.removeprefix("stream_k").removeprefix("_")
        kernel.scheduler = "stream-k"
        kernel.notes.append("stream-K tile scheduler: modelled as its DecompositionMode::StreamK (CUTLASS's default "
                            "Heuristic mode may run a problem as data-parallel or split-K instead)")
    schedule, epilogue = text, ""
    for suffix in EPILOGUES:
        if text == suffix or text.endswith("_" + suffix):
            schedule, epilogue = text.removesuffix(suffix).removesuffix("_"), suffix
    (_sm90_schedule if kernel.arch == 90 else _sm100_schedule)(kernel, schedule)
    _epilogue(kernel, epilogue)


def _sm90_schedule(kernel: Kernel, text: str) -> None:
    if text.endswith("_fp8_fastaccum"):
        text = text.removesuffix("_fp8_fastaccum")
        kernel.notes.append("fp8 fast accumulation: modelled as plain fp8 MMAs")
    if text == "":  # KernelScheduleAuto: sm90_gmma_builder.inl picks ping-pong for a 64-row tile
        pingpong = kernel.tile[0] == 64 and kernel.scheduler != "stream-k"  # ping-pong has no stream-K scheduler
        text = "warpspecialized_pingpong" if pingpong else "warpspecialized_cooperative"
        kernel.notes.append(f"schedule auto: CUTLASS's builder picks {text.removeprefix('warpspecialized_')}")
    if text not in SM90_SCHEDULES:
        raise error(kernel.name, "kernel schedule", text, f"is not modelled on sm90 (modelled: "
                    f"{', '.join(SM90_SCHEDULES)}; cp.async and unspecialized kernels do not use TMA pipelines)")
    consumers, mode, kernel.launch = SM90_SCHEDULES[text]
    kernel.pipeline = {"consumers": consumers, "consumer_mode": mode}


def _sm100_schedule(kernel: Kernel, text: str) -> None:
    if text not in SM100_SCHEDULES:
        raise error(kernel.name, "kernel schedule", text, "is not modelled on sm100 (modelled: 1sm, 2sm; "
                    "block-scaled, cp.async and FastF32 kernels are not)")
    # as tmasim's gemm-b200 scenarios: the MMA warp and the epilogue as two cooperative consumers
    kernel.pipeline = {"consumers": 2, "consumer_mode": "cooperative", "mma_cta_group": SM100_SCHEDULES[text]}


def _epilogue(kernel: Kernel, suffix: str) -> None:
    """sm90: no suffix is EpilogueScheduleAuto, which sm90_builder.inl makes NoSmemWarpSpecialized;
    sm100: no suffix is TmaWarpSpecialized1Sm (or the 2-SM auto schedule, a TMA epilogue too)."""
    if suffix == "epi_nosmem" or (suffix == "" and kernel.arch == 90):
        kernel.epilogue_smem = 0
        kernel.notes.append("epilogue without shared memory: workload.epilogue_smem = 0")


def _cta_tile(kernel: Kernel) -> None:
    """The CTA's tile. sm90: the name's tile is the CTA's. sm100: CUTLASS 4.0 on names the MMA's
    tile, ``GemmOperation.get_collective_tile_shape`` (instruction M and N, the tile's K), and a
    2-SM MMA's instruction M spans the CTA pair (``sm100_shapes.py``,
    SM100_MMA_SHAPES_16b_DENSE_2SM: M 128 or 256), so the CTA's tile is M/2. Older names give the
    instruction shape in the core and a tile of the instruction times the cluster
    (``generator.py`` GenerateSM100_TensorOp_16b_UMMA_gemm: ``multiplier_1sm = cluster_shape``,
    ``multiplier_2sm = (cluster_shape[0] // 2, cluster_shape[1], cluster_shape[2])``)."""
    group = kernel.pipeline.get("mma_cta_group", 1)
    if kernel.cluster == (0, 0):
        kernel.cluster = (group, 1)
        kernel.notes.append(f"cluster chosen at run time: modelled as {group}x1")
    if group == 2 and kernel.cluster[0] % 2:
        raise error(kernel.name, "cluster", f"{kernel.cluster[0]}x{kernel.cluster[1]}x1", "must be even along M "
                    "for a 2sm kernel (a CTA pair along M shares the MMA)")
    if kernel.arch == 90:
        return
    m, n, k = kernel.tile
    if kernel.inst is not None:
        m, n = _old_sm100_mma_tile(kernel, group)
    if m % group:
        raise error(kernel.name, "tile", f"{m}x{n}x{k}", f"must have an M divisible by {group} (the CTA pair's)")
    kernel.tile = (m // group, n, k)


def _old_sm100_mma_tile(kernel: Kernel, group: int) -> tuple[int, int]:
    assert kernel.inst is not None
    inst_m, inst_n, _ = kernel.inst
    along_m, along_n = kernel.cluster[0] // group, kernel.cluster[1]  # a run-time cluster is (group, 1) here
    if (kernel.tile[0], kernel.tile[1]) != (inst_m * along_m, inst_n * along_n):
        raise error(kernel.name, "tile", "x".join(map(str, kernel.tile)), f"must be the instruction "
                    f"{inst_m}x{inst_n} times the cluster (the older sm100 form)")
    return inst_m, inst_n


def scenario(name: str) -> dict[str, Any]:
    """The kernel's scenario, TOML-shaped: the defaults for what the name does not say."""
    kernel = read(name)
    workload: dict[str, Any] = {"kind": "gemm", "m": DEFAULT_PROBLEM, "n": DEFAULT_PROBLEM, "k": DEFAULT_PROBLEM,
                                "dtype": kernel.dtype, "out_dtype": kernel.out_dtype, "tile": list(kernel.tile),
                                "launch": kernel.launch}
    settle({"workload": workload})
    if kernel.epilogue_smem is not None:
        workload["epilogue_smem"] = kernel.epilogue_smem
    if kernel.scheduler != "data-parallel":
        workload["scheduler"] = kernel.scheduler
    pipeline = {"stages": kernel.stages, **kernel.pipeline, "cluster": list(kernel.cluster)}
    return {"name": kernel.name, "description": describe(kernel), "gpu": GPUS[kernel.arch],
            "workload": workload, "pipeline": pipeline, "run": {"records": False}}


def describe(kernel: Kernel) -> str:
    m, n, k = kernel.tile
    stages = "auto stages" if kernel.stages == "auto" else f"{kernel.stages} stages"
    group = kernel.pipeline.get("mma_cta_group")
    schedule = f"{group}-SM MMA" if group else kernel.pipeline["consumer_mode"].replace("pingpong", "ping-pong")
    schedule += ", stream-K" if kernel.scheduler == "stream-k" else ""
    return (f"CUTLASS {kernel.dtype} GEMM on {GPUS[kernel.arch]}: {m}x{n}x{k} CTA tile, "
            f"{kernel.cluster[0]}x{kernel.cluster[1]} cluster, {stages}, {schedule}; "
            f"{DEFAULT_PROBLEM}^3 unless workload.m/n/k are set")


def toml_text(name: str) -> str:
    """The scenario as a TOML file: comments say where each part came from and what is assumed."""
    raw = scenario(name)
    kernel = read(name)
    lines = [f"# From the CUTLASS kernel name {kernel.name}",
             "# (read by CUTLASS's generator grammar, tmasim.cutlass_names). Not in the name: the problem",
             f"# size ({DEFAULT_PROBLEM}^3 here: --set workload.m=...), the GPU ({GPUS[kernel.arch]} for "
             f"sm{kernel.arch}: --set gpu=...),",
             "# the raster (CUTLASS's heuristic: along M where there are more tiles along N, else along N)."]
    lines += [f"# Note: {note}." for note in dict.fromkeys(kernel.notes)]
    for key in ("name", "description", "gpu"):
        lines.append(f"{key} = {_value(raw[key])}")
    for table in ("workload", "pipeline", "run"):
        lines += ["", f"[{table}]", *(f"{key} = {_value(value)}" for key, value in raw[table].items())]
    return "\n".join(lines) + "\n"


def _value(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    import tomli_w

    return tomli_w.dumps({"v": value}).removeprefix("v = ").removesuffix("\n")


def settle(raw: dict[str, Any], overrides: Any = ()) -> dict[str, Any]:
    """After ``--set``: the raster CUTLASS's tile scheduler picks for this problem
    (``tile_scheduler_params.h``, RasterOrderOptions::Heuristic: along M where there are more
    tiles along N, else along N), unless the run set one."""
    workload = raw.get("workload")
    keys = overrides.keys() if isinstance(overrides, dict) else (str(o).partition("=")[0] for o in overrides)
    if not isinstance(workload, dict) or "workload.raster" in (k.strip() for k in keys):
        return raw
    try:
        tiles_m, tiles_n = (-(-int(workload[d]) // int(workload["tile"][i])) for i, d in enumerate("mn"))
    except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError):
        return raw  # a bad field: the scenario's own check names it
    workload["raster"] = "column" if tiles_n > tiles_m else "row"
    return raw
