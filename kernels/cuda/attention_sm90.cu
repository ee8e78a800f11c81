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
// The shared-memory matrix descriptor of a 128-byte-swizzled operand (PTX ISA, "Matrix
// Descriptor"), in two parts for operands walked by constant offsets: the low word (start
// address >> 4 and the leading byte offset lbo) made once per operand base, and a
// constant high word (stride 1024 bytes, 128-byte swizzle). sw128_at adds a byte offset
// to the start address (no carry leaves the 14-bit field: shared memory is under 256 KB),
// so each wgmma's descriptor is one add from a base: rebuilding it from a pointer took
// about 13 instructions a wgmma, a dependent chain that fed the backward's n64 products
// slower than they ran (docs/perf.md, calls 8 and 9).
DEV unsigned sw128_lo(const void *p, unsigned lbo) {
  return ((smem_u32(p) & 0x3FFFF) >> 4) | (((lbo >> 4) & 0x3FFF) << 16);
}
constexpr u64 kSw128Hi = ((u64)(1024 >> 4) << 32) | ((u64)1 << 62);
DEV u64 sw128_at(unsigned lo, int bytes) { return kSw128Hi | (u64)(lo + (unsigned)(bytes >> 4)); }
DEV void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
DEV void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> DEV void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Keeps the compiler from moving accesses of accumulator registers across wgmma calls.
template <int R> DEV void reg_fence(float (&r)[R]) {
#pragma unroll
  for (int i = 0; i < R; i++) asm volatile("" : "+f"(r[i])::"memory");
}
// The same for packed operands (a wgmma's A fragments in registers, read asynchronously).
template <int R, int C> DEV void reg_fence(unsigned (&r)[R][C]) {
#pragma unroll
  for (int i = 0; i < R; i++)
#pragma unroll
    for (int j = 0; j < C; j++) asm volatile("" : "+r"(r[i][j])::"memory");
}

template <typename T> struct Ops;
template <> struct Ops<__nv_bfloat16> {
  template <int TB> static DEV void ss128(float (&d)[64], u64 a, u64 b, int s) { wgmma_ss_bf16_n128<0, TB>(d, a, b, s); }
  template <int TA, int TB> static DEV void ss64(float (&d)[32], u64 a, u64 b, int s) { wgmma_ss_bf16_n64<TA, TB>(d, a, b, s); }
  template <int TB> static DEV void ss176(float (&d)[88], u64 a, u64 b, int s) { wgmma_ss_bf16_n176<0, TB>(d, a, b, s); }
  template <int TB> static DEV void rs128(float (&d)[64], const unsigned (&a)[4], u64 b, int s) { wgmma_rs_bf16_n128<TB>(d, a, b, s); }
  template <int TB> static DEV void rs64(float (&d)[32], const unsigned (&a)[4], u64 b, int s) { wgmma_rs_bf16_n64<TB>(d, a, b, s); }
  static DEV unsigned pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned *>(&v);
  }
};
template <> struct Ops<__half> {
  template <int TB> static DEV void ss128(float (&d)[64], u64 a, u64 b, int s) { wgmma_ss_fp16_n128<0, TB>(d, a, b, s); }
  template <int TA, int TB> static DEV void ss64(float (&d)[32], u64 a, u64 b, int s) { wgmma_ss_fp16_n64<TA, TB>(d, a, b, s); }
  template <int TB> static DEV void ss176(float (&d)[88], u64 a, u64 b, int s) { wgmma_ss_fp16_n176<0, TB>(d, a, b, s); }
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
  static DEV void run(float (&o)[64], const unsigned (&a)[4], u64 db, int s = 1) { Ops<T>::template rs128<1>(o, a, db, s); }
};
template <typename T> struct PV<T, 64> {
  static DEV void run(float (&o)[32], const unsigned (&a)[4], u64 db, int s = 1) { Ops<T>::template rs64<1>(o, a, db, s); }
};

// ---- bulk copies and reductions -----------------------------------------------------
// Copies bytes (a multiple of 16, both addresses 16-byte aligned) from global memory into
// shared memory, completing them on the barrier.
DEV void bulk_load(void *dst, const void *src, unsigned bytes, u64 *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(smem_u32(dst)),
               "l"(reinterpret_cast<unsigned long long>(src)), "r"(bytes), "r"(smem_u32(bar))
               : "memory");
}
// Adds the shared-memory box at src into the global tile at (c0, c1) of the tensor map.
DEV void tma_reduce_add2(const TmaDesc *map, const void *src, int c0, int c1) {
  asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
                   reinterpret_cast<unsigned long long>(map)),
               "r"(smem_u32(src)), "r"(c0), "r"(c1)
               : "memory");
}
// Adds bytes (a multiple of 16, both addresses 16-byte aligned) of fp32 at src in shared
// memory into dst in global memory (a bulk-group operation, like the tensor reduction).
DEV void bulk_reduce_add_f32(float *dst, const float *src, unsigned bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(
                   reinterpret_cast<unsigned long long>(dst)),
               "r"(smem_u32(src)), "r"(bytes)
               : "memory");
}
DEV void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
DEV void bulk_wait_read0() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
DEV void bulk_wait0() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Orders this thread's ordinary shared-memory writes before later reads by the async
// proxy (wgmma, TMA).
DEV void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// This thread's warpgroup. FWD_UNIFORM (sm90's forward since call 44, experiment sm90u):
// the forward reads it through a warp shuffle from lane 0, which tells the compiler the
// value is the same across the warp (it is), so that what is computed from it (the wgmma
// descriptors' bases) can live in uniform registers instead of being moved there (R2UR)
// before every wgmma: forward +0.3 to +2% at head dim 128, +0.5 to +4% at 64. The backward
// keeps the plain index (sm90u's backward: -2 to +1% at 128).
DEV int warpgroup_index() { return (int)threadIdx.x / 128; }
#ifdef LONGCA_FWD_UNIFORM
DEV int warpgroup_index_fwd() { return __shfl_sync(0xffffffffu, (int)threadIdx.x / 128, 0); }
#else
DEV int warpgroup_index_fwd() { return (int)threadIdx.x / 128; }
#endif
// Four 8 x 8 matrices of 16-bit elements from the accumulator's fragments (register i of a
// thread: row lane / 4, columns 2 (lane % 4) and the next, of matrix i) to shared memory,
// lanes 8 i .. 8 i + 7 giving the addresses of matrix i's rows (16 bytes each).
DEV void stsm_x4(unsigned addr, unsigned r0, unsigned r1, unsigned r2, unsigned r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}
// A barrier among some warps: id 1-15, count threads (a multiple of 32).
DEV void named_sync(int id, int count) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory"); }
// Arrives at a barrier among some warps without waiting for it.
DEV void named_arrive(int id, int count) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory"); }

#include "worklist.cuh"

// Sets the scores of a partial tile's masked pairs to -inf (rows queries from r0, keys
// from k0). A tile wider than 128 keys (the wide forward, sm90's since call 62) takes its bits
// in two parts, the first 128 keys and the rest (64 bits hold 128 columns of a thread).
template <int N> DEV void mask_tile(float (&sc)[N / 2], const WorkList &wl, int ref, int r0, int k0, int t) {
  if constexpr (N <= 128) {
    const unsigned long long bits = tile_bits<N, false>(wl, ref, r0, k0, t);
#pragma unroll
    for (int j = 0; j < N / 2; j++)
      if (!(bits >> j & 1ull)) sc[j] = -INFINITY;
  } else {
    static_assert(N - 128 <= 128 && N % 8 == 0, "two parts of at most 128 keys");
    const unsigned long long lo = tile_bits<128, false>(wl, ref, r0, k0, t);
    const unsigned long long hi = tile_bits<N - 128, false>(wl, ref, r0, k0 + 128, t);
#pragma unroll
    for (int j = 0; j < 64; j++)
      if (!(lo >> j & 1ull)) sc[j] = -INFINITY;
#pragma unroll
    for (int j = 0; j < N / 2 - 64; j++)
      if (!(hi >> j & 1ull)) sc[64 + j] = -INFINITY;
  }
}

// ---- the forward -------------------------------------------------------------------
// A block owns one 64 NC-row query tile of one query head (128 rows; 192 with three
// consumers, NC below). Warpgroup 0 produces: its first thread loads Q once and then K and V
// tiles of the work list into a STAGES-deep ring. Warpgroups 1 .. NC consume, 64 query rows
// each: S = Q K^T by wgmma from shared memory, the mask and the online softmax in registers,
// O += P V by wgmma with P from registers.
constexpr int SBM = 128, SBN = 128, STAGES = 2;
constexpr int CHUNK = 64;  // columns of one 128-byte swizzled chunk (16-bit elements)

template <int D, int QM = SBM, int BN = SBN> struct SmemLayout {
  static constexpr int kChunks = D / CHUNK;
  static constexpr int kQBytes = QM * D * 2;
  static constexpr int kKVBytes = BN * D * 2;
  // Q tiles: two (the persistent forward's next work item loads early), one in the wide
  // head-dim-128 forward (sm90's since call 62: 176-key tiles, never persistent; two Q tiles
  // and its K/V ring pass the 227 KB a block may have)
  static constexpr int kQTiles = BN == 176 ? 1 : 2;
  static constexpr int kQ = 0;
  static constexpr int kK = kQ + kQTiles * kQBytes;
  static constexpr int kV = kK + STAGES * kKVBytes;
  static constexpr int kBar = kV + STAGES * kKVBytes;
  // barriers: fullQ[2], emptyQ[2], fullK[S], fullV[S], emptyK[S], emptyV[S]
  static constexpr int kBytes = kBar + 8 * (4 + 4 * STAGES) + 1024;  // + alignment slack
};

// The forward's registers a thread (setmaxnreg: the producer's, a consumer's) by its consumer
// warpgroups NC: the producer and the consumers together within the block's registers at
// launch (65536 over the block's threads, in steps of 8; one block a multiprocessor).
template <int NC> struct FwdRegs {
  static constexpr int kProd = NC == 3 ? 32 : 40;
  static constexpr int kCons = NC == 3 ? 160 : 232;
  static constexpr int kLaunch = 65536 / (128 * (NC + 1)) / 8 * 8;  // registers a thread at launch
  static_assert(kProd + NC * kCons <= (NC + 1) * kLaunch, "setmaxnreg past the block's registers");
};

// A work item of the forward: query tile qt of head h, its entries e0 .. e1 of the work
// list. Items are numbered as the non-persistent grid is laid out, heads fastest, row
// tiles in the list's (heaviest first) order; with KVM a KV head's items come together
// instead: its group's query heads fastest, then its row tiles in the list's order, then the
// KV heads, so that the blocks running at once read the K and V of one or two KV heads
// (call 68: sm90's d64 full 16K forward read 1.54 GB from DRAM at an L2 hit rate of 84%,
// cuDNN's 0.17 GB at 99%, every KV head's K and V wanted at once; call 69, d128 full 16K:
// 7.26 GB at 78% before, 0.34 GB at 99% with KVM). KVM at head dim 128 in sm90 since call 69
// (LONGCA_FWD_KVMAJOR128: +1.3% mean over full and causal 8K-32K on an H100). At head dim 64
// it did not pay: experiment sm90kv, calls 69 and 71 (-2.2 to +2.4%, -1.7 to +0.5%); sm90kv64
// with the counter, call 99 (8K -2.5%, 16K-32K +1.2 to +2.3%); sm90kl, KV-major from 24 MiB of
// K and V, call 104: the DRAM read 1.54 -> 0.17 GB at 99% and the launch as long (7.90 ms),
// the other masks' geomean -0.4% (all removed).
#if defined(LONGCA_FWD_KVMAJOR128)
template <int D> constexpr bool kFwdKVMajor = D == 128;
#else
template <int D> constexpr bool kFwdKVMajor = false;
#endif
// The forward's overlapped loop reads the next tile's work-list entry (its key tile and mask
// reference) a whole turn ahead (LONGCA_FWD_ENTRY_AHEAD, sm90's since call 72's sm90ea), not
// at the start of that tile's softmax: call 71's stall samples of sm90's d64 full 8K forward
// put 2.6% of the consumers' samples on that load's use (long scoreboard, the load issued
// after the turn's waits, which order memory). Call 72 (an H100): d64 full / causal 8K-16K
// +0.6 to +2.1%, d128 -0.2 to +3.4%; ptxas 12.4 no longer spills 16 bytes in fwd90mo.
#if defined(LONGCA_FWD_ENTRY_AHEAD)
constexpr bool kFwdEntryAhead = true;
#else
constexpr bool kFwdEntryAhead = false;
#endif
// Where the forward's tiles start (experiment sm90rg, LONGCA_FWD_RAGGED): at the work list's
// bounds (row tile qt's rows bounds[qt] .. bounds[row_tiles + qt] - 1, key tile kt's keys from
// bounds[2 row_tiles + kt]), so that a ragged list's tiles start at its documents (cuDNN's
// THD layout: at 8K-16K seed 42 full_document and causal_document visit 3-4% fewer key
// positions); without it at the multiples of the tiles, rows to sq.
#if defined(LONGCA_FWD_RAGGED)
constexpr bool kFwdRagged = true;
#else
constexpr bool kFwdRagged = false;
#endif
// A packed list's launch passes no bounds (null): its tiles at the multiples, no loads (call
// 74: the define cost the d64 forward 1.3% on lists it left packed when they were read).
DEV int fwd_row0(const WorkList &wl, int qt, int tile) { return kFwdRagged && wl.bounds ? wl.bounds[qt] : qt * tile; }
DEV int fwd_row_end(const WorkList &wl, int qt, int sq) { return kFwdRagged && wl.bounds ? wl.bounds[wl.row_tiles + qt] : sq; }
DEV int fwd_col0(const WorkList &wl, int kt, int tile) { return kFwdRagged && wl.bounds ? wl.bounds[2 * wl.row_tiles + kt] : kt * tile; }
// The lean forward's running maximum moved lazily at head dim 128 (LONGCA_FWD_LAZY_MAX, sm90's
// since call 75's sm90lz: d128 +1.5 to +2%, d64 -0.6 to -2.1% and left out there;
// FlashAttention-4's conditional rescaling): a row's subtraction point m moves to the
// tile's maximum (in log2 units) only where that passes it by more than 8, so P = exp2(s
// scale log2e - m) reaches at most 256 (bf16 and fp16 hold it; O and the sums are fp32),
// alpha is exactly 1 without its MUFU.EX2 wherever m stays, and the warp's rescale of O (32
// FMUL at d64, 64 at d128, after the wait for P V) is skipped unless a row of it moved: for
// random scores a point, once set, moves again about never (a float32 simulation, 64 rows:
// no warp-tile rescaled after the rows' first at 8K or 16K, against 118 of 256 and 158 of
// 512 without it); the
// maximum reaches the point in three instructions where sm90 takes four. lse = m ln2 + ln l
// holds for any m.
// Without it the rescale is skipped only where no row's maximum grew at all: for random scores
// a warp's 16 rows see a new maximum at key tile k with odds about 1 - e^(-16 / k), so at 8K
// (64 key tiles) it rescales in about half of the tiles, at 16K in a third.
#if defined(LONGCA_FWD_LAZY_MAX)
constexpr bool kFwdLazyMax = true;
#else
constexpr bool kFwdLazyMax = false;
#endif
// a forward work-list entry: its key tile, its mask reference (-1: the tile is whole)
struct FwdEntry {
  int kt, ref;
};
struct FwdItem {
  int h, kvh, qt, e0, e1;
};
// kvm is the order (kFwdKVMajor): one pair of divisions for either, the order choosing the
// divisor and which quotient is which (a choice at run time, experiment sm90kl, cost the
// consumers no second copy of the arithmetic this way)
DEV FwdItem fwd_item(const WorkList &wl, int item, int hq, int hkv, bool kvm) {
  FwdItem it;
  const int gq = hq / hkv, a = kvm ? gq * wl.row_tiles : hq;
  const int x1 = item / a, r1 = item - x1 * a;  // KVM: the KV head, its item; else: the row, the head
  const int x2 = r1 / gq, r2 = r1 - x2 * gq;    // KVM: the row, the group's head; else: the KV head
  it.kvh = kvm ? x1 : x2;
  it.h = kvm ? x1 * gq + r2 : r1;
  const int row = kvm ? x2 : x1;
  const int list = wl.per_head ? it.kvh : 0;
  it.qt = wl.order[list * wl.row_tiles + row];
  it.e0 = wl.start[list * (wl.row_tiles + 1) + it.qt];
  it.e1 = wl.start[list * (wl.row_tiles + 1) + it.qt + 1];
  return it;
}

// The forward. Without PERSIST a block does the one work item of its grid position; with
// it, a grid of one block per multiprocessor walks items blockIdx.x, + gridDim.x, ...: the
// producer then loads the next item's Q and K/V tiles while the consumers finish the
// last one.
// LEAN (experiment sm90l; the softmax scale must be positive): fewer instructions a tile
// in the softmax: the row maxima are taken over the unscaled scores and the scale folded
// into the exponent's subtraction (one FFMA a score instead of a multiply and a
// subtraction), and the accumulator's rescale is skipped when no row of the warp has a
// new maximum (every alpha is exactly 1: the same result).
// NC (LONGCA_FWD_THREE, sm90's head-dim-64 forward since call 26, head dim 64 only): consumer warpgroups, 2 or 3,
// 64 query rows each (a 64 NC-row tile); they take turns on the tensor cores in a ring
// (warpgroup c waits at named barrier 1 + c and hands over at the next one). With 3 the
// block is 512 threads: consumers at 160 registers, the producer at 32 (65536 in all).
// DYN (LONGCA_FWD_DYN, sm90's since the twenty-seventh session's sm90dy; with PERSIST): the items are handed out at run time,
// not by the block's index: block b starts at item b, and the producer takes each next one by
// an atomic add on ctr (zeroed before the launch), plus gridDim.x, once it has issued the
// current item's loads, and passes each item's number to the consumers in dyn_slot[the Q
// tile] before it arms that tile's barrier (an item without entries, or -1 for no more
// items, with a plain arrival and no load), so that a block that drew short items takes more.
template <int D, typename T, bool PERSIST, bool LEAN, int NC = 2, bool OV = false, int BN = SBN, bool DYN = false>
DEV void fwd_sm90(const TmaDesc &tq, const TmaDesc &tk, const TmaDesc &tv, T *__restrict__ o, float *__restrict__ lse,
                  int sq, int sk, int hq, int hkv, float scale_log2, WorkList wl, int *ctr = nullptr) {
  static_assert(!DYN || PERSIST, "the dynamic walk is a persistent forward's");
  static_assert(NC == 2 || (NC == 3 && D == 64), "three consumer warpgroups fit the registers at head dim 64 only");
  static_assert(BN == 128 || (BN == 64 && NC == 2) || (BN == 176 && NC == 2 && D == 128 && !PERSIST),
                "64-key tiles with two consumer warpgroups; 176-key tiles at head dim 128, one work item a block");
  constexpr int QM = 64 * NC, CT = 128 * NC;  // query rows a tile, consumer threads
  constexpr int kProdRegs = FwdRegs<NC>::kProd, kConsRegs = FwdRegs<NC>::kCons;  // setmaxnreg
  using L = SmemLayout<D, QM, BN>;
  static_assert(!PERSIST || L::kQTiles == 2, "the persistent forward loads the next item's Q into a second tile");
  extern __shared__ unsigned char smem_raw[];
  unsigned char *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  T *sQs = reinterpret_cast<T *>(smem + L::kQ);
  T *sK = reinterpret_cast<T *>(smem + L::kK);
  T *sV = reinterpret_cast<T *>(smem + L::kV);
  u64 *bars = reinterpret_cast<u64 *>(smem + L::kBar);
  u64 *fullQ = bars, *emptyQ = bars + 2, *fullK = bars + 4, *fullV = fullK + STAGES, *emptyK = fullV + STAGES,
      *emptyV = emptyK + STAGES;

  const int tid = threadIdx.x, wg = warpgroup_index_fwd();
  const int items = hq * wl.row_tiles;
  const int first = PERSIST ? blockIdx.x : blockIdx.y * hq + blockIdx.x;
  const int step = PERSIST ? gridDim.x : items;
  __shared__ int dyn_slot[2];  // (DYN) the item of each Q tile, -1: none left

  if (tid == 0) {
    for (int b = 0; b < 2; b++) {
      mbar_init(&fullQ[b], 1);
      mbar_init(&emptyQ[b], CT);
    }
    for (int s = 0; s < STAGES; s++) {
      mbar_init(&fullK[s], 1);
      mbar_init(&fullV[s], 1);
      mbar_init(&emptyK[s], CT);
      mbar_init(&emptyV[s], CT);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProdRegs) : "memory");
    if (tid == 0) {
      tma_prefetch_desc(&tq);
      tma_prefetch_desc(&tk);
      tma_prefetch_desc(&tv);
      int n = 0, qn = 0;  // tiles and Q tiles loaded so far: their ring positions
      // (DYN) the next item drawn once this one's loads are issued: the consumers still have
      // its last tiles to run, under which the atomic's latency passes
      for (int item = first; item < items || DYN; item = DYN ? atomicAdd(ctr, 1) + gridDim.x : item + step) {
        FwdItem it;
        if constexpr (DYN) {
          if (item < items) it = fwd_item(wl, item, hq, hkv, kFwdKVMajor<D>);
        } else {
          it = fwd_item(wl, item, hq, hkv, kFwdKVMajor<D>);
          if (it.e0 == it.e1) continue;
        }
        const int qb = qn & 1;
        mbar_wait(&emptyQ[qb], ((qn >> 1) & 1) ^ 1);
        if constexpr (DYN) {
          dyn_slot[qb] = item < items ? item : -1;  // published by the barrier's arrival (release)
          // no Q to load: the consumers read -1 and stop, or (an item without entries) write
          // its rows' zeros and -inf, as the static walk's consumers do for the items its
          // producer skips
          if (item >= items || it.e0 == it.e1) {
            mbar_arrive(&fullQ[qb]);
            if (item >= items) break;
            qn++;
            continue;
          }
        }
        mbar_expect_tx(&fullQ[qb], L::kQBytes);
#pragma unroll
        for (int c = 0; c < L::kChunks; c++)
          tma_load3(sQs + qb * QM * D + c * QM * CHUNK, &tq, &fullQ[qb], c * CHUNK, it.h, fwd_row0(wl, it.qt, QM));
        qn++;
        for (int e = it.e0; e < it.e1; e++, n++) {
          const int s = n % STAGES;
          const unsigned ph = (n / STAGES) & 1;
          const int kt = wl.entries[2 * e], k0 = fwd_col0(wl, kt, BN);
          mbar_wait(&emptyK[s], ph ^ 1);
          mbar_expect_tx(&fullK[s], L::kKVBytes);
#pragma unroll
          for (int c = 0; c < L::kChunks; c++)
            tma_load3(sK + s * BN * D + c * BN * CHUNK, &tk, &fullK[s], c * CHUNK, it.kvh, k0);
          mbar_wait(&emptyV[s], ph ^ 1);
          mbar_expect_tx(&fullV[s], L::kKVBytes);
#pragma unroll
          for (int c = 0; c < L::kChunks; c++)
            tma_load3(sV + s * BN * D + c * BN * CHUNK, &tv, &fullV[s], c * CHUNK, it.kvh, k0);
        }
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsRegs) : "memory");
  const int cw = wg - 1;                  // consumer warpgroup: query rows 64 cw .. 64 cw + 63
  if (cw == NC - 1) named_arrive(1, 256);  // consumer 0 takes the first turn
  const int lt = tid % 128, warp = lt / 32, lane = lt % 32, g = lane / 4, t = lane % 4;
  constexpr int OR = D / 2;                // O accumulator registers (m64 x D)
  int n = 0, qn = 0;                       // tiles and Q tiles consumed so far
  // (DYN) the producer's item for the next Q tile, waited for here (not below): items when
  // it has none left
  auto drawn = [&]() {
    mbar_wait(&fullQ[qn & 1], (qn >> 1) & 1);
    const int it = dyn_slot[qn & 1];
    return it < 0 ? items : it;
  };
  for (int item = DYN ? drawn() : first; item < items; item = DYN ? drawn() : item + step) {
  const FwdItem itm = fwd_item(wl, item, hq, hkv, kFwdKVMajor<D>);
  const int h = itm.h, e0 = itm.e0, e1 = itm.e1, q0 = fwd_row0(wl, itm.qt, QM), q_end = fwd_row_end(wl, itm.qt, sq);
  const int r0 = q0 + cw * 64 + warp * 16 + g;  // this thread's rows: r0 and r0 + 8
  float acc[OR];
#pragma unroll
  for (int i = 0; i < OR; i++) acc[i] = 0.f;
  constexpr bool LZ = LEAN && kFwdLazyMax && D == 128;  // (call 75: d128 +1.5 to +2%, d64 -0.6 to -2.1%)
  // (probes, wrong by design: sm90probe-noexp, sm90probe-nomma; the forty-fifth session's
  // d64 study) the three-warpgroup d64 forward without its exponentials (the exponent's FFMA
  // kept, MUFU.EX2 gone) or without its products (no wgmma issued; the waits, turns and
  // loads kept): what each half of the tile costs alone. Never a result: their checks fail.
#ifdef LONGCA_PROBE_FWD_NOEXP
  constexpr bool kNoExp = D == 64 && NC == 3;
#else
  constexpr bool kNoExp = false;
#endif
#ifdef LONGCA_PROBE_FWD_NOMMA
  constexpr bool kNoMMA = D == 64 && NC == 3;
#else
  constexpr bool kNoMMA = false;
#endif
  const float kM0 = LZ ? -1e30f : -INFINITY;  // the rows' first subtraction point
  float m[2] = {kM0, kM0}, l[2] = {0.f, 0.f};
  const int qb = qn & 1;
  if (!DYN && e0 < e1) mbar_wait(&fullQ[qb], (qn >> 1) & 1);
  const T *qw = sQs + qb * QM * D + cw * 64 * CHUNK;  // this warpgroup's 64 rows of each chunk
  // S = Q K^T of the tile in stage s, issued (not waited for)
  const unsigned loQw = sw128_lo(qw, 16);  // descriptors are one add from a base
  auto issue_qk = [&](float(&sc)[BN / 2], int s) {
    const T *cK = sK + s * BN * D;
    const unsigned loK = sw128_lo(cK, 16);
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      const int c = kk / 4, k16 = (kk % 4) * 16;
      const u64 da = sw128_at(loQw, (c * QM * CHUNK + k16) * 2);
      const u64 db = sw128_at(loK, (c * BN * CHUNK + k16) * 2);
      if constexpr (kNoMMA)
        ;
      else if constexpr (BN == 128)
        Ops<T>::template ss128<0>(sc, da, db, kk > 0);
      else if constexpr (BN == 176)
        Ops<T>::template ss176<0>(sc, da, db, kk > 0);
      else
        Ops<T>::template ss64<0, 0>(sc, da, db, kk > 0);
    }
  };
  // O += P V of the tile in stage s, issued: keys kk*16 .. kk*16+15 are 16 rows of 128
  // bytes in every chunk, chunks BN*128 bytes apart; P from registers
  constexpr int PK = BN / 16;  // P's register fragments
  auto issue_pv = [&](const unsigned(&pa)[PK][4], int s) {
    const T *cV = sV + s * BN * D;
    const unsigned loV = sw128_lo(cV, BN * CHUNK * 2);
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++)
      if constexpr (!kNoMMA) PV<T, D>::run(acc, pa[kk], sw128_at(loV, kk * 16 * CHUNK * 2));
  };
  // P of the scores sc, bf16 (fp16), into pa
  auto put_p = [&](const float(&sc)[BN / 2], unsigned(&pa)[PK][4]) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++)
#pragma unroll
      for (int x = 0; x < 4; x++) pa[kk][x] = Ops<T>::pack(sc[8 * kk + 2 * x], sc[8 * kk + 2 * x + 1]);
  };
  // the scores of entry e to P (packed), with the row maxima m moved on; alpha rescales
  // what was accumulated before, sum is the rows' new mass
  // entry e of the work list: its key tile and mask reference (-1: a full tile)
  auto entry = [&](int e) { return FwdEntry{wl.entries[2 * e], wl.entries[2 * e + 1]}; };
  auto softmax = [&](float(&sc)[BN / 2], FwdEntry ent, unsigned(&pa)[PK][4], float(&alpha)[2], float(&sum)[2], bool pack = true) {
    const int kt = ent.kt, ref = ent.ref;
    if (!LEAN) {
#pragma unroll
      for (int j = 0; j < BN / 2; j++) sc[j] *= scale_log2;
    }
    if (ref >= 0) mask_tile<BN>(sc, wl, ref, r0, fwd_col0(wl, kt, BN), t);
#pragma unroll
    for (int r = 0; r < 2; r++) {
      float mx = LEAN ? -INFINITY : m[r];
#pragma unroll
      for (int j = 0; j < BN / 8; j++) mx = fmaxf(mx, fmaxf(sc[4 * j + 2 * r], sc[4 * j + 2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
      float use;
      if (LZ) {
        // the subtraction point moves to the tile's maximum only where that passes it by more
        // than 8 (P <= 256 where it stays; FlashAttention-4's rule); m starts at -1e30, not
        // -inf, so that a row without keys yet keeps a finite point and its masked scores'
        // exponentials are exactly 0 (a tile's maximum of -inf never passes it). Three
        // instructions from the maximum to the point (FMUL, FSETP against m + 8, FSEL; sm90's
        // four: FMUL, FMNMX, and the -inf test's FSETP, FSEL). alpha is 1 where the point
        // stays and while it is kM0 (acc and l are still 0: as sm90's first tile, the
        // rescale then compiled out of the first tile's softmax).
        const float t = mx * scale_log2;
        use = t > m[r] + 8.f ? t : m[r];
        alpha[r] = use == m[r] || m[r] == kM0 ? 1.f : exp2f(m[r] - use);
        mx = use;
      } else {
        if (LEAN) mx = fmaxf(m[r], mx * scale_log2);  // the maximum in the exponent's units (scale > 0)
        use = mx == -INFINITY ? 0.f : mx;
        // 0 when m[r] is -inf; LEAN: 1 then (acc and l are still 0: the same result, and the
        // rescale can be skipped on a warp's first tile)
        alpha[r] = LEAN && m[r] == -INFINITY ? 1.f : exp2f(m[r] - use);
      }
      m[r] = mx;
      float sm = 0.f;
#pragma unroll
      for (int j = 0; j < BN / 8; j++) {
        if (kNoExp) {
          sc[4 * j + 2 * r] = fmaf(sc[4 * j + 2 * r], scale_log2, -use);
          sc[4 * j + 2 * r + 1] = fmaf(sc[4 * j + 2 * r + 1], scale_log2, -use);
        } else if (LEAN) {  // exp2(s scale log2e - max): one FFMA; masked scores are -inf either way
          sc[4 * j + 2 * r] = exp2f(fmaf(sc[4 * j + 2 * r], scale_log2, -use));
          sc[4 * j + 2 * r + 1] = exp2f(fmaf(sc[4 * j + 2 * r + 1], scale_log2, -use));
        } else {
          sc[4 * j + 2 * r] = exp2f(sc[4 * j + 2 * r] - use);
          sc[4 * j + 2 * r + 1] = exp2f(sc[4 * j + 2 * r + 1] - use);
        }
        sm += sc[4 * j + 2 * r] + sc[4 * j + 2 * r + 1];
      }
      sum[r] = sm;
    }
    if (pack) put_p(sc, pa);
  };
  auto rescale = [&](const float(&alpha)[2], const float(&sum)[2]) {
#pragma unroll
    for (int r = 0; r < 2; r++) l[r] = l[r] * alpha[r] + sum[r];
    // LEAN: every alpha of the warp exactly 1 (no new maximum) leaves acc as it is
    if (LEAN && !__any_sync(0xffffffff, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#pragma unroll
    for (int r = 0; r < 2; r++) {
#pragma unroll
      for (int j = 0; j < D / 8; j++) {
        acc[4 * j + 2 * r] *= alpha[r];
        acc[4 * j + 2 * r + 1] *= alpha[r];
      }
    }
  };

  float sc[BN / 2], alpha[2], sum[2];
  unsigned pa[PK][4];
  if constexpr (kNoMMA) {  // (the probe) scores no product writes: defined, and tile-dependent through the softmax
#pragma unroll
    for (int j = 0; j < BN / 2; j++) sc[j] = (float)(j & 7) * scale_log2;
  }
  {
    // The consumer warpgroups take turns on the tensor cores (named barriers 1 .. NC, a ring):
    // a turn issues tile i's P V and tile i+1's Q K^T together, then hands over, so one
    // warpgroup's softmax runs while the others' products do. Tile e0's Q K^T comes first,
    // outside the turns.
    if (e0 < e1) {
      const int s = n % STAGES;
      mbar_wait(&fullK[s], (n / STAGES) & 1);
      wgmma_fence();
      issue_qk(sc, s);
      wgmma_commit();
      wgmma_wait<0>();
      reg_fence(sc);
      mbar_arrive(&emptyK[s]);
      softmax(sc, entry(e0), pa, alpha, sum);
      rescale(alpha, sum);
    }
    // (OV, sm90's head-dim-128 forward since call 26) tile i+1's Q K^T, then tile i's P V, as two groups: the
    // exponentials of tile i+1 run under P V (in sc, which Q K^T has finished); P is packed
    // into pa and acc rescaled once P V, which reads pa and writes acc, is done
    // (FlashAttention-3's order within a warpgroup, with the turns). The last tile's P V
    // is peeled off, so that every turn of the loop issues both groups: ptxas serialises
    // the wgmma (C7514) when Q K^T is conditional.
    // kFwdEntryAhead: tile e + 1's entry, read a turn before its softmax
    FwdEntry ahead = kFwdEntryAhead && OV && e0 + 1 < e1 ? entry(e0 + 1) : FwdEntry{0, -1};
    for (int e = e0; OV && e + 1 < e1; e++) {
      const int i = n + e - e0, s = i % STAGES, s1 = (i + 1) % STAGES;
      const FwdEntry ent = ahead;
      if (kFwdEntryAhead && e + 2 < e1) ahead = entry(e + 2);
      mbar_wait(&fullV[s], (i / STAGES) & 1);
      mbar_wait(&fullK[s1], ((i + 1) / STAGES) & 1);
      named_sync(1 + cw, 256);
      reg_fence(acc);
      wgmma_fence();
      issue_qk(sc, s1);
      wgmma_commit();
      issue_pv(pa, s);
      wgmma_commit();
      named_arrive(NC == 2 ? 2 - cw : 1 + (cw + 1) % NC, 256);
      wgmma_wait<1>();
      reg_fence(sc);
      mbar_arrive(&emptyK[s1]);
      softmax(sc, kFwdEntryAhead ? ent : entry(e + 1), pa, alpha, sum, false);
      reg_fence(sc);
      reg_fence(sum);
#ifndef EXP_NOPIN
      // ptxas schedules the wait for P V as early as it can, ahead of the exponentials:
      // a shared store that depends on every exponential (through the rows' sums) and never
      // runs (a sum of exponentials is never -inf) keeps the wait behind them
      asm volatile("{ .reg .pred p; setp.eq.f32 p, %0, 0fFF800000; @p st.shared.f32 [%1], %0; }" ::"f"(sum[0] + sum[1]),
                   "r"(smem_u32(smem)) : "memory");
#endif
      wgmma_wait<0>();
      reg_fence(acc);
      reg_fence(pa);
      mbar_arrive(&emptyV[s]);
      put_p(sc, pa);
      rescale(alpha, sum);
    }
    if (OV && e0 < e1) {  // the last tile's P V
      const int i = n + e1 - 1 - e0, s = i % STAGES;
      mbar_wait(&fullV[s], (i / STAGES) & 1);
      named_sync(1 + cw, 256);
      reg_fence(acc);
      wgmma_fence();
      issue_pv(pa, s);
      wgmma_commit();
      named_arrive(NC == 2 ? 2 - cw : 1 + (cw + 1) % NC, 256);
      wgmma_wait<0>();
      reg_fence(acc);
      reg_fence(pa);
      mbar_arrive(&emptyV[s]);
    }
    for (int e = e0; !OV && e < e1; e++) {
      const int i = n + e - e0, s = i % STAGES, s1 = (i + 1) % STAGES;
      const bool more = e + 1 < e1;
      mbar_wait(&fullV[s], (i / STAGES) & 1);
      if (more) mbar_wait(&fullK[s1], ((i + 1) / STAGES) & 1);
      named_sync(1 + cw, 256);  // this warpgroup's turn
      reg_fence(acc);
      wgmma_fence();
      issue_pv(pa, s);
      if (more) issue_qk(sc, s1);
      wgmma_commit();
      named_arrive(NC == 2 ? 2 - cw : 1 + (cw + 1) % NC, 256);  // the next warpgroup's turn
      wgmma_wait<0>();
      reg_fence(acc);
      reg_fence(sc);
      mbar_arrive(&emptyV[s]);
      if (more) {
        mbar_arrive(&emptyK[s1]);
        softmax(sc, entry(e + 1), pa, alpha, sum);
        rescale(alpha, sum);
      }
    }
  }

  if (DYN || e0 < e1) {  // (DYN: an item without entries had its Q tile's turn too)
    mbar_arrive(&emptyQ[qb]);
    qn++;
    n += e1 - e0;
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
    if (qi < q_end) {  // q_end: sq, or a ragged row tile's end (LONGCA_FWD_RAGGED)
      T *orow = o + (long long)qi * qs + (long long)h * D;
#pragma unroll
      for (int j = 0; j < D / 8; j++)
        *reinterpret_cast<unsigned *>(orow + j * 8 + 2 * t) = Ops<T>::pack(acc[4 * j + 2 * r] * inv, acc[4 * j + 2 * r + 1] * inv);
      if (t == 0) lse[(long long)h * sq + qi] = sum > 0.f ? m[r] * 0.6931471805599453f + logf(sum) : -INFINITY;
    }
  }
  }
  // the last consumer's last hand-over is still pending at barrier 1: take it, so no
  // arrival outlives the block
  if (cw == 0) named_sync(1, 256);
}

// ---- the backward -------------------------------------------------------------------
// A block owns 128 keys of one KV head and walks the transposed work list (the 64-query
// tiles touching them) for every query head of the group. Warpgroup 0 produces: K and V
// once, then per step a Q tile, a dO tile and their rows of lse*log2(e) and Dsum into a
// STAGES-deep ring (2; 3, experiment sm90bp, lost at head dim 128: docs/perf.md "Calls
// 48-51"). Warpgroups 1 and 2 own 64 keys each: S^T = K Q^T and dP^T = V dO^T by wgmma from shared memory; P^T and dS^T in registers; dV += P^T dO and dK += dS^T Q by
// wgmma with A from registers (dK and dV stay in registers for the whole walk); dS^T to
// shared memory for dQ = dS K, staged in shared memory as fp32 and added into the dQ
// accumulator by a TMA reduction (no per-element atomics). With D = 128 each warpgroup
// computes 64 of dQ's columns over all 128 keys (one 32 KB reduction a step); with D = 64
// each adds its own keys' share of all columns.
constexpr int BBM9 = 64, BBN9 = 128;

// The fragment-order dQ chunk (sm90's backward since call 13, F): a consumer thread lt (0..127) of a
// warpgroup holds, after dQ = dS K (m64n64), dqa[4 jj + 2 r + e] = dQ[row][col] with
// row = 16 (lt / 32) + (lt % 32) / 4 + 8 r and col = 8 jj + 2 (lt % 4) + e (wgmma's
// accumulator layout); it stores dqa[4 jj .. 4 jj + 3] as the float4 dq_frag_slot(lt, jj)
// of a 64 x 64 chunk (consecutive threads, consecutive 16 bytes: no bank conflict), and the
// conversion finds dQ[row][col] at dq_frag_pos(row, col). kernels/cuda's host test checks
// the two against the layout.
DEV int dq_frag_slot(int lt, int jj) { return jj * 128 + lt; }
DEV int dq_frag_pos(int row, int col) {
  const int lt = (row >> 4) * 32 + (row & 7) * 4 + ((col & 7) >> 1);
  return dq_frag_slot(lt, col >> 3) * 4 + ((row >> 3) & 1) * 2 + (col & 1);
}

// NB keys a block (BBN9; 192 in the three-consumer backward at head dim 64, experiment
// sm90b3): kNC consumer warpgroups of 64 keys each (two at D = 128, where they split dQ's
// columns), each with its own dQ stage and its pair of dQ barriers. QS queries a step
// (BBM9; 128 at head dim 64, sm90's since call 55, two of the work list's query tiles a
// step: the two warpgroups then split dQ's rows, a query tile each).
template <int D, int NB = BBN9, int ST = STAGES, int XB = 0, int QS = BBM9> struct BwdLayout {
  static constexpr int kChunks = D / CHUNK;
  static constexpr bool kSplit = D == 128 || QS == 2 * BBM9;  // dQ split between the warpgroups (columns, or query tiles)
  static constexpr int kNC = kSplit ? 2 : NB / 64;
  static_assert(!kSplit || NB == 128, "the split dQ needs 128 keys a block");
  static_assert(NB % 64 == 0 && kNC >= 2 && kNC <= 3, "two or three consumer warpgroups of 64 keys");
  static_assert(QS == BBM9 || (QS == 2 * BBM9 && D == 64), "128 queries a step at head dim 64 only");
  static constexpr int kKV = NB * D * 2;
  static constexpr int kQT = QS * D * 2;
  static constexpr int kK = 0;
  static constexpr int kV = kK + kKV;
  static constexpr int kQ = kV + kKV;                  // [ST] Q tiles
  static constexpr int kdO = kQ + ST * kQT;        // [ST] dO tiles
  static constexpr int kdS = kdO + ST * kQT;       // [2][QS / 64][NB keys][64 queries] dS^T
  static constexpr int kdQ = kdS + 2 * NB * QS * 2;  // [kNC warpgroups][BBM9][64] fp32
  static constexpr int kL = kdQ + kNC * BBM9 * 64 * 4;   // [ST][QS] lse * log2(e)
  static constexpr int kDs = kL + ST * QS * 4;     // [ST][QS] Dsum
  // fullKV, fullQ[S], emptyQ[S], dqFull[kNC], dqEmpty[kNC], and XB more (PAIRS: emptyKV)
  static constexpr int kBar = kDs + ST * QS * 4;
  static constexpr int kBytes = kBar + 8 * (1 + 2 * ST + 2 * kNC + XB) + 1024;
};

// A warp of the producer warpgroup issues the dQ reductions: a consumer warpgroup hands
// its staged dQ over through an mbarrier and goes on (issuing them itself, the consumer
// warpgroup waited at two named barriers a step: measured 5-7% slower, docs/perf.md).
// Acquire and release on a global flag (the deterministic backward's per-tile turns).
DEV int ld_acquire(const int *p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
  return v;
}
DEV void st_release(int *p, int v) { asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory"); }
DEV void fence_async_global() { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }

// sm90's since call 61 (LONGCA_BWD_LV2): at head dim 128 a consumer thread reads its queries'
// lse log2e and Dsum as 8-byte pairs (queries 8 j + 2 t and the next are side by side:
// LDS.64, 16 a step instead of 32 scalar loads): call 60 read the d128 backward's warps
// stalled on the shared-memory queue (mio_throttle 0.71 an issued instruction against
// cuDNN's 0.05, full 32K), and the lse / Dsum loads are the most of bwd90e's shared-memory
// instructions. Offline (ptxas 12.4) the pairs cost bwd90e 4 bytes of spill (a reload a
// step; 2,720 instructions against 2,856), 52 bytes at the pairs' entries, and at head dim
// 64 (bwd90qq) 84 bytes against sm90's 32: so the unpaired entries at head dim 128 only;
// 16-byte loads over rows permuted within the tile (four a step) spilled 76 bytes at 128
// and 308 at 64, and were left out.
#ifdef LONGCA_BWD_LV2
constexpr bool LV2 = true;
#else
constexpr bool LV2 = false;
#endif
// LONGCA_BWD_LATE_FENCE (sm90's since call 79's sm90qf: d64 backward +1.6 to +4.9%, d128
// unpaired +0.5 to +2% on an H100): in the early backward's loop a step's dQ stage is
// published to the writer (the proxy fence, then the arrival on dqFull) after the next step's
// S^T and dP^T are issued, not straight after its stores: call 78 read 5.7% of the d128 full
// 16K backward's stall samples on that fence (FENCE.VIEW.ASYNC.S, waiting for the eight
// STS.128 before it), 2.6% on the arrival and 0.6% on its MEMBAR; issued later, the stores
// have drained behind the products' issue.
#ifdef LONGCA_BWD_LATE_FENCE
constexpr bool kLateFence = true;
#else
constexpr bool kLateFence = false;
#endif
// LONGCA_BWD_TAIL (sm90's since calls 85-86's sm90tp): entries of their own (bwd90et,
// bwd90est; the template's TL) take the unpaired head-dim-128 backward's blocks over a 1-D
// grid (bit 9 of sched), the whole waves' items unsplit in bwd90et and the last wave's items
// split in bwd90est (their first item in bits 12-30), dK and dV of those summed by
// bwd90_dkv_reduce_tail. The entries every other plan runs (bwd90e, bwd90es, ...) are
// compiled as without the define: call 82's sm90tp, its code in bwd90e and bwd90es
// themselves, moved cells it does not split by -4.9 to +4.3% (share_question 16K,
// sliding_window_causal 48K; one run each on an H100).
// LONGCA_BWD_TAIL_PAIRS (sm90's since calls 85-86, with LONGCA_BWD_TAIL): the same for the
// pairs' plan (bwd90ept whole waves, bwd90espt the last wave's split), an item a pair of key tiles.
// LONGCA_BWD_LATE_FENCE_PAIRS (sm90's since call 80's sm90qp: the paired d128 cells +1.2 to
// +2.6% on an H100, 11 of 13 up): the late publish in the pairs' entries too,
// at every step (also across the change of key tile, which waits for K and V but writes dK
// and dV to global memory only: the dQ stage is read by the writer whenever it is published).
#ifdef LONGCA_BWD_LATE_FENCE_PAIRS
constexpr bool kLateFencePairs = true;
#else
constexpr bool kLateFencePairs = false;
#endif

// The backward's step in place, over a thread's N elements of a 2N-query x 64-key
// warpgroup tile (rows keys, columns queries; N 32, or 64 at 128 queries a step): S^T becomes
// P^T = exp2(S^T scale log2e - lse log2e) and dP^T becomes dS^T = P^T (dP^T - Dsum), cL and
// cDs the tile's lse log2e and Dsum by query; PARTIAL: only the pairs whose bit is set in bits
// (tile_bits; bit 4 j + c of element 4 j + c), P^T and dS^T 0 elsewhere (dP^T is finite).
template <bool PARTIAL, bool V2 = false, int N>
DEV void p_ds(float (&st)[N], float (&dpt)[N], const float *cL, const float *cDs, float scale_log2, int t,
              unsigned long long bits) {
  static_assert(N == 32 || N == 64, "64 or 128 queries");
  if constexpr (V2) {  // the column group's two queries' lse log2e and Dsum in one load each
#pragma unroll
    for (int j = 0; j < N / 4; j++) {
      const float2 l2 = *reinterpret_cast<const float2 *>(cL + j * 8 + 2 * t);
      const float2 d2 = *reinterpret_cast<const float2 *>(cDs + j * 8 + 2 * t);
#pragma unroll
      for (int c = 0; c < 4; c++) {
        const float p = !PARTIAL || (bits >> (j * 4 + c) & 1ull) ? exp2f(st[4 * j + c] * scale_log2 - (c % 2 ? l2.y : l2.x)) : 0.f;
        st[4 * j + c] = p;
        dpt[4 * j + c] = p * (dpt[4 * j + c] - (c % 2 ? d2.y : d2.x));
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < N / 4; j++)
#pragma unroll
      for (int c = 0; c < 4; c++) {
        const int ql = j * 8 + 2 * t + (c % 2);
        const float p = !PARTIAL || (bits >> (j * 4 + c) & 1ull) ? exp2f(st[4 * j + c] * scale_log2 - cL[ql]) : 0.f;
        st[4 * j + c] = p;
        dpt[4 * j + c] = p * (dpt[4 * j + c] - cDs[ql]);
      }
  }
}

// STSM (sm90's since call 40, experiment sm90bs: +2 to +5% at both head dims): the
// backward's dS^T stored by stmatrix. (Its row statistics read as 8-byte pairs too spilled
// 140 bytes in the d64 backward under ptxas 12.4: left out.)
#ifdef LONGCA_BWD_STSM
constexpr bool STSM = true;
#else
constexpr bool STSM = false;
#endif
// PAIRS (sm90's since call 50; experiment sm90hp in call 49): where the host sets sched
// bit 3 (pairsPay: causal-shaped rows at head dim 128), a block walks two key tiles of its
// KV head one after the other, the heaviest still unplaced with the lightest (order[x],
// then order[rows - 1 - x]), the first from its last query tile down, the second from its
// first query tile up, and every step the group's query heads of one query tile in turn
// (heads inner). On causal rows every block is then as long as a full row and the blocks
// running together walk the same query tiles at the same time, as on full, so that Q, dO
// and dQ stay in L2: call 48 measured causal 16K's backward reading 17.4 GB from DRAM (L2
// hit rate 74%) where cuDNN's read 1.4 GB, and at 32K 73 GB; paired, 2.0 and 5.2 GB (call
// 49). K and V are loaded again between the two tiles, behind the emptyKV barrier.
#ifdef LONGCA_BWD_PAIRS
constexpr bool PAIRS = true;
#else
constexpr bool PAIRS = false;
#endif
// PR, a template parameter of the backward: the pairs' code in this entry (PAIRS's value
// by default: every backward entry of a module with LONGCA_BWD_PAIRS, sm90-c54's). sm90
// since call 59 (experiment sm90pe) compiles its module without LONGCA_BWD_PAIRS and the
// pairs into entries of their own (bwd90ep, bwd90esp; LONGCA_BWD_PAIRS_ENTRY), so that the
// unpaired blocks run a kernel without the pairs' branches and barrier (call 59: full +0.9
// to +1.8%, full_document +0.3 to +2.3%, the paired cells level).

// DET: the deterministic backward. Every query tile's dQ is added by the key tiles that
// visit it in increasing order: the writer of key tile kt waits until locks[h][tile] says
// the ranks[e] lower key tiles have added theirs, adds, waits for its additions to land,
// and passes the turn on. Blocks run in key-tile order (blockIdx.y, not the heaviest-first
// order) and without the rotation, so a block waits only on lower key tiles, which were
// started before it: no cycle.
// F (sm90's since call 13): dQ staged unscaled in fragment order and added by one 1-D bulk
// reduction a warpgroup into chunks of the accumulator (dq90_convertf undoes the order and
// scales); without F (sm90r), two swizzled tensor boxes, scaled.
// SPLIT: the group split (below) at head dim 128 too (experiment sm90g2, entries bwd90es):
// the blocks running together walk half the group's query heads, so a KV head's Q, dO and
// dQ in flight halve (the L2 model: causal 48K paired 58 -> 16 GB read from DRAM,
// causal_blockwise 32K 44 -> 3.9 with the key tiles the grid's fast index). Entries of their
// own: the unsplit backward at 128 lost 1-2% compiled with the split's code (call 44).
// Q2: 128 queries a step at head dim 64 (sm90's since call 55, entries bwd90qq): the d128
// backward's shape with the head dimension and the step's queries swapped (two consumer
// warpgroups of 64 keys, S^T and dP^T 64 x 128 a warpgroup, dK and dV 64 x 64), so that a
// step's products are twice as long against its fixed cost (barriers, waits, the hand-off of
// dQ), FlashAttention-3's 128 x 128 tiles at head dim 64. A step takes two consecutive steps
// of the 64-query walk (its items; a head's last query tile and the next head's first can
// share one: dK and dV sum over both, dQ goes to each item's own row); the last step of an
// odd walk loads its first item twice and masks the second whole. Each warpgroup adds the dQ
// of one item (its 64 queries over the block's 128 keys). No pairs.
template <int D, typename T, bool DET, bool F, int OVB = 0, int NB = BBN9, bool SPLIT = false, bool Q2 = false, bool PR = PAIRS,
          bool TL = false>
DEV void bwd_sm90(const TmaDesc &tq, const TmaDesc &tk, const TmaDesc &tv, const TmaDesc &tdo, const TmaDesc &tdq,
                  const float *__restrict__ lse2, const float *__restrict__ dsum, T *__restrict__ dk,
                  T *__restrict__ dv, int sq, int sk, int hq, int hkv, int sq_pad, float scale, float scale_log2,
                  WorkList wl, const int *__restrict__ ranks, int *__restrict__ locks, int sched,
                  float *__restrict__ dqacc) {
  constexpr int QS = Q2 ? 2 * BBM9 : BBM9, QU = QS / BBM9;  // queries a step, items a step
  static_assert(!TL || (D == 128 && !DET && !Q2), "the tail's entries: head dim 128, not deterministic");
  static_assert(!Q2 || (OVB == 2 && F && D == 64 && NB == BBN9), "128 queries a step: the early loop, F, head dim 64, 128 keys");
  using L = BwdLayout<D, NB, STAGES, PR ? 1 : 0, QS>;
  static_assert(L::kBytes <= 232448, "the backward's shared memory past the H200's 227 KB a block");
  constexpr int NCW = L::kNC;  // consumer warpgroups
  extern __shared__ unsigned char smem_raw[];
  unsigned char *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  T *sK = reinterpret_cast<T *>(smem + L::kK);
  T *sV = reinterpret_cast<T *>(smem + L::kV);
  T *sQ = reinterpret_cast<T *>(smem + L::kQ);
  T *sdO = reinterpret_cast<T *>(smem + L::kdO);
  T *sdS = reinterpret_cast<T *>(smem + L::kdS);
  float *sdQ = reinterpret_cast<float *>(smem + L::kdQ);
  float *sL = reinterpret_cast<float *>(smem + L::kL);
  float *sDs = reinterpret_cast<float *>(smem + L::kDs);
  u64 *bars = reinterpret_cast<u64 *>(smem + L::kBar);
  u64 *fullKV = bars, *fullQ = bars + 1, *emptyQ = fullQ + STAGES, *dqFull = emptyQ + STAGES, *dqEmpty = dqFull + NCW;
  u64 *emptyKV = dqEmpty + NCW;  // PAIRS only

  const int tid = threadIdx.x, wg = warpgroup_index();
  // sched (sm90: backwardOrder's pick, 1 or 3; sm90fk 3, sm90fn 1, sm90r 0): bit 0 turns
  // the rotation below off, bit 1 makes the key tile the grid's fast index (blocks running
  // together then share one head's Q/dO in L2); the deterministic backward ignores it
  const bool ktFast = !DET && (sched & 2);
  // the group split (sm90's at head dim 64 since call 44, experiment sm90bg): bits 4-7 of
  // sched split a KV head's query heads into gs parts, a block each (the grid's head index
  // is kvh * gs + part), so that short rows make more blocks; each part adds its dK and dV
  // as fp32 partials (below), summed by bwd90_dkv_reduce. At head dim 128 (where it lost
  // or was level in call 44; the SPLIT entries split there too), or deterministic, one part.
  const int gs = (D == 64 || SPLIT) && !DET ? max(1, (sched >> 4) & 15) : 1;
  const int rows = wl.row_tiles;
  // TL (the tail's entries; the host sets bit 9 of sched, and bits 12-30 to B): a
  // 1-D grid over the items (KV head, key tile), the key tiles fastest. Unsplit (bwd90et),
  // blockIdx.x is the item; split (bwd90est, the last wave's items), item B + blockIdx.x /
  // gs, part blockIdx.x % gs.
  int hb = ktFast ? blockIdx.y : blockIdx.x, xi = ktFast ? blockIdx.x : blockIdx.y;
  if constexpr (TL) {
    if (sched & 512) {
      const int per = PR && (sched & 8) ? (rows + 1) / 2 : rows;  // a KV head's items (pairs: half)
      const int item = gs > 1 ? (sched >> 12) + (int)blockIdx.x / gs : (int)blockIdx.x;
      hb = item / per * gs + (gs > 1 ? (int)blockIdx.x % gs : 0);
      xi = item % per;
    }
  }
  const int kvh = hb / gs, part = hb % gs;
  const int group = hq / hkv, gpart = group / gs, list = wl.per_head ? kvh : 0;
  const int *lstart = wl.start + list * (rows + 1);
  // PAIRS: this block's second key tile (ktB, its entries eB0.., neB of them), -1 if none
  const bool paired = PR && !Q2 && !DET && (sched & 8);  // (the host then launches half the blocks a head)
  const int kt = DET ? (int)blockIdx.y : wl.order[list * rows + xi];
  const int ktB = paired && rows - 1 - xi > xi ? wl.order[list * rows + rows - 1 - xi] : -1;
  const int e0 = lstart[kt], e1 = lstart[kt + 1];
  const int ne = e1 - e0, itersA = ne * gpart;
  const int eB0 = ktB >= 0 ? lstart[ktB] : 0, neB = ktB >= 0 ? lstart[ktB + 1] - eB0 : 0;
  const int iters = itersA + neB * gpart;
  // Q2: the walk's steps, QU items each; item u of step j (the last step's first item again
  // where the walk has no item left: loaded and masked whole)
  const int steps = Q2 ? (iters + QU - 1) / QU : iters;
  auto item_of = [&](int j, int u) { return j * QU + u < iters ? j * QU + u : j * QU; };
  // Blocks start at different query tiles (a rotation by key tile), so that blocks
  // running together add into different dQ rows.
  const int rot = ne > 0 && !DET && !(sched & 1) && !paired ? (kt * 7) % ne : 0;
  // step it of this block's walk: its query head (of its part of the group) and its work-list
  // entry; unpaired, ne steps a head from the rotated first entry; paired, the first key
  // tile's entries from the last, then the second's from the first, the heads inner
  auto step_at = [&](int it, int &h, int &e) {
    if (paired) {
      const bool b = it >= itersA;
      const int l = b ? it - itersA : it, i = l / gpart;
      h = kvh * group + part * gpart + l % gpart;
      e = b ? eB0 + i : e1 - 1 - i;
    } else {
      h = kvh * group + part * gpart + it / ne;
      e = e0 + (it % ne + rot) % ne;
    }
  };
  auto entry_of = [&](int it) {
    int h, e;
    step_at(it, h, e);
    return e;
  };
  // the key tile being walked (PAIRS: ktB's from step itersA). The pairs rely on the work
  // list's heaviest-first order: kt has at least ktB's entries, so kt is never empty where
  // ktB is not (TestPairsNeverEmptyFirst; handling it here spilled in the d64 backward)
  int k0 = kt * NB;

  if (tid == 0) {
    mbar_init(fullKV, 1);
    if (PR) mbar_init(emptyKV, 128 * NCW);
    for (int s = 0; s < STAGES; s++) {
      mbar_init(&fullQ[s], 1);
      mbar_init(&emptyQ[s], 128 * NCW);
    }
    for (int c = 0; c < NCW; c++) {
      mbar_init(&dqFull[c], 128);
      mbar_init(&dqEmpty[c], 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(NCW == 3 ? 32 : 40) : "memory");
    if (tid == 0 && iters > 0) {
      tma_prefetch_desc(&tq);
      tma_prefetch_desc(&tdo);
      auto load_kv = [&](int kb) {
        mbar_expect_tx(fullKV, 2 * L::kKV);
#pragma unroll
        for (int c = 0; c < L::kChunks; c++) {
          tma_load3(sK + c * NB * CHUNK, &tk, fullKV, c * CHUNK, kvh, kb);
          tma_load3(sV + c * NB * CHUNK, &tv, fullKV, c * CHUNK, kvh, kb);
        }
      };
      if (itersA > 0) load_kv(k0);
      for (int it = 0; it < steps; it++) {
        const int s = it % STAGES;
        const unsigned ph = (it / STAGES) & 1;
        int h, e;
        step_at(Q2 ? item_of(it, 0) : it, h, e);
        int q0 = wl.entries[2 * e] * BBM9;
        mbar_wait(&emptyQ[s], ph ^ 1);
        mbar_expect_tx(&fullQ[s], 2 * L::kQT + 2 * QS * 4);
#pragma unroll
        for (int u = 0; u < QU; u++) {  // the step's items: Q and dO rows 64 u.., their lse and Dsum
          if (u > 0) {
            step_at(item_of(it, u), h, e);
            q0 = wl.entries[2 * e] * BBM9;
          }
#pragma unroll
          for (int c = 0; c < L::kChunks; c++) {
            tma_load3(sQ + s * QS * D + c * QS * CHUNK + u * BBM9 * CHUNK, &tq, &fullQ[s], c * CHUNK, h, q0);
            tma_load3(sdO + s * QS * D + c * QS * CHUNK + u * BBM9 * CHUNK, &tdo, &fullQ[s], c * CHUNK, h, q0);
          }
          bulk_load(sL + s * QS + u * BBM9, lse2 + (long long)h * sq_pad + q0, BBM9 * 4, &fullQ[s]);
          bulk_load(sDs + s * QS + u * BBM9, dsum + (long long)h * sq_pad + q0, BBM9 * 4, &fullQ[s]);
        }
        if (paired && it == itersA) {  // the second key tile's K and V, once the consumers are done with the first's
          if (itersA > 0) mbar_wait(emptyKV, 0);
          load_kv(ktB * NB);
        }
      }
    }
    // the dQ writer: lane 0 of warp 1, serving every consumer warpgroup in turn (a stage is
    // handed back once all of a step's stages have been read; a writer per warpgroup,
    // experiment sm90bw, measured level in call 44)
    if (tid == 32) {
      for (int it = 0; it < steps; it++) {
        int h, e;
        step_at(Q2 ? item_of(it, 0) : it, h, e);
        int q0 = wl.entries[2 * e] * BBM9;
        int *lock = locks + (long long)h * (sq_pad / BBM9) + q0 / BBM9;
        // the turn of the query tile at lock (entry e, want lower key tiles before it), and
        // passing it on
        int want = 0;
        auto turn = [&]() {
          if (DET) {
            want = ranks[e];
            while (ld_acquire(lock) != want) {
            }
            fence_async_global();
          }
        };
        auto pass = [&]() {
          if (DET) {
            fence_async_global();
            st_release(lock, want + 1);
          }
        };
        turn();
#pragma unroll
        for (int c = 0; c < NCW; c++) {
          // Q2: warpgroup c's dQ is item c's (its own query tile and turn); none where the
          // walk had no item c (the first loaded again, masked whole)
          const bool own = !Q2 || c == 0 || it * QU + c < iters;
          if (Q2 && c > 0 && own) {
            step_at(item_of(it, c), h, e);
            q0 = wl.entries[2 * e] * BBM9;
            lock = locks + (long long)h * (sq_pad / BBM9) + q0 / BBM9;
            turn();
          }
          mbar_wait(&dqFull[c], it & 1);
          if (!own) continue;
          if (F) {  // one chunk of 64 x 64 in fragment order: (h, query tile, column half)
            const long long chunk = ((long long)h * (sq_pad / BBM9) + q0 / BBM9) * (D / 64) + (L::kSplit && !Q2 ? c : 0);
            bulk_reduce_add_f32(dqacc + chunk * (BBM9 * 64), sdQ + c * BBM9 * 64, BBM9 * 64 * 4);
          } else {  // two swizzled boxes of 32 columns
            tma_reduce_add2(&tdq, sdQ + c * BBM9 * 64, L::kSplit ? c * 64 : 0, h * sq_pad + q0);
            tma_reduce_add2(&tdq, sdQ + c * BBM9 * 64 + BBM9 * 32, (L::kSplit ? c * 64 : 0) + 32, h * sq_pad + q0);
          }
          bulk_commit();
          if (DET) bulk_wait0();  // landed before the next half (the same columns at D = 64)
          if (Q2) pass();
        }
        if (!Q2) pass();
#pragma unroll
        for (int c = 0; c < NCW; c++) {
          // the stages have been read: hand them back (all at once: wait_group is per thread)
          if (c == 0 && !DET) bulk_wait_read0();
          mbar_arrive(&dqEmpty[c]);
        }
      }
      bulk_wait0();
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(NCW == 3 ? 160 : 232) : "memory");
  const int cw = wg - 1;  // consumer warpgroup: keys 64 cw .. 64 cw + 63 of the block
  const int lt = tid % 128, warp = lt / 32, lane = lt % 32, g = lane / 4, t = lane % 4;
  const int kr = cw * 64 + warp * 16 + g;  // this thread's key rows in the block: kr, kr + 8
  constexpr int OR = D / 2;

  float dka[OR], dva[OR];
#pragma unroll
  for (int i = 0; i < OR; i++) dka[i] = dva[i] = 0.f;
  // the descriptors' invariant bases (this warpgroup's keys of K and V, K for dQ)
  const unsigned loK = sw128_lo(sK + cw * 64 * CHUNK, 16), loV = sw128_lo(sV + cw * 64 * CHUNK, 16);
  const unsigned loKq = sw128_lo(sK + (Q2 ? 0 : L::kSplit ? cw * NB * CHUNK : cw * 64 * CHUNK), 16);
  if (iters > 0) mbar_wait(fullKV, 0);
  // the next step's work-list entry is read a step ahead
  int refNext = iters > 0 ? wl.entries[2 * entry_of(0) + 1] : -1;
  // stage dQ * scale as fp32 rows of 64 columns (the j-th dQ of the walk) and hand it to
  // the writer, who adds it into the accumulator
  // (publish false: the caller publishes the stage later, publish_dq)
  auto publish_dq = [&]() {
    fence_async_smem();
    mbar_arrive(&dqFull[cw]);
  };
  auto stage_dq = [&](float(&dqa)[32], int j, bool publish = true) {
    float *stage = sdQ + cw * BBM9 * 64;
    mbar_wait(&dqEmpty[cw], (j & 1) ^ 1);  // the writer has read what it held last
    if (F) {  // unscaled, in fragment order: 8 conflict-free 16-byte stores
#pragma unroll
      for (int jj = 0; jj < 8; jj++)
        *reinterpret_cast<float4 *>(stage + dq_frag_slot(lt, jj) * 4) =
            make_float4(dqa[4 * jj], dqa[4 * jj + 1], dqa[4 * jj + 2], dqa[4 * jj + 3]);
      if (publish) publish_dq();
      return;
    }
#pragma unroll
    for (int jj = 0; jj < 8; jj++)
#pragma unroll
      for (int r = 0; r < 2; r++) {
        const int row = warp * 16 + g + r * 8, col = jj * 8 + 2 * t;
        // two boxes of 32 columns, the 16-byte chunks of each 128-byte row swizzled by
        // the row: the 8 rows a warp writes at once fall in 8 different banks (rows of
        // 256 bytes put them all in the same ones: measured +1% over that, docs/perf.md)
        const int off = (col / 32) * BBM9 * 32 + row * 32 + ((((col % 32) / 4) ^ (row & 7)) << 2) + (col % 4);
        *reinterpret_cast<float2 *>(stage + off) = make_float2(dqa[4 * jj + 2 * r] * scale, dqa[4 * jj + 2 * r + 1] * scale);
      }
    if (publish) publish_dq();
  };

  // dS^T of a step (sa: its packed fragments, 4 k16 columns of queries a chunk) to shared
  // memory, rows keys, chunks of 64 query columns NB rows apart: one 128-byte swizzled row
  // each. STSM (sm90 since call 40): four stmatrix of four 8 x 8 matrices a thread and chunk,
  // the addresses computed once; else 16 32-bit stores a chunk.
  auto store_ds = [&](T *dS, const auto &sa) {
    constexpr int NK = sizeof(sa) / sizeof(sa[0]);  // k16 columns: 4, or 8 at 128 queries
    if constexpr (STSM) {
      const int m = lane / 8, row = cw * 64 + warp * 16 + (m & 1) * 8 + lane % 8;
      const unsigned base = smem_u32(dS) + row * CHUNK * 2;
#pragma unroll
      for (int kk = 0; kk < NK; kk++)
        stsm_x4(base + (kk / 4) * NB * CHUNK * 2 + ((((kk % 4) * 2 + (m >> 1)) ^ (row & 7)) << 4), sa[kk][0], sa[kk][1], sa[kk][2], sa[kk][3]);
    } else {
#pragma unroll
      for (int kk = 0; kk < NK; kk++)
#pragma unroll
        for (int x = 0; x < 4; x++) {
          const int row = kr + (x & 1) * 8, col = (kk % 4) * 16 + (x >> 1) * 8 + 2 * t;
          const int off = (kk / 4) * NB * CHUNK + row * CHUNK + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
          *reinterpret_cast<unsigned *>(dS + off) = sa[kk][x];
        }
    }
  };

  // keep: the first of the next step's dK and dV products adds to the accumulators (0 at
  // PAIRS's second key tile: the products start them afresh)
  int keep = 1;
  // write dK (scaled) and dV for this warpgroup's keys of key tile k0
  auto write_dkv = [&]() {
    const long long ks = (long long)hkv * D;
    // put(kp, vp, i) for each of this thread's column pairs of its two key rows: kp and vp
    // that row's dK and dV at the pair, i the pair's first accumulator
    auto each_pair = [&](auto *kb, auto *vb, auto put) {
#pragma unroll
      for (int r = 0; r < 2; r++) {
        const int ki = k0 + kr + r * 8;
        if (ki < sk) {
          auto *krow = kb + (long long)ki * ks + (long long)kvh * D, *vrow = vb + (long long)ki * ks + (long long)kvh * D;
#pragma unroll
          for (int j = 0; j < D / 8; j++) put(krow + j * 8 + 2 * t, vrow + j * 8 + 2 * t, 4 * j + 2 * r);
        }
      }
    };
    if constexpr (TL) {
      if (gs > 1) {  // the tail's split (bwd90est, bwd90espt; launched over the 1-D grid only): compact partials, [gs][items][tiles][NB][D]
        const int tiles = PR && (sched & 8) ? 2 : 1, slot = ((int)blockIdx.x / gs) * tiles + (k0 != kt * NB);
        const long long at = ((long long)part * ((int)gridDim.x / gs) * tiles + slot) * NB * D;
        float *kb = reinterpret_cast<float *>(dk) + at, *vb = reinterpret_cast<float *>(dv) + at;
#pragma unroll
        for (int r = 0; r < 2; r++) {
          if (k0 + kr + r * 8 < sk) {
            float *krow = kb + (kr + r * 8) * D, *vrow = vb + (kr + r * 8) * D;
#pragma unroll
            for (int j = 0; j < D / 8; j++) {
              const int i = 4 * j + 2 * r;
              *reinterpret_cast<float2 *>(krow + j * 8 + 2 * t) = make_float2(dka[i], dka[i + 1]);
              *reinterpret_cast<float2 *>(vrow + j * 8 + 2 * t) = make_float2(dva[i], dva[i + 1]);
            }
          }
        }
        return;
      }
    }
    if (gs > 1) {  // fp32 partials, unscaled: dk and dv point at gs slots of [sk][hkv][D]
      each_pair(reinterpret_cast<float *>(dk) + (long long)part * sk * ks, reinterpret_cast<float *>(dv) + (long long)part * sk * ks,
           [&](float *kp, float *vp, int i) {
             *reinterpret_cast<float2 *>(kp) = make_float2(dka[i], dka[i + 1]);
             *reinterpret_cast<float2 *>(vp) = make_float2(dva[i], dva[i + 1]);
           });
      return;
    }
    each_pair(dk, dv, [&](T *kp, T *vp, int i) {
      *reinterpret_cast<unsigned *>(kp) = Ops<T>::pack(dka[i] * scale, dka[i + 1] * scale);
      *reinterpret_cast<unsigned *>(vp) = Ops<T>::pack(dva[i], dva[i + 1]);
    });
  };
  // PAIRS: the first key tile's walk done (every group retired): its dK and dV out, the
  // second's K and V in
  auto next_tile = [&]() {
    mbar_arrive(emptyKV);
    write_dkv();
    keep = 0;  // the next step's dK and dV start afresh
    k0 = ktB * NB;
    mbar_wait(fullKV, 1);
  };
  // EARLY (OVB 2, sm90's backward at head dim 128 since call 31; both head dims in sm90be):
  // step it+1's S^T and dP^T are issued as soon as step it's dQ is staged, behind its dK, so
  // that the tensor cores go on from dK into them while this warpgroup waits (the two
  // warpgroups meet at dS^T every step at D = 128, so their gaps coincide).
  constexpr bool EARLY = OVB == 2;
  if constexpr (EARLY) {
    float st[QS / 2], dpt[QS / 2];
    unsigned pa[QS / 16][4], sa[QS / 16][4];
    // S^T and dP^T of step j, issued and committed (not waited for); Q2: 64 keys x 128 queries
    auto issue_sdp = [&](int j) {
      const int sj = j % STAGES;
      const T *cQ = sQ + sj * QS * D, *cdO = sdO + sj * QS * D;
      const unsigned loQ = sw128_lo(cQ, 16), loO = sw128_lo(cdO, 16);
      mbar_wait(&fullQ[sj], (j / STAGES) & 1);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < D / 16; kk++) {
        const int c = kk / 4, k16 = (kk % 4) * 16;
        const int ko = (c * NB * CHUNK + k16) * 2, qo = (c * QS * CHUNK + k16) * 2;
        if constexpr (Q2) {
          Ops<T>::template ss128<0>(st, sw128_at(loK, ko), sw128_at(loQ, qo), kk > 0);
          Ops<T>::template ss128<0>(dpt, sw128_at(loV, ko), sw128_at(loO, qo), kk > 0);
        } else {
          Ops<T>::template ss64<0, 0>(st, sw128_at(loK, ko), sw128_at(loQ, qo), kk > 0);
          Ops<T>::template ss64<0, 0>(dpt, sw128_at(loV, ko), sw128_at(loO, qo), kk > 0);
        }
      }
      wgmma_commit();
    };
    // P^T (packed into pa) and dS^T (fp32, in dpt) of step j from its S^T and dP^T
    auto elementwise = [&](int j) {
      if constexpr (Q2) {  // two items: their pairs' bits side by side (none for a missing second)
        const int sj = j % STAGES;
        const float *cL = sL + sj * QS, *cDs = sDs + sj * QS;
        const int ea = entry_of(item_of(j, 0)), eb = entry_of(item_of(j, 1));
        const bool hasB = j * QU + 1 < iters;
        const int ra = wl.entries[2 * ea + 1], rb = wl.entries[2 * eb + 1];
        if (ra < 0 && rb < 0 && hasB) {  // two full tiles
          p_ds<false, LV2 && D == 128 && !PR>(st, dpt, cL, cDs, scale_log2, t, 0);
        } else {
          const unsigned long long ba = ra < 0 ? 0xffffffffull : tile_bits<BBM9, true>(wl, ra, k0 + kr, wl.entries[2 * ea] * BBM9, t);
          const unsigned long long bb =
              !hasB ? 0ull : rb < 0 ? 0xffffffffull : tile_bits<BBM9, true>(wl, rb, k0 + kr, wl.entries[2 * eb] * BBM9, t);
          p_ds<true, LV2 && D == 128 && !PR>(st, dpt, cL, cDs, scale_log2, t, ba | bb << 32);
        }
      } else {
        const int sj = j % STAGES, ej = entry_of(j);
        const int q0 = wl.entries[2 * ej] * BBM9, ref = wl.entries[2 * ej + 1];
        const float *cL = sL + sj * BBM9, *cDs = sDs + sj * BBM9;
        if (ref < 0)  // a full tile: no pair to test
          p_ds<false, LV2 && D == 128 && !PR>(st, dpt, cL, cDs, scale_log2, t, 0);
        else
          p_ds<true, LV2 && D == 128 && !PR>(st, dpt, cL, cDs, scale_log2, t, tile_bits<BBM9, true>(wl, ref, k0 + kr, q0, t));
      }
#pragma unroll
      for (int kk = 0; kk < QS / 16; kk++)
#pragma unroll
        for (int x = 0; x < 4; x++) pa[kk][x] = Ops<T>::pack(st[8 * kk + 2 * x], st[8 * kk + 2 * x + 1]);
    };
    auto pack_ds = [&]() {
#pragma unroll
      for (int kk = 0; kk < QS / 16; kk++)
#pragma unroll
        for (int x = 0; x < 4; x++) sa[kk][x] = Ops<T>::pack(dpt[8 * kk + 2 * x], dpt[8 * kk + 2 * x + 1]);
    };
    // dV of step j, issued and committed
    auto issue_dv = [&](int j) {
      const T *cdO = sdO + (j % STAGES) * QS * D;
      const unsigned loOm = sw128_lo(cdO, QS * CHUNK * 2);
      reg_fence(dva);
      reg_fence(dka);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < QS / 16; kk++) PV<T, D>::run(dva, pa[kk], sw128_at(loOm, kk * 16 * CHUNK * 2), kk > 0 || keep);
      wgmma_commit();
    };
    // dS^T of step j to shared memory, then dQ and dK of step j, each committed
    auto issue_dqdk = [&](int j, float(&dqa)[32]) {
      T *dS = sdS + (j & 1) * NB * QS;
      store_ds(dS, sa);
      fence_async_smem();
      if (L::kSplit)
        named_sync(1, 256);  // both halves of dS^T written
      else
        named_sync(2 + cw, 128);
      wgmma_fence();
      // dQ's A: dS^T over the block's keys (Q2: this warpgroup's item, chunk cw), or this
      // warpgroup's keys
      const unsigned loS = sw128_lo(dS + (Q2 ? cw * NB * CHUNK : L::kSplit ? 0 : cw * 64 * CHUNK), 16);
#pragma unroll
      for (int kk = 0; kk < (L::kSplit ? NB : 64) / 16; kk++)
        Ops<T>::template ss64<1, 1>(dqa, sw128_at(loS, kk * 16 * CHUNK * 2), sw128_at(loKq, kk * 16 * CHUNK * 2), kk > 0);
      wgmma_commit();
      const T *cQ = sQ + (j % STAGES) * QS * D;
      const unsigned loQm = sw128_lo(cQ, QS * CHUNK * 2);
      wgmma_fence();
      {
        // dK's A from the dS^T just stored (this warpgroup's 64 key rows, K-major, a chunk of
        // 64 queries every 4 k16 columns): sa is free once stored, which leaves the registers
        // for the next S^T and dP^T
        const unsigned loA = sw128_lo(dS + cw * 64 * CHUNK, 16);
#pragma unroll
        for (int kk = 0; kk < QS / 16; kk++) {
          const int ao = (kk / 4) * NB * CHUNK * 2 + (kk % 4) * 32;
          if constexpr (D == 128)
            Ops<T>::template ss128<1>(dka, sw128_at(loA, ao), sw128_at(loQm, kk * 16 * CHUNK * 2), kk > 0 || keep);
          else
            Ops<T>::template ss64<0, 1>(dka, sw128_at(loA, ao), sw128_at(loQm, kk * 16 * CHUNK * 2), kk > 0 || keep);
        }
      }
      wgmma_commit();
      keep = 1;
    };
    if (iters > 0) {
      issue_sdp(0);
      wgmma_wait<0>();
    }
    // (every group is retired at the end of a turn: with S^T and dP^T in flight across the
    // loop's back edge the compiler copies accumulators there, and ptxas serialises, C7514)
    for (int it = 0; it + 1 < steps; it++) {
      float dqa[32];
      reg_fence(st);
      reg_fence(dpt);
      elementwise(it);
      pack_ds();
      issue_dv(it);
      issue_dqdk(it, dqa);
      wgmma_wait<1>();  // dV and dQ
      reg_fence(dva);
      reg_fence(dqa);
      // (kLateFence: the stage published once step it + 1's S^T and dP^T are issued; not in the
      // pairs' entries, whose change of key tile waits for K and V in between: there a runtime
      // condition made ptxas serialise the wgmma, C7515; kLateFencePairs: there too, always)
      constexpr bool late = kLateFence && (!PR || kLateFencePairs);
      stage_dq(dqa, it, !late);
      if (paired && it + 1 == itersA) {  // the first key tile's last step: dK retired, then the second's K and V
        wgmma_wait<0>();
        reg_fence(dka);
        next_tile();
      }
      issue_sdp(it + 1);  // behind dK
      if (late) publish_dq();
      wgmma_wait<1>();    // dK: the stage's Q is free
      reg_fence(dka);
      mbar_arrive(&emptyQ[it % STAGES]);
      wgmma_wait<0>();  // S^T and dP^T of step it + 1
    }
    if (iters > 0) {  // the last step's S^T and dP^T were waited for before the loop or in its last turn
      reg_fence(st);
      reg_fence(dpt);
      elementwise(steps - 1);
      pack_ds();
    }
    if (iters > 0) {  // the last step
      const int it = steps - 1;
      float dqa[32];
      issue_dv(it);
      issue_dqdk(it, dqa);
      wgmma_wait<1>();
      reg_fence(dva);
      reg_fence(dqa);
      stage_dq(dqa, it);
      wgmma_wait<0>();
      reg_fence(dka);
      mbar_arrive(&emptyQ[it % STAGES]);
    }
  }
  for (int it = 0; !EARLY && it < iters; it++) {
    const int s = it % STAGES;
    const unsigned ph = (it / STAGES) & 1;
    const int e = entry_of(it);
    const int q0 = wl.entries[2 * e] * BBM9;
    const int ref = refNext;
    if (it + 1 < iters) refNext = wl.entries[2 * entry_of(it + 1) + 1];
    const T *cQ = sQ + s * BBM9 * D, *cdO = sdO + s * BBM9 * D;
    const float *cL = sL + s * BBM9, *cDs = sDs + s * BBM9;
    T *dS = sdS + (it & 1) * NB * BBM9;

    float st[32], dpt[32];
    unsigned pa[4][4], sa[4][4];
    // S^T = K Q^T and dP^T = V dO^T, both over the head dimension
    const unsigned loQ = sw128_lo(cQ, 16), loO = sw128_lo(cdO, 16);
    mbar_wait(&fullQ[s], ph);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      const int c = kk / 4, k16 = (kk % 4) * 16;
      const int ko = (c * NB * CHUNK + k16) * 2, qo = (c * BBM9 * CHUNK + k16) * 2;
      Ops<T>::template ss64<0, 0>(st, sw128_at(loK, ko), sw128_at(loQ, qo), kk > 0);
      Ops<T>::template ss64<0, 0>(dpt, sw128_at(loV, ko), sw128_at(loO, qo), kk > 0);
    }
    wgmma_commit();
    wgmma_wait<0>();
    reg_fence(st);
    reg_fence(dpt);

    // P^T = exp2(S^T scale log2e - lse log2e) on allowed pairs; dS^T = P^T (dP^T - Dsum)
    if (ref < 0)  // a full tile: no pair to test
      p_ds<false, LV2 && D == 128 && !PR>(st, dpt, cL, cDs, scale_log2, t, 0);
    else  // the allowed pairs of a partial tile (rows keys, columns queries)
      p_ds<true, LV2 && D == 128 && !PR>(st, dpt, cL, cDs, scale_log2, t, tile_bits<BBM9, true>(wl, ref, k0 + kr, q0, t));
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
      for (int x = 0; x < 4; x++) {
        pa[kk][x] = Ops<T>::pack(st[8 * kk + 2 * x], st[8 * kk + 2 * x + 1]);
        sa[kk][x] = Ops<T>::pack(dpt[8 * kk + 2 * x], dpt[8 * kk + 2 * x + 1]);
      }
    // dV += P^T dO and dK += dS^T Q: queries are the reduction dimension; dO and Q are
    // MN-major B operands (chunks of 64 columns, BBM9 rows of 128 bytes apart)
    reg_fence(dva);
    reg_fence(dka);
    wgmma_fence();
    const unsigned loOm = sw128_lo(cdO, BBM9 * CHUNK * 2), loQm = sw128_lo(cQ, BBM9 * CHUNK * 2);
    // dV now, dK after dQ (below), so that dQ is staged while dK runs (issuing dK here,
    // beside dV, left the staging after the wait for all three: 3-5% slower, docs/perf.md)
#pragma unroll
    for (int kk = 0; kk < 4; kk++) PV<T, D>::run(dva, pa[kk], sw128_at(loOm, kk * 16 * CHUNK * 2), kk > 0 || keep);
    wgmma_commit();
    store_ds(dS, sa);
    fence_async_smem();
    if (L::kSplit)
      named_sync(1, 256);  // both halves of dS^T written
    else
      named_sync(2 + cw, 128);
    // dQ (64 queries x 64 columns) = dS K: A = dS^T read MN-major, B = K MN-major
    float dqa[32];
    wgmma_fence();
    const unsigned loS = sw128_lo(dS + (L::kSplit ? 0 : cw * 64 * CHUNK), 16);
#pragma unroll
    for (int kk = 0; kk < (L::kSplit ? NB : 64) / 16; kk++)
      Ops<T>::template ss64<1, 1>(dqa, sw128_at(loS, kk * 16 * CHUNK * 2), sw128_at(loKq, kk * 16 * CHUNK * 2), kk > 0);
    wgmma_commit();
    // dK += dS^T Q behind dQ: once dV and dQ are done (groups retire in order), dQ is
    // staged while dK runs on the tensor cores; then the Q/dO stage is released
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; kk++) PV<T, D>::run(dka, sa[kk], sw128_at(loQm, kk * 16 * CHUNK * 2), kk > 0 || keep);
    wgmma_commit();
    keep = 1;
    wgmma_wait<1>();
    reg_fence(dva);
    reg_fence(dqa);
    stage_dq(dqa, it);
    wgmma_wait<0>();
    reg_fence(dka);
    mbar_arrive(&emptyQ[s]);
    if (paired && it + 1 == itersA && it + 1 < iters) next_tile();
  }

  write_dkv();
  if (paired && ktB >= 0 && neB == 0) {  // a second key tile with no work: its dK and dV are 0
#pragma unroll
    for (int i = 0; i < OR; i++) dka[i] = dva[i] = 0.f;
    k0 = ktB * NB;
    write_dkv();
  }
}

// Backward preprocessing: Dsum[h][q] = sum_d dO * O and lse2[h][q] = lse * log2(e), in
// rows of sq_pad (a multiple of 64) so that the backward copies whole 64-row tiles; rows
// past sq are 0. One warp a (h, q).
template <int D, typename T>
DEV void bwd90_pre(const T *__restrict__ o, const T *__restrict__ dout, const float *__restrict__ lse,
                   float *__restrict__ dsum, float *__restrict__ lse2, int sq, int hq, int sq_pad) {
  const long long w = (blockIdx.x * (long long)blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (w >= (long long)hq * sq_pad) return;
  const int h = w / sq_pad, qi = w % sq_pad;
  float s = 0.f, l = 0.f;
  if (qi < sq) {
    const T *a = o + ((long long)qi * hq + h) * D, *b = dout + ((long long)qi * hq + h) * D;
    for (int d = lane; d < D; d += 32) s += float(a[d]) * float(b[d]);
#pragma unroll
    for (int x = 16; x > 0; x >>= 1) s += __shfl_xor_sync(0xffffffff, s, x);
    l = lse[(long long)h * sq + qi] * 1.4426950408889634f;
  }
  if (lane == 0) {
    dsum[w] = s;
    lse2[w] = l;
  }
}

// Elements i and i + 1 of dK and dV: the sum of their gs fp32 partials, n elements apart, dK
// scaled (dkv90_reduce's and dkv90_reduce_tail's).
template <typename T>
DEV void dkv90_sum_at(const float *__restrict__ kp, const float *__restrict__ vp, T *__restrict__ dk, T *__restrict__ dv,
                      long long i, long long n, int gs, float scale, long long o) {
  float2 a = *reinterpret_cast<const float2 *>(kp + i), b = *reinterpret_cast<const float2 *>(vp + i);
  for (int g = 1; g < gs; g++) {
    const float2 x = *reinterpret_cast<const float2 *>(kp + g * n + i), y = *reinterpret_cast<const float2 *>(vp + g * n + i);
    a.x += x.x, a.y += x.y, b.x += y.x, b.y += y.y;
  }
  *reinterpret_cast<unsigned *>(dk + o) = Ops<T>::pack(a.x * scale, a.y * scale);
  *reinterpret_cast<unsigned *>(dv + o) = Ops<T>::pack(b.x, b.y);
}

// dK and dV of the split backward (head dim 64; 128 in bwd90es): the sum of gs fp32 partials of n elements each
// ([sk][hkv][D]), dK scaled, in the problem's dtype; two elements a thread a turn.
template <typename T>
DEV void dkv90_reduce(const float *__restrict__ kp, const float *__restrict__ vp, T *__restrict__ dk, T *__restrict__ dv,
                      long long n, int gs, float scale) {
  for (long long i = 2 * (blockIdx.x * (long long)blockDim.x + threadIdx.x); i < n; i += 2 * (long long)gridDim.x * blockDim.x)
    dkv90_sum_at(kp, vp, dk, dv, i, n, gs, scale, i);
}

// dK and dV of the tail's items: items first .. first+items-1 of the 1-D grid's
// order (KV head item / rows, key tile order[item % rows]; paired, a KV head has
// (rows + 1) / 2 items, item x its key tiles order[x] and order[rows - 1 - x] where that is
// another), each NB key rows of D, summed over gs fp32 partials into dk and dv, dK scaled.
// The partials are compact, the split entries' (bwd90est, bwd90espt): [gs][items][tiles][NB][D],
// the tail's items only (at 48K full 64:8, 36 MiB where [gs][sk][hkv][D] took 3.2 GB).
template <typename T, int D, int NB>
DEV void dkv90_reduce_tail(const float *__restrict__ kp, const float *__restrict__ vp, T *__restrict__ dk, T *__restrict__ dv,
                           const int *__restrict__ order, int rows, int first, int items, int hkv, int sk, int gs,
                           float scale, int paired) {
  const int tiles = paired ? 2 : 1, perHead = paired ? (rows + 1) / 2 : rows;
  const long long per = (long long)tiles * NB * D / 2, n = 2 * per * items;  // pairs of elements an item; a part's elements
  for (long long w = blockIdx.x * (long long)blockDim.x + threadIdx.x; w < items * per; w += (long long)gridDim.x * blockDim.x) {
    const int item = first + (int)(w / per), e = (int)(w % per) * 2, tile = e / (NB * D), et = e % (NB * D);
    const int x = item % perHead, xb = rows - 1 - x;
    if (tile == 1 && xb <= x) continue;  // the odd middle tile walks alone
    const int ki = order[tile == 0 ? x : xb] * NB + et / D;
    if (ki >= sk) continue;
    dkv90_sum_at(kp, vp, dk, dv, 2 * w, n, gs, scale, ((long long)ki * hkv + item / perHead) * D + et % D);
  }
}

// dq[q][h][:] = dqacc[h][q][:], in the problem's dtype.
// dQ = scale * the fragment-order accumulator of the F backward (chunks of 64 x 64 per head, query
// tile and column half), in the output's layout.
template <int D, typename T>
DEV void dq90_convertf(const float *__restrict__ acc, T *__restrict__ dq, int sq, int hq, int sq_pad, float scale) {
  const long long n = (long long)sq * hq * D;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const long long q = i / ((long long)hq * D);
    const int h = (i / D) % hq, d = i % D;
    const long long chunk = ((long long)h * (sq_pad / 64) + q / 64) * (D / 64) + d / 64;
    dq[i] = T(acc[chunk * 4096 + dq_frag_pos((int)(q % 64), d % 64)] * scale);
  }
}

// dq90_convertf through shared memory (experiment sm90c): a block takes one 64 x 64 chunk
// at a time, reads its 16 KB in order (16 bytes a thread, a warp 512 contiguous bytes), and
// writes each query row's 64 columns as 128 contiguous bytes (8 a thread), where
// dq90_convertf reads half-used sectors and writes 2 bytes a thread. The chunk's 8 groups
// of 128 float4 slots lie 516 floats apart in shared memory, and a warp takes rows r and
// r + 8 with its lanes' column groups fastest, so that its 32 pairs of words fall in 32
// different pairs of banks (a warp still writes two whole 128-byte rows). Blocks of 256
// threads.
constexpr int DQC_GROUP = 128 * 4 + 4;  // floats from one group of 128 slots to the next
DEV int dqc_word(int pos) { return (pos >> 9) * DQC_GROUP + (pos & 511); }
template <int D, typename T>
DEV void dq90_convertc(const float *__restrict__ acc, T *__restrict__ dq, int sq, int hq, int sq_pad, float scale) {
  __shared__ __align__(16) float buf[8 * DQC_GROUP];
  const int tiles = sq_pad / 64;
  const long long chunks = (long long)hq * tiles * (D / 64);
  for (long long c = blockIdx.x; c < chunks; c += gridDim.x) {
    const float4 *src = reinterpret_cast<const float4 *>(acc + c * 4096);
    for (int j = threadIdx.x; j < 1024; j += blockDim.x)
      *reinterpret_cast<float4 *>(buf + dqc_word(4 * j)) = src[j];
    __syncthreads();
    const int half = (int)(c % (D / 64));
    const long long qt = (c / (D / 64)) % tiles;
    const int h = (int)(c / ((long long)(D / 64) * tiles));
    for (int j = threadIdx.x; j < 64 * 16; j += blockDim.x) {  // 64 rows x 16 groups of 4 columns
      // lane bits: 8-column group (3), row + 8 (1), the 4-column half (1); then the rows
      const int rest = j >> 5, row = (rest >> 3) * 16 + ((j >> 3) & 1) * 8 + (rest & 7);
      const int col = (j & 7) * 8 + ((j >> 4) & 1) * 4;
      const long long q = qt * 64 + row;
      if (q < sq) {
        // columns col, col + 1 are one pair of a slot, col + 2, col + 3 the next slot's
        const float2 a = *reinterpret_cast<const float2 *>(buf + dqc_word(dq_frag_pos(row, col)));
        const float2 b = *reinterpret_cast<const float2 *>(buf + dqc_word(dq_frag_pos(row, col + 2)));
        *reinterpret_cast<uint2 *>(dq + (q * hq + h) * D + half * 64 + col) =
            make_uint2(Ops<T>::pack(a.x * scale, a.y * scale), Ops<T>::pack(b.x * scale, b.y * scale));
      }
    }
    __syncthreads();
  }
}

#define SM90_FWD(FN, NAME, T, D, PERSIST, LEAN) SM90_FWD_NC(FN, NAME, T, D, PERSIST, LEAN, 2)
#define SM90_FWD_NC(FN, NAME, T, D, PERSIST, LEAN, NC) SM90_FWD_X(FN, NAME, T, D, PERSIST, LEAN, NC, false)
#define SM90_FWD_X(FN, NAME, T, D, PERSIST, LEAN, NC, OV) SM90_FWD_B(FN, NAME, T, D, PERSIST, LEAN, NC, OV, SBN)
#define SM90_FWD_B(FN, NAME, T, D, PERSIST, LEAN, NC, OV, BN)                                                                          \
  extern "C" __global__ void __launch_bounds__(128 * (NC + 1), 1)                                                             \
      FN##_##NAME##_d##D(const __grid_constant__ TmaDesc tq, const __grid_constant__ TmaDesc tk,                   \
                         const __grid_constant__ TmaDesc tv, T *o, float *lse, int sq, int sk, int hq, int hkv,    \
                         float scale_log2, const int *order, const int *start, const int *entries, const int *refs, \
                         const int *slices, int row_tiles, int per_head, const int *bounds) {                      \
    fwd_sm90<D, T, PERSIST, LEAN, NC, OV, BN>(tq, tk, tv, o, lse, sq, sk, hq, hkv, scale_log2,                                       \
                            WorkList{order, start, entries, refs, slices, row_tiles, per_head, bounds});           \
  }
// the dynamic persistent forward (DYN): fwd_sm90's arguments and ctr, the items drawn so far
#define SM90_FWD_DYN(FN, NAME, T, D, LEAN, NC, OV)                                                                  \
  extern "C" __global__ void __launch_bounds__(128 * (NC + 1), 1)                                                  \
      FN##_##NAME##_d##D(const __grid_constant__ TmaDesc tq, const __grid_constant__ TmaDesc tk,                   \
                         const __grid_constant__ TmaDesc tv, T *o, float *lse, int sq, int sk, int hq, int hkv,    \
                         float scale_log2, const int *order, const int *start, const int *entries, const int *refs, \
                         const int *slices, int row_tiles, int per_head, const int *bounds, int *ctr) {            \
    fwd_sm90<D, T, true, LEAN, NC, OV, SBN, true>(tq, tk, tv, o, lse, sq, sk, hq, hkv, scale_log2,                   \
                            WorkList{order, start, entries, refs, slices, row_tiles, per_head, bounds}, ctr);      \
  }
#define SM90_BWD(FN, NAME, T, D, DET, F) SM90_BWD_X(FN, NAME, T, D, DET, F, 0)
#define SM90_BWD_X(FN, NAME, T, D, DET, F, OVB) SM90_BWD_N(FN, NAME, T, D, DET, F, OVB, BBN9)
#define SM90_BWD_N(FN, NAME, T, D, DET, F, OVB, NB) SM90_BWD_G(FN, NAME, T, D, DET, F, OVB, NB, false)
#define SM90_BWD_G(FN, NAME, T, D, DET, F, OVB, NB, SPLIT) SM90_BWD_Q(FN, NAME, T, D, DET, F, OVB, NB, SPLIT, false)
#define SM90_BWD_Q(FN, NAME, T, D, DET, F, OVB, NB, SPLIT, Q2) SM90_BWD_P(FN, NAME, T, D, DET, F, OVB, NB, SPLIT, Q2, PAIRS)
#define SM90_BWD_P(FN, NAME, T, D, DET, F, OVB, NB, SPLIT, Q2, PR) SM90_BWD_T(FN, NAME, T, D, DET, F, OVB, NB, SPLIT, Q2, PR, false)
#define SM90_BWD_T(FN, NAME, T, D, DET, F, OVB, NB, SPLIT, Q2, PR, TL)                                                \
  extern "C" __global__ void __launch_bounds__(128 * (BwdLayout<D, NB, STAGES, 0, (Q2) ? 2 * BBM9 : BBM9>::kNC + 1), 1) FN##_##NAME##_d##D( \
      const __grid_constant__ TmaDesc tq, const __grid_constant__ TmaDesc tk, const __grid_constant__ TmaDesc tv,   \
      const __grid_constant__ TmaDesc tdo, const __grid_constant__ TmaDesc tdq, const float *lse2, const float *dsum, \
      T *dk, T *dv, int sq, int sk, int hq, int hkv, int sq_pad, float scale, float scale_log2, const int *order,     \
      const int *start, const int *entries, const int *refs, const int *slices, int row_tiles, int per_head,        \
      const int *ranks, int *locks, int sched, float *dqacc) {                                                       \
    bwd_sm90<D, T, DET, F, OVB, NB, SPLIT, Q2, PR, TL>(tq, tk, tv, tdo, tdq, lse2, dsum, dk, dv, sq, sk, hq, hkv, sq_pad, scale, scale_log2, \
                                 WorkList{order, start, entries, refs, slices, row_tiles, per_head}, ranks, locks, sched, dqacc); \
  }
#define SM90_ENTRIES(NAME, T, D)                                                                                   \
  SM90_FWD(fwd90, NAME, T, D, false, false)                                                                        \
  SM90_FWD(fwd90p, NAME, T, D, true, false)                                                                        \
  SM90_BWD(bwd90f, NAME, T, D, false, true)                                                                        \
  SM90_BWD(bwd90fd, NAME, T, D, true, true)                                                                        \
  extern "C" __global__ void bwd90_pre_##NAME##_d##D(const T *o, const T *dout, const float *lse, float *dsum,      \
                                                    float *lse2, int sq, int hq, int sq_pad) {                     \
    bwd90_pre<D, T>(o, dout, lse, dsum, lse2, sq, hq, sq_pad);                                                     \
  }                                                                                                                \
  extern "C" __global__ void dq90_convertf_##NAME##_d##D(const float *acc, T *dq, int sq, int hq, int sq_pad,      \
                                                         float scale) {                                            \
    dq90_convertf<D, T>(acc, dq, sq, hq, sq_pad, scale);                                                           \
  }                                                                                                                \
  extern "C" __global__ void __launch_bounds__(256) dq90_convertc_##NAME##_d##D(const float *acc, T *dq, int sq,   \
                                                                               int hq, int sq_pad, float scale) {  \
    dq90_convertc<D, T>(acc, dq, sq, hq, sq_pad, scale);                                                           \
  }

SM90_ENTRIES(bf16, __nv_bfloat16, 64)
SM90_ENTRIES(bf16, __nv_bfloat16, 128)
SM90_ENTRIES(fp16, __half, 64)
SM90_ENTRIES(fp16, __half, 128)

// The lean forward's entries (experiment sm90l) only in the variants that define
// LONGCA_FWD_LEAN: the default module is not compiled with 16 forward kernels it never runs.
#ifdef LONGCA_FWD_LEAN
#define SM90_LEAN_ENTRIES(NAME, T, D)     \
  SM90_FWD(fwd90l, NAME, T, D, false, true) \
  SM90_FWD(fwd90lp, NAME, T, D, true, true)
SM90_LEAN_ENTRIES(bf16, __nv_bfloat16, 64)
SM90_LEAN_ENTRIES(bf16, __nv_bfloat16, 128)
SM90_LEAN_ENTRIES(fp16, __half, 64)
SM90_LEAN_ENTRIES(fp16, __half, 128)
#endif

// The three-consumer forward's entries (sm90 at head dim 64): head dim 64, the lean softmax;
// only in the variants that define LONGCA_FWD_THREE.
#ifdef LONGCA_FWD_THREE
SM90_FWD_NC(fwd90m, bf16, __nv_bfloat16, 64, false, true, 3)
SM90_FWD_NC(fwd90mp, bf16, __nv_bfloat16, 64, true, true, 3)
SM90_FWD_NC(fwd90m, fp16, __half, 64, false, true, 3)
SM90_FWD_NC(fwd90mp, fp16, __half, 64, true, true, 3)
#endif

// The three-consumer forward with the overlap (sm90's since call 55): head dim 64, three
// consumer warpgroups in a ring as fwd90m, and within a turn the next tile's Q K^T and this
// tile's P V as two groups with the next tile's softmax under P V (fwd90o's order); only
// with LONGCA_FWD_THREE_OVL.
#ifdef LONGCA_FWD_THREE_OVL
SM90_FWD_X(fwd90mo, bf16, __nv_bfloat16, 64, false, true, 3, true)
SM90_FWD_X(fwd90mop, bf16, __nv_bfloat16, 64, true, true, 3, true)
SM90_FWD_X(fwd90mo, fp16, __half, 64, false, true, 3, true)
SM90_FWD_X(fwd90mop, fp16, __half, 64, true, true, 3, true)
#endif
// the same, persistent by a counter (sm90's since the twenty-seventh session's sm90dy): only
// with LONGCA_FWD_DYN
#if defined(LONGCA_FWD_THREE_OVL) && defined(LONGCA_FWD_DYN)
SM90_FWD_DYN(fwd90mopd, bf16, __nv_bfloat16, 64, true, 3, true)
SM90_FWD_DYN(fwd90mopd, fp16, __half, 64, true, 3, true)
#endif

// The overlapped forward's entries (sm90 at head dim 128): the lean softmax, two consumer
// warpgroups, the exponentials of the next tile under this tile's P V; only in the variants
// that define LONGCA_FWD_OVL.
#ifdef LONGCA_FWD_OVL
#define SM90_OVL_ENTRIES(NAME, T, D)                 \
  SM90_FWD_X(fwd90o, NAME, T, D, false, true, 2, true) \
  SM90_FWD_X(fwd90op, NAME, T, D, true, true, 2, true)
SM90_OVL_ENTRIES(bf16, __nv_bfloat16, 64)
SM90_OVL_ENTRIES(bf16, __nv_bfloat16, 128)
SM90_OVL_ENTRIES(fp16, __half, 64)
SM90_OVL_ENTRIES(fp16, __half, 128)
#endif
// (LONGCA_FWD_DYN_P, sm90's since the twenty-eighth session's sm90dw) the head-dim-128 overlapped forward persistent by a
// counter: where the rule runs it persistent, the items are drawn at run time instead of
// walked blockIdx.x, + gridDim.x, ... (a static walk whose blocks' loads depend on the item
// count modulo the grid: 0.89-0.99 of even by a model of the walk, docs/perf.md)
#if defined(LONGCA_FWD_OVL) && defined(LONGCA_FWD_DYN_P)
SM90_FWD_DYN(fwd90opd, bf16, __nv_bfloat16, 128, true, 2, true)
SM90_FWD_DYN(fwd90opd, fp16, __half, 128, true, 2, true)
#endif

// The forward over 64-key tiles (sm90 where the tile rule picks it, sm90s always): the
// overlapped forward with tiles of 128 queries x 64 keys, for masks whose kept blocks are 64
// keys wide (a 128-key tile of a 64-token block-sparse map is often half empty); only with
// LONGCA_FWD_K64.
#ifdef LONGCA_FWD_K64
#define SM90_K64_ENTRIES(NAME, T, D)                      \
  SM90_FWD_B(fwd90s, NAME, T, D, false, true, 2, true, 64) \
  SM90_FWD_B(fwd90sp, NAME, T, D, true, true, 2, true, 64)
SM90_K64_ENTRIES(bf16, __nv_bfloat16, 64)
SM90_K64_ENTRIES(bf16, __nv_bfloat16, 128)
SM90_K64_ENTRIES(fp16, __half, 64)
SM90_K64_ENTRIES(fp16, __half, 128)
#endif

// The wide forward (sm90's since call 62, LONGCA_FWD_WIDE): the overlapped forward at head dim
// 128 over tiles of 128 queries x 176 keys (FlashAttention-3's tile at head dim 128 without
// a causal mask), so that a turn's products are 1.375x as long for the same hand-over, the
// same row maxima's shuffles and the same rescale: S 88 registers a thread, P 44, O 64. Its
// K/V ring (2 x 2 x 44 KB) leaves room for one Q tile only: never persistent (the host runs
// it on long rows only, where the forward is not persistent).
#ifdef LONGCA_FWD_WIDE
SM90_FWD_B(fwd90n, bf16, __nv_bfloat16, 128, false, true, 2, true, 176)
SM90_FWD_B(fwd90n, fp16, __half, 128, false, true, 2, true, 176)
#endif

// A backward loop's two entries, FN and its deterministic FN##d (OVB picks the loop).
#define SM90_BWD_PAIR(FN, NAME, T, D, OVB)      \
  SM90_BWD_X(FN, NAME, T, D, false, true, OVB) \
  SM90_BWD_X(FN##d, NAME, T, D, true, true, OVB)

// The three-consumer backward's entries (experiment sm90b3): at head dim 64, blocks of 192
// keys, three consumer warpgroups of 64 keys (160 registers each, 32 the producer), so that
// two keep the tensor cores busy while the third does its elementwise work (the d64 step's
// products are half as long as d128's, its elementwise work as long). Only with
// LONGCA_BWD_THREE.
#ifdef LONGCA_BWD_THREE
#define SM90_BWD3_PAIR(NAME, T)                        \
  SM90_BWD_N(bwd90t, NAME, T, 64, false, true, 2, 192) \
  SM90_BWD_N(bwd90td, NAME, T, 64, true, true, 2, 192)
SM90_BWD3_PAIR(bf16, __nv_bfloat16)
SM90_BWD3_PAIR(fp16, __half)
#endif

// The split backward's reduction (head dim 64; 128 in bwd90es).
#define SM90_DKV_REDUCE(NAME, T)                                                                              \
  extern "C" __global__ void bwd90_dkv_reduce_##NAME(const float *kp, const float *vp, T *dk, T *dv, long long n, int gs, \
                                                  float scale) {                                              \
    dkv90_reduce<T>(kp, vp, dk, dv, n, gs, scale);                                                            \
  }
SM90_DKV_REDUCE(bf16, __nv_bfloat16)
SM90_DKV_REDUCE(fp16, __half)

#ifdef LONGCA_BWD_TAIL
// The tail's reduction: the last wave's items only, at head dim 128 over 128-key tiles.
#define SM90_DKV_REDUCE_TAIL(NAME, T)                                                                          \
  extern "C" __global__ void bwd90_dkv_reduce_tail_##NAME(const float *kp, const float *vp, T *dk, T *dv,     \
                                                       const int *order, int rows, int first, int items,      \
                                                       int hkv, int sk, int gs, float scale, int paired) {    \
    dkv90_reduce_tail<T, 128, BBN9>(kp, vp, dk, dv, order, rows, first, items, hkv, sk, gs, scale, paired);  \
  }
SM90_DKV_REDUCE_TAIL(bf16, __nv_bfloat16)
SM90_DKV_REDUCE_TAIL(fp16, __half)
#endif

// The early backward's entries (sm90 at head dim 128 since call 31): the
// next step's S^T and dP^T issued behind this step's dK; only with LONGCA_BWD_EARLY.
#ifdef LONGCA_BWD_EARLY
SM90_BWD_PAIR(bwd90e, bf16, __nv_bfloat16, 64, 2)
SM90_BWD_PAIR(bwd90e, bf16, __nv_bfloat16, 128, 2)
SM90_BWD_PAIR(bwd90e, fp16, __half, 64, 2)
SM90_BWD_PAIR(bwd90e, fp16, __half, 128, 2)
#endif

// The early backward split at head dim 128 (experiment sm90g2: the group split there too,
// the host's pick where it splits a d128 backward); only with LONGCA_BWD_SPLIT128.
#if defined(LONGCA_BWD_EARLY) && defined(LONGCA_BWD_SPLIT128)
SM90_BWD_G(bwd90es, bf16, __nv_bfloat16, 128, false, true, 2, BBN9, true)
SM90_BWD_G(bwd90es, fp16, __half, 128, false, true, 2, BBN9, true)
#endif

// The pairs' own entries (sm90 since call 59, a module without LONGCA_BWD_PAIRS): the early
// backward at head dim 128 with the pairs' code, unsplit and split (the host runs them only
// for a paired plan, sched bit 3); only with LONGCA_BWD_PAIRS_ENTRY.
#if defined(LONGCA_BWD_EARLY) && defined(LONGCA_BWD_PAIRS_ENTRY)
SM90_BWD_P(bwd90ep, bf16, __nv_bfloat16, 128, false, true, 2, BBN9, false, false, true)
SM90_BWD_P(bwd90ep, fp16, __half, 128, false, true, 2, BBN9, false, false, true)
#if defined(LONGCA_BWD_SPLIT128)
SM90_BWD_P(bwd90esp, bf16, __nv_bfloat16, 128, false, true, 2, BBN9, true, false, true)
SM90_BWD_P(bwd90esp, fp16, __half, 128, false, true, 2, BBN9, true, false, true)
#endif
#endif

// The tail's entries (LONGCA_BWD_TAIL; the paired ones with LONGCA_BWD_TAIL_PAIRS): the
// tail's versions of bwd90e and bwd90es (bwd90ep, bwd90esp), launched only over tailLaunch's
// 1-D grids (sched bit 9), the split ones only on the last wave's items.
#if defined(LONGCA_BWD_EARLY) && defined(LONGCA_BWD_SPLIT128) && defined(LONGCA_BWD_TAIL)
SM90_BWD_T(bwd90et, bf16, __nv_bfloat16, 128, false, true, 2, BBN9, false, false, PAIRS, true)
SM90_BWD_T(bwd90et, fp16, __half, 128, false, true, 2, BBN9, false, false, PAIRS, true)
SM90_BWD_T(bwd90est, bf16, __nv_bfloat16, 128, false, true, 2, BBN9, true, false, PAIRS, true)
SM90_BWD_T(bwd90est, fp16, __half, 128, false, true, 2, BBN9, true, false, PAIRS, true)
#if defined(LONGCA_BWD_PAIRS_ENTRY) && defined(LONGCA_BWD_TAIL_PAIRS)
SM90_BWD_T(bwd90ept, bf16, __nv_bfloat16, 128, false, true, 2, BBN9, false, false, true, true)
SM90_BWD_T(bwd90ept, fp16, __half, 128, false, true, 2, BBN9, false, false, true, true)
SM90_BWD_T(bwd90espt, bf16, __nv_bfloat16, 128, false, true, 2, BBN9, true, false, true, true)
SM90_BWD_T(bwd90espt, fp16, __half, 128, false, true, 2, BBN9, true, false, true, true)
#endif
#endif

// The backward over 128 queries a step at head dim 64 (sm90's since call 55), and its
// deterministic entry; only with LONGCA_BWD_Q2.
#if defined(LONGCA_BWD_EARLY) && defined(LONGCA_BWD_Q2)
SM90_BWD_Q(bwd90qq, bf16, __nv_bfloat16, 64, false, true, 2, BBN9, false, true)
SM90_BWD_Q(bwd90qqd, bf16, __nv_bfloat16, 64, true, true, 2, BBN9, false, true)
SM90_BWD_Q(bwd90qq, fp16, __half, 64, false, true, 2, BBN9, false, true)
SM90_BWD_Q(bwd90qqd, fp16, __half, 64, true, true, 2, BBN9, false, true)
#endif
