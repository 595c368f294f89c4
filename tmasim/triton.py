"""Triton autotuning pruned by simulation: ``tmasim.triton.prune`` as ``early_config_prune``.

    import functools, triton, tmasim.triton

    @triton.autotune(configs=CONFIGS, key=["M", "N", "K"], prune_configs_by={
        "early_config_prune": functools.partial(tmasim.triton.prune, gpu="h100-sxm", dtype="bf16")})
    @triton.jit
    def matmul_kernel(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, ...): ...

Triton's autotuner calls ``prune(configs, named_args, **call_kwargs)`` once per new key. Each
config becomes a GEMM scenario on the preset ``gpu`` (the mapping is :func:`settings`'s), is
simulated, and is kept if it is predicted within ``tolerance`` of the best; a config that cannot
run (shared memory, registers, a cluster that does not fit) is dropped with the scenario's own
error as its reason. Triton is never imported: a config is anything with ``kwargs``,
``num_stages``, ``num_warps`` and ``num_ctas`` attributes (``triton.Config`` has them).

The problem is the kernel's arguments ``M``, ``N`` and ``K`` (C[M, N] = A[M, K] @ B[K, N]), read
from ``named_args`` (or the call's keyword arguments). Each verdict is logged on the
``tmasim.triton`` logger (INFO) and appended to ``report`` when one is given.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tmasim.errors import ResidencyError, ScenarioError, TmasimError
from tmasim.values import fields as read

log = logging.getLogger(__name__)

BLOCK_KEYS = {"m": ("BLOCK_M", "BLOCK_SIZE_M"), "n": ("BLOCK_N", "BLOCK_SIZE_N"), "k": ("BLOCK_K", "BLOCK_SIZE_K")}
GROUP_KEYS = ("GROUP_SIZE_M", "GROUP_M")  # the tutorials' grouped ordering of output tiles
PROBLEM_KEYS = ("M", "N", "K")
WARPS_PER_WARPGROUP = 4
LAUNCHES = ("persistent", "grid")


@dataclass(frozen=True)
class Target:
    """What every config of one ``prune`` call shares: the GPU, the types, the kernel's shape."""

    gpu: str = "h100-sxm"
    dtype: str = "bf16"
    out_dtype: str | None = None  # None: tmasim's default for ``dtype`` (bf16; fp32 for tf32)
    launch: str = "persistent"
    warp_specialize: bool = True
    overrides: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Verdict:
    """One config's fate: kept or dropped, why, and the scenario fields it was simulated as."""

    config: Any
    kept: bool
    reason: str
    predicted_ms: float | None
    settings: Mapping[str, Any]

    def __str__(self) -> str:
        return f"{'kept' if self.kept else 'dropped'} {describe(self.config)}: {self.reason}"


def prune(configs: Sequence[Any], named_args: Mapping[str, Any], *, gpu: str = "h100-sxm", dtype: str = "bf16",
          out_dtype: str | None = None, tolerance: float = 0.05, launch: str = "persistent",
          warp_specialize: bool = True, overrides: Mapping[str, Any] | None = None,
          report: list[Verdict] | None = None, cache: dict[Any, float | str] | None = None,
          **kwargs: Any) -> list[Any]:
    """The configs predicted within ``tolerance`` (0.05: 5%) of the fastest, in their order.

    Each config is a GEMM of the kernel's ``M``, ``N``, ``K`` on the preset ``gpu`` (:func:`settings`):
    BLOCK_M/N/K is the tile (split over ``num_ctas`` CTAs as Triton's PlanCTA does, the cluster
    being the split), ``num_stages`` the ring's stages, ``num_warps // 4`` (at least 1)
    cooperative consumer warpgroups, with one producer warpgroup when ``warp_specialize``.

    ``launch``: ``persistent`` (one CTA per SM walking the tiles, as Triton's persistent TMA
    matmul) or ``grid`` (one CTA per tile; slower to simulate). ``warp_specialize``: the kernel
    uses ``tl.range(..., warp_specialize=True)`` (a producer warpgroup beside the consumers), else
    the consumers issue their own copies. ``overrides``: more scenario fields, ``{"gpu.clock":
    "1.5 GHz"}``. ``cache``: a dict kept by the caller to reuse simulations across calls.
    ``kwargs``: the kernel call's other arguments (Triton passes them), read only for M, N, K."""
    target = Target(gpu, dtype, out_dtype, read.choice("launch", launch, LAUNCHES),
                    read.boolean("warp_specialize", warp_specialize), dict(overrides or {}))
    shape = problem(named_args, kwargs)
    _check(target, shape, tolerance)
    cache = {} if cache is None else cache
    outcomes = [_outcome(config, i, shape, target, cache) for i, config in enumerate(configs)]
    verdicts = judge(configs, outcomes, tolerance)
    for verdict in verdicts:
        log.info("tmasim.triton.prune: %s", verdict)
    if report is not None:
        report.extend(verdicts)
    return [v.config for v in verdicts if v.kept]


def problem(named_args: Mapping[str, Any], kwargs: Mapping[str, Any]) -> tuple[int, int, int]:
    """(M, N, K) from the kernel's arguments named ``M``, ``N`` and ``K``."""
    values = []
    for key in PROBLEM_KEYS:
        value = named_args.get(key, kwargs.get(key))
        if value is None:
            raise ScenarioError(f"named_args[{key!r}]", None, "must be the GEMM's size: tmasim.triton.prune reads the "
                                "kernel's arguments M, N and K (C[M, N] = A[M, K] @ B[K, N])")
        try:
            values.append(read.integer(f"named_args[{key!r}]", operator.index(value), minimum=1))
        except TypeError:
            raise ScenarioError(f"named_args[{key!r}]", value, "must be a whole number") from None
    return values[0], values[1], values[2]


def _check(target: Target, shape: tuple[int, int, int], tolerance: float) -> None:
    """Errors every config would share, raised once rather than dropping them all."""
    from tmasim.machine.hardware import DTYPES, load_gpu

    load_gpu(target.gpu)
    read.choice("dtype", target.dtype, DTYPES)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not 0 <= tolerance < 10:
        raise ScenarioError("tolerance", tolerance, "must be a number from 0 to 10 (0.05: within 5% of the best)")
    from tmasim.inputs.scenario import from_dict

    try:  # a probe with no config's fields: M, N, K, out_dtype and the overrides, by the scenario's reader
        from_dict(_raw(target, shape))
    except ResidencyError:
        pass
    except ScenarioError as err:
        if err.field in target.overrides or not err.field.startswith(("workload.tile", "pipeline.")):
            raise


def block(config: Any, index: int = 0) -> tuple[int, int, int]:
    """The config's BLOCK_M, BLOCK_N, BLOCK_K (or BLOCK_SIZE_M, ...)."""
    kwargs = getattr(config, "kwargs", None)
    if not isinstance(kwargs, Mapping):
        raise ScenarioError(f"configs[{index}]", config, "must have a kwargs dict (as triton.Config)")
    sizes = []
    for keys in BLOCK_KEYS.values():
        found = [kwargs[key] for key in keys if key in kwargs]
        if not found:
            raise ScenarioError(f"configs[{index}].kwargs", dict(kwargs), f"lacks {' or '.join(keys)} (a matmul's "
                                "block sizes)")
        sizes.append(read.integer(f"configs[{index}].kwargs[{keys[0]!r}]", found[0], minimum=1))
    return sizes[0], sizes[1], sizes[2]


def cta_split(block_m: int, block_n: int, num_ctas: int) -> tuple[int, int]:
    """How Triton splits a dot's block over a cluster of ``num_ctas`` CTAs (PlanCTA.cpp,
    ``getCTATiling``): chunks along M of 128 rows, else 64, the rest of the CTAs along N."""
    split_m, split_n, chunk_m = 1, num_ctas, 128
    while chunk_m >= 64:
        split_m = min(max(block_m // chunk_m, 1), num_ctas)
        split_n = num_ctas // split_m
        if block_n // split_n >= 64:
            break
        chunk_m //= 2
    return split_m, split_n


def settings(config: Any, target: Target | None = None, index: int = 0) -> dict[str, Any]:
    """The scenario fields a config sets. The block is split over ``num_ctas`` CTAs as Triton's
    PlanCTA does (each CTA's tile is its share, the cluster is the split); ``num_stages`` is
    ``pipeline.stages``; ``num_warps // 4`` (at least 1) are cooperative consumer warpgroups, and
    with ``warp_specialize`` one producer warpgroup beside them; GROUP_SIZE_M is the grouped
    raster's group."""
    target = target or Target()
    bm, bn, bk = block(config, index)
    ctas = read.integer(f"configs[{index}].num_ctas", getattr(config, "num_ctas", 1), minimum=1)
    split_m, split_n = cta_split(bm, bn, ctas)
    warps = read.integer(f"configs[{index}].num_warps", getattr(config, "num_warps", 4), minimum=1)
    fields: dict[str, Any] = {
        "workload.tile": [max(bm // split_m, 1), max(bn // split_n, 1), bk],
        "pipeline.stages": read.integer(f"configs[{index}].num_stages", getattr(config, "num_stages", 3), minimum=1),
        "pipeline.consumers": max(warps // WARPS_PER_WARPGROUP, 1),
        "pipeline.consumer_mode": "cooperative",
        "pipeline.cluster": [split_m, split_n],
        "pipeline.warp_specialized": target.warp_specialize,
    }
    group = [config.kwargs[key] for key in GROUP_KEYS if key in config.kwargs]
    if group:
        fields["workload.group"] = read.integer(f"configs[{index}].kwargs['GROUP_SIZE_M']", group[0], minimum=1)
    return fields


def _raw(target: Target, shape: tuple[int, int, int], fields: Mapping[str, Any] | None = None) -> dict[str, Any]:
    from tmasim.inputs.scenario import apply_overrides

    m, n, k = shape
    workload: dict[str, Any] = {"kind": "gemm", "m": m, "n": n, "k": k, "dtype": target.dtype, "tile": [128, 128, 64],
                                "raster": "grouped", "launch": target.launch}
    if target.out_dtype is not None:
        workload["out_dtype"] = target.out_dtype
    raw = {"name": "triton-matmul", "description": f"a Triton matmul config, {m}x{n}x{k} {target.dtype}",
           "gpu": target.gpu, "workload": workload, "run": {"records": False}}
    return apply_overrides(raw, {**dict(fields or {}), **dict(target.overrides)})


def _outcome(config: Any, index: int, shape: tuple[int, int, int], target: Target,
             cache: dict[Any, float | str]) -> tuple[dict[str, Any], float | str]:
    """The config's fields and its predicted time in ms, or why it cannot run."""
    fields = settings(config, target, index)
    key = (shape, target.gpu, target.dtype, target.out_dtype, target.launch,
           tuple(sorted(target.overrides.items())), tuple((f, str(v)) for f, v in sorted(fields.items())))
    if key not in cache:
        cache[key] = _simulate(_raw(target, shape, fields))
    return fields, cache[key]


def _simulate(raw: dict[str, Any]) -> float | str:
    from tmasim.inputs.scenario import from_dict
    from tmasim.simulation import simulate

    try:
        return float(simulate(from_dict(raw)).stats["makespan_ns"]) / 1e6
    except TmasimError as err:
        return str(err)


def judge(configs: Sequence[Any], outcomes: Sequence[tuple[dict[str, Any], float | str]],
          tolerance: float) -> list[Verdict]:
    """Kept: within ``tolerance`` of the fastest; dropped: slower, or cannot run (the reason why)."""
    times = [t for _, t in outcomes if isinstance(t, float)]
    if not times:
        first = outcomes[0][1] if outcomes else "no configs were given"
        raise TmasimError(f"tmasim.triton.prune: none of the {len(outcomes)} configs can run ({first})")
    best = min(times)
    verdicts = []
    for config, (fields, time) in zip(configs, outcomes, strict=True):
        if isinstance(time, str):
            verdicts.append(Verdict(config, False, f"cannot run: {time}", None, fields))
            continue
        slower = time / best - 1
        kept = slower <= tolerance
        where = "the fastest" if time == best else (f"{slower:.1%} slower than the fastest {best:.3f} ms, "
                                                   f"{'within' if kept else 'over'} the {tolerance:.0%} tolerance")
        verdicts.append(Verdict(config, kept, f"predicted {time:.3f} ms, {where}", time, fields))
    return verdicts


def describe(config: Any) -> str:
    """A config as Triton prints it: its kwargs, then num_warps, num_ctas, num_stages."""
    kwargs = getattr(config, "kwargs", {}) or {}
    parts = [f"{key}: {value}" for key, value in kwargs.items()]
    parts += [f"{name}: {getattr(config, name)}" for name in ("num_warps", "num_ctas", "num_stages")
              if hasattr(config, name)]
    return ", ".join(parts)
