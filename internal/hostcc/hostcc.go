// Package hostcc compiles CUDA C helper kernels with the host C++ compiler for tests: the
// source, over a shim of the test's own, runs block by block on the CPU against a Go
// implementation, so index arithmetic and templates are checked where no GPU is. CI
// installs g++ (.ci/run); without it, a test fails under CI and is skipped elsewhere.
package hostcc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/longca/longca/tensor"
)

// CUDAShim makes CUDA C device code compile as host C++: the qualifiers as nothing,
// blockIdx/threadIdx/blockDim/gridDim as globals a driver sets, __syncthreads as nothing
// (blocks run thread by thread), bf16 and fp16 as 16-bit structs with CUDA's
// round-to-nearest-even conversions. Tests put it before the kernels' source (their
// #include <cuda_*.h> lines removed) and a driver of their own after it.
const CUDAShim = `
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <math.h>
#define __global__
#define __device__
#define __forceinline__ inline
struct dim3_ { long long x; };
static dim3_ blockIdx, threadIdx, blockDim, gridDim;
static inline void __syncthreads() {}
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
struct __nv_bfloat16 { uint16_t x; };
static inline float __bfloat162float(__nv_bfloat16 h) { uint32_t u = (uint32_t)h.x << 16; float f; memcpy(&f, &u, 4); return f; }
static inline __nv_bfloat16 __float2bfloat16(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  if (f != f) return {(uint16_t)((u >> 16) | 0x40)};
  u += 0x7fff + ((u >> 16) & 1);
  return {(uint16_t)(u >> 16)};
}
struct __half { uint16_t x; };
static inline float __half2float(__half h) { _Float16 v; memcpy(&v, &h.x, 2); return (float)v; }
static inline __half __float2half(float f) { _Float16 v = (_Float16)f; __half h; memcpy(&h.x, &v, 2); return h; }
`

// compiler finds a host compiler a test needs: under CI (which installs it: .ci/run) its
// absence fails the test; elsewhere the test is skipped, what it checks left to the GPU.
func compiler(t testing.TB, tool, name, what string) string {
	t.Helper()
	path, err := exec.LookPath(tool)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no %s: CI must install it (.ci/run) so %s is %s on the CPU", tool, name, what)
		}
		t.Skipf("no %s on this machine: %s is %s on the GPU only", tool, name, what)
	}
	return path
}

// Compile writes src to a temporary file and compiles it with g++ (C++17, -O1), returning
// the binary's path; flags are added to the compiler's.
func Compile(t testing.TB, name, src string, flags ...string) string {
	t.Helper()
	cxx := compiler(t, "g++", name, "checked")
	dir := t.TempDir()
	path := filepath.Join(dir, name+".cc")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	out, err := exec.Command(cxx, append(append([]string{"-std=c++17", "-O1"}, flags...), "-o", bin, path)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s does not compile as C++: %v\n%s", name, err, out)
	}
	if len(out) > 0 {
		t.Logf("g++ warnings for %s:\n%s", name, out)
	}
	return bin
}

// Output compiles src (Compile) and runs it without arguments, returning what it printed.
func Output(t testing.TB, name, src string, flags ...string) string {
	t.Helper()
	out, err := exec.Command(Compile(t, name, src, flags...)).Output()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return string(out)
}

// Run calls bin with op, the number of buffers, a file per buffer and the integer
// arguments; the program rewrites the files, which are read back into the buffers.
func Run(t testing.TB, bin, op string, bufs []*tensor.Host, args ...int64) {
	t.Helper()
	dir := t.TempDir()
	argv := []string{op, fmt.Sprint(len(bufs))}
	for i, b := range bufs {
		p := filepath.Join(dir, fmt.Sprintf("b%d", i))
		if err := os.WriteFile(p, b.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		argv = append(argv, p)
	}
	for _, a := range args {
		argv = append(argv, fmt.Sprint(a))
	}
	if out, err := exec.Command(bin, argv...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", op, err, out)
	}
	for i, b := range bufs {
		d, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("b%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		copy(b.Data, d)
	}
}

// SharedLibrary compiles the C file src into the shared library out with the C compiler
// cgo uses ($CC, else cc), -shared -fPIC -O1 and flags: the fake libnccl and libcudnn
// that CPU tests load in place of the real ones. It takes no testing.TB so that a
// TestMain (or a helper package such as ncclfake) can build once for a whole package.
func SharedLibrary(out, src string, flags ...string) error {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	args := append([]string{"-shared", "-fPIC", "-O1", "-o", out, src}, flags...)
	if msg, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("building %s with %s: %v\n%s", filepath.Base(out), cc, err, msg)
	}
	return nil
}
