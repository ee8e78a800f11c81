//go:build gpu

package cp

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/comm/local/cudamover"
	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/internal/cuda/devops"
	"github.com/longca/longca/kernels"
	cudakern "github.com/longca/longca/kernels/cuda"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// gpuSeq is the sequence length of the GPU table: several tiles per rank at 2 ranks,
// partial tiles at 8, and small enough for the CPU reference.
const gpuSeq = 512

// gpuWorld is 8 simulated ranks on GPU 0: each its own device handle (own stream,
// own peak bookkeeping) and cuda kernel, and one device mover for comm/local.
var gpuWorld struct {
	once  sync.Once
	devs  []*cuda.Device
	kerns []*cudakern.Kernel
	mover *cudamover.Mover
	err   error
}

func gpuRanks(t *testing.T) ([]*cuda.Device, []*cudakern.Kernel, *cudamover.Mover) {
	t.Helper()
	w := &gpuWorld
	w.once.Do(func() {
		for range 8 {
			g, err := cuda.Open(0)
			if err != nil {
				w.err = err
				return
			}
			k, err := cudakern.New(g)
			if err != nil {
				w.err = err
				return
			}
			w.devs, w.kerns = append(w.devs, g), append(w.kerns, k)
		}
		g, err := cuda.Open(0)
		if err != nil {
			w.err = err
			return
		}
		w.mover, w.err = cudamover.New(g, 16)
	})
	if w.err != nil {
		t.Fatalf("no GPU world (this test needs a GPU; a CompileError carries NVRTC's log): %v", w.err)
	}
	return w.devs, w.kerns, w.mover
}

// TestGPUOpsCompile compiles the helper kernels and prints NVRTC's log.
func TestGPUOpsCompile(t *testing.T) {
	g, err := cuda.Open(0)
	if err != nil {
		t.Fatalf("no GPU: %v", err)
	}
	_, log, err := cuda.Compile(devops.Source(), "longca_cp_ops.cu", g.Options())
	t.Logf("NVRTC log (%s):\n%s", g.Arch(), log)
	if err != nil {
		t.Fatalf("%v", err)
	}
}

// TestGPUPrimsMatchEmulation runs each device primitive and its host emulation (the
// fakePrims of the CPU tests, which the device path was checked through) on the same
// random inputs: copies and conversions exactly, sums and merges to fp32 rounding.
func TestGPUPrimsMatchEmulation(t *testing.T) {
	devs, _, _ := gpuRanks(t)
	g := devs[0]
	o, err := devops.New(g, g.Stream())
	if err != nil {
		t.Fatal(err)
	}
	gp := cudaPrims{Ops: o, g: g, pool: devops.NewPool(g)}
	fp := newFakePrims(nil)
	rng := rand.New(rand.NewPCG(11, 12))
	rnd := func(dt tensor.DType, shape ...int) *tensor.Host {
		h := tensor.NewHost(dt, shape...)
		h.FillNormal(rng, 1)
		return h
	}
	// both runs fn on device copies and host copies of ins and compares output index out.
	both := func(name string, tol float64, out int, ins []*tensor.Host, fn func(p devicePrims, ts []tensor.Tensor) error) {
		t.Helper()
		dts := make([]tensor.Tensor, len(ins))
		hts := make([]tensor.Tensor, len(ins))
		for i, h := range ins {
			d, err := gp.Alloc(h.DType(), h.Shape()...)
			if err != nil {
				t.Fatal(err)
			}
			if err := gp.CopyIn(d, h); err != nil {
				t.Fatal(err)
			}
			dts[i], hts[i] = d, h.Clone()
		}
		defer gp.Free(dts...)
		if err := fn(gp, dts); err != nil {
			t.Fatalf("%s on the GPU: %v", name, err)
		}
		if err := fn(fp, hts); err != nil {
			t.Fatalf("%s emulated: %v", name, err)
		}
		got := tensor.NewHost(ins[out].DType(), ins[out].Shape()...)
		if err := gp.Sync(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := gp.CopyOut(got, dts[out]); err != nil {
			t.Fatal(err)
		}
		want := hts[out].(*tensor.Host)
		worst := 0.0
		for i := range got.Numel() {
			a, b := got.At(i), want.At(i)
			if math.IsInf(a, -1) && math.IsInf(b, -1) {
				continue
			}
			worst = max(worst, math.Abs(a-b)/max(1, math.Abs(b)))
			if !(math.Abs(a-b) <= tol*max(1, math.Abs(b))) {
				t.Fatalf("%s: element %d is %g on the GPU, %g emulated", name, i, a, b)
			}
		}
		t.Logf("%s: %d elements, worst relative difference %.2g", name, got.Numel(), worst)
	}
	T, H, D, u := 96, 8, 64, 4
	dOps := deviceOps{p: gp}
	// The rearrangements against the host path's own functions, exactly.
	same := func(name string, got tensor.Tensor, want *tensor.Host) {
		t.Helper()
		h := tensor.NewHost(want.DType(), want.Shape()...)
		if err := dOps.download(h, got); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got.Shape()) != fmt.Sprint(want.Shape()) || string(h.Data) != string(want.Data) {
			t.Fatalf("%s: the GPU's %v differs from the host's %v", name, got.Shape(), want.Shape())
		}
		t.Logf("%s: %v identical", name, want.Shape())
	}
	for _, hk := range []int{H, 2} {
		rep := hk < u
		x := rnd(tensor.BF16, T, hk, D)
		dx, err := dOps.upload(x)
		if err != nil {
			t.Fatal(err)
		}
		y, err := dOps.headsOut(dx, u, rep)
		if err != nil {
			t.Fatal(err)
		}
		same(fmt.Sprintf("headsOut %d heads over %d", hk, u), y, headsOut(x, u, rep))
		back := tensor.NewHost(tensor.BF16, T, hk, D)
		dback, err := dOps.upload(back)
		if err != nil {
			t.Fatal(err)
		}
		if err := dOps.headsIn(y, dback, u, rep); err != nil {
			t.Fatal(err)
		}
		headsIn(headsOut(x, u, rep), back, u, rep)
		same(fmt.Sprintf("headsIn %d heads over %d", hk, u), dback, back)
		dOps.free(dx, y, dback)
	}
	l := rnd(tensor.FP32, 2, u*T)
	dl, err := dOps.upload(l)
	if err != nil {
		t.Fatal(err)
	}
	lo, err := dOps.lseOut(dl, u)
	if err != nil {
		t.Fatal(err)
	}
	same("lseOut", lo, lseOut(l, u))
	dOps.free(dl, lo)
	both("copy_rows", 0, 0, []*tensor.Host{rnd(tensor.BF16, 40, 64), rnd(tensor.BF16, 30, 96)}, func(p devicePrims, ts []tensor.Tensor) error {
		return p.CopyRows(ts[0], ts[1], 20, 64, 6, 128, 32, 192)
	})
	both("heads_sum", 1e-6, 0, []*tensor.Host{rnd(tensor.BF16, T, 2, D), rnd(tensor.BF16, 8*T, 1, D)}, func(p devicePrims, ts []tensor.Tensor) error {
		return p.HeadsSum(ts[0], ts[1], 8)
	})
	for _, dt := range []tensor.DType{tensor.BF16, tensor.FP16, tensor.FP32} {
		both("accumulate "+dt.String(), 1e-6, 0, []*tensor.Host{rnd(tensor.FP32, T, H, D), rnd(dt, T, H, D)}, func(p devicePrims, ts []tensor.Tensor) error {
			return p.Accumulate(ts[0], ts[1])
		})
		if dt != tensor.FP32 {
			both("convert fp32->"+dt.String(), 0, 0, []*tensor.Host{rnd(dt, T, H, D), rnd(tensor.FP32, T, H, D)}, func(p devicePrims, ts []tensor.Tensor) error {
				return p.Convert(ts[0], ts[1])
			})
			both("convert "+dt.String()+"->fp32", 0, 0, []*tensor.Host{rnd(tensor.FP32, T, H, D), rnd(dt, T, H, D)}, func(p devicePrims, ts []tensor.Tensor) error {
				return p.Convert(ts[0], ts[1])
			})
		}
	}
	both("fill -inf", 0, 0, []*tensor.Host{rnd(tensor.FP32, H, T)}, func(p devicePrims, ts []tensor.Tensor) error {
		return p.Fill(ts[0], math.Inf(-1))
	})
	// Merge three partials, one with rows of -inf (no keys), into -inf accumulators in
	// place, the lse alternating between two buffers (it ends in the second); then the
	// engine's other merges: two bf16 partials into fp32, fp32 and bf16 into bf16, and
	// two bf16 in place in the first.
	lses := []*tensor.Host{rnd(tensor.FP32, H, T), rnd(tensor.FP32, H, T), rnd(tensor.FP32, H, T)}
	for i := range T {
		lses[1].Set(3*T+i, math.Inf(-1))
		lses[2].Set(i, math.Inf(-1))
	}
	for _, which := range []int{0, 2} {
		acc, lacc := tensor.NewHost(tensor.FP32, T, H, D), tensor.NewHost(tensor.FP32, H, T)
		lacc.Fill(math.Inf(-1))
		ins := []*tensor.Host{acc, lacc, rnd(tensor.FP32, H, T), rnd(tensor.BF16, T, H, D), lses[0], rnd(tensor.BF16, T, H, D), lses[1], rnd(tensor.BF16, T, H, D), lses[2]}
		both(fmt.Sprintf("merge (output %d)", which), 2e-5, which, ins, func(p devicePrims, ts []tensor.Tensor) error {
			for j := 0; j < 3; j++ {
				if err := p.Merge(ts[0], ts[1+(j+1)%2], ts[0], ts[1+j%2], ts[3+2*j], ts[4+2*j]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	for _, c := range []struct {
		name    string
		a, b    tensor.DType
		d       tensor.DType
		inPlace bool
	}{{"bf16+bf16->fp32", tensor.BF16, tensor.BF16, tensor.FP32, false}, {"fp32+bf16->bf16", tensor.FP32, tensor.BF16, tensor.BF16, false},
		{"bf16+bf16->bf16 in place", tensor.BF16, tensor.BF16, tensor.BF16, true}} {
		ins := []*tensor.Host{rnd(c.d, T, H, D), rnd(tensor.FP32, H, T), rnd(c.a, T, H, D), lses[1], rnd(c.b, T, H, D), lses[2]}
		outs := []int{0, 1}
		if c.inPlace {
			outs[0] = 2 // dst is a
		}
		for _, which := range outs {
			both("merge "+c.name+fmt.Sprintf(" (output %d)", which), 1e-2, which, ins, func(p devicePrims, ts []tensor.Tensor) error {
				dst := ts[0]
				if c.inPlace {
					dst = ts[2]
				}
				return p.Merge(dst, ts[1], ts[2], ts[3], ts[4], ts[5])
			})
		}
	}
	for _, dt := range []tensor.DType{tensor.BF16, tensor.FP32} {
		both("add bf16+bf16->"+dt.String(), 1e-6, 0, []*tensor.Host{rnd(dt, T, H, D), rnd(tensor.BF16, T, H, D), rnd(tensor.BF16, T, H, D)}, func(p devicePrims, ts []tensor.Tensor) error {
			return p.Add(ts[0], ts[1], ts[2])
		})
	}
}

// TestGPUMethodsMatchReference is the device path on one GPU: every method x the four
// CP masks x its meshes of 2, 4 and 8 simulated ranks (comm/local with the device
// mover, each rank its own stream and kernel), forward and backward, checked against
// the CPU reference by the rule (CheckRank). Every buffer the methods took from the
// ranks' pools is returned.
func TestGPUMethodsMatchReference(t *testing.T) {
	devs, kerns, mover := gpuRanks(t)
	ctx := context.Background()
	worst := 0.0
	opts := func(mi int) mask.Options {
		opt := testMaskOptions(uint64(21 + mi))
		opt.LongMin, opt.LongMax = 48, 160
		return opt
	}
	forEachDeviceCase(t, gpuSeq, 64, opts, func(t *testing.T, mi, ci int, m Method, pl *Plan, p kernels.Problem) {
		var rep0 string
		var pass bool
		var ratio float64
		err := local.Run(pl.Config.Ranks, func(c comm.Comm) error {
			r, err := NewRun(pl, kerns[c.Rank()], c)
			if err != nil {
				return err
			}
			defer r.Close()
			if _, ok := r.ops.(deviceOps); !ok {
				return fmt.Errorf("the run's ops are %T, not the device's", r.ops)
			}
			rep, err := CheckRank(ctx, m, r, CheckOptions{Seed: uint64(900 + 10*mi + ci), Backward: true})
			if err != nil {
				return err
			}
			if c.Rank() == 0 {
				rep0, pass = rep.String(), rep.Pass
				for _, f := range rep.Figures {
					ratio = max(ratio, f.Err/f.Tol)
				}
			}
			return nil
		}, local.WithMover(mover))
		if err != nil {
			t.Fatal(err)
		}
		for i := range pl.Config.Ranks {
			if n := devOps[devs[i]].pool.Outstanding(); n != 0 {
				t.Errorf("rank %d: %d pool buffers not returned", i, n)
			}
		}
		worst = max(worst, ratio)
		t.Logf("%s (worst error/tolerance %.3f)", rep0, ratio)
		if !pass {
			t.Errorf("%s", rep0)
		}
	})
	t.Logf("worst error / tolerance over the table: %.3f", worst)
}
