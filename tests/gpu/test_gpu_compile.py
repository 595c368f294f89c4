"""Compile-only check: the kernels and the PTX helpers build for sm_90 without a GPU.

Needs numba-cuda's NVVM plus NVRTC and nvJitLink (the `numba-cuda[cu13]` extra);
skipped cleanly where they are missing and under the simulator. The kernel is
compiled to PTX by numba, tma_helpers.cu by NVRTC, and both are linked by
nvJitLink into an sm_90 cubin: ptxas sees every inline-asm instruction.
"""

from __future__ import annotations

import types as pytypes
from typing import Any

import pytest

pytest.importorskip("numba")

from tmasim.gpu.backend import simulator_enabled  # noqa: E402

if simulator_enabled():
    pytest.skip("compile-only checks need numba's real CUDA target", allow_module_level=True)

nvrtc = pytest.importorskip("cuda.bindings.nvrtc")
nvjitlink = pytest.importorskip("cuda.bindings.nvjitlink")

CC = (9, 0)


def _toolchain_or_skip() -> None:
    from numba.cuda.cudadrv import nvvm

    try:
        nvjitlink.version()
        nvrtc.nvrtcVersion()
        ok = nvvm.is_available()
    except Exception as exc:  # library not found
        pytest.skip(f"CUDA compiler libraries not installed: {exc}")
    if not ok:
        pytest.skip("NVVM not installed")


@pytest.fixture
def no_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """numba compiles device functions for the *current* device; pretend it is sm_90."""
    import numba.cuda.dispatcher as dispatcher

    fake = pytypes.SimpleNamespace(compute_capability=CC)
    monkeypatch.setattr(dispatcher, "get_current_device", lambda: fake, raising=False)


def helpers_ptx() -> str:
    from tmasim.gpu.device_primitives import HELPERS_CU

    with open(HELPERS_CU, "rb") as f:
        src = f.read()
    err, prog = nvrtc.nvrtcCreateProgram(src, b"tma_helpers.cu", 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    opts = [b"--gpu-architecture=compute_90", b"-rdc=true"]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, log.decode()
    _, size = nvrtc.nvrtcGetPTXSize(prog)
    ptx = b" " * size
    nvrtc.nvrtcGetPTX(prog, ptx)
    return ptx.decode().rstrip("\x00 ")


def link_sm90(*ptx: str) -> tuple[int, str]:
    handle = nvjitlink.create(2, ["-arch=sm_90", "-verbose"])
    for i, code in enumerate(ptx):
        data = code.encode()
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), f"m{i}")
    try:
        nvjitlink.complete(handle)
    except Exception:
        size = nvjitlink.get_error_log_size(handle)
        log = bytearray(size)
        nvjitlink.get_error_log(handle, log)
        raise AssertionError(log.decode()) from None
    size = nvjitlink.get_info_log_size(handle)
    info = bytearray(size)
    nvjitlink.get_info_log(handle, info)
    return nvjitlink.get_linked_cubin_size(handle), info.decode()


def kernel_signature() -> tuple[Any, ...]:
    from numba import float32, int64, uint32, uint64

    i64 = int64
    return (i64, float32[::1], uint64[::1], float32[:, :, ::1], uint64[:, :, ::1],
            uint32[:, ::1], uint32[::1], i64, i64, i64, i64, i64, i64, i64, i64, uint64)


def test_helpers_hold_the_hopper_instructions() -> None:
    _toolchain_or_skip()
    ptx = helpers_ptx()
    for instr in ("mbarrier.init.shared::cta.b64", "fence.mbarrier_init.release.cluster",
                  "mbarrier.arrive.expect_tx.shared::cta.b64", "mbarrier.arrive.shared::cta.b64",
                  "mbarrier.try_wait.parity.shared::cta.b64",
                  "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes",
                  "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx"
                  "::bytes", "fence.proxy.tensormap::generic.acquire.gpu"):
        assert instr in ptx, instr


def test_stream_kernel_links_into_an_sm90_cubin(no_device: None) -> None:
    _toolchain_or_skip()
    from numba import cuda

    from tmasim.gpu import kernels

    ptx, _ = cuda.compile_ptx(kernels.stream_tiles.py_func, kernel_signature(), cc=CC)
    assert "%globaltimer" in ptx and "%smid" in ptx
    for helper in ("tma_mbar_init", "tma_mbar_try_wait", "tma_mbar_arrive_expect_tx",
                   "tma_bulk_g2s", "tma_tensor_2d_g2s", "tma_fence_tensormap"):
        assert helper in ptx, helper
    assert "call.uni" in ptx
    assert ".shared .align 8 .b8" in ptx  # the mbarrier words are 8-byte aligned
    size, info = link_sm90(ptx, helpers_ptx())
    assert size > 0
    assert "stream_tiles" in info


def test_probe_kernels_compile_without_helpers(no_device: None) -> None:
    _toolchain_or_skip()
    from numba import cuda, float32, int64, uint64

    from tmasim.gpu import kernels

    ptx, _ = cuda.compile_ptx(kernels.timer_probe.py_func, (uint64[::1],), cc=CC)
    assert "%globaltimer" in ptx and "tma_" not in ptx
    ptx, _ = cuda.compile_ptx(kernels.read_stream.py_func, (float32[::1], float32[::1]), cc=CC)
    assert link_sm90(ptx)[0] > 0
    ptx, _ = cuda.compile_ptx(kernels.clock_probe.py_func, (uint64[::1], int64), cc=CC)
    assert "%clock64" in ptx and "%globaltimer" in ptx and link_sm90(ptx)[0] > 0


def _nvrtc_ptx(path: str, arch: bytes) -> str:
    with open(path, "rb") as f:
        src = f.read()
    err, prog = nvrtc.nvrtcCreateProgram(src, path.encode(), 0, [], [])
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS
    opts = [b"--gpu-architecture=" + arch, b"-rdc=true"]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    _, size = nvrtc.nvrtcGetProgramLogSize(prog)
    log = b" " * size
    nvrtc.nvrtcGetProgramLog(prog, log)
    assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, log.decode()
    _, size = nvrtc.nvrtcGetPTXSize(prog)
    ptx = b" " * size
    nvrtc.nvrtcGetPTX(prog, ptx)
    return ptx.decode().rstrip("\x00 ")


def test_pipe_probe_kernels_hold_the_probed_instructions(no_device: None) -> None:
    """cvt.rn.f16x2.f32 and ex2.approx.ftz.f32 reach the PTX, and ptxas accepts them."""
    _toolchain_or_skip()
    from numba import cuda, float32, int32, int64, uint64

    from tmasim.gpu import pipe_kernels

    sig = (uint64[:, ::1], float32[:, ::1], float32[::1], int32, int32)
    ptx, _ = cuda.compile_ptx(pipe_kernels.convert_probe.py_func, sig, cc=CC)
    assert "cvt.rn.f16x2.f32" in ptx and "ex2.approx.ftz.f32" in ptx and "%clock64" in ptx
    assert link_sm90(ptx)[0] > 0
    ptx, _ = cuda.compile_ptx(pipe_kernels.fma_exp_load.py_func,
                              (uint64[:, ::1], float32[:, ::1], int64), cc=CC)
    assert "fma.rn.f32" in ptx and "ex2.approx.ftz.f32" in ptx
    assert link_sm90(ptx)[0] > 0


def test_wgmma_helper_links_for_sm90a(no_device: None) -> None:
    """wgmma_helpers.cu builds for sm_90a (what numba-cuda picks on a cc 9.0 device)."""
    _toolchain_or_skip()
    from numba import cuda, int32, uint64

    from tmasim.gpu import pipe_kernels
    from tmasim.gpu.device_primitives import WGMMA_CU

    helper = _nvrtc_ptx(WGMMA_CU, b"compute_90a")
    for instr in ("wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", "wgmma.fence",
                  "wgmma.commit_group", "wgmma.wait_group", "ex2.approx.ftz.f32"):
        assert instr in helper, instr
    ptx, _ = cuda.compile_ptx(pipe_kernels.wgmma_probe.py_func,
                              (uint64[::1], int32, int32, int32, int32), cc=(9, 0, "a"))
    assert "probe_wgmma" in ptx
    handle = nvjitlink.create(1, ["-arch=sm_90a"])
    for i, code in enumerate((ptx, helper)):
        data = code.encode()
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), f"m{i}")
    nvjitlink.complete(handle)
    assert nvjitlink.get_linked_cubin_size(handle) > 0
