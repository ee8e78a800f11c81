// longca's flash attention for Hopper (sm_90a): TMA loads into 128-byte-swizzled shared
// memory, wgmma from shared memory (Q K^T) and from registers (P V), mbarrier pipelines,
// and warp specialisation (one producer warpgroup issuing the copies, two consumer
// warpgroups of 64 query rows each, registers moved to them with setmaxnreg). Masks
// arrive as the same work lists as the sm_80 kernel (kernels/cuda/worklist.go): for each
// 128-row query tile the 128-key tiles to visit, full (no per-element test) or partial
// (the indices of the canonical slices touching it).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define DEV __device__ __forceinline__
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
typedef unsigned long long u64;

#include "wgmma.cuh"

// A TMA descriptor (CUtensorMap) made by cuTensorMapEncodeTiled on the host, passed by
// value as a __grid_constant__ kernel parameter.
struct __align__(64) TmaDesc {
  unsigned long long v[16];
};

DEV unsigned smem_u32(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

// ---- mbarriers -------------------------------------------------------------------
DEV void mbar_init(u64 *b, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(b)), "r"(count) : "memory");
}
DEV void mbar_expect_tx(u64 *b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(b)), "r"(bytes) : "memory");
}
DEV void mbar_arrive(u64 *b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(b)) : "memory");
}
DEV bool mbar_try(u64 *b, unsigned parity) {
  unsigned ok;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(ok)
      : "r"(smem_u32(b)), "r"(parity)
      : "memory");
  return ok != 0;
}
// Waits until the barrier's phase of the given parity has completed. A fresh barrier
// counts its phase before the first as complete, so waiting for parity 1 passes at once.
DEV void mbar_wait(u64 *b, unsigned parity) {
  while (!mbar_try(b, parity)) {
  }
}

// ---- TMA -------------------------------------------------------------------------
// Copies the box at coordinates (c0, c1, c2) of the tensor map into shared memory,
// completing bytes on the barrier.
DEV void tma_load3(void *dst, const TmaDesc *map, u64 *bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(
          smem_u32(dst)),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
DEV void tma_prefetch_desc(const TmaDesc *map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<unsigned long long>(map)) : "memory");
}

// ---- wgmma -----------------------------------------------------------------------
// The shared-memory matrix descriptor of a 128-byte-swizzled operand starting at p:
// lbo and sbo are the leading and stride byte offsets (PTX ISA, "Matrix Descriptor").
DEV u64 sw128_desc(const void *p, unsigned lbo, unsigned sbo) {
  u64 d = (u64)((smem_u32(p) & 0x3FFFF) >> 4);
  d |= (u64)((lbo >> 4) & 0x3FFF) << 16;
  d |= (u64)((sbo >> 4) & 0x3FFF) << 32;
  d |= (u64)1 << 62;
  return d;
}
DEV void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
DEV void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> DEV void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Keeps the compiler from moving accesses of accumulator registers across wgmma calls.
template <int R> DEV void reg_fence(float (&r)[R]) {
#pragma unroll
  for (int i = 0; i < R; i++) asm volatile("" : "+f"(r[i])::"memory");
}

template <typename T> struct Ops;
template <> struct Ops<__nv_bfloat16> {
  template <int TB> static DEV void ss128(float (&d)[64], u64 a, u64 b, int s) { wgmma_ss_bf16_n128<TB>(d, a, b, s); }
  template <int TB> static DEV void rs128(float (&d)[64], const unsigned (&a)[4], u64 b, int s) { wgmma_rs_bf16_n128<TB>(d, a, b, s); }
  template <int TB> static DEV void rs64(float (&d)[32], const unsigned (&a)[4], u64 b, int s) { wgmma_rs_bf16_n64<TB>(d, a, b, s); }
  static DEV unsigned pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&v);
  }
};
template <> struct Ops<__half> {
  template <int TB> static DEV void ss128(float (&d)[64], u64 a, u64 b, int s) { wgmma_ss_fp16_n128<TB>(d, a, b, s); }
  template <int TB> static DEV void rs128(float (&d)[64], const unsigned (&a)[4], u64 b, int s) { wgmma_rs_fp16_n128<TB>(d, a, b, s); }
  template <int TB> static DEV void rs64(float (&d)[32], const unsigned (&a)[4], u64 b, int s) { wgmma_rs_fp16_n64<TB>(d, a, b, s); }
  static DEV unsigned pack(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&v);
  }
};

// O (m64 x D) += P (m64 x k16, registers) * V (k16 x D, MN-major in shared memory).
template <typename T, int D> struct PV;
template <typename T> struct PV<T, 128> {
  static DEV void run(float (&o)[64], const unsigned (&a)[4], u64 db) { Ops<T>::template rs128<1>(o, a, db, 1); }
};
template <typename T> struct PV<T, 64> {
  static DEV void run(float (&o)[32], const unsigned (&a)[4], u64 db) { Ops<T>::template rs64<1>(o, a, db, 1); }
};

struct WorkList {
  const int *order, *start, *entries, *refs, *slices;
  int row_tiles, per_head;
};

// ---- the forward -------------------------------------------------------------------
// A block owns one 128-row query tile of one query head. Warpgroup 0 produces: its first
// thread loads Q once and then K and V tiles of the work list into a STAGES-deep ring.
// Warpgroups 1 and 2 consume, 64 query rows each: S = Q K^T by wgmma from shared memory,
// the mask and the online softmax in registers, O += P V by wgmma with P from registers.
constexpr int SBM = 128, SBN = 128, STAGES = 2, SNT = 384;
constexpr int CHUNK = 64;  // columns of one 128-byte swizzled chunk (16-bit elements)

template <int D> struct SmemLayout {
  static constexpr int kChunks = D / CHUNK;
  static constexpr int kQBytes = SBM * D * 2;
  static constexpr int kKVBytes = SBN * D * 2;
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kQBytes;
  static constexpr int kV = kK + STAGES * kKVBytes;
  static constexpr int kBar = kV + STAGES * kKVBytes;
  // barriers: fullQ, fullK[S], fullV[S], emptyK[S], emptyV[S]
  static constexpr int kBytes = kBar + 8 * (1 + 4 * STAGES) + 1024;  // + alignment slack
};

template <int D, typename T>
DEV void fwd_sm90(const TmaDesc &tq, const TmaDesc &tk, const TmaDesc &tv, T *__restrict__ o, float *__restrict__ lse,
                  int sq, int sk, int hq, int hkv, float scale_log2, WorkList wl) {
  using L = SmemLayout<D>;
  extern __shared__ unsigned char smem_raw[];
  unsigned char *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  T *sQ = reinterpret_cast<T *>(smem + L::kQ);
  T *sK = reinterpret_cast<T *>(smem + L::kK);
  T *sV = reinterpret_cast<T *>(smem + L::kV);
  u64 *bars = reinterpret_cast<u64 *>(smem + L::kBar);
  u64 *fullQ = bars, *fullK = bars + 1, *fullV = fullK + STAGES, *emptyK = fullV + STAGES, *emptyV = emptyK + STAGES;

  const int tid = threadIdx.x, wg = tid / 128;
  const int h = blockIdx.x, kvh = h / (hq / hkv), list = wl.per_head ? kvh : 0;
  const int qt = wl.order[list * wl.row_tiles + blockIdx.y];
  const int e0 = wl.start[list * (wl.row_tiles + 1) + qt], e1 = wl.start[list * (wl.row_tiles + 1) + qt + 1];
  const int q0 = qt * SBM;

  if (tid == 0) {
    mbar_init(fullQ, 1);
    for (int s = 0; s < STAGES; s++) {
      mbar_init(&fullK[s], 1);
      mbar_init(&fullV[s], 1);
      mbar_init(&emptyK[s], 256);
      mbar_init(&emptyV[s], 256);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (tid == 0 && e0 < e1) {
      tma_prefetch_desc(&tq);
      tma_prefetch_desc(&tk);
      tma_prefetch_desc(&tv);
      mbar_expect_tx(fullQ, L::kQBytes);
#pragma unroll
      for (int c = 0; c < L::kChunks; c++) tma_load3(sQ + c * SBM * CHUNK, &tq, fullQ, c * CHUNK, h, q0);
      for (int e = e0; e < e1; e++) {
        const int i = e - e0, s = i % STAGES;
        const unsigned ph = (i / STAGES) & 1;
        const int kt = wl.entries[2 * e];
        mbar_wait(&emptyK[s], ph ^ 1);
        mbar_expect_tx(&fullK[s], L::kKVBytes);
#pragma unroll
        for (int c = 0; c < L::kChunks; c++)
          tma_load3(sK + s * SBN * D + c * SBN * CHUNK, &tk, &fullK[s], c * CHUNK, kvh, kt * SBN);
        mbar_wait(&emptyV[s], ph ^ 1);
        mbar_expect_tx(&fullV[s], L::kKVBytes);
#pragma unroll
        for (int c = 0; c < L::kChunks; c++)
          tma_load3(sV + s * SBN * D + c * SBN * CHUNK, &tv, &fullV[s], c * CHUNK, kvh, kt * SBN);
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int cw = wg - 1;                  // consumer warpgroup: query rows 64 cw .. 64 cw + 63
  const int lt = tid % 128, warp = lt / 32, lane = lt % 32, g = lane / 4, t = lane % 4;
  const int r0 = q0 + cw * 64 + warp * 16 + g;  // this thread's rows: r0 and r0 + 8
  constexpr int OR = D / 2;                // O accumulator registers (m64 x D)

  float acc[OR];
#pragma unroll
  for (int i = 0; i < OR; i++) acc[i] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  if (e0 < e1) mbar_wait(fullQ, 0);
  const T *qw = sQ + cw * 64 * CHUNK;  // this warpgroup's 64 rows of each chunk
  for (int e = e0; e < e1; e++) {
    const int i = e - e0, s = i % STAGES;
    const unsigned ph = (i / STAGES) & 1;
    const int kt = wl.entries[2 * e], ref = wl.entries[2 * e + 1];
    const T *cK = sK + s * SBN * D, *cV = sV + s * SBN * D;

    float sc[64];
    mbar_wait(&fullK[s], ph);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      const int c = kk / 4, k16 = (kk % 4) * 16;
      const u64 da = sw128_desc(qw + c * SBM * CHUNK + k16, 16, 1024);
      const u64 db = sw128_desc(cK + c * SBN * CHUNK + k16, 16, 1024);
      Ops<T>::template ss128<0>(sc, da, db, kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(sc);
    mbar_arrive(&emptyK[s]);

#pragma unroll
    for (int j = 0; j < 64; j++) sc[j] *= scale_log2;
    if (ref >= 0) {
      // one bit per element: each slice gives each of the thread's two rows an interval
      // of allowed keys, read once per slice rather than once per element
      unsigned long long bits = 0;
      const int n = wl.refs[ref];
      for (int x = 0; x < n; x++) {
        const int *sl = wl.slices + 6 * wl.refs[ref + 1 + x];
        const int qa = sl[0], qb = sl[1], ka = sl[2], kb = sl[3], lo = sl[4], hi = sl[5];
#pragma unroll
        for (int r = 0; r < 2; r++) {
          const int qi = r0 + r * 8;
          const int kl = max(ka, qi + lo), kh = min(kb - 1, qi + hi);
          const bool in = qi >= qa && qi < qb;
#pragma unroll
          for (int j = 0; j < SBN / 8; j++)
#pragma unroll
            for (int cc = 0; cc < 2; cc++) {
              const int ki = kt * SBN + j * 8 + 2 * t + cc;
              if (in && ki >= kl && ki <= kh) bits |= 1ull << (j * 4 + r * 2 + cc);
            }
        }
      }
#pragma unroll
      for (int j = 0; j < 64; j++)
        if (!(bits >> j & 1ull)) sc[j] = -INFINITY;
    }
    // online softmax over the two rows this thread holds
#pragma unroll
    for (int r = 0; r < 2; r++) {
      float mx = m[r];
#pragma unroll
      for (int j = 0; j < SBN / 8; j++) mx = fmaxf(mx, fmaxf(sc[4 * j + 2 * r], sc[4 * j + 2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
      const float use = mx == -INFINITY ? 0.f : mx;
      const float alpha = exp2f(m[r] - use);  // 0 when m[r] is -inf
      m[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < SBN / 8; j++) {
        sc[4 * j + 2 * r] = exp2f(sc[4 * j + 2 * r] - use);
        sc[4 * j + 2 * r + 1] = exp2f(sc[4 * j + 2 * r + 1] - use);
        sum += sc[4 * j + 2 * r] + sc[4 * j + 2 * r + 1];
      }
      l[r] = l[r] * alpha + sum;
#pragma unroll
      for (int j = 0; j < D / 8; j++) {
        acc[4 * j + 2 * r] *= alpha;
        acc[4 * j + 2 * r + 1] *= alpha;
      }
    }
    unsigned pa[SBN / 16][4];
#pragma unroll
    for (int kk = 0; kk < SBN / 16; kk++) {
      pa[kk][0] = Ops<T>::pack(sc[8 * kk + 0], sc[8 * kk + 1]);
      pa[kk][1] = Ops<T>::pack(sc[8 * kk + 2], sc[8 * kk + 3]);
      pa[kk][2] = Ops<T>::pack(sc[8 * kk + 4], sc[8 * kk + 5]);
      pa[kk][3] = Ops<T>::pack(sc[8 * kk + 6], sc[8 * kk + 7]);
    }
    mbar_wait(&fullV[s], ph);
    reg_fence(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < SBN / 16; kk++) {
      // keys kk*16 .. kk*16+15: 16 rows of 128 bytes in every chunk; chunks SBN*128 B apart
      const u64 db = sw128_desc(cV + kk * 16 * CHUNK, SBN * CHUNK * 2, 1024);
      PV<T, D>::run(acc, pa[kk], db);
    }
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(acc);
    mbar_arrive(&emptyV[s]);
  }

  // finish: out = acc / l, lse = m ln2 + ln l; empty rows give 0 and -inf
  const long long qs = (long long)hq * D;
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float sum = l[r];
    sum += __shfl_xor_sync(0xffffffff, sum, 1);
    sum += __shfl_xor_sync(0xffffffff, sum, 2);
    const int qi = r0 + r * 8;
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    if (qi < sq) {
      T *orow = o + (long long)qi * qs + (long long)h * D;
#pragma unroll
      for (int j = 0; j < D / 8; j++)
        *reinterpret_cast<unsigned *>(orow + j * 8 + 2 * t) = Ops<T>::pack(acc[4 * j + 2 * r] * inv, acc[4 * j + 2 * r + 1] * inv);
      if (t == 0) lse[(long long)h * sq + qi] = sum > 0.f ? m[r] * 0.6931471805599453f + logf(sum) : -INFINITY;
    }
  }
}

#define SM90_ENTRIES(NAME, T, D)                                                                                   \
  extern "C" __global__ void __launch_bounds__(SNT, 1)                                                             \
      fwd90_##NAME##_d##D(const __grid_constant__ TmaDesc tq, const __grid_constant__ TmaDesc tk,                  \
                          const __grid_constant__ TmaDesc tv, T *o, float *lse, int sq, int sk, int hq, int hkv,   \
                          float scale_log2, const int *order, const int *start, const int *entries, const int *refs, \
                          const int *slices, int row_tiles, int per_head) {                                        \
    fwd_sm90<D, T>(tq, tk, tv, o, lse, sq, sk, hq, hkv, scale_log2,                                                \
                   WorkList{order, start, entries, refs, slices, row_tiles, per_head});                            \
  }

SM90_ENTRIES(bf16, __nv_bfloat16, 64)
SM90_ENTRIES(bf16, __nv_bfloat16, 128)
SM90_ENTRIES(fp16, __half, 64)
SM90_ENTRIES(fp16, __half, 128)
