package cuda

import (
	"fmt"

	"github.com/longca/longca/tensor"
)

// fillSource is the random-fill kernel: a counter-based hash (splitmix64) of the seed and
// the element index feeds Box-Muller, so a fill needs no state and no host data.
const fillSource = `
#include <cuda_bf16.h>
#include <cuda_fp16.h>
__device__ __forceinline__ unsigned long long mix(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__device__ __forceinline__ float normal(unsigned long long seed, unsigned long long i) {
  unsigned long long h = mix(seed * 0x100000001B3ull ^ mix(i));
  float u1 = ((h >> 40) + 1) * (1.0f / 16777217.0f);
  float u2 = ((h & 0xFFFFFF)) * (1.0f / 16777216.0f);
  return sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
}
extern "C" __global__ void fill_normal_bf16(__nv_bfloat16 *p, long long n, unsigned long long seed, float std) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    p[i] = __float2bfloat16(normal(seed, i) * std);
}
extern "C" __global__ void fill_normal_fp16(__half *p, long long n, unsigned long long seed, float std) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    p[i] = __float2half(normal(seed, i) * std);
}
extern "C" __global__ void fill_normal_fp32(float *p, long long n, unsigned long long seed, float std) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    p[i] = normal(seed, i) * std;
}
`

// FillNormal fills t with normal values of standard deviation std drawn from seed, on the
// device (bf16, fp16 or fp32).
func (g *Device) FillNormal(t tensor.Tensor, seed uint64, std float32) error {
	b, err := buffer(t)
	if err != nil {
		return err
	}
	name := map[tensor.DType]string{tensor.BF16: "fill_normal_bf16", tensor.FP16: "fill_normal_fp16", tensor.FP32: "fill_normal_fp32"}[b.dt]
	if name == "" {
		return fmt.Errorf("cuda: no normal fill for %s", b.dt)
	}
	if g.util == nil {
		m, err := g.LoadSource(fillSource, "longca_fill.cu")
		if err != nil {
			return err
		}
		g.util = m
	}
	return g.with(func() error {
		f, err := g.util.Function(name)
		if err != nil {
			return err
		}
		blocks := max(1, min(g.SMs*8, (b.Numel()+255)/256))
		return f.Launch(Dim3{X: blocks}, Dim3{X: 256}, 0, g.stream, b, uint64(b.Numel()), seed, std)
	})
}
