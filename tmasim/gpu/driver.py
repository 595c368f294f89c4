"""Host driver: sweep the validation kernels and return tidy per-tile and per-run tables.

    spec = SweepSpec(stages=(1, 2, 4), tile_bytes=(4096, 16384), ctas=(1, "sms", "2sms"))
    result = run_sweep(spec, progress=print)
    result.save("out/")          # measured_tiles.csv, measured_runs.csv, meta.json

CTA counts may be given as multiples of the SM count ("sms", "2sms") so the same
spec creates HBM contention on any GPU. Configurations that break a rule (shared
memory per CTA) are listed in `skipped` with the rule, not silently dropped. Each
configuration gets warm-up launches, then `repeats` timed and verified launches
(see launch.py); a configuration that fails verification is recorded with its
error and the sweep moves on, while an error of the CUDA context ends the sweep
(the context is unusable after it) with what was measured so far.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tmasim.gpu import metadata, reference
from tmasim.gpu.backend import simulator_enabled
from tmasim.gpu.launch import KernelTimeoutError, Launcher, LaunchResult, ResultCheckError
from tmasim.gpu.params import (
    EV_COMPUTE_END,
    EV_COMPUTE_START,
    EV_EMPTY_WAIT,
    EV_FULL_WAIT,
    EV_ISSUE,
    EV_READY,
    KernelParams,
    Variant,
    smem_bytes,
    source_elems,
)
from tmasim.gpu.tensormap import CudaCallError

CtaCount = int | str  # an int, or "sms" / "2sms" / "<k>sms": multiples of the SM count
TILE_COLUMNS = ("run_id", "variant", "stages", "tile_bytes", "compute_iters", "ctas",
                "tiles_per_cta", "consumer_warps", "repeat", "cta", "sm", "tile", "stage",
                "t_empty_wait_ns", "t_issue_ns", "t_full_wait_ns", "t_ready_ns",
                "t_compute_start_ns", "t_compute_end_ns")
RUN_COLUMNS = ("run_id", "variant", "stages", "tile_bytes", "compute_iters", "ctas",
               "tiles_per_cta", "consumer_warps", "instrumented", "repeat", "kernel_ns",
               "timing", "bytes", "gbps", "smem_bytes_per_cta", "threads_per_cta",
               "distinct_sms", "steady_interval_ns", "full_wait_ns_mean",
               "empty_wait_ns_mean", "order_violations", "status")
_STAMP_COLUMNS = {"t_empty_wait_ns": EV_EMPTY_WAIT, "t_issue_ns": EV_ISSUE,
                  "t_full_wait_ns": EV_FULL_WAIT, "t_ready_ns": EV_READY,
                  "t_compute_start_ns": EV_COMPUTE_START, "t_compute_end_ns": EV_COMPUTE_END}
Progress = Callable[[str], None]


@dataclass(frozen=True)
class SweepSpec:
    """The grid to measure and how (every field is a knob of the device check)."""

    variants: tuple[Variant, ...] = tuple(Variant)
    stages: tuple[int, ...] = (1, 2, 3, 4)
    tile_bytes: tuple[int, ...] = (4096, 8192, 16384)
    compute_iters: tuple[int, ...] = (1, 16, 64)
    ctas: tuple[CtaCount, ...] = (1, "sms", "2sms")
    tiles_per_cta: int = 64
    consumer_warps: int = 4
    instrumented: tuple[bool, ...] = (True,)
    warmup: int = 1
    repeats: int = 3
    tile_rows_ctas: int = 8  # per-tile rows kept for this many CTAs per run (evenly spaced)
    tile_rows_repeats: int = 1  # ... and for the first this-many repeats
    seed: int = 0
    timeout_s: float = 2.0  # deadline of each barrier wait inside the kernel
    flush_l2: bool = True
    time_budget_s: float | None = None  # start no new configuration after this (but the 1st)

    def __post_init__(self) -> None:
        object.__setattr__(self, "variants", tuple(Variant(v) for v in self.variants))
        for name in ("warmup", "repeats", "tile_rows_ctas", "tile_rows_repeats"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}={getattr(self, name)!r}: must be at least 0")
        if self.repeats < 1:
            raise ValueError(f"repeats={self.repeats!r}: must be at least 1")
        if self.timeout_s <= 0:
            raise ValueError(f"timeout_s={self.timeout_s!r}: must be positive")


@dataclass
class SweepResult:
    """Per-tile timestamps, per-run totals, what was skipped and why, and metadata."""

    tiles: pd.DataFrame
    runs: pd.DataFrame
    skipped: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def save(self, folder: str | Path, prefix: str = "measured_",
             meta_name: str = "meta.json") -> list[Path]:
        """Write <prefix>tiles.csv, <prefix>runs.csv and the metadata (with spec and skips)."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        paths = [out / f"{prefix}tiles.csv", out / f"{prefix}runs.csv", out / meta_name]
        self.tiles.to_csv(paths[0], index=False)
        self.runs.to_csv(paths[1], index=False)
        # the rows written, so that a copy cut at a row boundary is refused when read back
        rows = {paths[0].name: len(self.tiles), paths[1].name: len(self.runs)}
        meta = dict(self.meta, skipped=self.skipped, rows=rows)
        paths[2].write_text(json.dumps(meta, indent=2, default=str) + "\n")
        return paths


def resolve_ctas(value: CtaCount, sm_count: int) -> int:
    """An int stays; "sms" / "2sms" / "<k>sms" become multiples of the SM count."""
    if isinstance(value, int):
        return value
    text = str(value).strip().lower()
    if text.endswith("sms"):
        factor = text[:-3] or "1"
        if factor.isdigit() and int(factor) > 0:
            return int(factor) * sm_count
    raise ValueError(f"ctas={value!r}: must be an int or 'sms', '2sms', '<k>sms'")


def expand(spec: SweepSpec, sm_count: int) -> tuple[list[KernelParams], list[dict[str, Any]]]:
    """All valid configurations, and the invalid ones with the rule they break.

    Order: variant, compute_iters, tile_bytes, ctas, instrumented, stages (innermost),
    so a time budget that cuts a sweep short drops the last compute length first
    and every measured (tile, ctas) point has its whole stage series.
    """
    ctas = sorted({resolve_ctas(c, sm_count) for c in spec.ctas})
    grid = itertools.product(spec.variants, spec.compute_iters, spec.tile_bytes, ctas,
                             spec.instrumented, spec.stages)
    valid, skipped = [], []
    for variant, iters, tile, n_ctas, instr, stages in grid:
        try:
            valid.append(KernelParams(variant, stages, tile, iters, n_ctas, spec.tiles_per_cta,
                                      spec.consumer_warps, instr))
        except ValueError as exc:
            skipped.append(dict(variant=Variant(variant).value, stages=stages, tile_bytes=tile,
                                compute_iters=iters, ctas=n_ctas,
                                tiles_per_cta=spec.tiles_per_cta,
                                consumer_warps=spec.consumer_warps, instrumented=instr,
                                reason=str(exc)))
    return valid, skipped


def sm_count_of_device(simulator: bool) -> int:
    if simulator:
        return 1
    from numba import cuda

    return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)


def run_sweep(spec: SweepSpec, progress: Progress | None = None) -> SweepResult:
    """Measure every configuration of `spec` on the current device (or the simulator)."""
    say = progress or (lambda _msg: None)
    simulator = simulator_enabled()
    sm_count = sm_count_of_device(simulator)
    configs, skipped = expand(spec, sm_count)
    meta = metadata.collect(simulator)
    meta["spec"] = _spec_dict(spec)
    if not configs:
        return _result([], [], skipped, meta)
    launcher = _make_launcher(configs, spec, simulator)
    return _sweep_loop(spec, configs, skipped, meta, launcher, sm_count, say)


def _make_launcher(configs: Sequence[KernelParams], spec: SweepSpec, simulator: bool) -> Launcher:
    n_src = max(source_elems(p.tile_bytes, p.n_tiles) for p in configs)
    flush = 0
    if spec.flush_l2 and not simulator:
        from numba import cuda

        try:
            l2 = int(cuda.get_current_device().L2_CACHE_SIZE)
        except Exception:  # attribute unknown to this driver: assume a large L2
            l2 = 64 << 20
        flush = 2 * l2
    return Launcher(n_src, spec.seed, simulator, flush, max(p.n_tiles for p in configs))


def _sweep_loop(spec: SweepSpec, configs: list[KernelParams], skipped: list[dict[str, Any]],
                meta: dict[str, Any], launcher: Launcher, sm_count: int,
                say: Progress) -> SweepResult:
    runs: list[dict[str, Any]] = []
    tiles: list[pd.DataFrame] = []
    t_start = time.monotonic()
    for i, p in enumerate(configs):
        over = spec.time_budget_s is not None and time.monotonic() - t_start > spec.time_budget_s
        if over and i > 0:  # the first point is always measured
            skipped += [_skip_row(q, "time budget spent") for q in configs[i:]]
            say(f"time budget of {spec.time_budget_s:.0f} s spent: {len(configs) - i} "
                "configurations not run")
            break
        try:
            _measure_config(p, spec, launcher, sm_count, runs, tiles)
        except Exception as exc:  # the CUDA context is not trustworthy after this
            runs.append(_failed_row(len(runs), p, 0, f"aborted: {type(exc).__name__}: {exc}"))
            meta["aborted"] = f"{p.label()}: {type(exc).__name__}: {exc}"
            say(f"ABORT at {p.label()}: {type(exc).__name__}: {exc}")
            break
        say(f"[{i + 1}/{len(configs)}] {_summary_line(runs[-1])}")
    return _result(runs, tiles, skipped, meta)


def _measure_config(p: KernelParams, spec: SweepSpec, launcher: Launcher, sm_count: int,
                    runs: list[dict[str, Any]], tiles: list[pd.DataFrame]) -> None:
    """Warm-ups, then timed repeats; a verification failure is recorded, not raised."""
    try:
        bufs = launcher.buffers(p)
    except (CudaCallError, ValueError) as exc:  # e.g. the driver refuses the tensor map
        runs.append(_failed_row(len(runs), p, 0, f"{type(exc).__name__}: {exc}"))
        return
    timeout_ns = int(spec.timeout_s * 1e9)
    for repeat in range(-spec.warmup, spec.repeats):
        run_id = len(runs)
        try:
            res = launcher.launch(p, bufs, timeout_ns, sm_count)
        except (KernelTimeoutError, ResultCheckError) as exc:
            runs.append(_failed_row(run_id, p, max(repeat, 0), f"{type(exc).__name__}: {exc}"))
            return
        if repeat < 0:
            continue
        runs.append(_run_row(run_id, p, repeat, res))
        if p.instrumented and repeat < spec.tile_rows_repeats:
            tiles.append(tile_frame(run_id, p, repeat, res, spec.tile_rows_ctas))


def _base_fields(run_id: int, p: KernelParams, repeat: int) -> dict[str, Any]:
    return dict(run_id=run_id, variant=p.variant.value, stages=p.stages,
                tile_bytes=p.tile_bytes, compute_iters=p.compute_iters, ctas=p.ctas,
                tiles_per_cta=p.tiles_per_cta, consumer_warps=p.consumer_warps,
                instrumented=p.instrumented, repeat=repeat)


def _run_row(run_id: int, p: KernelParams, repeat: int, res: LaunchResult) -> dict[str, Any]:
    row = _base_fields(run_id, p, repeat)
    row.update(kernel_ns=res.kernel_ns, timing=res.timing, bytes=p.bytes_moved,
               gbps=p.bytes_moved / res.kernel_ns if res.kernel_ns > 0 else float("nan"),
               smem_bytes_per_cta=smem_bytes(p.stages, p.tile_bytes),
               threads_per_cta=p.threads_per_cta, distinct_sms=int(np.unique(res.sms).size),
               status="ok")
    row.update(stamp_summary(res.stamps, p) if p.instrumented else _empty_summary())
    return row


def _failed_row(run_id: int, p: KernelParams, repeat: int, status: str) -> dict[str, Any]:
    row = _base_fields(run_id, p, repeat)
    row.update(kernel_ns=float("nan"), timing="", bytes=p.bytes_moved, gbps=float("nan"),
               smem_bytes_per_cta=smem_bytes(p.stages, p.tile_bytes),
               threads_per_cta=p.threads_per_cta, distinct_sms=0, status=status)
    row.update(_empty_summary())
    return row


def _empty_summary() -> dict[str, Any]:
    return dict(steady_interval_ns=float("nan"), full_wait_ns_mean=float("nan"),
                empty_wait_ns_mean=float("nan"), order_violations=-1)


def stamp_summary(stamps: np.ndarray, p: KernelParams) -> dict[str, Any]:
    """Per-run numbers the simulator can be compared against, from the timestamps."""
    s = stamps.astype(np.int64)
    ends = s[:, :, EV_COMPUTE_END]
    interval = float(np.median(np.diff(ends, axis=1))) if p.tiles_per_cta > 1 else float("nan")
    return dict(
        steady_interval_ns=interval,
        full_wait_ns_mean=float(np.mean(s[:, :, EV_READY] - s[:, :, EV_FULL_WAIT])),
        empty_wait_ns_mean=float(np.mean(s[:, :, EV_ISSUE] - s[:, :, EV_EMPTY_WAIT])),
        order_violations=sum(reference.order_violations(stamps, p.stages).values()),
    )


def kept_ctas(ctas: int, keep: int) -> np.ndarray:
    """`keep` CTA indices spread evenly over the grid (first and last included)."""
    if keep <= 0:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.linspace(0, ctas - 1, min(keep, ctas)).round().astype(np.int64))


def tile_frame(run_id: int, p: KernelParams, repeat: int, res: LaunchResult,
               keep: int) -> pd.DataFrame:
    """One row per (kept CTA, tile); times in ns relative to the run's first timestamp."""
    t0 = int(res.stamps.min())
    ctas = kept_ctas(p.ctas, keep)
    n = p.tiles_per_cta
    cols: dict[str, Any] = _base_fields(run_id, p, repeat)
    cols.pop("instrumented")
    cols.update(cta=np.repeat(ctas, n), sm=np.repeat(res.sms[ctas].astype(np.int64), n),
                tile=np.tile(np.arange(n), ctas.size),
                stage=np.tile(np.arange(n) % p.stages, ctas.size))
    rel = res.stamps[ctas].astype(np.int64) - t0
    for name, ev in _STAMP_COLUMNS.items():
        cols[name] = rel[:, :, ev].reshape(-1)
    return pd.DataFrame(cols, columns=list(TILE_COLUMNS))


def _skip_row(p: KernelParams, reason: str) -> dict[str, Any]:
    row = _base_fields(-1, p, 0)
    for k in ("run_id", "repeat"):
        row.pop(k)
    return dict(row, reason=reason)


def _summary_line(row: dict[str, Any]) -> str:
    head = (f"{row['variant']} S={row['stages']} tile={row['tile_bytes']} "
            f"iters={row['compute_iters']} ctas={row['ctas']}")
    if row["status"] != "ok":
        return f"{head}: {row['status']}"
    return (f"{head}: {row['kernel_ns'] / 1e3:.1f} us, {row['gbps']:.1f} GB/s, "
            f"interval {row['steady_interval_ns']:.0f} ns")


def _result(runs: list[dict[str, Any]], tiles: list[pd.DataFrame],
            skipped: list[dict[str, Any]], meta: dict[str, Any]) -> SweepResult:
    runs_df = pd.DataFrame(runs, columns=list(RUN_COLUMNS))
    tiles_df = (pd.concat(tiles, ignore_index=True) if tiles
                else pd.DataFrame(columns=list(TILE_COLUMNS)))
    return SweepResult(tiles_df, runs_df, skipped, meta)


def _spec_dict(spec: SweepSpec) -> dict[str, Any]:
    d = asdict(spec)
    d["variants"] = [v.value for v in spec.variants]
    return d
