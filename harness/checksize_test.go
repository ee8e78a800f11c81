package harness

import (
	"context"
	"math"
	"testing"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// TestKernelCheckSizeIsTheRunnersCheck: the size KernelFootprintAt counts a case's check
// at, from its mask's area at each length as an estimate lays it out (PlanArea), is the
// size the runner checks it at, for every kernel mask over 1-token and over the default
// documents, and for block-sparse masks. checkSizeBound (a full mask's area) put a mask of
// 1-token documents at 4K where the runner checks its full length, and sliding_window's
// too; KernelFootprintAt counts that check, and is KernelFootprint's for full and causal.
func TestKernelCheckSizeIsTheRunnersCheck(t *testing.T) {
	const seqlen = 16384
	ones := Docs{Source: &dataset.Empirical{Name: "ones", Counts: []int{1}}}
	var cases []Case
	for _, name := range mask.KernelMasks() {
		cases = append(cases, Case{Mask: name, SeqLen: seqlen, Heads: Heads{4, 2}, HeadDim: 8, DType: tensor.BF16, Kernel: "fake", Pass: kernels.Fwd, Seed: 42})
	}
	for _, sp := range []SparseSpec{{Block: 64, Ratio: 0.1}, {AvgBlock: 256, Ratio: 0.2}, {Block: 128, Ratio: 0.5, Scores: mask.ContentScores}} {
		c := Case{SeqLen: seqlen, Heads: Heads{4, 2}, HeadDim: 8, DType: tensor.BF16, Kernel: "fake", Pass: kernels.Fwd, Seed: 42, Sparse: sp}
		c.Mask = sp.MaskName()
		cases = append(cases, c)
	}
	fullLength := map[string]bool{}
	for _, b := range []struct {
		name  string
		build MaskBuilder
	}{{"1-token documents", ones.KernelBuilder()}, {"the default documents", BuildMask}} {
		for _, c := range cases {
			k := newFake()
			k.noop = true
			var got struct {
				n int
				h Heads
			}
			r := &Runner{Build: b.build, Iters: 1, NewKernel: func(string) (kernels.Kernel, error) { return k, nil },
				Check: func(_ context.Context, _ kernels.Kernel, p kernels.Problem, _ kernels.Pass, _ uint64) (CheckOutcome, error) {
					got.n, got.h = p.Mask.SeqQ, Heads{p.HeadsQ, p.HeadsKV}
					return CheckOutcome{Pass: true, Worst: results.CheckFigure{Name: "out", Tol: 1}}, nil
				}}
			if row := r.Run(context.Background(), c); row.Status != results.StatusOK {
				t.Fatalf("%s, %s: %s %q", b.name, c, row.Status, row.Reason)
			}
			area := func(n int, _ Heads) (int64, bool) {
				cc := c
				cc.SeqLen = n
				a, err := PlanArea(cc, b.build)
				return int64(math.Round(a)), err == nil
			}
			n, h := KernelCheckSize(c, 0, area)
			if n != got.n || h != got.h {
				t.Errorf("%s, %s: counted at %d, heads %s; the runner checks it at %d, heads %s", b.name, c, n, h, got.n, got.h)
			}
			withArea := KernelFootprintAt(c, true, 0, false, true, area)
			bound := KernelFootprint(c, true, 0, false, true)
			if bn, _ := checkSizeBound(c, 0); bn < n && withArea.Host <= bound.Host {
				t.Errorf("%s, %s: checked at %d, not %d: %s counted, the bound's %s", b.name, c, n, bn, FormatBytes(withArea.Host), FormatBytes(bound.Host))
			}
			if CheckSizeBounded(c) && withArea != bound {
				t.Errorf("%s, %s: %+v, KernelFootprint's %+v", b.name, c, withArea, bound)
			}
			if b.name == "1-token documents" && n == seqlen {
				fullLength[c.Mask] = true
			}
		}
	}
	for _, name := range []string{"causal_document", "full_document", "share_question", "causal_blockwise", "prefix_lm_document", "sliding_window"} {
		if !fullLength[name] {
			t.Errorf("%s of 1-token documents at %d, heads 4:2, dim 8: not checked at its full length", name, seqlen)
		}
	}
	if n, _ := checkSizeBound(Case{Mask: "causal_document", SeqLen: seqlen, Heads: Heads{4, 2}, HeadDim: 8}, 0); n == seqlen {
		t.Errorf("the bound checks causal_document at its full length: the test shows nothing")
	}
}
