package devops

import (
	"math"
	"math/rand/v2"
	"regexp"
	"testing"

	"github.com/longca/longca/internal/hostcc"
	"github.com/longca/longca/tensor"
)

// The helper kernels are CUDA C that only NVRTC on the GPU machine compiles for real.
// These tests compile the same source with the host C++ compiler over a small shim
// (CUDA's qualifiers as nothing, bf16 and fp16 as 16-bit structs with CUDA's
// round-to-nearest-even conversions) and run every kernel sequentially, block by block
// and thread by thread, against Go implementations of what each kernel must compute:
// the index arithmetic, the templates and the dtype variants are checked here; the
// CUDA-specific parts (headers, launch, concurrency) only on the GPU.

const shim = hostcc.CUDAShim

// driver loads buffers from files, calls one kernel over a grid of blocks x threads run
// one after another, and writes the buffers back.
const driver = `
static void *bufs[8];
static long long sizes[8];
static void load(int i, const char *path) {
  FILE *f = fopen(path, "rb"); fseek(f, 0, SEEK_END); sizes[i] = ftell(f); fseek(f, 0, SEEK_SET);
  bufs[i] = malloc(sizes[i] + 1); if (fread(bufs[i], 1, sizes[i], f) != (size_t)sizes[i]) exit(3); fclose(f);
}
static void save(int i, const char *path) { FILE *f = fopen(path, "wb"); fwrite(bufs[i], 1, sizes[i], f); fclose(f); }
#define GRID(blocks, threads, call) \
  gridDim.x = blocks; blockDim.x = threads; \
  for (blockIdx.x = 0; blockIdx.x < (blocks); blockIdx.x++) for (threadIdx.x = 0; threadIdx.x < (threads); threadIdx.x++) { call; }
#define K1(name, T0, T1) if (!strcmp(op, #name)) { GRID(3, 5, name((T0 *)bufs[0], (const T1 *)bufs[1], A(0))); }
int main(int argc, char **argv) {
  const char *op = argv[1]; int nb = atoi(argv[2]);
  for (int i = 0; i < nb; i++) load(i, argv[3 + i]);
  long long a[8]; for (int i = 3 + nb; i < argc; i++) a[i - 3 - nb] = atoll(argv[i]);
#define A(i) a[i]
  if (!strcmp(op, "copy_rows")) { GRID(3, 5, copy_rows((unsigned short *)bufs[0], (const unsigned short *)bufs[1], A(0), A(1), A(2), A(3), A(4), A(5))); }
  if (!strcmp(op, "heads_sum_bf16")) { GRID(3, 5, heads_sum_bf16((__nv_bfloat16 *)bufs[0], (const __nv_bfloat16 *)bufs[1], A(0), A(1), A(2), A(3))); }
  if (!strcmp(op, "heads_sum_fp16")) { GRID(3, 5, heads_sum_fp16((__half *)bufs[0], (const __half *)bufs[1], A(0), A(1), A(2), A(3))); }
  if (!strcmp(op, "heads_sum_fp32")) { GRID(3, 5, heads_sum_fp32((float *)bufs[0], (const float *)bufs[1], A(0), A(1), A(2), A(3))); }
  K1(acc_bf16, float, __nv_bfloat16) K1(acc_fp16, float, __half) K1(acc_fp32, float, float)
  K1(cvt_fp32_bf16, __nv_bfloat16, float) K1(cvt_fp32_fp16, __half, float)
  K1(cvt_bf16_fp32, float, __nv_bfloat16) K1(cvt_fp16_fp32, float, __half) K1(max_fp32, float, float)
  if (!strncmp(op, "merge_", 6)) {
    long long rows = A(0) * A(1), th = A(3);
    if (!strcmp(op, "merge_bf16")) { GRID(rows, th, merge_bf16((float *)bufs[0], (float *)bufs[1], (const __nv_bfloat16 *)bufs[2], (const float *)bufs[3], A(0), A(1), A(2))); }
    if (!strcmp(op, "merge_fp16")) { GRID(rows, th, merge_fp16((float *)bufs[0], (float *)bufs[1], (const __half *)bufs[2], (const float *)bufs[3], A(0), A(1), A(2))); }
    if (!strcmp(op, "merge_fp32")) { GRID(rows, th, merge_fp32((float *)bufs[0], (float *)bufs[1], (const float *)bufs[2], (const float *)bufs[3], A(0), A(1), A(2))); }
  }
  for (int i = 0; i < nb; i++) save(i, argv[3 + i]);
  return 0;
}
`

// hostBinary compiles shim + source + driver.
func hostBinary(t *testing.T) string {
	t.Helper()
	src := regexp.MustCompile(`(?m)^#include <cuda_.*>$`).ReplaceAllString(source, "")
	return hostcc.Compile(t, "the CUDA C helper kernels", shim+src+driver, "-Wall", "-Wno-unused-function")
}

// call runs one kernel on host tensors (updated in place) with integer arguments.
func call(t *testing.T, bin, op string, bufs []*tensor.Host, args ...int64) {
	t.Helper()
	hostcc.Run(t, bin, op, bufs, args...)
}

func rnd(rng *rand.Rand, dt tensor.DType, shape ...int) *tensor.Host {
	h := tensor.NewHost(dt, shape...)
	h.FillNormal(rng, 1)
	return h
}

// near compares element by element within tol (relative, at least absolute).
func near(t *testing.T, name string, got, want *tensor.Host, tol float64) {
	t.Helper()
	for i := range want.Numel() {
		a, b := got.At(i), want.At(i)
		if a == b || (math.IsNaN(a) && math.IsNaN(b)) {
			continue
		}
		if !(math.Abs(a-b) <= tol*max(1, math.Abs(b))) {
			t.Fatalf("%s: element %d is %g, want %g", name, i, a, b)
		}
	}
}

var suffixes = map[tensor.DType]string{tensor.BF16: "bf16", tensor.FP16: "fp16", tensor.FP32: "fp32"}

func TestKernelsOnHost(t *testing.T) {
	bin := hostBinary(t)
	rng := rand.New(rand.NewPCG(3, 4))

	// copy_rows: 16-bit words, offsets and strides in words.
	src := rnd(rng, tensor.BF16, 30, 40)
	dst := rnd(rng, tensor.BF16, 40, 32)
	want := dst.Clone()
	rows, w, do, ds, so, ss := 11, 13, 5, 29, 7, 37
	for r := range rows {
		copy(want.Data[2*(do+r*ds):2*(do+r*ds+w)], src.Data[2*(so+r*ss):2*(so+r*ss+w)])
	}
	call(t, bin, "copy_rows", []*tensor.Host{dst, src}, int64(rows), int64(w), int64(do), int64(ds), int64(so), int64(ss))
	near(t, "copy_rows", dst, want, 0)

	for dt, sf := range suffixes {
		// heads_sum: x [t, h, d] sums the replicas j*h/u == head of in [u*t, 1, d].
		tk, h, d, u := 7, 2, 8, 8
		in := rnd(rng, dt, u*tk, 1, d)
		x := rnd(rng, dt, tk, h, d)
		want := tensor.NewHost(dt, tk, h, d)
		for i := range want.Numel() {
			tok, hh, e := i/(h*d), (i/d)%h, i%d
			var s float32
			for j := range u {
				if j*h/u == hh {
					s += float32(in.At((j*tk+tok)*d + e))
				}
			}
			want.Set(i, float64(s))
		}
		call(t, bin, "heads_sum_"+sf, []*tensor.Host{x, in}, int64(tk), int64(h), int64(d), int64(u))
		near(t, "heads_sum_"+sf, x, want, 0)

		// acc: fp32 dst += src.
		acc, part := rnd(rng, tensor.FP32, 100), rnd(rng, dt, 100)
		wantAcc := acc.Clone()
		for i := range 100 {
			wantAcc.Set(i, float64(float32(acc.At(i))+float32(part.At(i))))
		}
		call(t, bin, "acc_"+sf, []*tensor.Host{acc, part}, 100)
		near(t, "acc_"+sf, acc, wantAcc, 0)

		if dt != tensor.FP32 {
			// cvt both ways, rounding to nearest even as tensor.Host.Set does.
			f := rnd(rng, tensor.FP32, 100)
			f.Set(0, math.Inf(-1))
			f.Set(1, 1+1.0/256) // a tie in bf16
			lo := tensor.NewHost(dt, 100)
			wantLo := tensor.NewHost(dt, 100)
			for i := range 100 {
				wantLo.Set(i, f.At(i))
			}
			call(t, bin, "cvt_fp32_"+sf, []*tensor.Host{lo, f}, 100)
			near(t, "cvt_fp32_"+sf, lo, wantLo, 0)
			back := tensor.NewHost(tensor.FP32, 100)
			call(t, bin, "cvt_"+sf+"_fp32", []*tensor.Host{back, lo}, 100)
			near(t, "cvt_"+sf+"_fp32", back, lo, 0)
		}

		// merge: three partials (one with rows of -inf) into -inf-initialised
		// accumulators, checked against the float64 log-sum-exp (fp32 rounding).
		tk, h, d = 5, 3, 6
		accO, accL := tensor.NewHost(tensor.FP32, tk, h, d), tensor.NewHost(tensor.FP32, h, tk)
		accL.Fill(math.Inf(-1))
		wantO, wantL := make([]float64, tk*h*d), make([]float64, h*tk)
		for i := range wantL {
			wantL[i] = math.Inf(-1)
		}
		for p := range 3 {
			o, l := rnd(rng, dt, tk, h, d), rnd(rng, tensor.FP32, h, tk)
			if p == 1 {
				for i := range tk {
					l.Set(i, math.Inf(-1))
				}
			}
			for row := range tk * h {
				tok, hd := row/h, row%h
				li := hd*tk + tok
				a, b := wantL[li], l.At(li)
				if math.IsInf(b, -1) {
					continue
				}
				lv := b
				wa, wb := 0.0, 1.0
				if !math.IsInf(a, -1) {
					hi := math.Max(a, b)
					lv = hi + math.Log(math.Exp(a-hi)+math.Exp(b-hi))
					wa, wb = math.Exp(a-lv), math.Exp(b-lv)
				}
				for e := range d {
					wantO[row*d+e] = wa*wantO[row*d+e] + wb*o.At(row*d+e)
				}
				wantL[li] = lv
			}
			// One thread per block: run one after another, threads cannot meet at the
			// kernel's barrier (all read the old lse, then thread 0 writes the new one).
			call(t, bin, "merge_"+sf, []*tensor.Host{accO, accL, o, l}, int64(tk), int64(h), int64(d), 1)
		}
		wo, wl := tensor.NewHost(tensor.FP64, tk, h, d), tensor.NewHost(tensor.FP64, h, tk)
		wo.SetFloat64s(wantO)
		wl.SetFloat64s(wantL)
		near(t, "merge_"+sf+" out", accO, wo, 1e-5)
		near(t, "merge_"+sf+" lse", accL, wl, 1e-6)
	}

	// max_fp32.
	a, b := rnd(rng, tensor.FP32, 50), rnd(rng, tensor.FP32, 50)
	wantMax := a.Clone()
	for i := range 50 {
		wantMax.Set(i, math.Max(a.At(i), b.At(i)))
	}
	call(t, bin, "max_fp32", []*tensor.Host{a, b}, 50)
	near(t, "max_fp32", a, wantMax, 0)
}

// TestKernelNames checks that every kernel name the Go side launches is defined in
// the source as an extern "C" __global__ function, and nothing defined goes unused.
func TestKernelNames(t *testing.T) {
	used := []string{"copy_rows", "max_fp32"}
	for _, sf := range []string{"bf16", "fp16", "fp32"} {
		used = append(used, "heads_sum_"+sf, "acc_"+sf, "merge_"+sf)
	}
	for _, c := range []string{"fp32_bf16", "fp32_fp16", "bf16_fp32", "fp16_fp32"} {
		used = append(used, "cvt_"+c)
	}
	defined := map[string]bool{}
	for _, m := range regexp.MustCompile(`extern "C" __global__ void (\w+)\(`).FindAllStringSubmatch(source, -1) {
		defined[m[1]] = true
	}
	for _, n := range used {
		if !defined[n] {
			t.Errorf("kernel %s is launched but not defined", n)
		}
		delete(defined, n)
	}
	for n := range defined {
		t.Errorf("kernel %s is defined but never launched", n)
	}
}

// fakeBuf stands for a device buffer in argument checks.
type fakeBuf struct{}

func (fakeBuf) DevicePtr() uintptr { return 0 }

// TestSignatures parses every kernel's parameters and checks that the argument lists
// the wrappers build fit them (and that a wrong one is refused).
func TestSignatures(t *testing.T) {
	s, err := signatures()
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != 15 {
		t.Fatalf("parsed %d kernels, want 15", len(s))
	}
	b := fakeBuf{}
	ok := map[string][]any{
		"copy_rows":      {b, b, uint64(1), uint64(2), uint64(3), uint64(4), uint64(5), uint64(6)},
		"heads_sum_bf16": {b, b, uint64(7), 2, 64, 8},
		"acc_fp16":       {b, b, uint64(9)},
		"cvt_fp32_bf16":  {b, b, uint64(9)},
		"max_fp32":       {b, b, uint64(9)},
		"merge_fp32":     {b, b, b, b, 5, 3, 6},
	}
	for name, args := range ok {
		if err := checkArgs(name, args); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, args := range map[string][]any{
		"copy_rows":  {b, b, 1, uint64(2), uint64(3), uint64(4), uint64(5), uint64(6)},
		"merge_fp32": {b, b, b, b, 5, 3},
		"nope":       {b},
		"acc_bf16":   {b, uint64(1), uint64(9)},
	} {
		if err := checkArgs(name, args); err == nil {
			t.Errorf("%s with %v was accepted", name, args)
		}
	}
}
