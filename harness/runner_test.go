package harness

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// fakeKernel is the reference kernel on a scripted device, optionally made wrong,
// unsupported or out of memory.
type fakeKernel struct {
	*ref.Kernel
	dev         *fakeDevice
	wrong       bool
	unsupported error
	oom         bool
	noop        bool // compute nothing (timing-only tests)
	forwards    int
}

func (f *fakeKernel) Name() string          { return "fake" }
func (f *fakeKernel) Device() tensor.Device { return f.dev }
func (f *fakeKernel) Supports(p kernels.Problem) error {
	if f.unsupported != nil {
		return f.unsupported
	}
	return f.Kernel.Supports(p)
}

func (f *fakeKernel) Forward(ctx context.Context, p kernels.Problem, q, k, v, out, lse tensor.Tensor) error {
	f.forwards++
	if f.oom {
		return errors.New("cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY: out of memory")
	}
	if f.noop {
		return nil
	}
	if err := f.Kernel.Forward(ctx, p, q, k, v, out, lse); err != nil {
		return err
	}
	if f.wrong { // off by a little everywhere: far beyond 3x the naive bf16 error
		h := out.(*tensor.Host)
		for i := 0; i < h.Numel(); i++ {
			h.Set(i, h.At(i)+0.05)
		}
	}
	return nil
}

func newFake() *fakeKernel {
	return &fakeKernel{Kernel: ref.New(ref.Options{}), dev: &fakeDevice{times: []time.Duration{2 * time.Millisecond, 4 * time.Millisecond, 3 * time.Millisecond}}}
}

func runnerFor(k kernels.Kernel) *Runner {
	return &Runner{Check: KernelCheck, Warmup: 1, Iters: 3,
		NewKernel: func(string) (kernels.Kernel, error) { return k, nil }}
}

var small = Case{Mask: "causal_document", SeqLen: 256, Heads: Heads{4, 2}, HeadDim: 16, DType: tensor.BF16, Kernel: "fake", Pass: kernels.Fwd, Seed: 42}

func TestWrongKernelIsNeverTimed(t *testing.T) {
	for _, pass := range []kernels.Pass{kernels.Fwd, kernels.FwdBwd} {
		k := newFake()
		k.wrong = true
		c := small
		c.Pass = pass
		row := runnerFor(k).Run(context.Background(), c)
		if row.Status != results.StatusWrong {
			t.Fatalf("%s: status %s (%s), want wrong", pass, row.Status, row.Reason)
		}
		if k.dev.timed != 0 || k.dev.flushes != 0 {
			t.Fatalf("%s: wrong kernel was timed %d times", pass, k.dev.timed)
		}
		if row.MedianMs != nil || row.TFLOPs != nil || row.MinMs != nil || row.PeakMemBytes != nil {
			t.Fatalf("%s: wrong row has numbers: %+v", pass, row)
		}
		// The worst figure is out for fwd; for fwd+bwd the backward of the wrong out may
		// be worse still (check.Both runs the candidate's own forward first).
		if row.CheckPass == nil || *row.CheckPass || (pass == kernels.Fwd && row.CheckWorst != "out") || row.CheckWorst == "" || *row.CheckErr <= *row.CheckTol {
			t.Fatalf("%s: check columns %v %q", pass, row.CheckPass, row.CheckWorst)
		}
		if *row.CheckSeqLen != 256 || row.FLOPs <= 0 || row.MaskArea <= 0 {
			t.Fatalf("%s: checked at %d, flops %v", pass, *row.CheckSeqLen, row.FLOPs)
		}
	}
}

func TestGoodKernelIsCheckedThenTimed(t *testing.T) {
	for _, pass := range []kernels.Pass{kernels.Fwd, kernels.Bwd, kernels.FwdBwd} {
		k := newFake()
		c := small
		c.Pass = pass
		r := runnerFor(k)
		row := r.Run(context.Background(), c)
		r.Close()
		if row.Status != results.StatusOK {
			t.Fatalf("%s: status %s: %s", pass, row.Status, row.Reason)
		}
		if k.dev.timed != 3 || k.dev.flushes != 3 {
			t.Fatalf("%s: timed %d, flushed %d", pass, k.dev.timed, k.dev.flushes)
		}
		if *row.MedianMs != 3 || *row.MinMs != 2 || *row.MaxMs != 4 || *row.MeanMs != 3 {
			t.Fatalf("%s: times %v %v %v %v", pass, *row.MedianMs, *row.MinMs, *row.MaxMs, *row.MeanMs)
		}
		p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 16}
		want := 4 * float64(row.MaskArea) * 4 * 16 * pass.FLOPsFactor()
		if row.FLOPs != want || *row.TFLOPs != want/3e-3/1e12 {
			t.Fatalf("%s: flops %v want %v (%v), tflops %v", pass, row.FLOPs, want, p, *row.TFLOPs)
		}
		if !*row.CheckPass || row.Pass != pass.String() || row.Device != "cpu" || row.Backend != "cpu" || *row.PeakMemBytes <= 0 {
			t.Fatalf("%s: row %+v", pass, row)
		}
	}
}

func TestStatusesOfFailingCases(t *testing.T) {
	k := newFake()
	k.unsupported = errors.New("fake: head dim 16 is not compiled")
	row := runnerFor(k).Run(context.Background(), small)
	if row.Status != results.StatusUnsupported || row.Reason != "fake: head dim 16 is not compiled" || k.forwards != 0 {
		t.Fatalf("unsupported: %s %q, %d forwards", row.Status, row.Reason, k.forwards)
	}

	k = newFake()
	k.oom = true
	r := runnerFor(k)
	r.Check = nil // --no-check: the OOM shows up in timing
	row = r.Run(context.Background(), small)
	if row.Status != results.StatusOOM || row.MedianMs != nil || row.CheckPass != nil {
		t.Fatalf("oom: %s %q", row.Status, row.Reason)
	}

	c := small
	c.Mask, c.SeqLen = "block_causal_document", 1000 // not a multiple of the 1024 block
	row = runnerFor(newFake()).Run(context.Background(), c)
	if row.Status != results.StatusUnsupported {
		t.Fatalf("unbuildable mask: %s %q", row.Status, row.Reason)
	}
}

func TestLargeCaseIsCheckedSmaller(t *testing.T) {
	k := newFake()
	k.noop = true
	var checked []int
	r := runnerFor(k)
	r.CheckBudget = 5e7
	r.Check = func(ctx context.Context, kk kernels.Kernel, p kernels.Problem, pass kernels.Pass, seed uint64) (CheckOutcome, error) {
		checked = append(checked, p.Mask.SeqQ*1000+p.HeadsQ*10+p.HeadsKV)
		if seed != 42 {
			t.Errorf("checked with seed %d", seed)
		}
		return CheckOutcome{Pass: true, Worst: results.CheckFigure{Name: "out", Err: 1, Tol: 2}}, nil
	}
	for _, n := range []int{2048, 4096} { // both check the same small case: once
		c := small
		c.Mask, c.SeqLen, c.Heads = "causal", n, Heads{8, 2}
		row := r.Run(context.Background(), c)
		if row.Status != results.StatusOK || *row.CheckSeqLen != 1024 || *row.CheckHeadsQ != 4 || *row.CheckHeadsKV != 1 {
			t.Fatalf("S=%d: %s %q, checked at %v", n, row.Status, row.Reason, *row.CheckSeqLen)
		}
	}
	// causal 1024 has area 524800: at 8:2 heads 6.7e7 multiply-adds, over budget; at 4:1, 3.4e7.
	if len(checked) != 1 || checked[0] != 1024*1000+4*10+1 {
		t.Fatalf("checked %v, want one cached check", checked)
	}
}

// selfTimed is the reference kernel timing itself (as an external worker does): the
// harness must take its figures and never time it on the device.
type selfTimed struct {
	*fakeKernel
	spec  kernels.TimeSpec
	calls int
	err   error
}

func (s *selfTimed) TimePass(ctx context.Context, p kernels.Problem, pass kernels.Pass, spec kernels.TimeSpec) (kernels.Timing, error) {
	s.calls++
	s.spec = spec
	if s.err != nil {
		return kernels.Timing{}, s.err
	}
	return kernels.Timing{Median: 3 * time.Millisecond, Min: 2 * time.Millisecond, Max: 5 * time.Millisecond, Mean: 4 * time.Millisecond, PeakMemBytes: 1 << 20}, nil
}

// Device is a GPU-named device, so the row records the device index.
func (s *selfTimed) Device() tensor.Device { return gpuNamed{s.dev} }

type gpuNamed struct{ *fakeDevice }

func (gpuNamed) Name() string { return "fake-gpu" }

func (s *selfTimed) Describe(p kernels.Problem, pass kernels.Pass) kernels.Info {
	return kernels.Info{Variant: "v-" + pass.String(), Versions: map[string]string{"lib": "1.2"}}
}

func TestSelfTimerAndDescriber(t *testing.T) {
	k := &selfTimed{fakeKernel: newFake()}
	r := runnerFor(k)
	r.KernelOptions = kernels.Options{Device: 3}
	row := r.Run(context.Background(), small)
	if row.Status != results.StatusOK {
		t.Fatalf("status %s: %s", row.Status, row.Reason)
	}
	if k.calls != 1 || k.dev.timed != 0 || k.spec.Iters != 3 || k.spec.Warmup != 1 || k.spec.FlushBytes != FlushBytes || k.spec.Seed != 42 {
		t.Fatalf("self timer called %d times with %+v; device timed %d times", k.calls, k.spec, k.dev.timed)
	}
	if *row.MedianMs != 3 || *row.MinMs != 2 || *row.MaxMs != 5 || *row.PeakMemBytes != 1<<20 || row.TFLOPs == nil {
		t.Fatalf("times not taken from the self timer: %+v", row)
	}
	if row.KernelVariant != "v-fwd" || row.KernelVersions != `{"lib":"1.2"}` {
		t.Fatalf("variant %q versions %q", row.KernelVariant, row.KernelVersions)
	}
	if row.DeviceIndex == nil || *row.DeviceIndex != 3 {
		t.Fatalf("device index %v, want 3", row.DeviceIndex)
	}
	for _, c := range []struct {
		err  error
		want results.Status
	}{
		{kernels.Unsupported(errors.New("no such mask")), results.StatusUnsupported},
		{kernels.OOM(errors.New("worker: 80 GiB")), results.StatusOOM},
		{errors.New("worker exited with status 3"), results.StatusError},
	} {
		k := &selfTimed{fakeKernel: newFake(), err: c.err}
		row := runnerFor(k).Run(context.Background(), small)
		if row.Status != c.want || row.MedianMs != nil {
			t.Errorf("%v: status %s, median %v; want %s and no times", c.err, row.Status, row.MedianMs, c.want)
		}
	}
}

// --deterministic: a backward of a kernel without a deterministic one is unsupported and
// never run; its forward, and the backward of a kernel that has one (the reference), run.
func TestDeterministicBackwardOnly(t *testing.T) {
	type plain struct{ kernels.Kernel } // hides DeterministicBackward
	for _, c := range []struct {
		name string
		k    kernels.Kernel
		pass kernels.Pass
		want results.Status
	}{
		{"no det, bwd", plain{newFake()}, kernels.Bwd, results.StatusUnsupported},
		{"no det, fwd+bwd", plain{newFake()}, kernels.FwdBwd, results.StatusUnsupported},
		{"no det, fwd", plain{newFake()}, kernels.Fwd, results.StatusOK},
		{"ref, bwd", newFake(), kernels.Bwd, results.StatusOK},
	} {
		cs := small
		cs.Pass = c.pass
		r := runnerFor(c.k)
		r.KernelOptions.Deterministic = true
		row := r.Run(context.Background(), cs)
		r.Close()
		if row.Status != c.want {
			t.Fatalf("%s: status %s (%s), want %s", c.name, row.Status, row.Reason, c.want)
		}
		if c.want == results.StatusUnsupported && !strings.Contains(row.Reason, "--deterministic") {
			t.Fatalf("%s: reason %q does not name the flag", c.name, row.Reason)
		}
		var f *fakeKernel
		switch k := c.k.(type) {
		case plain:
			f = k.Kernel.(*fakeKernel)
		case *fakeKernel:
			f = k
		}
		if c.want == results.StatusUnsupported && f.forwards != 0 {
			t.Fatalf("%s: the kernel ran (%d forwards)", c.name, f.forwards)
		}
	}
}
