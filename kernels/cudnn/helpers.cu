// Helper kernels of the cudnn kernel (compiled at run time by NVRTC): the LSE layout
// conversions between longca's [heads, tokens] and cuDNN's packed [tokens, heads], and,
// for masks cut into several cuDNN calls, the log-sum-exp merge of partial outputs, fp32
// accumulation of partial gradients, and the conversion back to the I/O type.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
__device__ __forceinline__ void from_f(__nv_bfloat16 *p, float v) { *p = __float2bfloat16(v); }
__device__ __forceinline__ void from_f(__half *p, float v) { *p = __float2half(v); }

// thd[s*heads + h] -> ht[h*tokens + s]
extern "C" __global__ void lse_to_heads(const float *thd, float *ht, int tokens, int heads) {
  long long n = (long long)tokens * heads;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    long long h = i / tokens, s = i % tokens;
    ht[i] = thd[s * heads + h];
  }
}

// ht[h*tokens + s] -> thd[s*heads + h]
extern "C" __global__ void lse_to_tokens(const float *ht, float *thd, int tokens, int heads) {
  long long n = (long long)tokens * heads;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    long long s = i / heads, h = i % heads;
    thd[i] = ht[h * tokens + s];
  }
}

// merge folds one partial result (out [tokens, heads, dim] in T, lse [heads, tokens])
// into fp32 accumulators by log-sum-exp, one thread per (token, head) row. A row whose
// partial lse is -inf saw no key in that call: its partial output is not read.
template <typename T>
__device__ void merge(float *acc, float *lacc, const T *out, const float *lse, int tokens, int heads, int dim) {
  const float ninf = __int_as_float(0xff800000);
  long long rows = (long long)tokens * heads;
  for (long long r = blockIdx.x * (long long)blockDim.x + threadIdx.x; r < rows; r += (long long)gridDim.x * blockDim.x) {
    long long s = r / heads, h = r % heads;
    float b = lse[h * tokens + s];
    if (b == ninf) continue;
    float a = lacc[h * tokens + s];
    float m = fmaxf(a, b);
    float l = m + logf(expf(a - m) + expf(b - m)); // a = -inf gives l = b
    float wa = expf(a - l), wb = expf(b - l);
    for (int x = 0; x < dim; x++) {
      long long i = r * dim + x;
      acc[i] = wa * acc[i] + wb * to_f(out[i]);
    }
    lacc[h * tokens + s] = l;
  }
}
extern "C" __global__ void merge_bf16(float *acc, float *lacc, const __nv_bfloat16 *out, const float *lse, int tokens, int heads, int dim) {
  merge(acc, lacc, out, lse, tokens, heads, dim);
}
extern "C" __global__ void merge_fp16(float *acc, float *lacc, const __half *out, const float *lse, int tokens, int heads, int dim) {
  merge(acc, lacc, out, lse, tokens, heads, dim);
}

template <typename T>
__device__ void accumulate(float *acc, const T *x, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    acc[i] += to_f(x[i]);
}
extern "C" __global__ void accumulate_bf16(float *acc, const __nv_bfloat16 *x, long long n) { accumulate(acc, x, n); }
extern "C" __global__ void accumulate_fp16(float *acc, const __half *x, long long n) { accumulate(acc, x, n); }

template <typename T>
__device__ void convert(T *dst, const float *src, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    from_f(&dst[i], src[i]);
}
extern "C" __global__ void convert_bf16(__nv_bfloat16 *dst, const float *src, long long n) { convert(dst, src, n); }
extern "C" __global__ void convert_fp16(__half *dst, const float *src, long long n) { convert(dst, src, n); }
