// PTX primitives for the tmasim numba.cuda validation kernels (sm_90+).
//
// numba-cuda links this file with NVRTC. Every helper follows numba's calling
// convention for declared device functions:
//     extern "C" __device__ int name(T* ret, args...)   // returns 0 = success
// and receives addresses as 64-bit *generic* integers (what the kernels'
// addr_of intrinsic yields). Shared-memory operands are converted to the
// 32-bit shared window here, once, so the kernels never do pointer arithmetic
// on address spaces. Each helper holds exactly one PTX primitive so that the
// pure-Python stand-ins in sim_primitives.py can mirror them one to one.
//
// References: PTX ISA 8.x, sections "mbarrier", "cp.async.bulk",
// "cp.async.bulk.tensor", "fence.proxy"; the same asm strings as CUTLASS's
// cute/arch/copy_sm90_tma.hpp and cutlass/arch/barrier.h.

typedef unsigned int u32;
typedef unsigned long long u64;

static __device__ __forceinline__ u32 smem_u32(u64 generic_addr)
{
    return static_cast<u32>(__cvta_generic_to_shared(reinterpret_cast<void*>(generic_addr)));
}

// 32-bit shared-window address of a generic shared pointer (used to align
// stage buffers to 128 bytes).
extern "C" __device__ int tma_smem_addr(u32* ret, u64 addr)
{
    *ret = smem_u32(addr);
    return 0;
}

// Initialise an mbarrier with an expected arrival count; phase 0, tx 0.
extern "C" __device__ int tma_mbar_init(int* ret, u64 bar, u32 count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;"
                 :: "r"(smem_u32(bar)), "r"(count) : "memory");
    *ret = 0;
    return 0;
}

// Make barrier initialisation visible to the other threads and to the async
// proxy (the TMA unit) before anyone arrives or copies.
extern "C" __device__ int tma_fence_barrier_init(int* ret)
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    *ret = 0;
    return 0;
}

// Plain arrival (release semantics at CTA scope).
extern "C" __device__ int tma_mbar_arrive(int* ret, u64 bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];"
                 :: "r"(smem_u32(bar)) : "memory");
    *ret = 0;
    return 0;
}

// Arrive and announce `tx_bytes` that the copy engine will deliver.
extern "C" __device__ int tma_mbar_arrive_expect_tx(int* ret, u64 bar, u32 tx_bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(smem_u32(bar)), "r"(tx_bytes) : "memory");
    *ret = 0;
    return 0;
}

// 1 if the phase with parity `parity` has completed, else 0 (after the
// hardware's own bounded suspend). Acquire semantics at CTA scope.
extern "C" __device__ int tma_mbar_try_wait(int* ret, u64 bar, u32 parity)
{
    u32 done;
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.b32 %0, 1, 0, p;\n\t"
        "}"
        : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
    *ret = static_cast<int>(done);
    return 0;
}

// 1-D bulk copy global -> shared that completes `bytes` on the barrier.
// dst and src 16-byte aligned, bytes a multiple of 16.
extern "C" __device__ int tma_bulk_g2s(int* ret, u64 dst, u64 src, u32 bytes, u64 bar)
{
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
        :: "r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar)) : "memory");
    *ret = 0;
    return 0;
}

// Acquire a tensor map that was written through the generic proxy (here: a
// host-to-device copy into a global array) before the TMA unit reads it.
extern "C" __device__ int tma_fence_tensormap(int* ret, u64 tmap)
{
    asm volatile("fence.proxy.tensormap::generic.acquire.gpu [%0], 128;"
                 :: "l"(tmap) : "memory");
    *ret = 0;
    return 0;
}

// 2-D tiled tensor copy global -> shared of the box at (c0 innermost, c1).
extern "C" __device__ int tma_tensor_2d_g2s(int* ret, u64 dst, u64 tmap, int c0, int c1, u64 bar)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%2, %3}], [%4];"
        :: "r"(smem_u32(dst)), "l"(tmap), "r"(c0), "r"(c1), "r"(smem_u32(bar)) : "memory");
    *ret = 0;
    return 0;
}
