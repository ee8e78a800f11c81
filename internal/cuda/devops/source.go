package devops

// source holds the helper kernels, kept small and plain: grid-stride loops over
// elements, fp32 arithmetic, one kernel per dtype where the element type matters.
// Offsets and strides are in 16-bit words (every dtype here is a whole number of them).
const source = `
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#define LOOP(i, n) for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

__device__ __forceinline__ float ld(const __nv_bfloat16 *p, long long i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float ld(const __half *p, long long i) { return __half2float(p[i]); }
__device__ __forceinline__ float ld(const float *p, long long i) { return p[i]; }
__device__ __forceinline__ void st(__nv_bfloat16 *p, long long i, float v) { p[i] = __float2bfloat16(v); }
__device__ __forceinline__ void st(__half *p, long long i, float v) { p[i] = __float2half(v); }
__device__ __forceinline__ void st(float *p, long long i, float v) { p[i] = v; }

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

// acc_*: dst (fp32) += src.
template <typename T>
__device__ void acc(float *dst, const T *src, long long n) { LOOP(i, n) dst[i] += ld(src, i); }
extern "C" __global__ void acc_bf16(float *dst, const __nv_bfloat16 *src, long long n) { acc(dst, src, n); }
extern "C" __global__ void acc_fp16(float *dst, const __half *src, long long n) { acc(dst, src, n); }
extern "C" __global__ void acc_fp32(float *dst, const float *src, long long n) { acc(dst, src, n); }

// cvt_A_B: dst (B) = src (A), rounded to nearest.
template <typename A, typename B>
__device__ void cvt(B *dst, const A *src, long long n) { LOOP(i, n) st(dst, i, ld(src, i)); }
extern "C" __global__ void cvt_fp32_bf16(__nv_bfloat16 *dst, const float *src, long long n) { cvt(dst, src, n); }
extern "C" __global__ void cvt_fp32_fp16(__half *dst, const float *src, long long n) { cvt(dst, src, n); }
extern "C" __global__ void cvt_bf16_fp32(float *dst, const __nv_bfloat16 *src, long long n) { cvt(dst, src, n); }
extern "C" __global__ void cvt_fp16_fp32(float *dst, const __half *src, long long n) { cvt(dst, src, n); }

// merge_*: one block per (token, head) row merges a partial (out [t, h, d] in T, lse
// [h, t] fp32) into the accumulators (acc [t, h, d] fp32, lacc [h, t] fp32) by
// log-sum-exp. A partial lse of -inf saw no key: the row is left alone.
template <typename T>
__device__ void merge(float *acc, float *lacc, const T *out, const float *lse, int t, int h, int d) {
  int row = blockIdx.x;  // token * h + head
  int tok = row / h, hd = row - tok * h;
  long long li = (long long)hd * t + tok, o = (long long)row * d;
  float a = lacc[li], b = lse[li];
  const float ninf = __int_as_float(0xff800000);
  if (b == ninf) return;
  float wa = 0.f, wb = 1.f, l = b;
  if (a != ninf) {
    float hi = fmaxf(a, b);
    l = hi + logf(expf(a - hi) + expf(b - hi));
    wa = expf(a - l);
    wb = expf(b - l);
  }
  for (int e = threadIdx.x; e < d; e += blockDim.x) acc[o + e] = wa * acc[o + e] + wb * ld(out, o + e);
  __syncthreads();
  if (threadIdx.x == 0) lacc[li] = l;
}
extern "C" __global__ void merge_bf16(float *acc, float *lacc, const __nv_bfloat16 *out, const float *lse, int t, int h, int d) { merge(acc, lacc, out, lse, t, h, d); }
extern "C" __global__ void merge_fp16(float *acc, float *lacc, const __half *out, const float *lse, int t, int h, int d) { merge(acc, lacc, out, lse, t, h, d); }
extern "C" __global__ void merge_fp32(float *acc, float *lacc, const float *out, const float *lse, int t, int h, int d) { merge(acc, lacc, out, lse, t, h, d); }

// max_fp32: dst = max(dst, src).
extern "C" __global__ void max_fp32(float *dst, const float *src, long long n) { LOOP(i, n) dst[i] = fmaxf(dst[i], src[i]); }
`
