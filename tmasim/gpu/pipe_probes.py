"""Instruction-pipe probes for the attention softmax: F2FP, the clock under load, wgmma + exp2.

Three questions that only a GPU answers (shared/calibration/hopper/attention-softmax.md §5):

1. `conversion_probe`: how many fp32 pairs a Hopper SM packs into fp16x2 per clock
   (SASS F2FP.F16.F32.PACK_AB, from PTX cvt.rn.f16x2.f32), alone and interleaved
   with MUFU.EX2 in FA3's ratio (one pack per two exponentials), and whether the two
   share a pipe: the *shared-pipe index* is 0 when the mixed loop takes as long as
   its slower half alone (separate pipes) and 1 when it takes the sum (one pipe).
2. `clock_under_load`: the SM clock (clock64 cycles over globaltimer ns, per SM)
   while every SM runs FA3's tensor + exponential mix (wgmma with MUFU.EX2 in both
   warpgroups, random fp16 operands), then under an FFMA + MUFU.EX2 load without
   tensor cores (lower power: an upper bound for the clock).
3. `wgmma_overlap`: wgmma m64n128k16 (A in registers, as FA3's P.V) throughput alone,
   with MUFU.EX2 in the same warpgroup (issued between the wgmma batch and its wait),
   and with MUFU.EX2 in the other warpgroup of the CTA; the same index says whether
   the exponentials cost tensor time.

Rates are per SM per clock: operations counted per SM (blocks grouped by %smid) over
that SM's clock64 span. The arithmetic (`per_sm`, `shared_pipe_index`, `summarize_*`)
is pure numpy and runs on fake records in the tests; the kernels run under the CUDA
simulator with Python stand-ins (the wgmma stand-in writes fake timings).
"""

from __future__ import annotations

import re
import time
from typing import Any

import numpy as np

WGMMA_FLOP = 2 * 64 * 128 * 16  # one m64n128k16
WG_THREADS = 128
MODE_NAMES = {0: "mma_alone", 1: "exp_alone", 2: "same_warpgroup", 3: "other_warpgroup",
              4: "mma_two_warpgroups", 5: "mma_exp_two_warpgroups"}
# (role of warpgroup 0, role of warpgroup 1); roles: 0 idle, 1 wgmma, 2 exp2, 3 both
MODE_ROLES = {0: (1, 0), 1: (2, 0), 2: (3, 0), 3: (1, 2), 4: (1, 1), 5: (3, 3)}
SASS_OPS = ("F2FP.F16.F32.PACK_AB", "MUFU.EX2", "HGMMA", "FFMA")


# ----------------------------------------------------------------------------- arithmetic


def stats(values: Any) -> dict[str, float | None]:
    """min, median and max of a sequence (None when empty)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if not v.size:
        return {"min": None, "median": None, "max": None}
    return {"min": float(v.min()), "median": float(np.median(v)), "max": float(v.max())}


def per_sm(rec: Any, ops: Any) -> dict[str, Any]:
    """Per-SM rates from block records [c0, c1, t0, t1, smid, ...] and each block's ops.

    `ops` is a dict name -> operations per record (a number or one per record). Per
    SM: cycles = last end - first start over its records, ns likewise; rate = ops
    on that SM / cycles; clock = cycles / ns. Records with end <= start are refused.
    """
    r = np.asarray(rec, dtype=np.int64)
    if r.ndim != 2 or r.shape[1] < 5 or not len(r):
        raise ValueError(f"records: shape {r.shape}, rule: one row of >= 5 words per block")
    if np.any(r[:, 1] <= r[:, 0]) or np.any(r[:, 3] < r[:, 2]):
        bad = int(np.flatnonzero((r[:, 1] <= r[:, 0]) | (r[:, 3] < r[:, 2]))[0])
        raise ValueError(f"records[{bad}]: {r[bad, :4].tolist()}, rule: end after start")
    counts = {k: np.broadcast_to(np.asarray(v, dtype=np.float64), (len(r),)) for k, v in ops.items()}
    sms = np.unique(r[:, 4])
    cycles, ns = np.empty(sms.size), np.empty(sms.size)
    rates: dict[str, np.ndarray] = {k: np.empty(sms.size) for k in counts}
    for i, sm in enumerate(sms):
        sel = r[:, 4] == sm
        cycles[i] = r[sel, 1].max() - r[sel, 0].min()
        ns[i] = r[sel, 3].max() - r[sel, 2].min()
        for k, c in counts.items():
            rates[k][i] = c[sel].sum() / cycles[i]
    mhz = np.where(ns > 0, 1e3 * cycles / np.where(ns > 0, ns, 1), np.nan)
    return {"sms": int(sms.size), "cycles": stats(cycles), "mhz": stats(mhz),
            "duration_ns": int(r[:, 3].max() - r[:, 2].min()),
            "per_clk_per_sm": {k: stats(v) for k, v in rates.items()}}


def shared_pipe_index(t_a: float, t_b: float, t_both: float) -> float:
    """0 when two loads overlap fully (t_both = max), 1 when they serialise (t_both = sum)."""
    if min(t_a, t_b) <= 0:
        raise ValueError(f"times ({t_a}, {t_b}), rule: both alone times > 0")
    return (t_both - max(t_a, t_b)) / min(t_a, t_b)


def _median(d: dict[str, Any], name: str) -> float:
    value = d["per_clk_per_sm"][name]["median"]
    return float("nan") if value is None else float(value)


def summarize_conversions(runs: dict[str, dict[str, Any]], ops: dict[str, tuple[int, int]],
                          threads_per_sm: float) -> dict[str, Any]:
    """Rates and the shared-pipe index from the three convert_probe runs (per_sm results).

    ops[mode] = (packs, exps) per thread per loop step *times steps*; threads_per_sm
    the threads resident on one SM: the mixed run's work per SM is then known, and
    its cycles are compared with that work at the alone rates.
    """
    pack = _median(runs["pack"], "packs")
    exp = _median(runs["exp"], "exps")
    n_pack, n_exp = (threads_per_sm * n for n in ops["mixed"])
    t_pack, t_exp = n_pack / pack, n_exp / exp
    t_mixed = float(runs["mixed"]["cycles"]["median"])
    return {"pack_per_clk_per_sm": pack, "exp_per_clk_per_sm": exp,
            "mixed_pack_per_clk_per_sm": _median(runs["mixed"], "packs"),
            "mixed_exp_per_clk_per_sm": _median(runs["mixed"], "exps"),
            "mixed_cycles": t_mixed, "separate_pipes_cycles": max(t_pack, t_exp),
            "one_pipe_cycles": t_pack + t_exp,
            "shared_pipe_index": shared_pipe_index(t_pack, t_exp, t_mixed)}


def wgmma_records(flat: Any, mode: int, iters: int, batch: int, exps: int) -> dict[str, Any]:
    """Per-SM figures of one wgmma_probe run: flat holds 8 words per warpgroup."""
    rec = np.asarray(flat, dtype=np.uint64).reshape(-1, 8).astype(np.int64)
    want = np.tile(np.asarray(MODE_ROLES[mode]), len(rec) // 2)
    if not np.array_equal(rec[:, 5], want):
        raise ValueError(f"wgmma records: roles {rec[:8, 5].tolist()}..., rule: mode {mode} "
                         f"gives {MODE_ROLES[mode]} per CTA")
    active = rec[rec[:, 5] != 0]
    mma = np.isin(active[:, 5], (1, 3)) * float(iters * batch * WGMMA_FLOP)
    exp = np.isin(active[:, 5], (2, 3)) * float(iters * exps * WG_THREADS)
    out = per_sm(active, {"flop": mma, "exps": exp})
    out.update(mode=MODE_NAMES[mode], iters=iters, batch=batch, exps=exps)
    if mma.any():  # the wgmma warpgroups over their own spans (another may run longer)
        own = per_sm(active[mma > 0], {"flop": mma[mma > 0]})
        out["mma_own_flop_per_clk_per_sm"] = own["per_clk_per_sm"]["flop"]
    return out


def summarize_wgmma(runs: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Tensor and exp2 rates per mode; the shared-pipe index of each overlap mode."""
    t_mma = float(runs[0]["cycles"]["median"])
    t_exp = float(runs[1]["cycles"]["median"])
    flop_alone = _median(runs[0], "flop")
    out: dict[str, Any] = {"flop_per_clk_per_sm": {}, "exp_per_clk_per_sm": {}}
    for mode, r in runs.items():
        out["flop_per_clk_per_sm"][MODE_NAMES[mode]] = _median(r, "flop")
        out["exp_per_clk_per_sm"][MODE_NAMES[mode]] = _median(r, "exps")
    for mode in (2, 3):
        if mode in runs:
            name = MODE_NAMES[mode]
            out[f"{name}_index"] = shared_pipe_index(
                t_mma, t_exp, float(runs[mode]["cycles"]["median"]))
            own = runs[mode]["mma_own_flop_per_clk_per_sm"]["median"]
            out[f"{name}_tensor_fraction"] = float(own) / flop_alone
    return out


def sass_counts(kernel: Any) -> dict[str, int] | str:
    """How many of the probed SASS opcodes each compiled kernel holds (needs nvdisasm)."""
    try:
        sass = kernel.inspect_sass()
    except Exception as exc:  # no nvdisasm, or nothing compiled
        return f"unavailable: {type(exc).__name__}: {exc}"[:200]
    text = "\n".join(sass.values()) if isinstance(sass, dict) else str(sass)
    return {op: len(re.findall(re.escape(op), text)) for op in SASS_OPS}


# ----------------------------------------------------------------------------- references


def pack_ref(a: np.ndarray, b: float) -> np.ndarray:
    """cvt.rn.f16x2.f32 on arrays: a in the upper half, b in the lower, as float32 bits."""
    hi = a.astype(np.float32).astype(np.float16).view(np.uint16).astype(np.uint32)
    lo = np.uint32(np.float32(b).astype(np.float16).view(np.uint16))
    return ((hi << np.uint32(16)) | lo).view(np.float32)


def convert_reference(nthreads: int, mode: int, iters: int, y: float) -> np.ndarray:
    """The 16 chain values convert_probe leaves per thread (see pipe_kernels.py)."""
    from tmasim.gpu.pipe_kernels import MODE_EXP, MODE_MIXED, MODE_PACK

    tid = np.arange(nthreads)
    base = np.float32(0.5) + (tid % 64).astype(np.float32) * np.float32(0.015625)
    vals = np.empty((nthreads, 16), dtype=np.float32)
    for c in range(8):
        vals[:, c] = base + np.float32(0.125 * c)
        vals[:, 8 + c] = base + np.float32(0.0625 * c)
    packs = {MODE_PACK: range(8), MODE_EXP: range(0), MODE_MIXED: range(4)}[mode]
    exps = range(8) if mode in (MODE_EXP, MODE_MIXED) else range(0)
    for _ in range(iters):
        for c in packs:
            vals[:, c] = pack_ref(vals[:, c], y)
        for c in exps:
            vals[:, 8 + c] = np.exp2(-vals[:, 8 + c].astype(np.float64)).astype(np.float32)
    return vals


# ----------------------------------------------------------------------------- GPU runs


def _sizes(sms: int, simulate: bool) -> tuple[int, int]:
    """(blocks, threads per block): 2 blocks of 512 threads per SM; tiny on the simulator."""
    return (2, 32) if simulate else (2 * sms, 512)


def conversion_probe(sms: int, simulate: bool = False, iters: int = 8192) -> dict[str, Any]:
    """F2FP.PACK_AB and MUFU.EX2 per clock per SM, alone and mixed (about a second on an H100)."""
    from numba import cuda

    from tmasim.gpu import pipe_kernels as pk

    blocks, threads = _sizes(sms, simulate)
    iters = 3 if simulate else iters
    y = cuda.to_device(np.array([0.75], dtype=np.float32))
    out: dict[str, Any] = {"blocks": blocks, "threads": threads, "iters": iters, "runs": {}}
    modes = {"pack": pk.MODE_PACK, "exp": pk.MODE_EXP, "mixed": pk.MODE_MIXED}
    for name, mode in modes.items():
        rec = cuda.to_device(np.zeros((blocks, pk.REC_WORDS), dtype=np.uint64))
        vals = cuda.to_device(np.full((blocks * threads, 16), np.nan, dtype=np.float32))
        check_iters = 3
        pk.convert_probe[blocks, threads](rec, vals, y, np.int32(mode), np.int32(check_iters))
        got = vals.copy_to_host()
        want = convert_reference(blocks * threads, mode, check_iters, 0.75)
        n_pack = 8 if mode == pk.MODE_PACK else (4 if mode == pk.MODE_MIXED else 0)
        if not np.array_equal(got[:, :8].view(np.uint32), want[:, :8].view(np.uint32)):
            raise RuntimeError(f"{name}: packed values differ from cvt.rn.f16x2.f32's "
                               f"(first chains {n_pack}): {got[0, :4]} vs {want[0, :4]}")
        if not np.allclose(got[:, 8:], want[:, 8:], rtol=1e-5, atol=0):
            raise RuntimeError(f"{name}: exp2 chains off by more than 1e-5: "
                               f"{got[0, 8:10]} vs {want[0, 8:10]}")
        pk.convert_probe[blocks, threads](rec, vals, y, np.int32(mode), np.int32(iters))
        cuda.synchronize()
        packs, exps = pk.CONVERT_OPS[mode]
        out["runs"][name] = per_sm(rec.copy_to_host(), {"packs": threads * iters * packs,
                                                         "exps": threads * iters * exps})
    ops = {k: (iters * pk.CONVERT_OPS[m][0], iters * pk.CONVERT_OPS[m][1]) for k, m in modes.items()}
    threads_per_sm = blocks * threads / out["runs"]["mixed"]["sms"]
    out.update(summarize_conversions(out["runs"], ops, threads_per_sm))
    out["sass"] = "simulator" if simulate else sass_counts(pk.convert_probe)
    out["expected_sass"] = "F2FP.F16.F32.PACK_AB Rd, Ra, Rb (packs); MUFU.EX2 Rd, -Ra (exps)"
    return out


def _load_segments(launch: Any, rec_shape: tuple[int, int], ops_per_rec: dict[str, float],
                   segments: int, seconds: float, parse: Any, probe_iters: int) -> dict[str, Any]:
    """Run a load in equal segments of about `seconds` each; per-SM clock per segment.

    A first launch of `probe_iters` iterations compiles, warms up and sizes the segments.
    """
    from numba import cuda

    rec = cuda.to_device(np.zeros(rec_shape, dtype=np.uint64))
    launch(rec, probe_iters)  # compile, warm up, and time one short run
    cuda.synchronize()
    first = parse(rec.copy_to_host(), probe_iters)
    ns_per_iter = max(first["duration_ns"], 1) / probe_iters
    iters = int(min(max(seconds * 1e9 / ns_per_iter, 1), 2**31 - 1))
    segs, t_start = [], time.monotonic()
    for _ in range(segments):
        launch(rec, iters)
        cuda.synchronize()
        segs.append(parse(rec.copy_to_host(), iters))
    mhz = [s["mhz"]["median"] for s in segs]
    return {"iters_per_segment": iters, "segments": segs, "segment_median_mhz": mhz,
            "mhz": {"min": min(s["mhz"]["min"] for s in segs),
                    "median": float(np.median([s["mhz"]["median"] for s in segs])),
                    "max": max(s["mhz"]["max"] for s in segs)},
            "sms": segs[-1]["sms"], "load_s": sum(s["duration_ns"] for s in segs) / 1e9,
            "wall_s": round(time.monotonic() - t_start, 2), "ops": ops_per_rec}


def clock_under_load(sms: int, simulate: bool = False, segments: int = 5,
                     seconds: float = 1.0) -> dict[str, Any]:
    """SM MHz (clock64 / globaltimer, per SM) under FA3's wgmma + exp2 mix, then FFMA + exp2."""
    from tmasim.gpu import pipe_kernels as pk

    probe_iters = 256  # about 0.1 ms of either load: long enough to size 1 s segments
    if simulate:
        segments, seconds, probe_iters = 2, 1e-4, 4
    out: dict[str, Any] = {}
    batch, exps = 8, 64
    ctas = 2 if simulate else sms

    def wg_launch(rec: Any, iters: int) -> None:
        pk.wgmma_probe[ctas, 256](rec.reshape(-1), np.int32(5), np.int32(iters), np.int32(batch),
                                  np.int32(exps))

    def wg_parse(rec: Any, iters: int) -> dict[str, Any]:
        return wgmma_records(rec.reshape(-1), 5, iters, batch, exps)

    try:
        out["wgmma_exp"] = _load_segments(wg_launch, (2 * ctas, 8), {}, segments, seconds,
                                          wg_parse, probe_iters)
        out["wgmma_exp"]["load"] = ("wgmma m64n128k16 (A registers, B shared, random fp16) with "
                                    f"{exps} MUFU.EX2 per thread per {batch} wgmma, both "
                                    "warpgroups of one CTA per SM")
    except Exception as exc:  # the wgmma helper needs sm_90a; keep the FFMA load
        out["wgmma_exp"] = {"error": f"{type(exc).__name__}: {exc}"[:400]}
    blocks, threads = (2, 32) if simulate else (4 * sms, 512)
    vals = None

    def fma_launch(rec: Any, iters: int) -> None:
        nonlocal vals
        from numba import cuda

        if vals is None:
            vals = cuda.device_array((blocks * threads, 2), dtype=np.float32)
        pk.fma_exp_load[blocks, threads](rec, vals, np.int64(iters))

    def fma_parse(rec: Any, iters: int) -> dict[str, Any]:
        return per_sm(rec, {"ffma": threads * iters * pk.LOAD_FMAS,
                            "exps": threads * iters * pk.LOAD_EXPS})

    out["ffma_exp"] = _load_segments(fma_launch, (blocks, pk.REC_WORDS), {}, max(segments - 2, 1),
                                     seconds, fma_parse, probe_iters)
    out["ffma_exp"]["load"] = (f"{pk.LOAD_FMAS} FFMA + {pk.LOAD_EXPS} MUFU.EX2 chains per thread, "
                               f"{blocks} blocks of {threads} threads (no tensor cores)")
    return out


def wgmma_overlap(sms: int, simulate: bool = False, iters: int = 2048, batch: int = 8,
                  exps: int = 64) -> dict[str, Any]:
    """wgmma alone, with exp2 in the same warpgroup, in the other, and two wgmma warpgroups."""
    from numba import cuda

    from tmasim.gpu import pipe_kernels as pk

    ctas = 2 if simulate else sms
    iters = 2 if simulate else iters
    flat = cuda.to_device(np.zeros(2 * ctas * 8, dtype=np.uint64))
    i32 = np.int32
    pk.wgmma_probe[ctas, 256](flat, i32(0), i32(1), i32(batch), i32(exps))  # compile, warm up
    runs = {}
    for mode in (0, 1, 2, 3, 4):
        pk.wgmma_probe[ctas, 256](flat, i32(mode), i32(iters), i32(batch), i32(exps))
        cuda.synchronize()
        runs[mode] = wgmma_records(flat.copy_to_host(), mode, iters, batch, exps)
    out: dict[str, Any] = {"ctas": ctas, "iters": iters, "batch": batch, "exps": exps,
                           "runs": {MODE_NAMES[m]: r for m, r in runs.items()}}
    out.update(summarize_wgmma(runs))
    out["sass"] = "simulator" if simulate else sass_counts(pk.wgmma_probe)
    out["measures"] = ("wgmma.mma_async m64n128k16.f32.f16.f16, A in registers (FA3's P.V); "
                       "timings on the simulator are the stand-in's, not a measurement")
    return out
