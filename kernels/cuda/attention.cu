// longca's flash attention for NVIDIA GPUs (sm_80 and later): bf16/fp16 in, fp32
// accumulation, online softmax, mma.sync m16n8k16 with ldmatrix and cp.async double
// buffering. Masks arrive as work lists (kernels/cuda/worklist.go): for each row tile the
// column tiles to visit, each full (no per-element test) or partial (a list of canonical
// slices, each tested as q in Q && k in K && lo <= k-q <= hi).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define DEV __device__ __forceinline__
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

DEV unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

// 16-byte asynchronous copy; with pred false the destination is zero-filled.
DEV void cp_async16(void *s, const void *g, bool pred) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(s)), "l"(g), "r"(pred ? 16 : 0));
}
DEV void cp_async4(void *s, const void *g, bool pred) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(s)), "l"(g), "r"(pred ? 4 : 0));
}
DEV void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
DEV void cp_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

DEV void ldsm4(unsigned (&r)[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}
DEV void ldsm4t(unsigned (&r)[4], const void *p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(p)));
}

template <typename T> DEV void mma(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1);
template <> DEV void mma<__nv_bfloat16>(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <> DEV void mma<__half>(float (&c)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <typename T> DEV unsigned pack2(float lo, float hi);
template <> DEV unsigned pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned *>(&v);
}
template <> DEV unsigned pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<unsigned *>(&v);
}
template <typename T> DEV float tofloat(T x);
template <> DEV float tofloat<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> DEV float tofloat<__half>(__half x) { return __half2float(x); }
template <typename T> DEV T fromfloat(float x);
template <> DEV __nv_bfloat16 fromfloat<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> DEV __half fromfloat<__half>(float x) { return __float2half(x); }

// Element offset of (row, col) in a shared tile of rows of W elements, the 16-byte chunks
// of each row XOR-swizzled by the row so ldmatrix and cp.async avoid bank conflicts.
template <int W> DEV int swz(int row, int col) {
  return row * W + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

// Loads rows [row0, row0+R) of a [n, stride] global matrix (W columns from col 0) into a
// swizzled shared tile; rows at or past n are zero-filled.
template <int R, int W, int NT, typename T>
DEV void load_tile(T *s, const T *g, int row0, int n, long long stride, int tid) {
  constexpr int CH = W / 8;
#pragma unroll
  for (int i = tid; i < R * CH; i += NT) {
    int r = i / CH, c = (i % CH) * 8;
    bool ok = row0 + r < n;
    const T *src = g + (ok ? (long long)(row0 + r) * stride + c : 0);
    cp_async16(s + swz<W>(r, c), src, ok);
  }
}

#include "worklist.cuh"

// ---------------------------------------------------------------------------------
// Forward: a block of 8 warps owns 128 query rows (16 a warp) of one query head and walks
// its work list over 64-key tiles.
constexpr int FBM = 128, FBN = 64, FWARPS = 8, FNT = FWARPS * 32;

template <int D, typename T>
DEV void fwd(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v, T *__restrict__ o,
             float *__restrict__ lse, int sq, int sk, int hq, int hkv, float scale_log2, WorkList wl) {
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T *sQ = reinterpret_cast<T *>(smem_raw);
  T *sK = sQ + FBM * D;       // [2][FBN][D]
  T *sV = sK + 2 * FBN * D;   // [2][FBN][D]
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int h = blockIdx.x, kvh = h / (hq / hkv), list = wl.per_head ? kvh : 0;
  const int qt = wl.order[list * wl.row_tiles + blockIdx.y];
  const int e0 = wl.start[list * (wl.row_tiles + 1) + qt], e1 = wl.start[list * (wl.row_tiles + 1) + qt + 1];
  const long long qs = (long long)hq * D, ks = (long long)hkv * D;
  const T *qh = q + (long long)h * D, *kh = k + (long long)kvh * D, *vh = v + (long long)kvh * D;
  const int q0 = qt * FBM;

  float acc[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};

  load_tile<FBM, D, FNT>(sQ, qh, q0, sq, qs, tid);
  if (e0 < e1) {
    int kt = wl.entries[2 * e0];
    load_tile<FBN, D, FNT>(sK, kh, kt * FBN, sk, ks, tid);
    load_tile<FBN, D, FNT>(sV, vh, kt * FBN, sk, ks, tid);
  }
  cp_commit();
  cp_wait_all();
  __syncthreads();
  // the warp's Q fragments stay in registers for the whole walk
  unsigned qf[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++)
    ldsm4(qf[kk], sQ + swz<D>(warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8, kk * 16 + (lane / 16) * 8));

  for (int e = e0; e < e1; e++) {
    const int buf = (e - e0) & 1;
    const int kt = wl.entries[2 * e], ref = wl.entries[2 * e + 1];
    if (e + 1 < e1) {
      int nk = wl.entries[2 * e + 2];
      load_tile<FBN, D, FNT>(sK + (buf ^ 1) * FBN * D, kh, nk * FBN, sk, ks, tid);
      load_tile<FBN, D, FNT>(sV + (buf ^ 1) * FBN * D, vh, nk * FBN, sk, ks, tid);
    }
    cp_commit();
    const T *cK = sK + buf * FBN * D, *cV = sV + buf * FBN * D;
    float s[FBN / 8][4];
#pragma unroll
    for (int i = 0; i < FBN / 8; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      const unsigned(&qa)[4] = qf[kk];
#pragma unroll
      for (int j = 0; j < FBN / 16; j++) {
        unsigned b[4];
        ldsm4(b, cK + swz<D>(j * 16 + (lane % 8) + (lane / 16) * 8, kk * 16 + ((lane / 8) % 2) * 8));
        mma<T>(s[2 * j], qa, b[0], b[1]);
        mma<T>(s[2 * j + 1], qa, b[2], b[3]);
      }
    }
    // scale into the log2 domain, and mask a partial tile
#pragma unroll
    for (int j = 0; j < FBN / 8; j++)
#pragma unroll
      for (int c = 0; c < 4; c++) s[j][c] *= scale_log2;
    if (ref >= 0) {
      // one bit per element (tile_bits, worklist.cuh): each slice gives each of the
      // thread's two rows an interval of allowed keys
      const unsigned bits = (unsigned)tile_bits<FBN, false>(wl, ref, q0 + warp * 16 + g, kt * FBN, t);
#pragma unroll
      for (int j = 0; j < FBN / 8; j++)
#pragma unroll
        for (int c = 0; c < 4; c++)
          if (!(bits >> (j * 4 + c) & 1u)) s[j][c] = -INFINITY;
    }
    // online softmax over the two rows this thread holds
#pragma unroll
    for (int r = 0; r < 2; r++) {
      float mx = m[r];
#pragma unroll
      for (int j = 0; j < FBN / 8; j++) mx = fmaxf(mx, fmaxf(s[j][2 * r], s[j][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
      float use = mx == -INFINITY ? 0.f : mx;
      float alpha = exp2f(m[r] - use);  // 0 when m[r] is -inf
      m[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < FBN / 8; j++) {
        s[j][2 * r] = exp2f(s[j][2 * r] - use);
        s[j][2 * r + 1] = exp2f(s[j][2 * r + 1] - use);
        sum += s[j][2 * r] + s[j][2 * r + 1];
      }
      l[r] = l[r] * alpha + sum;
#pragma unroll
      for (int i = 0; i < D / 8; i++) {
        acc[i][2 * r] *= alpha;
        acc[i][2 * r + 1] *= alpha;
      }
    }
    // O += P V
#pragma unroll
    for (int kk = 0; kk < FBN / 16; kk++) {
      unsigned a[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]), pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                       pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int j = 0; j < D / 16; j++) {
        unsigned b[4];
        ldsm4t(b, cV + swz<D>(kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8, j * 16 + (lane / 16) * 8));
        mma<T>(acc[2 * j], a, b[0], b[1]);
        mma<T>(acc[2 * j + 1], a, b[2], b[3]);
      }
    }
    cp_wait_all();
    __syncthreads();
  }
  // finish: out = acc / l, lse = m ln2 + ln l; empty rows give 0 and -inf
#pragma unroll
  for (int r = 0; r < 2; r++) {
    float sum = l[r];
    sum += __shfl_xor_sync(0xffffffff, sum, 1);
    sum += __shfl_xor_sync(0xffffffff, sum, 2);
    const int qi = q0 + warp * 16 + g + r * 8;
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    if (qi < sq) {
      T *orow = o + (long long)qi * qs + (long long)h * D;
#pragma unroll
      for (int i = 0; i < D / 8; i++)
        *reinterpret_cast<unsigned *>(orow + i * 8 + 2 * t) = pack2<T>(acc[i][2 * r] * inv, acc[i][2 * r + 1] * inv);
      if (t == 0) lse[(long long)h * sq + qi] = sum > 0.f ? m[r] * 0.6931471805599453f + logf(sum) : -INFINITY;
    }
  }
}

// ---------------------------------------------------------------------------------
// Backward preprocessing: Dsum[h][q] = sum_d dO * O, one warp a (q, h) row.
template <int D, typename T>
DEV void bwd_pre(const T *__restrict__ o, const T *__restrict__ dout, float *__restrict__ dsum, int sq, int hq) {
  const int w = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (w >= sq * hq) return;
  const int qi = w / hq, h = w % hq;
  const T *a = o + (long long)w * D, *b = dout + (long long)w * D;
  float s = 0.f;
  for (int d = lane; d < D; d += 32) s += tofloat<T>(a[d]) * tofloat<T>(b[d]);
#pragma unroll
  for (int x = 16; x > 0; x >>= 1) s += __shfl_xor_sync(0xffffffff, s, x);
  if (lane == 0) dsum[(long long)h * sq + qi] = s;
}

// dq = (T) dq_accum.
template <typename T> DEV void dq_convert(const float *__restrict__ acc, T *__restrict__ dq, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    dq[i] = fromfloat<T>(acc[i]);
}

// ---------------------------------------------------------------------------------
// Backward, K side: a block of 8 warps owns 128 keys (16 a warp) of one KV head and walks
// the transposed work list (the 64-query tiles touching it) for every query head of the
// group, accumulating dK and dV in registers (the GQA sum, deterministic) and adding dQ
// into an fp32 buffer with atomics.
constexpr int BBM = 64, BBN_ = 128, BWARPS_ = 8;

template <int D, typename T, int BBN, int BWARPS>
DEV void bwd(const T *__restrict__ q, const T *__restrict__ k, const T *__restrict__ v, const T *__restrict__ dout,
             const float *__restrict__ lse, const float *__restrict__ dsum, float *__restrict__ dqacc,
             T *__restrict__ dk, T *__restrict__ dv, int sq, int sk, int hq, int hkv, float scale, float scale_log2,
             WorkList wl) {
  constexpr int BNT = BWARPS * 32;
  static_assert(BBN == 16 * BWARPS, "a warp owns 16 keys");
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T *sK = reinterpret_cast<T *>(smem_raw);
  T *sV = sK + BBN * D;
  T *sQ = sV + BBN * D;      // [2][BBM][D]
  T *sdO = sQ + 2 * BBM * D; // [2][BBM][D]
  T *sdS = sdO + 2 * BBM * D; // [BBN keys][BBM queries]
  float *sL = reinterpret_cast<float *>(sdS + BBN * BBM); // [2][BBM] lse * log2e
  float *sD = sL + 2 * BBM;                               // [2][BBM]
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int kvh = blockIdx.x, group = hq / hkv, list = wl.per_head ? kvh : 0;
  const int kt = wl.order[list * wl.row_tiles + blockIdx.y];
  const int e0 = wl.start[list * (wl.row_tiles + 1) + kt], e1 = wl.start[list * (wl.row_tiles + 1) + kt + 1];
  const int ne = e1 - e0, iters = ne * group;
  // Blocks start at different query tiles (a rotation by key tile), so that blocks
  // running together add into different dQ rows instead of contending on the same ones.
  const int rot = ne > 0 ? (kt * 7) % ne : 0;
  const long long qs = (long long)hq * D, ks = (long long)hkv * D;
  const int k0 = kt * BBN;

  float dka[D / 8][4], dva[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; i++)
#pragma unroll
    for (int c = 0; c < 4; c++) dka[i][c] = dva[i][c] = 0.f;

  auto prefetch = [&](int it, int buf) {
    const int h = kvh * group + it / ne, e = e0 + (it % ne + rot) % ne, qt = wl.entries[2 * e];
    load_tile<BBM, D, BNT>(sQ + buf * BBM * D, q + (long long)h * D, qt * BBM, sq, qs, tid);
    load_tile<BBM, D, BNT>(sdO + buf * BBM * D, dout + (long long)h * D, qt * BBM, sq, qs, tid);
    for (int i = tid; i < BBM; i += BNT) {
      bool ok = qt * BBM + i < sq;
      long long off = (long long)h * sq + (ok ? qt * BBM + i : 0);
      cp_async4(sL + buf * BBM + i, lse + off, ok);
      cp_async4(sD + buf * BBM + i, dsum + off, ok);
    }
  };
  load_tile<BBN, D, BNT>(sK, k + (long long)kvh * D, k0, sk, ks, tid);
  load_tile<BBN, D, BNT>(sV, v + (long long)kvh * D, k0, sk, ks, tid);
  if (iters > 0) prefetch(0, 0);
  cp_commit();
  cp_wait_all();
  __syncthreads();

  for (int it = 0; it < iters; it++) {
    const int buf = it & 1;
    const int h = kvh * group + it / ne, e = e0 + (it % ne + rot) % ne;
    const int qt = wl.entries[2 * e], ref = wl.entries[2 * e + 1], q0 = qt * BBM;
    if (it + 1 < iters) prefetch(it + 1, buf ^ 1);
    cp_commit();
    const T *cQ = sQ + buf * BBM * D, *cdO = sdO + buf * BBM * D;
    const float *cL = sL + buf * BBM, *cD = sD + buf * BBM;

    // S^T = K Q^T and dP^T = V dO^T, 16 keys x 64 queries a warp
    float st[BBM / 8][4], dpt[BBM / 8][4];
#pragma unroll
    for (int i = 0; i < BBM / 8; i++)
#pragma unroll
      for (int c = 0; c < 4; c++) st[i][c] = dpt[i][c] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      unsigned ka[4], va[4];
      const int ar = warp * 16 + (lane % 8) + ((lane / 8) % 2) * 8, ac = kk * 16 + (lane / 16) * 8;
      ldsm4(ka, sK + swz<D>(ar, ac));
      ldsm4(va, sV + swz<D>(ar, ac));
#pragma unroll
      for (int j = 0; j < BBM / 16; j++) {
        unsigned b[4];
        const int br = j * 16 + (lane % 8) + (lane / 16) * 8, bc = kk * 16 + ((lane / 8) % 2) * 8;
        ldsm4(b, cQ + swz<D>(br, bc));
        mma<T>(st[2 * j], ka, b[0], b[1]);
        mma<T>(st[2 * j + 1], ka, b[2], b[3]);
        ldsm4(b, cdO + swz<D>(br, bc));
        mma<T>(dpt[2 * j], va, b[0], b[1]);
        mma<T>(dpt[2 * j + 1], va, b[2], b[3]);
      }
    }
    // the allowed bits of a partial tile: each slice gives each key row an interval of
    // allowed queries
    const unsigned bits = ref >= 0 ? (unsigned)tile_bits<BBM, true>(wl, ref, k0 + warp * 16 + g, q0, t) : 0xffffffffu;
    // P^T = exp(S^T scale - lse) on allowed pairs; dS^T = P^T (dP^T - Dsum)
#pragma unroll
    for (int j = 0; j < BBM / 8; j++)
#pragma unroll
      for (int c = 0; c < 4; c++) {
        const int ql = j * 8 + 2 * t + (c % 2);
        const bool ok = bits >> (j * 4 + c) & 1u;
        float p = ok ? exp2f(st[j][c] * scale_log2 - cL[ql] * 1.4426950408889634f) : 0.f;
        st[j][c] = p;
        dpt[j][c] = p * (dpt[j][c] - cD[ql]);
      }
    // dV += P^T dO and dK += dS^T Q (queries are the reduction dimension)
#pragma unroll
    for (int kk = 0; kk < BBM / 16; kk++) {
      unsigned pa[4] = {pack2<T>(st[2 * kk][0], st[2 * kk][1]), pack2<T>(st[2 * kk][2], st[2 * kk][3]),
                        pack2<T>(st[2 * kk + 1][0], st[2 * kk + 1][1]), pack2<T>(st[2 * kk + 1][2], st[2 * kk + 1][3])};
      unsigned sa[4] = {pack2<T>(dpt[2 * kk][0], dpt[2 * kk][1]), pack2<T>(dpt[2 * kk][2], dpt[2 * kk][3]),
                        pack2<T>(dpt[2 * kk + 1][0], dpt[2 * kk + 1][1]), pack2<T>(dpt[2 * kk + 1][2], dpt[2 * kk + 1][3])};
      // dS^T to shared memory for the dQ product: rows keys, columns queries
      const int kl = warp * 16 + g;
      *reinterpret_cast<unsigned *>(sdS + swz<BBM>(kl, kk * 16 + 2 * t)) = sa[0];
      *reinterpret_cast<unsigned *>(sdS + swz<BBM>(kl + 8, kk * 16 + 2 * t)) = sa[1];
      *reinterpret_cast<unsigned *>(sdS + swz<BBM>(kl, kk * 16 + 8 + 2 * t)) = sa[2];
      *reinterpret_cast<unsigned *>(sdS + swz<BBM>(kl + 8, kk * 16 + 8 + 2 * t)) = sa[3];
#pragma unroll
      for (int j = 0; j < D / 16; j++) {
        unsigned b[4];
        const int br = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8, bc = j * 16 + (lane / 16) * 8;
        ldsm4t(b, cdO + swz<D>(br, bc));
        mma<T>(dva[2 * j], pa, b[0], b[1]);
        mma<T>(dva[2 * j + 1], pa, b[2], b[3]);
        ldsm4t(b, cQ + swz<D>(br, bc));
        mma<T>(dka[2 * j], sa, b[0], b[1]);
        mma<T>(dka[2 * j + 1], sa, b[2], b[3]);
      }
    }
    __syncthreads();
    // dQ[64 q x D] += scale dS K: a warp takes 16 queries and D/(BWARPS/4) columns, 32 at
    // a time
    {
      constexpr int WPQ = BWARPS / 4, DW = D / WPQ;
      const int m0 = (warp % 4) * 16, dbase = (warp / 4) * DW;
#pragma unroll
      for (int dc0 = 0; dc0 < DW / 32; dc0++) {
        const int dc = dbase / 32 + dc0;
        float dqa[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++) dqa[i][0] = dqa[i][1] = dqa[i][2] = dqa[i][3] = 0.f;
#pragma unroll
        for (int kk = 0; kk < BBN / 16; kk++) {
          unsigned a[4];
          ldsm4t(a, sdS + swz<BBM>(kk * 16 + (lane % 8) + (lane / 16) * 8, m0 + ((lane / 8) % 2) * 8));
#pragma unroll
          for (int j = 0; j < 2; j++) {
            unsigned b[4];
            ldsm4t(b, sK + swz<D>(kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8, dc * 32 + j * 16 + (lane / 16) * 8));
            mma<T>(dqa[2 * j], a, b[0], b[1]);
            mma<T>(dqa[2 * j + 1], a, b[2], b[3]);
          }
        }
#pragma unroll
        for (int r = 0; r < 2; r++) {
          const int qi = q0 + m0 + g + r * 8;
          if (qi < sq) {
            float *row = dqacc + (long long)qi * qs + (long long)h * D + dc * 32;
#pragma unroll
            for (int i = 0; i < 4; i++) {
              atomicAdd(row + i * 8 + 2 * t, dqa[i][2 * r] * scale);
              atomicAdd(row + i * 8 + 2 * t + 1, dqa[i][2 * r + 1] * scale);
            }
          }
        }
      }
    }
    cp_wait_all();
    __syncthreads();
  }
  // write dK (scaled) and dV for the block's keys
#pragma unroll
  for (int r = 0; r < 2; r++) {
    const int ki = k0 + warp * 16 + g + r * 8;
    if (ki < sk) {
      T *krow = dk + (long long)ki * ks + (long long)kvh * D, *vrow = dv + (long long)ki * ks + (long long)kvh * D;
#pragma unroll
      for (int i = 0; i < D / 8; i++) {
        *reinterpret_cast<unsigned *>(krow + i * 8 + 2 * t) = pack2<T>(dka[i][2 * r] * scale, dka[i][2 * r + 1] * scale);
        *reinterpret_cast<unsigned *>(vrow + i * 8 + 2 * t) = pack2<T>(dva[i][2 * r], dva[i][2 * r + 1]);
      }
    }
  }
}

// ---------------------------------------------------------------------------------
// Entry points, one per (dtype, head dim).
#define WL_PARAMS const int *order, const int *start, const int *entries, const int *refs, const int *slices, int row_tiles, int per_head
#define WL_ARGS WorkList{order, start, entries, refs, slices, row_tiles, per_head}
#define FWD_ENTRY(NAME, T, D)                                                                                        \
  extern "C" __global__ void __launch_bounds__(FNT) fwd_##NAME##_d##D(                                               \
      const T *q, const T *k, const T *v, T *o, float *lse, int sq, int sk, int hq, int hkv, float scale_log2,       \
      WL_PARAMS) {                                                                                                   \
    fwd<D, T>(q, k, v, o, lse, sq, sk, hq, hkv, scale_log2, WL_ARGS);                                                \
  }
#define BWD_ENTRY(NAME, T, D, BN, NW)                                                                                 \
  extern "C" __global__ void __launch_bounds__(NW * 32) bwd_##NAME##_d##D(                                            \
      const T *q, const T *k, const T *v, const T *dout, const float *lse, const float *dsum, float *dqacc, T *dk,   \
      T *dv, int sq, int sk, int hq, int hkv, float scale, float scale_log2, WL_PARAMS) {                            \
    bwd<D, T, BN, NW>(q, k, v, dout, lse, dsum, dqacc, dk, dv, sq, sk, hq, hkv, scale, scale_log2, WL_ARGS);         \
  }
#define ENTRIES(NAME, T, D)                                                                                          \
  FWD_ENTRY(NAME, T, D)                                                                                              \
  BWD_ENTRY(NAME, T, D, BBN_, BWARPS_)                                                                               \
  extern "C" __global__ void bwd_pre_##NAME##_d##D(const T *o, const T *dout, float *dsum, int sq, int hq) {         \
    bwd_pre<D, T>(o, dout, dsum, sq, hq);                                                                            \
  }

ENTRIES(bf16, __nv_bfloat16, 64)
ENTRIES(bf16, __nv_bfloat16, 128)
ENTRIES(fp16, __half, 64)
ENTRIES(fp16, __half, 128)

extern "C" __global__ void dq_convert_bf16(const float *acc, __nv_bfloat16 *dq, long long n) { dq_convert(acc, dq, n); }
extern "C" __global__ void dq_convert_fp16(const float *acc, __half *dq, long long n) { dq_convert(acc, dq, n); }
