"""The PTX primitives for real GPUs: linked CUDA C++ helpers plus three intrinsics.

Everything that needs a PTX instruction with memory effects (mbarriers, bulk
copies, proxy fences) lives in tma_helpers.cu, declared here with
`cuda.declare_device(..., link=...)`; numba-cuda compiles that file with NVRTC and
links it into every kernel that calls one of them. The three things a helper
cannot do well are numba intrinsics emitting inline PTX through llvmlite:
`addr_of` (the generic address of an array element, which the helpers take as a
64-bit integer) and the special registers `%globaltimer` and `%smid`, which should
be inlined where they are read rather than cost a call.

Importing this module needs numba-cuda but no GPU; calling the kernels needs sm_90.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import Any

from llvmlite import ir
from numba import cuda


def _first_module(*names: str) -> ModuleType:
    """Newer numba-cuda carries its own extension API and types; older uses numba's core."""
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ImportError(f"none of {names} can be imported")


types = _first_module("numba.cuda.types", "numba.core.types")
intrinsic = _first_module("numba.cuda.extending", "numba.core.extending").intrinsic

HELPERS_CU = str(Path(__file__).with_name("tma_helpers.cu"))


def _declare(name: str, sig: str) -> Any:
    return cuda.declare_device(name, sig, link=[HELPERS_CU])


smem_addr = _declare("tma_smem_addr", "uint32(uint64)")
mbar_init = _declare("tma_mbar_init", "int32(uint64, uint32)")
fence_barrier_init = _declare("tma_fence_barrier_init", "int32()")
mbar_arrive = _declare("tma_mbar_arrive", "int32(uint64)")
mbar_arrive_expect_tx = _declare("tma_mbar_arrive_expect_tx", "int32(uint64, uint32)")
mbar_try_wait = _declare("tma_mbar_try_wait", "int32(uint64, uint32)")
bulk_g2s = _declare("tma_bulk_g2s", "int32(uint64, uint64, uint32, uint64)")
fence_tensormap = _declare("tma_fence_tensormap", "int32(uint64)")
tensor_2d_g2s = _declare("tma_tensor_2d_g2s", "int32(uint64, uint64, int32, int32, uint64)")


def _special_register(name: str, bits: int) -> Any:
    """An intrinsic reading a PTX special register with a volatile `mov`."""
    constraint = "=l" if bits == 64 else "=r"
    suffix = "u64" if bits == 64 else "u32"
    restype = types.uint64 if bits == 64 else types.uint32

    def reader(typingctx: Any) -> Any:
        def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
            fnty = ir.FunctionType(ir.IntType(bits), [])
            asm = ir.InlineAsm(fnty, f"mov.{suffix} $0, %{name};", constraint,
                               side_effect=True)
            return builder.call(asm, [])

        return restype(), codegen

    reader.__name__ = name
    return intrinsic(reader)


globaltimer = _special_register("globaltimer", 64)
clock64 = _special_register("clock64", 64)
smid = _special_register("smid", 32)


@intrinsic
def addr_of(typingctx: Any, arr: Any, idx: Any) -> Any:
    """Generic 64-bit address of arr[idx] for a 1-D C-contiguous array (no bounds check)."""
    if not isinstance(arr, types.Array) or arr.ndim != 1 or arr.layout != "C":
        return None
    if not isinstance(idx, types.Integer):
        return None

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        aryty, idxty = sig.args
        ary = context.make_array(aryty)(context, builder, value=args[0])
        index = context.cast(builder, args[1], idxty, types.intp)
        return builder.ptrtoint(builder.gep(ary.data, [index]), ir.IntType(64))

    return types.uint64(arr, idx), codegen


# ----------------------------------------------------------------------------- pipe probes

WGMMA_CU = str(Path(__file__).with_name("wgmma_helpers.cu"))
probe_wgmma = cuda.declare_device("probe_wgmma", "int32(int32, int32, int32, int32, uint64)",
                                  link=[WGMMA_CU])


def _asm_codegen(asm_text: str, nargs: int) -> Any:
    """Codegen of one inline-PTX block float32(float32 * nargs), not volatile.

    Operands are f32 registers ("f"); a block that produces a .b32 value moves it
    into the f32 result with mov.b32, which ptxas folds away (no MOV in the SASS).
    """

    def codegen(context: Any, builder: Any, sig: Any, llargs: Any) -> Any:
        f32 = ir.FloatType()
        fnty = ir.FunctionType(f32, [f32] * nargs)
        asm = ir.InlineAsm(fnty, asm_text, "=f" + ",f" * nargs, side_effect=False)
        return builder.call(asm, list(llargs))

    return codegen


@intrinsic
def f2fp_pack(typingctx: Any, a: Any, b: Any) -> Any:
    """cvt.rn.f16x2.f32 d, a, b (a to the upper half, b to the lower): SASS F2FP.F16.F32.PACK_AB."""
    if a != types.float32 or b != types.float32:
        return None
    return types.float32(a, b), _asm_codegen(
        "{ .reg .b32 t; cvt.rn.f16x2.f32 t, $1, $2; mov.b32 $0, t; }", 2)


@intrinsic
def ex2_neg(typingctx: Any, x: Any) -> Any:
    """2^-x: SASS MUFU.EX2 with the negation as an operand modifier (no extra instruction)."""
    if x != types.float32:
        return None
    return types.float32(x), _asm_codegen(
        "{ .reg .f32 t; neg.f32 t, $1; ex2.approx.ftz.f32 $0, t; }", 1)
