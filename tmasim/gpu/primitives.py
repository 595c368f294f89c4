"""One set of primitive names for the kernels, bound at import to GPU or simulator code.

The kernels in kernels.py call `mbar_init`, `bulk_g2s`, `globaltimer`, ... without
knowing which implementation they get: under numba's CUDA simulator
(`NUMBA_ENABLE_CUDASIM=1`, read when numba is first imported) the pure-Python
stand-ins of sim_primitives.py, otherwise the linked PTX helpers of
device_primitives.py. This keeps a single kernel source whose logic is tested on
a CPU and whose instructions are compiled for sm_90.
"""

from __future__ import annotations

import importlib

from tmasim.gpu.backend import simulator_enabled

SIMULATOR: bool = simulator_enabled()
_impl = importlib.import_module(
    "tmasim.gpu.sim_primitives" if SIMULATOR else "tmasim.gpu.device_primitives")

addr_of = _impl.addr_of
ex2_neg = _impl.ex2_neg
f2fp_pack = _impl.f2fp_pack
probe_wgmma = _impl.probe_wgmma
bulk_g2s = _impl.bulk_g2s
clock64 = _impl.clock64
fence_barrier_init = _impl.fence_barrier_init
fence_tensormap = _impl.fence_tensormap
globaltimer = _impl.globaltimer
mbar_arrive = _impl.mbar_arrive
mbar_arrive_expect_tx = _impl.mbar_arrive_expect_tx
mbar_init = _impl.mbar_init
mbar_try_wait = _impl.mbar_try_wait
smem_addr = _impl.smem_addr
smid = _impl.smid
tensor_2d_g2s = _impl.tensor_2d_g2s

__all__ = [
    "SIMULATOR",
    "addr_of",
    "ex2_neg",
    "f2fp_pack",
    "probe_wgmma",
    "bulk_g2s",
    "clock64",
    "fence_barrier_init",
    "fence_tensormap",
    "globaltimer",
    "mbar_arrive",
    "mbar_arrive_expect_tx",
    "mbar_init",
    "mbar_try_wait",
    "smem_addr",
    "smid",
    "tensor_2d_g2s",
]
