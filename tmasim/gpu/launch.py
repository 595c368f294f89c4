"""One checked kernel launch: buffers, poison, L2 flush, timing, verification.

A measurement is only worth keeping if the kernel demonstrably did the work, so
every launch starts from poisoned outputs (NaN partials, all-ones timestamps and
SM ids), and afterwards the partial sums must match the numpy reference, every
timestamp and SM id must have been written, and no barrier wait may have timed
out. Failures raise KernelTimeoutError or ResultCheckError naming the run.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import cuda

from tmasim.gpu import kernels, reference
from tmasim.gpu.params import (
    N_EVENTS,
    ROLE_NAMES,
    KernelParams,
    TensorLayout,
    Variant,
    tensor_layout,
)
from tmasim.gpu.tensormap import TENSOR_MAP_WORDS, build_tensor_map

POISON_U64 = np.uint64(0xFFFF_FFFF_FFFF_FFFF)
POISON_U32 = np.uint32(0xFFFF_FFFF)
READ_BLOCK = 256


class KernelTimeoutError(RuntimeError):
    """A barrier wait inside the kernel passed its deadline (a protocol bug or a hang)."""


class ResultCheckError(RuntimeError):
    """The kernel finished but its outputs are wrong or incomplete."""


@dataclass
class LaunchResult:
    """What one verified launch produced (host copies)."""

    kernel_ns: float
    timing: str  # "cuda_event" or "wall_clock" (the simulator has no event timing)
    stamps: np.ndarray  # uint64[cta, tile, event]
    sms: np.ndarray  # uint32[cta]
    partials: np.ndarray  # float32[cta, tile, consumer thread], verified


@dataclass
class _Buffers:
    out: Any
    stamps: Any
    errs: Any
    sms: Any
    tmap: Any
    want: np.ndarray  # expected partials [cta, tile, thread]
    poison_out: np.ndarray
    poison_stamps: np.ndarray


def device_address(arr: Any, simulator: bool) -> int:
    """Address of a device array's first byte (the simulator's is a host address)."""
    if simulator:
        return int(arr._ary.ctypes.data)
    return int(arr.__cuda_array_interface__["data"][0])


class Launcher:
    """Device-side state shared by the runs of a sweep: the source data and an L2 flush.

    The source is allocated once, big enough for the largest configuration; smaller
    ones use its prefix, so every configuration reads the same bytes per tile.
    """

    def __init__(self, n_src_elems: int, seed: int, simulator: bool, flush_bytes: int,
                 max_tiles: int | None = None) -> None:
        self.simulator = simulator
        self.max_tiles = max_tiles  # the most tiles any run will ask a reference for
        self.src_host = reference.make_source(n_src_elems, seed)
        self.d_src = cuda.to_device(self.src_host)
        self.d_sink = cuda.to_device(np.zeros(1, dtype=np.float32))
        self.d_flush = None
        if flush_bytes > 0 and not simulator:
            self.d_flush = cuda.to_device(np.zeros(flush_bytes // 4, dtype=np.float32))
        self._want_key: tuple[Any, ...] | None = None
        self._want: np.ndarray | None = None

    def expected(self, p: KernelParams) -> np.ndarray:
        """Reference partials [cta, tile, thread]; cached across stage counts and CTA counts.

        Tile g's data does not depend on the CTA count (2-D boxes sit at fixed
        coordinates), so the reference for the largest grid serves smaller ones.
        """
        mapping = p.variant is Variant.TENSOR_2D
        key = (mapping, p.tile_bytes, p.compute_iters, p.consumer_threads)
        if self._want_key != key or self._want is None or len(self._want) < p.n_tiles:
            n_tiles = max(p.n_tiles, self.max_tiles or 0)
            lay = _covering_layout(p, n_tiles, self.src_host.size)
            n_tiles = min(n_tiles, lay.height // lay.box_h * lay.grid_cols)
            tiles = reference.tiles_of(self.src_host, p.variant, n_tiles, p.tile_elems, lay)
            self._want = reference.expected_partials(tiles, p.compute_iters, p.consumer_threads)
            self._want_key = key
        return self._want[: p.n_tiles].reshape(p.ctas, p.tiles_per_cta, p.consumer_threads)

    def buffers(self, p: KernelParams) -> _Buffers:
        out = cuda.device_array((p.ctas, p.tiles_per_cta, p.consumer_threads), np.float32)
        stamps = cuda.device_array((p.ctas, p.tiles_per_cta, N_EVENTS), np.uint64)
        errs = cuda.device_array((p.ctas, len(ROLE_NAMES)), np.uint32)
        sms = cuda.device_array(p.ctas, np.uint32)
        words = np.zeros(TENSOR_MAP_WORDS, dtype=np.uint64)
        if p.variant is Variant.TENSOR_2D:
            addr = device_address(self.d_src, self.simulator)
            words = build_tensor_map(addr, p.layout, self.simulator)
        return _Buffers(out, stamps, errs, sms, cuda.to_device(words), self.expected(p),
                        np.full(out.shape, np.nan, dtype=np.float32),
                        np.full(stamps.shape, POISON_U64, dtype=np.uint64))

    def flush_l2(self, sm_count: int) -> None:
        """Read a buffer twice the L2 size so the next run starts from cold L2."""
        if self.d_flush is not None:
            kernels.read_stream[4 * sm_count, READ_BLOCK](self.d_flush, self.d_sink)

    def launch(self, p: KernelParams, b: _Buffers, timeout_ns: int, sm_count: int) -> LaunchResult:
        """Poison, flush, launch (timed), copy back and verify one run."""
        _poison(b)
        self.flush_l2(sm_count)
        kernel_ns, timing = self._timed_launch(p, b, timeout_ns)
        stamps, sms = b.stamps.copy_to_host(), b.sms.copy_to_host()
        _check_errs(p, b.errs.copy_to_host())
        partials = b.out.copy_to_host()
        _check_outputs(p, partials, b.want, stamps, sms)
        return LaunchResult(kernel_ns, timing, stamps, sms, partials)

    def _timed_launch(self, p: KernelParams, b: _Buffers, timeout_ns: int) -> tuple[float, str]:
        lay = p.layout
        args = (np.int64(p.variant.code), self.d_src, b.tmap, b.out, b.stamps, b.errs, b.sms,
                np.int64(p.tiles_per_cta), np.int64(p.stages), np.int64(p.tile_elems),
                np.int64(p.compute_iters), np.int64(lay.grid_cols), np.int64(lay.box_w),
                np.int64(lay.box_h), np.int64(int(p.instrumented)), np.uint64(timeout_ns))
        kernel = kernels.stream_tiles[p.ctas, p.threads_per_cta, 0, p.dynamic_smem]
        if self.simulator:
            t0 = time.perf_counter_ns()
            kernel(*args)
            return float(time.perf_counter_ns() - t0), "wall_clock"
        start = cuda.event(timing=True)  # type: ignore[call-arg, unused-ignore]
        end = cuda.event(timing=True)  # type: ignore[call-arg, unused-ignore]
        start.record()
        kernel(*args)
        end.record()
        end.synchronize()
        cuda.synchronize()  # surfaces asynchronous launch errors here, with this run's name
        return start.elapsed_time(end) * 1e6, "cuda_event"


def _covering_layout(p: KernelParams, n_tiles: int, n_src_elems: int) -> TensorLayout:
    """The 2-D layout of `n_tiles` tiles, cut to the whole row bands the source holds."""
    lay = tensor_layout(p.tile_bytes, n_tiles)
    bands = min(lay.height, n_src_elems // lay.width) // lay.box_h
    return tensor_layout(p.tile_bytes, bands * lay.grid_cols)


def _poison(b: _Buffers) -> None:
    """Outputs start as values the kernel never writes, so a skipped write is visible."""
    b.out.copy_to_device(b.poison_out)
    b.stamps.copy_to_device(b.poison_stamps)
    b.errs.copy_to_device(np.zeros(b.errs.shape, dtype=np.uint32))
    b.sms.copy_to_device(np.full(b.sms.shape, POISON_U32, dtype=np.uint32))


def _check_errs(p: KernelParams, errs: np.ndarray) -> None:
    bad = np.argwhere(errs != 0)
    if bad.size == 0:
        return
    where = [f"CTA {cta} {ROLE_NAMES[role]} waiting for tile {int(errs[cta, role]) - 1}"
             for cta, role in bad[:6]]
    raise KernelTimeoutError(f"{p.label()}: barrier waits timed out in {len(bad)} "
                             f"(CTA, role) pairs: " + "; ".join(where))


def _check_outputs(p: KernelParams, out: np.ndarray, want: np.ndarray, stamps: np.ndarray,
                   sms: np.ndarray) -> None:
    problems = reference.checksum_errors(out, want)
    if np.any(sms == POISON_U32):
        problems.append(f"{int(np.sum(sms == POISON_U32))} CTAs never wrote their SM id")
    if p.instrumented and np.any(stamps == POISON_U64):
        problems.append(f"{int(np.sum(stamps == POISON_U64))} timestamps never written")
    if problems:
        raise ResultCheckError(f"{p.label()}: " + "; ".join(problems))
