"""Where the kernels will run: the CUDA simulator, a real GPU, or nowhere.

Kept apart from the kernels so that asking costs no compilation, and so that the
subtle case is handled once: under the simulator `cuda.is_available()` is True,
yet there is no GPU.
"""

from __future__ import annotations

import importlib.util


def numba_cuda_installed() -> bool:
    """True when numba with its CUDA target can be imported (does not import it)."""
    return importlib.util.find_spec("numba") is not None and _has_numba_cuda()


def _has_numba_cuda() -> bool:
    try:
        return importlib.util.find_spec("numba.cuda") is not None
    except ModuleNotFoundError:
        return False


def simulator_enabled() -> bool:
    """True when numba's CUDA simulator is active (NUMBA_ENABLE_CUDASIM=1 at import)."""
    try:
        config = importlib.import_module("numba.cuda.config")
    except ImportError:  # older numba-cuda keeps the flag in numba's core config
        config = importlib.import_module("numba.core.config")
    return bool(config.ENABLE_CUDASIM)


def real_gpu_available() -> bool:
    """True only with a real CUDA device (never under the simulator)."""
    if not numba_cuda_installed() or simulator_enabled():
        return False
    from numba import cuda

    try:
        return bool(cuda.is_available())
    except Exception:  # a broken driver install reads as "no GPU", not a crash
        return False
