// Tensor-core probe helpers for validation/device_check.py (sm_90a: wgmma).
//
// numba cannot emit wgmma, so the tensor-core half of the pipe probes lives
// here, in CUDA C++ with inline PTX, and numba-cuda links it with NVRTC (for a
// cc 9.0 device numba-cuda compiles and links for sm_90a, which wgmma needs).
// Calling convention as in tma_helpers.cu:
//     extern "C" __device__ int name(T* ret, args...)   // returns 0
//
// One helper, probe_wgmma, is called by every thread of a 256-thread CTA (two
// warpgroups). `mode` gives each warpgroup a role:
//     MMA      batches of `batch` back-to-back
//              wgmma.mma_async.m64n128k16.f32.f16.f16 (A in registers, B in
//              shared memory: FA3's P.V shape), one commit and a wait per batch
//     EXP      `exps` ex2.approx.ftz.f32 per thread per batch (MUFU.EX2),
//              8 independent chains
//     MMA_EXP  both in one warpgroup: issue the batch, run the exps while it
//              is in flight, then wait (FA3's intra-warpgroup overlap)
//     IDLE     nothing
// Modes (warpgroup 0, warpgroup 1): 0 (MMA, IDLE), 1 (EXP, IDLE),
// 2 (MMA_EXP, IDLE), 3 (MMA, EXP), 4 (MMA, MMA), 5 (MMA_EXP, MMA_EXP).
//
// Each warpgroup's first thread writes one record of 8 words at
// out + 8 * (2 * blockIdx.x + warpgroup):
//     clock64 start, clock64 end, globaltimer start, globaltimer end, smid,
//     role, float bits of a checksum (keeps the results live), 0
// The operands are pseudo-random fp16 (never zero: METHOD.md, zeros draw less
// power) so that the clock probe sees the power of real data.
//
// B is 16 x 128 fp16 in shared memory, no swizzle, core matrices of 8 rows x
// 16 bytes: leading-dimension byte offset 128, stride byte offset 256 (the
// layout of the PTX ISA's "matrix descriptor" section). The probe measures
// throughput, not the product, so the layout only has to stay inside the
// buffer (4 KiB used of 8 KiB).

typedef unsigned int u32;
typedef unsigned long long u64;

#define ROLE_IDLE 0
#define ROLE_MMA 1
#define ROLE_EXP 2
#define ROLE_MMA_EXP 3

__shared__ __align__(128) unsigned short probe_b_tile[4096];

static __device__ __forceinline__ u64 read_clock64()
{
    u64 v;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(v));
    return v;
}

static __device__ __forceinline__ u64 read_globaltimer()
{
    u64 v;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(v));
    return v;
}

static __device__ __forceinline__ u32 read_smid()
{
    u32 v;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(v));
    return v;
}

static __device__ __forceinline__ float ex2_neg(float x)
{
    float y;
    asm volatile("{ .reg .f32 t; neg.f32 t, %1; ex2.approx.ftz.f32 %0, t; }" : "=f"(y) : "f"(x));
    return y;
}

// A 32-bit hash: pseudo-random operands without a generator's state.
static __device__ __forceinline__ u32 mix(u32 x)
{
    x ^= x >> 16; x *= 0x7feb352dU; x ^= x >> 15; x *= 0x846ca68bU; x ^= x >> 16;
    return x;
}

// An fp16 in [-1, -0.5) or [0.5, 1): sign and mantissa from the hash.
static __device__ __forceinline__ unsigned short random_half(u32 seed)
{
    u32 h = mix(seed);
    return (unsigned short)(((h >> 15) & 0x8000U) | 0x3800U | (h & 0x03FFU));
}

static __device__ __forceinline__ u64 b_descriptor()
{
    u64 addr = (u64)__cvta_generic_to_shared(probe_b_tile);
    return ((addr & 0x3FFFFULL) >> 4) | ((128ULL >> 4) << 16) | ((256ULL >> 4) << 32);
}

static __device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

static __device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

static __device__ __forceinline__ void wgmma_wait_all()
{
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}

static __device__ __forceinline__ void wgmma_rs(float (&d)[64], const u32 (&a)[4], u64 desc_b)
{
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
        "{%64, %65, %66, %67}, %68, 1, 1, 1, 0;"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

static __device__ __forceinline__ void exp_block(float (&e)[8], int exps)
{
    for (int j = 0; j < exps; j += 8) {
#pragma unroll
        for (int c = 0; c < 8; ++c) e[c] = ex2_neg(e[c]);
    }
}

static __device__ int role_of(int mode, int wg)
{
    switch (mode) {
    case 0: return wg == 0 ? ROLE_MMA : ROLE_IDLE;
    case 1: return wg == 0 ? ROLE_EXP : ROLE_IDLE;
    case 2: return wg == 0 ? ROLE_MMA_EXP : ROLE_IDLE;
    case 3: return wg == 0 ? ROLE_MMA : ROLE_EXP;
    case 4: return ROLE_MMA;
    case 5: return ROLE_MMA_EXP;
    default: return ROLE_IDLE;
    }
}

extern "C" __device__ int probe_wgmma(int* ret, int mode, int iters, int batch, int exps,
                                      u64 out_addr)
{
    const u32 tid = threadIdx.x;
    const int wg = (int)(tid >> 7);
    const u32 seed = (blockIdx.x * 256U + tid) * 2654435761U;
    for (u32 i = tid; i < 4096; i += blockDim.x) probe_b_tile[i] = random_half(i * 97U + 1U);
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the tensor cores read it next
    __syncthreads();

    const int role = role_of(mode, wg);
    float d[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) d[i] = 0.0f;
    u32 a[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
        a[i] = (u32)random_half(seed + 2 * i) | ((u32)random_half(seed + 2 * i + 1) << 16);
    float e[8];
#pragma unroll
    for (int c = 0; c < 8; ++c) e[c] = 0.5f + 0.0625f * c;
    const u64 desc_b = b_descriptor();

    const u64 c0 = read_clock64();
    const u64 t0 = read_globaltimer();
    if (role == ROLE_MMA || role == ROLE_MMA_EXP) {
        for (int it = 0; it < iters; ++it) {
            wgmma_fence();
            for (int k = 0; k < batch; ++k) wgmma_rs(d, a, desc_b);
            wgmma_commit();
            if (role == ROLE_MMA_EXP) exp_block(e, exps);
            wgmma_wait_all();
        }
    } else if (role == ROLE_EXP) {
        for (int it = 0; it < iters; ++it) exp_block(e, exps);
    }
    const u64 c1 = read_clock64();
    const u64 t1 = read_globaltimer();

    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < 64; ++i) sum += d[i];
#pragma unroll
    for (int c = 0; c < 8; ++c) sum += e[c];
    if ((tid & 127U) == 0) {
        u64* rec = reinterpret_cast<u64*>(out_addr) + 8 * (2 * blockIdx.x + wg);
        rec[0] = c0; rec[1] = c1; rec[2] = t0; rec[3] = t1;
        rec[4] = read_smid(); rec[5] = (u64)role; rec[6] = (u64)__float_as_uint(sum); rec[7] = 0;
    }
    *ret = 0;
    return 0;
}
