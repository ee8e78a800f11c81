package devops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
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
// one after another, and writes the buffers back. The add, cvt and merge kernels take
// the grid as their first two integer arguments and, for add and merge, which buffer
// each operand is (so a test can merge or add in place); their dispatch lines are
// generated from the same dtype list as the kernels (dispatch).
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
#define ADD(name, TA, TB, TD) if (!strcmp(op, #name)) { GRID(A(0), A(1), name((TD *)bufs[0], (const TA *)bufs[A(4)], (const TB *)bufs[A(5)], A(2), A(3))); }
#define CVT(name, TA, TD) if (!strcmp(op, #name)) { GRID(A(0), A(1), name((TD *)bufs[0], (const TA *)bufs[1], A(2), A(3))); }
#define MERGE(name, TA, TB, TD) if (!strcmp(op, #name)) { GRID(A(0), A(1), name((TD *)bufs[0], (float *)bufs[1], (const TA *)bufs[A(6)], \
  (const float *)bufs[A(7)], (const TB *)bufs[A(8)], (const float *)bufs[A(9)], A(2), A(3), A(4), A(5))); }
int main(int argc, char **argv) {
  const char *op = argv[1]; int nb = atoi(argv[2]);
  for (int i = 0; i < nb; i++) load(i, argv[3 + i]);
  long long a[16]; for (int i = 3 + nb; i < argc; i++) a[i - 3 - nb] = atoll(argv[i]);
#define A(i) a[i]
  if (!strcmp(op, "copy_rows")) { GRID(3, 5, copy_rows((unsigned short *)bufs[0], (const unsigned short *)bufs[1], A(0), A(1), A(2), A(3), A(4), A(5))); }
  if (!strcmp(op, "heads_sum_bf16")) { GRID(3, 5, heads_sum_bf16((__nv_bfloat16 *)bufs[0], (const __nv_bfloat16 *)bufs[1], A(0), A(1), A(2), A(3))); }
  if (!strcmp(op, "heads_sum_fp16")) { GRID(3, 5, heads_sum_fp16((__half *)bufs[0], (const __half *)bufs[1], A(0), A(1), A(2), A(3))); }
  if (!strcmp(op, "heads_sum_fp32")) { GRID(3, 5, heads_sum_fp32((float *)bufs[0], (const float *)bufs[1], A(0), A(1), A(2), A(3))); }
  K1(max_fp32, float, float)
`

// dispatch is the driver's lines for the add, cvt and merge kernels of every dtype
// triple, and its end.
func dispatch() string {
	var b strings.Builder
	for _, a := range dtypes {
		for _, x := range dtypes {
			for _, d := range dtypes {
				n := a.sf + "_" + x.sf + "_" + d.sf
				fmt.Fprintf(&b, "  ADD(add_%s, %s, %s, %s)\n  MERGE(merge_%s, %s, %s, %s)\n", n, a.c, x.c, d.c, n, a.c, x.c, d.c)
			}
		}
	}
	for _, x := range dtypes[:2] {
		fmt.Fprintf(&b, "  CVT(cvt_fp32_%s, float, %s)\n  CVT(cvt_%s_fp32, %s, float)\n", x.sf, x.c, x.sf, x.c)
	}
	return b.String() + "  for (int i = 0; i < nb; i++) save(i, argv[3 + i]);\n  return 0;\n}\n"
}

// hostBinary compiles shim + source + driver.
func hostBinary(t *testing.T) string {
	t.Helper()
	src := regexp.MustCompile(`(?m)^#include <cuda_.*>$`).ReplaceAllString(source, "")
	return hostcc.Compile(t, "the CUDA C helper kernels", shim+src+driver+dispatch(), "-Wall", "-Wno-unused-function")
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

// dtypeOf is the tensor dtype of a kernel suffix.
var dtypeOf = map[string]tensor.DType{"bf16": tensor.BF16, "fp16": tensor.FP16, "fp32": tensor.FP32}

// grids are the launch shapes the bandwidth kernels are run under on the host: fewer
// threads than 8-element chunks (each thread loops, grid-stride) and more (some idle).
var grids = [][2]int64{{3, 5}, {4, 64}}

// TestAddConvertOnHost runs add_A_B_D for every dtype triple, apart and in place (dst is
// a), and cvt both ways, on element counts with and without a tail of fewer than 8,
// 16-byte accesses on and off, under both grids, against Go's fp32 arithmetic rounded
// once to dst's dtype (exactly).
func TestAddConvertOnHost(t *testing.T) {
	bin := hostBinary(t)
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{96, 101, 5} {
		for vec := range int64(2) {
			for gi, g := range grids {
				for _, a := range dtypes {
					for _, x := range dtypes {
						for _, d := range dtypes {
							name := fmt.Sprintf("add_%s_%s_%s", a.sf, x.sf, d.sf)
							av, bv := rnd(rng, dtypeOf[a.sf], n), rnd(rng, dtypeOf[x.sf], n)
							want := tensor.NewHost(dtypeOf[d.sf], n)
							for i := range n {
								want.Set(i, float64(float32(av.At(i))+float32(bv.At(i))))
							}
							dst := rnd(rng, dtypeOf[d.sf], n)
							call(t, bin, name, []*tensor.Host{dst, av, bv}, g[0], g[1], int64(n), vec, 1, 2)
							near(t, fmt.Sprintf("%s n=%d vec=%d grid %d", name, n, vec, gi), dst, want, 0)
							if a.sf == d.sf && gi == 0 { // in place: dst is a
								call(t, bin, name, []*tensor.Host{av, bv}, g[0], g[1], int64(n), vec, 0, 1)
								near(t, fmt.Sprintf("%s in place n=%d vec=%d", name, n, vec), av, want, 0)
							}
						}
					}
				}
				for _, sf := range []string{"bf16", "fp16"} {
					dt := dtypeOf[sf]
					// cvt both ways, rounding to nearest even as tensor.Host.Set does.
					f := rnd(rng, tensor.FP32, n)
					f.Set(0, math.Inf(-1))
					f.Set(1, 1+1.0/256) // a tie in bf16
					lo, wantLo := tensor.NewHost(dt, n), tensor.NewHost(dt, n)
					for i := range n {
						wantLo.Set(i, f.At(i))
					}
					call(t, bin, "cvt_fp32_"+sf, []*tensor.Host{lo, f}, g[0], g[1], int64(n), vec)
					near(t, "cvt_fp32_"+sf, lo, wantLo, 0)
					back := tensor.NewHost(tensor.FP32, n)
					call(t, bin, "cvt_"+sf+"_fp32", []*tensor.Host{back, lo}, g[0], g[1], int64(n), vec)
					near(t, "cvt_"+sf+"_fp32", back, lo, 0)
				}
			}
		}
	}
}

// mergeRef is the log-sum-exp merge in float64 of a (lse la) and b (lse lb), [t, h, d]
// outputs and [h, t] lse: a side with lse -inf is left out; a row empty on both sides
// is out 0, lse -inf.
func mergeRef(a, la, b, lb *tensor.Host, t, h, d int) (out, lse []float64) {
	out, lse = make([]float64, t*h*d), make([]float64, h*t)
	for row := range t * h {
		tok, hd := row/h, row%h
		li := hd*t + tok
		x, y := la.At(li), lb.At(li)
		wa, wb, l := 0.0, 0.0, math.Inf(-1)
		switch {
		case !math.IsInf(x, -1) && !math.IsInf(y, -1):
			hi := math.Max(x, y)
			l = hi + math.Log(math.Exp(x-hi)+math.Exp(y-hi))
			wa, wb = math.Exp(x-l), math.Exp(y-l)
		case !math.IsInf(x, -1):
			wa, l = 1, x
		case !math.IsInf(y, -1):
			wb, l = 1, y
		}
		lse[li] = l
		for e := range d {
			i := row*d + e
			if wa != 0 {
				out[i] += wa * a.At(i)
			}
			if wb != 0 {
				out[i] += wb * b.At(i)
			}
		}
	}
	return out, lse
}

// TestMergeOnHost runs merge_A_B_D for every dtype triple on head dims 64 and 128 (16-byte
// accesses), 24 and 20 (a row of 3 chunks; a partial last chunk, element by element), odd
// token and head counts, both grids, apart and in place (dst is a, when their dtypes
// agree), against mergeRef: rows empty on one side (whose out holds NaN, so reading it
// shows) or on both (out exactly 0, lse -inf), and rows whose lse differ by 100 (the
// smaller weight underflows). No output may be NaN.
func TestMergeOnHost(t *testing.T) {
	bin := hostBinary(t)
	rng := rand.New(rand.NewPCG(7, 8))
	ninf := math.Inf(-1)
	type shape struct{ t, h, d int }
	run := func(name string, sh shape, vec, inplace bool, g [2]int64) {
		t.Helper()
		parts := strings.Split(name, "_")
		ta, tb, td := dtypeOf[parts[1]], dtypeOf[parts[2]], dtypeOf[parts[3]]
		tk, h, d := sh.t, sh.h, sh.d
		a, b := rnd(rng, ta, tk, h, d), rnd(rng, tb, tk, h, d)
		la, lb := rnd(rng, tensor.FP32, h, tk), rnd(rng, tensor.FP32, h, tk)
		for row := range tk * h {
			li := (row%h)*tk + row/h
			switch row % 5 {
			case 1: // a saw no key: its out is not read
				la.Set(li, ninf)
				for e := range d {
					a.Set(row*d+e, math.NaN())
				}
			case 2: // b saw no key
				lb.Set(li, ninf)
				for e := range d {
					b.Set(row*d+e, math.NaN())
				}
			case 3: // neither
				la.Set(li, ninf)
				lb.Set(li, ninf)
				for e := range d {
					a.Set(row*d+e, math.NaN())
					b.Set(row*d+e, math.NaN())
				}
			case 4: // far apart: b's weight underflows in fp32
				lb.Set(li, la.At(li)-100)
			}
		}
		wantO, wantL := mergeRef(a, la, b, lb, tk, h, d)
		dst, ldst := rnd(rng, td, tk, h, d), rnd(rng, tensor.FP32, h, tk)
		v := int64(0)
		if vec {
			v = 1
		}
		bufs, idx := []*tensor.Host{dst, ldst, a, la, b, lb}, []int64{2, 3, 4, 5}
		if inplace {
			bufs, idx = []*tensor.Host{a, ldst, la, b, lb}, []int64{0, 2, 3, 4}
			dst = a
		}
		call(t, bin, name, bufs, append([]int64{g[0], g[1], int64(tk), int64(h), int64(d), v}, idx...)...)
		label := fmt.Sprintf("%s %v vec=%v in-place=%v grid %v", name, sh, vec, inplace, g)
		for i := range dst.Numel() {
			if math.IsNaN(dst.At(i)) {
				t.Fatalf("%s: out element %d is NaN", label, i)
			}
			if row := i / d; row%5 == 3 && dst.At(i) != 0 {
				t.Fatalf("%s: out element %d of a row without keys is %g, want 0", label, i, dst.At(i))
			}
		}
		wo, wl := tensor.NewHost(tensor.FP64, tk, h, d), tensor.NewHost(tensor.FP64, h, tk)
		wo.SetFloat64s(wantO)
		wl.SetFloat64s(wantL)
		tol := 2e-6 // fp32 arithmetic, then one rounding to dst's dtype
		switch td {
		case tensor.BF16:
			tol = 1.0 / 256
		case tensor.FP16:
			tol = 1.0 / 1024
		}
		near(t, label+" out", dst, wo, tol)
		near(t, label+" lse", ldst, wl, 1e-6)
	}
	for _, a := range dtypes {
		for _, x := range dtypes {
			for _, d := range dtypes {
				name := fmt.Sprintf("merge_%s_%s_%s", a.sf, x.sf, d.sf)
				run(name, shape{5, 3, 64}, true, false, grids[0])
				if a.sf == d.sf {
					run(name, shape{5, 3, 64}, true, true, grids[0])
				}
			}
		}
	}
	// The shape classes on the triples the engine uses (bf16 out and partials, fp32
	// accumulator; and fp32 partials).
	for _, name := range []string{"merge_bf16_bf16_bf16", "merge_bf16_bf16_fp32", "merge_fp32_bf16_fp32", "merge_fp32_bf16_bf16", "merge_fp32_fp32_fp32", "merge_fp32_fp32_bf16"} {
		parts := strings.Split(name, "_")
		for _, sh := range []shape{{7, 2, 128}, {3, 5, 64}, {4, 3, 24}, {3, 3, 20}, {1, 1, 8}} {
			for _, g := range grids {
				vecs := []bool{false}
				if sh.d%8 == 0 {
					vecs = append(vecs, true)
				}
				for _, vec := range vecs {
					run(name, sh, vec, false, g)
					if parts[1] == parts[3] {
						run(name, sh, vec, true, g)
					}
				}
			}
		}
	}
}

// TestKernelNames checks that every kernel name the Go side launches is defined in
// the source as an extern "C" __global__ function, and nothing defined goes unused.
func TestKernelNames(t *testing.T) {
	used := []string{"copy_rows", "max_fp32"}
	for _, a := range dtypes {
		used = append(used, "heads_sum_"+a.sf)
		for _, b := range dtypes {
			for _, d := range dtypes {
				used = append(used, "add_"+a.sf+"_"+b.sf+"_"+d.sf, "merge_"+a.sf+"_"+b.sf+"_"+d.sf)
			}
		}
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
	if len(s) != 67 { // copy_rows, max, 3 heads_sum, 4 cvt, 27 add, 27 merge; copy_runs, 3 add_runs
		t.Fatalf("parsed %d kernels, want 67", len(s))
	}
	b := fakeBuf{}
	ok := map[string][]any{
		"copy_rows":            {b, b, uint64(1), uint64(2), uint64(3), uint64(4), uint64(5), uint64(6)},
		"heads_sum_bf16":       {b, b, uint64(7), 2, 64, 8},
		"add_fp32_fp16_fp32":   {b, b, b, uint64(9), 1},
		"cvt_fp32_bf16":        {b, b, uint64(9), 0},
		"max_fp32":             {b, b, uint64(9)},
		"copy_runs":            {b, b, b, uint64(4), uint64(16)},
		"add_runs_bf16":        {b, b, b, uint64(4), uint64(1024)},
		"merge_fp32_bf16_bf16": {b, b, b, b, b, b, 5, 3, 64, 1},
	}
	for name, args := range ok {
		if err := checkArgs(name, args); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for name, args := range map[string][]any{
		"copy_rows":            {b, b, 1, uint64(2), uint64(3), uint64(4), uint64(5), uint64(6)},
		"merge_fp32_fp32_fp32": {b, b, b, b, 5, 3},
		"merge_fp32":           {b, b, b, b, 5, 3, 6},
		"nope":                 {b},
		"add_bf16_bf16_fp32":   {b, b, b, 9, 1},
		"cvt_bf16_fp32":        {b, b, uint64(9)},
	} {
		if err := checkArgs(name, args); err == nil {
			t.Errorf("%s with %v was accepted", name, args)
		}
	}
}

// TestKernelsCompileForDevice compiles the helper kernels' device code with clang for
// sm_80, the newest clang here knows (types, templates, every instance; NVRTC compiles
// them for the GPU at hand on the GPU machine).
func TestKernelsCompileForDevice(t *testing.T) {
	hostcc.CheckDevice(t, "devops", source, "sm_80")
}
