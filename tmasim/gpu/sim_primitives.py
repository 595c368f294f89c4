"""Pure-Python stand-ins for the PTX primitives, used under numba's CUDA simulator.

The simulator cannot link tma_helpers.cu or run inline PTX, so the kernels call
these instead (primitives.py picks one set at import). They work on the same
integer addresses as the real helpers -- the host address of the simulator's numpy
buffers -- so the kernel source is identical in both worlds, and they model the
hardware semantics the kernels rely on, strictly enough to catch bookkeeping bugs:

* an mbarrier is a 64-bit word in "shared memory" holding pending arrivals,
  expected arrivals, the transaction byte count and the phase bit; a phase
  completes when arrivals and bytes both reach zero; `try_wait.parity(p)` is true
  once the phase with parity p has completed (i.e. the current phase bit != p);
  too many arrivals or a byte-count underflow raise MbarrierError;
* a bulk or tensor copy is asynchronous: it lands (memmove + complete_tx) on a
  timer thread a little later, so a consumer that skips its wait reads stale data;
* addresses are bounds-checked against the array they came from.
"""

from __future__ import annotations

import ctypes
import threading
import time
from typing import Any

import numpy as np

COPY_DELAY_S = 0.002  # how long a simulated copy stays in flight
SPIN_SLEEP_S = 5e-5  # a failed try_wait yields the GIL this long (hardware suspends too)
FAKE_TMAP_MAGIC = 0x7A5D_7E50_2D2D_0001  # marks a simulator tensor map

_PENDING_BITS = 21
_MASK = (1 << _PENDING_BITS) - 1
_EXPECTED_SHIFT = _PENDING_BITS
_TX_SHIFT = 2 * _PENDING_BITS
_PHASE_SHIFT = 63
_lock = threading.Lock()  # makes each barrier operation atomic, like the hardware's


class MbarrierError(RuntimeError):
    """Misuse of an mbarrier that real hardware would turn into a hang or garbage."""


class SimPtr(int):
    """An integer address that keeps its array alive and knows where it ends."""

    owner: np.ndarray
    end: int

    def __new__(cls, value: int, owner: np.ndarray, end: int) -> SimPtr:
        ptr = super().__new__(cls, value)
        ptr.owner = owner
        ptr.end = end
        return ptr


def _ndarray(arr: Any) -> np.ndarray:
    """The numpy array behind a simulator array (shared, local or device)."""
    if isinstance(arr, np.ndarray):
        return arr
    inner = getattr(arr, "_item", arr)  # FakeWithinKernelCUDAArray -> FakeCUDAArray
    ary = getattr(inner, "_ary", None)
    if not isinstance(ary, np.ndarray):
        raise TypeError(f"addr_of: cannot find the buffer of {type(arr).__name__}")
    return ary


def addr_of(arr: Any, idx: int) -> SimPtr:
    """Address of arr[idx] (1-D contiguous arrays only, index bounds-checked)."""
    a = _ndarray(arr)
    if a.ndim != 1 or not a.flags.c_contiguous:
        raise TypeError("addr_of needs a 1-D contiguous array")
    if not 0 <= idx < a.size:
        raise IndexError(f"addr_of: index {idx} outside an array of {a.size} elements")
    base = a.ctypes.data
    return SimPtr(base + int(idx) * a.itemsize, a, base + a.nbytes)


def smem_addr(addr: int) -> int:
    """The simulator has one address space: the shared-window offset is the address."""
    return int(addr)


def globaltimer() -> int:
    """Nanoseconds from a clock that is monotonic across the simulator's threads."""
    return time.perf_counter_ns()


def clock64() -> int:
    """The simulator has no SM clock: nanoseconds stand in for cycles."""
    return time.perf_counter_ns()


def smid() -> int:
    """Pretend every CTA has its own SM (the simulator runs blocks one at a time)."""
    block = getattr(threading.current_thread(), "blockIdx", None)
    return int(block.x) if block is not None else 0


def _word(bar: int) -> ctypes.c_uint64:
    if bar % 8:
        raise MbarrierError(f"mbarrier at {bar:#x} is not 8-byte aligned")
    _check_room(bar, 8, "mbarrier")
    return ctypes.c_uint64.from_address(int(bar))


def _check_room(ptr: int, nbytes: int, what: str) -> None:
    end = getattr(ptr, "end", None)
    if end is not None and int(ptr) + nbytes > end:
        raise IndexError(f"{what}: {nbytes} B at {int(ptr):#x} run past the end of its array")


def _unpack(v: int) -> tuple[int, int, int, int]:
    return (v & _MASK, (v >> _EXPECTED_SHIFT) & _MASK, (v >> _TX_SHIFT) & _MASK,
            v >> _PHASE_SHIFT)


def _pack(pending: int, expected: int, tx: int, phase: int) -> int:
    return pending | (expected << _EXPECTED_SHIFT) | (tx << _TX_SHIFT) | (phase << _PHASE_SHIFT)


def _update(bar: int, arrivals: int, tx_delta: int) -> None:
    """Apply arrivals and a byte-count change atomically; flip the phase when done."""
    with _lock:
        w = _word(bar)
        pending, expected, tx, phase = _unpack(w.value)
        if expected == 0:
            raise MbarrierError(f"mbarrier at {bar:#x} used before mbarrier.init")
        if arrivals > pending:
            raise MbarrierError(f"mbarrier at {bar:#x}: more arrivals than expected "
                                f"({expected}) in phase {phase}")
        pending, tx = pending - arrivals, tx + tx_delta
        if not 0 <= tx <= _MASK:
            raise MbarrierError(f"mbarrier at {bar:#x}: tx-count out of range ({tx}); "
                                "complete_tx without a matching expect_tx?")
        if pending == 0 and tx == 0:
            pending, phase = expected, phase ^ 1
        w.value = _pack(pending, expected, tx, phase)


def mbar_init(bar: int, count: int) -> int:
    if not 1 <= count <= _MASK:
        raise MbarrierError(f"mbarrier.init: count {count} outside 1..{_MASK}")
    with _lock:
        _word(bar).value = _pack(int(count), int(count), 0, 0)
    return 0


def fence_barrier_init() -> int:
    return 0


def mbar_arrive(bar: int) -> int:
    _update(bar, 1, 0)
    return 0


def mbar_arrive_expect_tx(bar: int, tx_bytes: int) -> int:
    _update(bar, 1, int(tx_bytes))
    return 0


def complete_tx(bar: int, nbytes: int) -> int:
    """What the copy engine does as bytes land: lower the tx-count (may complete the phase)."""
    _update(bar, 0, -int(nbytes))
    return 0


def mbar_try_wait(bar: int, parity: int) -> int:
    """1 once the phase with this parity has completed (the current phase bit differs)."""
    with _lock:
        phase = _unpack(_word(bar).value)[3]
    if phase != (int(parity) & 1):
        return 1
    time.sleep(SPIN_SLEEP_S)
    return 0


def mbar_phase(bar: int) -> int:
    """Current phase bit (for tests)."""
    with _lock:
        return _unpack(_word(bar).value)[3]


def mbar_state(bar: int) -> tuple[int, int, int, int]:
    """(pending, expected, tx, phase) of a barrier word (for tests)."""
    with _lock:
        return _unpack(_word(bar).value)


def _land_later(keep: tuple[Any, ...], copy: Any, bar: int, nbytes: int) -> None:
    """Run `copy` and complete `nbytes` on `bar` after COPY_DELAY_S, off this thread."""

    def land() -> None:
        _ = keep  # hold the arrays alive until the copy has landed
        copy()
        complete_tx(bar, nbytes)

    timer = threading.Timer(COPY_DELAY_S, land)
    timer.daemon = True
    timer.start()


def bulk_g2s(dst: int, src: int, nbytes: int, bar: int) -> int:
    """cp.async.bulk global->shared completing `nbytes` on `bar` (alignment-checked)."""
    nbytes = int(nbytes)
    for name, ptr in (("dst", dst), ("src", src)):
        if int(ptr) % 16:
            raise ValueError(f"cp.async.bulk: {name} address {int(ptr):#x} not 16-byte aligned")
    if nbytes <= 0 or nbytes % 16:
        raise ValueError(f"cp.async.bulk: size {nbytes} is not a positive multiple of 16")
    _check_room(dst, nbytes, "cp.async.bulk dst")
    _check_room(src, nbytes, "cp.async.bulk src")
    _land_later((dst, src, bar), lambda: ctypes.memmove(int(dst), int(src), nbytes),
                bar, nbytes)
    return 0


def fence_tensormap(tmap: int) -> int:
    if ctypes.c_uint64.from_address(int(tmap)).value != FAKE_TMAP_MAGIC:
        raise ValueError("fence.proxy.tensormap: not a simulator tensor map "
                         "(build it with tensormap.encode_tensor_map_2d under the simulator)")
    return 0


def encode_fake_tensor_map(global_addr: int, width: int, height: int, row_stride_bytes: int,
                           box_w: int, box_h: int) -> np.ndarray:
    """A 16-word stand-in for CUtensorMap (float32, 2-D, no swizzle) for the simulator."""
    words = np.zeros(16, dtype=np.uint64)
    words[:7] = [FAKE_TMAP_MAGIC, global_addr, width, height, row_stride_bytes, box_w, box_h]
    return words


def _box_copy(dst: int, words: np.ndarray, c0: int, c1: int) -> None:
    """Copy the box at (c0, c1) row by row; elements outside the tensor read as zero."""
    _, gaddr, width, height, stride, box_w, box_h = (int(x) for x in words[:7])
    row_bytes = box_w * 4
    ctypes.memset(dst, 0, row_bytes * box_h)
    cols = max(0, min(box_w, width - c0))
    for r in range(box_h):
        if 0 <= c1 + r < height and cols > 0:
            ctypes.memmove(dst + r * row_bytes, gaddr + (c1 + r) * stride + c0 * 4, cols * 4)


def tensor_2d_g2s(dst: int, tmap: int, c0: int, c1: int, bar: int) -> int:
    """cp.async.bulk.tensor.2d: copy one box; the barrier counts the full box bytes."""
    words = np.ctypeslib.as_array((ctypes.c_uint64 * 16).from_address(int(tmap))).copy()
    if int(words[0]) != FAKE_TMAP_MAGIC:
        raise ValueError("cp.async.bulk.tensor: not a simulator tensor map")
    if int(dst) % 128:
        raise ValueError(f"cp.async.bulk.tensor: dst {int(dst):#x} not 128-byte aligned")
    nbytes = int(words[5]) * int(words[6]) * 4
    _check_room(dst, nbytes, "cp.async.bulk.tensor dst")
    _land_later((dst, bar), lambda: _box_copy(int(dst), words, int(c0), int(c1)), bar, nbytes)
    return 0


# ----------------------------------------------------------------------------- pipe probes

SIM_CLOCK_GHZ = 1.5  # the fake SM clock of the simulated wgmma records
SIM_MMA_CYCLES = 64  # fake cycles per m64n128k16 wgmma (4096 FLOP/clk/SM)
SIM_EXP_CYCLES_PER_THREAD = 8  # fake cycles per ex2 per thread of a warpgroup (16/clk/SM)
_ROLES = {0: (1, 0), 1: (2, 0), 2: (3, 0), 3: (1, 2), 4: (1, 1), 5: (3, 3)}


def f2fp_pack(a: float, b: float) -> np.float32:
    """cvt.rn.f16x2.f32: a rounded to fp16 in the upper half, b in the lower, as f32 bits."""
    hi = int(np.float32(a).astype(np.float16).view(np.uint16))
    lo = int(np.float32(b).astype(np.float16).view(np.uint16))
    return np.array([(hi << 16) | lo], dtype=np.uint32).view(np.float32)[0]


def ex2_neg(x: float) -> np.float32:
    """ex2.approx.ftz.f32 of -x (exact here; the hardware is within 2 ulp)."""
    return np.float32(np.exp2(-np.float64(x)))


def wgmma_fake_cycles(role: int, iters: int, batch: int, exps: int) -> int:
    """The simulator's stand-in timing of one warpgroup's role (see wgmma_helpers.cu)."""
    mma = iters * batch * SIM_MMA_CYCLES
    exp = iters * exps * SIM_EXP_CYCLES_PER_THREAD
    return {0: 0, 1: mma, 2: exp, 3: max(mma, exp)}[role]


def probe_wgmma(mode: int, iters: int, batch: int, exps: int, out_addr: int) -> int:
    """Stand-in for wgmma_helpers.cu's probe_wgmma: writes the records, with fake timings.

    The simulator cannot run wgmma, so the first thread of each warpgroup writes the
    record the real helper would, its cycles from wgmma_fake_cycles and its
    nanoseconds from SIM_CLOCK_GHZ: the host arithmetic is then checked on known values.
    """
    thread = threading.current_thread()
    tid, block = int(thread.threadIdx.x), int(thread.blockIdx.x)  # type: ignore[attr-defined]
    if tid % 128:
        return 0
    wg = tid // 128
    role = _ROLES.get(int(mode), (0, 0))[wg]
    cycles = wgmma_fake_cycles(role, int(iters), int(batch), int(exps))
    start_c, start_t = 1_000_000 * (block + 1), 5_000_000 * (block + 1)
    rec = [start_c, start_c + cycles, start_t, start_t + round(cycles / SIM_CLOCK_GHZ),
           block, role, 0, 0]
    ptr = int(out_addr) + 8 * 8 * (2 * block + wg)
    _check_room(out_addr, 8 * 8 * (2 * block + wg + 1), "probe_wgmma record")
    ctypes.memmove(ptr, (ctypes.c_uint64 * 8)(*rec), 8 * 8)
    return 0
