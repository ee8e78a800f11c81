package hostcc

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// deviceHeaders stand in for cuda_bf16.h and cuda_fp16.h (which NVRTC finds on a GPU
// machine and no build machine has): the qualifiers, the built-in variables and the few
// conversions and intrinsics the kernels call, declared and not defined.
const deviceHeaders = `#ifndef LONGCA_DEVICE_HEADERS
#define LONGCA_DEVICE_HEADERS
#define __device__ __attribute__((device))
#define __global__ __attribute__((global))
#define __host__ __attribute__((host))
#define __shared__ __attribute__((shared))
#define __forceinline__ __attribute__((always_inline))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#define __grid_constant__
#define __align__(n) __attribute__((aligned(n)))
struct longca_dim3 { unsigned x, y, z; };
extern __device__ longca_dim3 threadIdx, blockIdx, blockDim, gridDim;
struct __nv_bfloat16 { unsigned short x; __device__ __nv_bfloat16() {} __device__ __nv_bfloat16(float) {} __device__ operator float() const; };
struct __nv_bfloat162 { __nv_bfloat16 x, y; };
__device__ __nv_bfloat162 __floats2bfloat162_rn(float, float);
struct __half { unsigned short x; __device__ __half() {} __device__ __half(float) {} __device__ operator float() const; };
struct __half2 { __half x, y; };
__device__ __half2 __floats2half2_rn(float, float);
__device__ float __bfloat162float(__nv_bfloat16); __device__ __nv_bfloat16 __float2bfloat16(float);
__device__ float __half2float(__half); __device__ __half __float2half(float);
__device__ float exp2f(float); __device__ float logf(float); __device__ float expf(float); __device__ float fmaxf(float, float);
__device__ float fmaf(float, float, float);
__device__ float __shfl_xor_sync(unsigned, float, int); __device__ int __shfl_sync(unsigned, int, int); __device__ int __any_sync(unsigned, int);
__device__ unsigned long long __cvta_generic_to_shared(const void *);
__device__ float __int_as_float(int); __device__ int __float_as_int(float);
struct float2 { float x, y; }; __device__ float2 make_float2(float, float);
struct __attribute__((aligned(16))) float4 { float x, y, z, w; }; __device__ float4 make_float4(float, float, float, float);
struct __attribute__((aligned(8))) uint2 { unsigned x, y; }; __device__ uint2 make_uint2(unsigned, unsigned);
template <class T> __device__ T max(T, T); template <class T> __device__ T min(T, T);
__device__ void __syncthreads();
__device__ float atomicAdd(float *, float);
__device__ int atomicAdd(int *, int);
#endif
`

// CheckDevice compiles a CUDA C source's device code with clang (syntax, types and every
// template instantiation; the inline PTX is not checked, only NVRTC on a GPU machine
// does that), so a kernel edit that does not compile fails here and not on a device
// call. CI installs clang (.ci/run); without it the test fails under CI and is skipped
// elsewhere.
func CheckDevice(t testing.TB, name, src, arch string) {
	t.Helper()
	cc := compiler(t, "clang++", name, "compiled")
	dir := t.TempDir()
	for _, h := range []string{"cuda_bf16.h", "cuda_fp16.h"} {
		if err := os.WriteFile(filepath.Join(dir, h), []byte(deviceHeaders), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, name+".cu")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cc, "-x", "cuda", "--cuda-device-only", "--cuda-gpu-arch="+arch, "-nocudainc", "-nocudalib",
		"-I", dir, "-std=c++17", "-S", "-o", filepath.Join(dir, name+".ptx"), path).CombinedOutput()
	if err != nil {
		t.Fatalf("%s does not compile (clang, device code for %s): %v\n%s", name, arch, err, out)
	}
}
