package devops

import (
	"fmt"
	"strings"
)

// source holds the helper kernels, kept small and plain: grid-stride loops, fp32
// arithmetic, one kernel per dtype (or dtype triple) where the element type matters.
// Offsets and strides are in 16-bit words (every dtype here is a whole number of them).
// The add and merge kernels of every dtype triple are declared by instances.
var source = templates + instances()

// prelude is what every module of helper kernels starts with: the headers, the
// grid-stride loop, and loads and stores of each dtype through fp32.
const prelude = `
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define LOOP(i, n) for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

__device__ __forceinline__ float ld(const __nv_bfloat16 *p, long long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float ld(const __half *p, long long i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const float *p, long long i) { return p[i]; }
__device__ __forceinline__ void st(__nv_bfloat16 *p, long long i, float v) { p[i] = __float2bfloat16(v); }
__device__ __forceinline__ void st(__half *p, long long i, float v) { p[i] = __float2half(v); }
__device__ __forceinline__ void st(float *p, long long i, float v) { p[i] = v; }
`

const templates = prelude + `
// copy_rows copies rows of w words: row r goes from src + so + r*ss to dst + do_ + r*ds.
extern "C" __global__ void copy_rows(unsigned short *dst, const unsigned short *src, long long rows, long long w,
                                     long long do_, long long ds, long long so, long long ss) {
  LOOP(i, rows * w) {
    long long r = i / w, c = i - r * w;
    dst[do_ + r * ds + c] = src[so + r * ss + c];
  }
}

// heads_sum: x [t, h, d] = the sum of the replicas in in [u*t, 1, d] of each head
// (block j holds head j*h/u), as the gradients of KV heads replicated over u > h ranks.
template <typename T>
__device__ void heads_sum(T *x, const T *in, long long t, int h, int d, int u) {
  LOOP(i, t * h * d) {
    long long tok = i / ((long long)h * d);
    int hh = (int)((i / d) % h), e = (int)(i % d);
    float s = 0.f;
    for (int j = 0; j < u; j++)
      if (j * h / u == hh) s += ld(in, ((long long)j * t + tok) * d + e);
    st(x, i, s);
  }
}
extern "C" __global__ void heads_sum_bf16(__nv_bfloat16 *x, const __nv_bfloat16 *in, long long t, int h, int d, int u) { heads_sum(x, in, t, h, d, u); }
extern "C" __global__ void heads_sum_fp16(__half *x, const __half *in, long long t, int h, int d, int u) { heads_sum(x, in, t, h, d, u); }
extern "C" __global__ void heads_sum_fp32(float *x, const float *in, long long t, int h, int d, int u) { heads_sum(x, in, t, h, d, u); }

// The bandwidth-bound kernels below (add, cvt, merge) give each thread 8 consecutive
// elements: with vec set (the caller's promise that every base pointer is 16-byte
// aligned and, for merge, that d is a multiple of 8) as one 16-byte access per 16-bit
// operand and two per fp32 operand, otherwise element by element (unaligned views, odd
// head dims, the tail of an elementwise pass).
struct alignas(16) u32x4 { unsigned int x, y, z, w; };
struct alignas(16) f32x4 { float x, y, z, w; };

// from16 and to16 convert between a 16-bit element's bits and a float (a pun of a local,
// which stays in registers).
template <typename T>
__device__ __forceinline__ float from16(unsigned short s) { return ld(reinterpret_cast<const T *>(&s), 0); }
template <typename T>
__device__ __forceinline__ unsigned int to16(float v) {
  T x;
  st(&x, 0, v);
  return *reinterpret_cast<const unsigned short *>(&x);
}

// ldn loads the m <= 8 elements at p + i as floats (V: m is 8 and p + i 16-byte aligned;
// whole words are loaded and unpacked, so the compiler does not split them); stn stores
// them. The two paths are separate instances, so the compiler cannot merge them either.
template <bool V, typename T>
__device__ __forceinline__ void ldn(const T *p, long long i, float *x, int m) {
  if constexpr (V) {
    if constexpr (sizeof(T) == 4) {
      f32x4 a = reinterpret_cast<const f32x4 *>(p + i)[0], b = reinterpret_cast<const f32x4 *>(p + i)[1];
      x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
    } else {
      u32x4 w = *reinterpret_cast<const u32x4 *>(p + i);
      unsigned int u[4] = {w.x, w.y, w.z, w.w};
      for (int k = 0; k < 4; k++) {
        x[2 * k] = from16<T>((unsigned short)(u[k] & 0xffffu));
        x[2 * k + 1] = from16<T>((unsigned short)(u[k] >> 16));
      }
    }
  } else {
    for (int j = 0; j < 8; j++)  // a constant trip count keeps x in registers
      if (j < m) x[j] = ld(p, i + j);
  }
}
template <bool V, typename T>
__device__ __forceinline__ void stn(T *p, long long i, const float *x, int m) {
  if constexpr (V) {
    if constexpr (sizeof(T) == 4) {
      reinterpret_cast<f32x4 *>(p + i)[0] = f32x4{x[0], x[1], x[2], x[3]};
      reinterpret_cast<f32x4 *>(p + i)[1] = f32x4{x[4], x[5], x[6], x[7]};
    } else {
      unsigned int u[4];
      for (int k = 0; k < 4; k++) u[k] = to16<T>(x[2 * k]) | to16<T>(x[2 * k + 1]) << 16;
      *reinterpret_cast<u32x4 *>(p + i) = u32x4{u[0], u[1], u[2], u[3]};
    }
  } else {
    for (int j = 0; j < 8; j++)
      if (j < m) st(p, i + j, x[j]);
  }
}

// chunk8 runs f(i, m) over n elements in chunks of 8 (m of them in the last), grid-stride:
// with vec, the whole chunks by 16-byte words (f<true>) and the tail element by element.
template <typename F>
__device__ __forceinline__ void chunk8(long long n, int vec, F f) {
  long long whole = vec ? n / 8 : 0;
  LOOP(c, whole) f.template run<true>(c * 8, 8);
  long long rest = n - whole * 8;
  LOOP(c, (rest + 7) / 8) {
    long long i = whole * 8 + c * 8;
    f.template run<false>(i, n - i < 8 ? (int)(n - i) : 8);
  }
}

// add_A_B_D: dst (D) = a (A) + b (B) in fp32, n elements; dst may be a or b (each
// element is read and written by one thread). Accumulate is add_fp32_B_fp32 in place.
template <typename A, typename B, typename D>
struct Add {
  D *dst;
  const A *a;
  const B *b;
  template <bool V>
  __device__ __forceinline__ void run(long long i, int m) const {
    float x[8] = {}, y[8] = {};
    ldn<V>(a, i, x, m);
    ldn<V>(b, i, y, m);
    for (int j = 0; j < 8; j++) x[j] += y[j];
    stn<V>(dst, i, x, m);
  }
};
template <typename A, typename B, typename D>
__device__ void add(D *dst, const A *a, const B *b, long long n, int vec) { chunk8(n, vec, Add<A, B, D>{dst, a, b}); }

// cvt_A_B: dst (B) = src (A), rounded to nearest.
template <typename A, typename B>
struct Cvt {
  B *dst;
  const A *src;
  template <bool V>
  __device__ __forceinline__ void run(long long i, int m) const {
    float x[8] = {};
    ldn<V>(src, i, x, m);
    stn<V>(dst, i, x, m);
  }
};
template <typename A, typename B>
__device__ void cvt(B *dst, const A *src, long long n, int vec) { chunk8(n, vec, Cvt<A, B>{dst, src}); }

// merge_A_B_D: dst (D [t, h, d]) and ldst (fp32 [h, t]) = the log-sum-exp merge of the
// partials a (A, lse la) and b (B, lse lb) over disjoint keys. A thread takes 8
// elements of a row (token, head), grid-stride, and computes the row's weights from the
// two lse itself (no shared memory, no barrier); the row's first thread writes ldst,
// which therefore must not alias la or lb (the row's other threads may still read them).
// dst may be a: every element is read and written by the same thread. A side with
// lse = -inf saw no key and is not read: a row empty on both sides is out 0, lse -inf,
// and a row b leaves empty merged in place (dst is a) is not touched at all.
// V (vec, which needs d % 8 == 0) moves the 8 elements as 16-byte words.
template <bool V, typename A, typename B, typename D>
__device__ __forceinline__ void merge_rows(D *dst, float *ldst, const A *a, const float *la, const B *b, const float *lb, int t, int h, int d) {
  const float ninf = __int_as_float(0xff800000);
  const bool inplace = (const void *)dst == (const void *)a;
  const int cpr = (d + 7) / 8;  // 8-element chunks per row
  LOOP(c, (long long)t * h * cpr) {
    long long row = c / cpr;
    int e0 = (int)(c - row * cpr) * 8, m = d - e0 < 8 ? d - e0 : 8;
    int tok = (int)(row / h), hd = (int)(row - (long long)tok * h);
    long long li = (long long)hd * t + tok, o = row * d + e0;
    float x = la[li], y = lb[li], wa = 0.f, wb = 0.f, l = ninf;
    if (x != ninf && y != ninf) {
      float hi = fmaxf(x, y);
      l = hi + logf(expf(x - hi) + expf(y - hi));
      wa = expf(x - l);
      wb = expf(y - l);
    } else if (x != ninf) {
      wa = 1.f, l = x;
    } else if (y != ninf) {
      wb = 1.f, l = y;
    }
    if (e0 == 0) ldst[li] = l;
    if (inplace && wa == 1.f && wb == 0.f) continue;  // dst already holds the result
    float r[8] = {}, p[8] = {};
    if (wa != 0.f) {
      ldn<V>(a, o, p, m);
      for (int j = 0; j < 8; j++) r[j] = wa * p[j];
    }
    if (wb != 0.f) {
      ldn<V>(b, o, p, m);
      for (int j = 0; j < 8; j++) r[j] += wb * p[j];
    }
    stn<V>(dst, o, r, m);
  }
}
template <typename A, typename B, typename D>
__device__ void merge(D *dst, float *ldst, const A *a, const float *la, const B *b, const float *lb, int t, int h, int d, int vec) {
  if (vec && d % 8 == 0)
    merge_rows<true>(dst, ldst, a, la, b, lb, t, h, d);
  else
    merge_rows<false>(dst, ldst, a, la, b, lb, t, h, d);
}

// max_fp32: dst = max(dst, src).
extern "C" __global__ void max_fp32(float *dst, const float *src, long long n) { LOOP(i, n) dst[i] = fmaxf(dst[i], src[i]); }
`

// dtypes are the element types of the kernels: suffix and C type.
var dtypes = []struct{ sf, c string }{{"bf16", "__nv_bfloat16"}, {"fp16", "__half"}, {"fp32", "float"}}

// instances declares add_A_B_D and merge_A_B_D for every triple of dtypes (27 each),
// and cvt_A_B for fp32 to and from the 16-bit types, as plain extern "C" lines (the
// argument check reads their parameters from this text: signature.go).
func instances() string {
	var b strings.Builder
	for _, a := range dtypes {
		for _, x := range dtypes {
			for _, d := range dtypes {
				n := a.sf + "_" + x.sf + "_" + d.sf
				fmt.Fprintf(&b, "extern \"C\" __global__ void add_%s(%s *dst, const %s *a, const %s *b, long long n, int vec) { add(dst, a, b, n, vec); }\n", n, d.c, a.c, x.c)
				fmt.Fprintf(&b, "extern \"C\" __global__ void merge_%s(%s *dst, float *ldst, const %s *a, const float *la, const %s *b, const float *lb, int t, int h, int d, int vec) "+
					"{ merge(dst, ldst, a, la, b, lb, t, h, d, vec); }\n", n, d.c, a.c, x.c)
			}
		}
	}
	for _, x := range dtypes[:2] {
		fmt.Fprintf(&b, "extern \"C\" __global__ void cvt_fp32_%s(%s *dst, const float *src, long long n, int vec) { cvt(dst, src, n, vec); }\n", x.sf, x.c)
		fmt.Fprintf(&b, "extern \"C\" __global__ void cvt_%s_fp32(float *dst, const %s *src, long long n, int vec) { cvt(dst, src, n, vec); }\n", x.sf, x.c)
	}
	return b.String()
}
