"""Kernels of the instruction-pipe probes: fp32->fp16 packing, exp2, FFMA, wgmma.

Each kernel keeps several independent dependency chains per thread, written out
by hand (a register array indexed in a loop could land in local memory), so
that the pipe under test, not an instruction's latency, binds. Every block's
thread 0 writes one record after a barrier at each end of the timed loop:

    rec[block] = [clock64 start, clock64 end, globaltimer start, globaltimer end, smid]

The chains' final values go to `vals[thread, chain]`, which keeps them live and
lets the host check them against a numpy reference (pipe_probes.py).

Modes of `convert_probe` (per thread per loop step):
    MODE_PACK  8 cvt.rn.f16x2.f32 (SASS F2FP.F16.F32.PACK_AB), 8 chains
    MODE_EXP   8 ex2.approx.ftz.f32 (SASS MUFU.EX2), 8 chains
    MODE_MIXED 4 packs and 8 exps: FA3's ratio (one pack per two probabilities)

The wgmma probe is a CUDA C++ helper (wgmma_helpers.cu) behind `probe_wgmma`:
numba cannot emit wgmma. primitives.py binds every name below to the PTX
intrinsics on a GPU and to Python stand-ins under the simulator.
"""

from __future__ import annotations

from numba import cuda, float32, uint64

from tmasim.gpu.primitives import (
    addr_of,
    clock64,
    ex2_neg,
    f2fp_pack,
    globaltimer,
    probe_wgmma,
    smid,
)

MODE_PACK, MODE_EXP, MODE_MIXED = 0, 1, 2
CHAINS = 8
REC_WORDS = 5
# per thread per loop step: (packs, exps)
CONVERT_OPS = {MODE_PACK: (8, 0), MODE_EXP: (0, 8), MODE_MIXED: (4, 8)}
LOAD_FMAS, LOAD_EXPS = 8, 2  # per thread per step of fma_exp_load
FMA_A, FMA_B = float32(0.999), float32(0.001)


@cuda.jit
def convert_probe(rec, vals, y, mode, iters):
    """fp32->fp16x2 packs and/or exp2s in 8 chains per thread (see the module docstring)."""
    tid = cuda.grid(1)
    b = cuda.blockIdx.x
    base = float32(0.5) + float32(tid % 64) * float32(0.015625)
    x0, x1, x2, x3 = base, base + float32(0.125), base + float32(0.25), base + float32(0.375)
    x4, x5, x6, x7 = base + float32(0.5), base + float32(0.625), base + float32(0.75), base + float32(0.875)
    e0, e1, e2, e3 = base, base + float32(0.0625), base + float32(0.125), base + float32(0.1875)
    e4, e5, e6, e7 = base + float32(0.25), base + float32(0.3125), base + float32(0.375), base + float32(0.4375)
    yy = y[0]
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        rec[b, 0] = clock64()
        rec[b, 2] = globaltimer()
    if mode == MODE_PACK:
        for _ in range(iters):
            x0 = f2fp_pack(x0, yy)
            x1 = f2fp_pack(x1, yy)
            x2 = f2fp_pack(x2, yy)
            x3 = f2fp_pack(x3, yy)
            x4 = f2fp_pack(x4, yy)
            x5 = f2fp_pack(x5, yy)
            x6 = f2fp_pack(x6, yy)
            x7 = f2fp_pack(x7, yy)
    elif mode == MODE_EXP:
        for _ in range(iters):
            e0 = ex2_neg(e0)
            e1 = ex2_neg(e1)
            e2 = ex2_neg(e2)
            e3 = ex2_neg(e3)
            e4 = ex2_neg(e4)
            e5 = ex2_neg(e5)
            e6 = ex2_neg(e6)
            e7 = ex2_neg(e7)
    else:
        for _ in range(iters):
            e0 = ex2_neg(e0)
            e1 = ex2_neg(e1)
            x0 = f2fp_pack(x0, yy)
            e2 = ex2_neg(e2)
            e3 = ex2_neg(e3)
            x1 = f2fp_pack(x1, yy)
            e4 = ex2_neg(e4)
            e5 = ex2_neg(e5)
            x2 = f2fp_pack(x2, yy)
            e6 = ex2_neg(e6)
            e7 = ex2_neg(e7)
            x3 = f2fp_pack(x3, yy)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        rec[b, 1] = clock64()
        rec[b, 3] = globaltimer()
        rec[b, 4] = uint64(smid())
    vals[tid, 0] = x0
    vals[tid, 1] = x1
    vals[tid, 2] = x2
    vals[tid, 3] = x3
    vals[tid, 4] = x4
    vals[tid, 5] = x5
    vals[tid, 6] = x6
    vals[tid, 7] = x7
    vals[tid, 8] = e0
    vals[tid, 9] = e1
    vals[tid, 10] = e2
    vals[tid, 11] = e3
    vals[tid, 12] = e4
    vals[tid, 13] = e5
    vals[tid, 14] = e6
    vals[tid, 15] = e7


@cuda.jit
def fma_exp_load(rec, vals, iters):
    """A chip-filling FFMA + MUFU.EX2 load (8 FFMA and 2 EX2 chains per thread)."""
    tid = cuda.grid(1)
    b = cuda.blockIdx.x
    base = float32(0.5) + float32(tid % 64) * float32(0.015625)
    f0, f1, f2, f3 = base, base + float32(0.1), base + float32(0.2), base + float32(0.3)
    f4, f5, f6, f7 = base + float32(0.4), base + float32(0.5), base + float32(0.6), base + float32(0.7)
    e0, e1 = base, base + float32(0.25)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        rec[b, 0] = clock64()
        rec[b, 2] = globaltimer()
    for _ in range(iters):
        f0 = f0 * FMA_A + FMA_B
        f1 = f1 * FMA_A + FMA_B
        f2 = f2 * FMA_A + FMA_B
        f3 = f3 * FMA_A + FMA_B
        e0 = ex2_neg(e0)
        f4 = f4 * FMA_A + FMA_B
        f5 = f5 * FMA_A + FMA_B
        f6 = f6 * FMA_A + FMA_B
        f7 = f7 * FMA_A + FMA_B
        e1 = ex2_neg(e1)
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        rec[b, 1] = clock64()
        rec[b, 3] = globaltimer()
        rec[b, 4] = uint64(smid())
    vals[tid, 0] = f0 + f1 + f2 + f3 + f4 + f5 + f6 + f7
    vals[tid, 1] = e0 + e1


@cuda.jit
def wgmma_probe(out, mode, iters, batch, exps):
    """Two warpgroups per CTA run wgmma and/or exp2 loops (wgmma_helpers.cu's modes).

    out is a flat uint64 array of 8 words per warpgroup: clock64 start/end,
    globaltimer start/end, smid, role, checksum bits, 0.
    """
    probe_wgmma(mode, iters, batch, exps, addr_of(out, 0))
