package cudnn

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// TestUnsupportedRows: without cuDNN, or with one too old, the kernel does not start,
// and a sweep's cudnn cases become unsupported rows that say why (the library the
// factory opens is pointed at a missing file and at the fake of an old version).
func TestUnsupportedRows(t *testing.T) {
	if _, err := kernels.New("cudnn", kernels.Options{Variant: "fastest"}); err == nil || !strings.Contains(err.Error(), "--variant") {
		t.Errorf("bad variant: %v", err)
	}
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	saved := DefaultLibraries
	defer func() { DefaultLibraries = saved }()
	for _, c := range []struct {
		lib, version string
		want         []string
	}{
		{"libcudnn-not-here.so.9", "", []string{"libcudnn-not-here.so.9", "install cuDNN 9"}},
		{fakeLib, "90500", []string{"cudnn 9.5.0 is too old", "9.6.0"}},
	} {
		DefaultLibraries = []string{c.lib}
		t.Setenv("FAKE_CUDNN_VERSION", c.version)
		r := &harness.Runner{Warmup: 0, Iters: 1}
		row := r.Run(context.Background(), harness.Case{Mask: "causal", SeqLen: 256, Heads: harness.Heads{Q: 4, KV: 2}, HeadDim: 64,
			DType: tensor.BF16, Kernel: "cudnn", Pass: kernels.Fwd, Seed: 1})
		if row.Status != results.StatusUnsupported || row.MedianMs != nil {
			t.Errorf("%s: row status %s", c.lib, row.Status)
		}
		for _, w := range c.want {
			if !strings.Contains(row.Reason, w) {
				t.Errorf("%s: reason %q lacks %q", c.lib, row.Reason, w)
			}
		}
	}
}

// fakeKernel is a Kernel on the fake library with no device: enough to choose layouts
// and build plans for dense calls (ragged calls upload arrays and need a GPU).
func fakeKernel(t *testing.T, variant string) *Kernel {
	t.Helper()
	l := openFake(t, fakeLib)
	h, err := l.NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.DestroyHandle(h) })
	return &Kernel{lib: l, handle: h, variant: variant, problems: map[uint64]*problemPlan{}, plans: map[spec]planEntry{}}
}

func problemOf(t *testing.T, name string, s int, hq, hkv int) kernels.Problem {
	t.Helper()
	spec, err := mask.Build(name, s, mask.Options{Seed: 42, Window: 64, LongMin: s / 8, LongMax: s / 3})
	if err != nil {
		t.Fatal(err)
	}
	return kernels.Problem{HeadsQ: hq, HeadsKV: hkv, HeadDim: 128, DType: tensor.BF16, Mask: spec.Mask}
}

// TestForwardImplementation: the full mask's forward is the SDPA operation unless the
// variant says composite, the library lacks the operation, or cuDNN refuses it (then the
// composite graph, with the reason kept); the sdpa-op variant refuses rather than fall
// back; masked problems and the backward are always composite.
func TestForwardImplementation(t *testing.T) {
	for _, c := range []struct {
		variant, env, version, mask string
		backward                    bool
		wantOp                      bool
		fallback                    string // in the fallback reason; "error" when the call must fail
	}{
		{variant: "auto", mask: "full", wantOp: true},
		{variant: "composite", mask: "full"},
		{variant: "auto", mask: "causal"},
		{variant: "auto", mask: "full", backward: true},
		{variant: "auto", env: "41", mask: "full", fallback: "FAKE_CUDNN_REFUSE=41"},
		{variant: "auto", version: "91200", mask: "full", fallback: "needs cuDNN 9.13.1"},
		{variant: "sdpa-op", env: "41", mask: "full", fallback: "error"},
	} {
		if c.env != "" {
			t.Setenv("FAKE_CUDNN_REFUSE", c.env)
		}
		if c.version != "" {
			t.Setenv("FAKE_CUDNN_VERSION", c.version)
		}
		k := fakeKernel(t, c.variant)
		pp := k.problem(problemOf(t, c.mask, 512, 8, 2))
		cp, err := k.callPlan(pp, 0, c.backward)
		t.Setenv("FAKE_CUDNN_REFUSE", "")
		t.Setenv("FAKE_CUDNN_VERSION", "")
		label := c.variant + " " + c.mask + " " + c.env + c.version
		if c.fallback == "error" {
			if err == nil {
				t.Errorf("%s: built %s, want an error", label, cp.spec)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", label, err)
		}
		if cp.spec.unified != c.wantOp || cp.spec.ragged || cp.plan == nil || !strings.Contains(cp.fallback, c.fallback) || (c.fallback == "") != (cp.fallback == "") {
			t.Errorf("%s: %s, fallback %q; want SDPA op %v, fallback with %q", label, cp.spec, cp.fallback, c.wantOp, c.fallback)
		}
		if got := describeCalls(c.backward, []callPlan{cp}); !strings.Contains(got, "eng=10 dense") {
			t.Errorf("%s: described as %q", label, got)
		}
	}
}

// TestSpecFor: which layout each call gets, and the padding of batch and lengths.
func TestSpecFor(t *testing.T) {
	k := fakeKernel(t, "auto")
	full := k.problem(problemOf(t, "full", 512, 8, 2))
	if s := k.specFor(full, 0, true); s.ragged || s.b != 1 || s.sq != 512 || s.sk != 512 || s.scale != float32(1/math.Sqrt(128)) {
		t.Errorf("full 512 backward: %s scale %v", s, s.scale)
	}
	// cuDNN <= 9.15 runs a backward with s_kv not a multiple of 128 only padded.
	odd := k.problem(problemOf(t, "causal", 200, 8, 2))
	if s := k.specFor(odd, 0, false); s.ragged {
		t.Errorf("causal 200 forward: %s, want dense", s)
	}
	if s := k.specFor(odd, 0, true); !s.ragged || s.b != 1 || s.sq != 256 || s.sk != 256 || s.totalQ != 384 {
		t.Errorf("causal 200 backward: %s totals %d", s, s.totalQ)
	}
	docs := k.problem(problemOf(t, "causal_document", 4096, 8, 2))
	s := k.specFor(docs, 0, false)
	n := len(docs.cut.calls[0].pieces)
	longest := 0
	for _, p := range docs.cut.calls[0].pieces {
		longest = max(longest, p.Q.Len())
	}
	if !s.ragged || s.b != pow2(int64(n)) || s.b < int64(n) || s.sq != pow2(max(int64(longest), 64)) || s.mask.String() != "right 0 top-left" {
		t.Errorf("causal_document: %s for %d documents of at most %d tokens", s, n, longest)
	}
}

// TestRaggedValues: entry e is piece e's lengths and first element in each tensor's
// packed layout; the padding entries are empty at the end.
func TestRaggedValues(t *testing.T) {
	p := kernels.Problem{HeadsQ: 8, HeadsKV: 2, HeadDim: 64}
	pieces := []piece{
		{Q: mask.Range{Start: 0, End: 10}, K: mask.Range{Start: 0, End: 10}},
		{Q: mask.Range{Start: 10, End: 40}, K: mask.Range{Start: 12, End: 30}},
		{Q: mask.Range{Start: 50, End: 51}, K: mask.Range{Start: 40, End: 41}},
	}
	v := raggedHost(p, pieces, 4)
	if !slices.Equal(v.seqQ, []int32{10, 30, 1, 0}) || !slices.Equal(v.seqKV, []int32{10, 18, 1, 0}) {
		t.Errorf("lengths %v %v", v.seqQ, v.seqKV)
	}
	if !slices.Equal(v.offQ, []int64{0, 10 * 8 * 64, 50 * 8 * 64, 51 * 8 * 64, 51 * 8 * 64}) ||
		!slices.Equal(v.offKV, []int64{0, 12 * 2 * 64, 40 * 2 * 64, 41 * 2 * 64, 41 * 2 * 64}) ||
		!slices.Equal(v.offStats, []int64{0, 10 * 8, 50 * 8, 51 * 8, 51 * 8}) {
		t.Errorf("offsets %v %v %v", v.offQ, v.offKV, v.offStats)
	}
}

// TestSupports: what the kernel refuses, with the cuDNN version in the reason.
func TestSupports(t *testing.T) {
	k := fakeKernel(t, "auto")
	p := problemOf(t, "causal", 256, 8, 2)
	if err := k.Supports(p); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		change func(*kernels.Problem)
		want   string
	}{
		{func(p *kernels.Problem) { p.DType = tensor.FP32 }, "bf16 or fp16"},
		{func(p *kernels.Problem) { p.HeadDim = 96 }, "head dim 64 or 128"},
		{func(p *kernels.Problem) { p.HeadMasks = []mask.Mask{p.Mask, p.Mask} }, "block-sparse"},
	} {
		q := p
		c.change(&q)
		if err := k.Supports(q); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "cudnn 9.14.0") {
			t.Errorf("%v, want %q with the version", err, c.want)
		}
	}
}

// TestProblemCache: a problem equal to a cached one finds it, whatever slice holds its
// mask; a different mask, shape or scale does not.
func TestProblemCache(t *testing.T) {
	k := fakeKernel(t, "auto")
	p := problemOf(t, "causal_document", 1024, 8, 2)
	pp := k.problem(p)
	q := p
	q.Mask.Slices = slices.Clone(p.Mask.Slices)
	if k.problem(q) != pp {
		t.Error("an equal problem was cut again")
	}
	k.last = nil
	if k.problem(q) != pp {
		t.Error("an equal problem was not found by its hash")
	}
	r := q
	r.Mask.Slices = slices.Clone(q.Mask.Slices)
	r.Mask.Slices[0].Kind = mask.Full
	s := q
	s.Scale = 0.5
	for _, x := range []kernels.Problem{r, s} {
		if k.problem(x) == pp {
			t.Errorf("a different problem found the cached one")
		}
	}
	p.Mask.Slices[0].Kind = mask.Full // the cache keeps its own copy of the mask
	if !slices.Equal(pp.p.Mask.Slices, q.Mask.Slices) {
		t.Error("the cached problem shares the caller's slices")
	}
}
