package harness

import (
	"context"
	"math"
	"testing"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/internal/heaptest"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// TestKernelCheckCountedByPass: a checked case of kernels/ref (its check through
// NewKernelCheck, as kernel runs it, then one timed repetition) holds at its peak
// (heaptest.Peak) no more than KernelFootprintAt counts, for every pass; and a forward's
// check is counted as a forward's (q, k, v, out and lse, a forward's working set), not
// as a forward and backward's, where the check is most of the case: 1-token documents at
// 8K, 16K and 32K (8:2 heads, dim 64) peaked at 0.22-0.31, 0.65 and 1.31 GB forward and
// were counted at 1.02, 2.04 and 4.08 GB, 3.1-4.4x, a backward's count (now 0.57, 1.15
// and 2.30 GB, 1.8-2.5x), where a backward's 0.38-0.47, 0.99 and 1.98 GB are counted at
// 2.2-2.8x. A dense mask checked smaller than its case is counted so too.
func TestKernelCheckCountedByPass(t *testing.T) {
	ones := Docs{Source: dataset.NewCounts("ones", []int{1})}
	for _, tc := range []struct {
		mask   string
		seqlen int
		h      Heads
		d      int
		build  MaskBuilder
		budget float64
		tight  bool // the check is most of the case: a forward's is counted well below a backward's
	}{
		{"causal_document", 8192, Heads{8, 2}, 64, ones.KernelBuilder(), 0, true}, // checked at 8K: its area is 8K pairs
		{"full_document", 4096, Heads{4, 1}, 32, ones.KernelBuilder(), 0, true},
		{"causal", 1024, Heads{4, 2}, 16, BuildMask, 0, false}, // checked at 1K
		{"full", 2048, Heads{4, 2}, 16, BuildMask, 1e8, false}, // checked at 1K
	} {
		for _, pass := range []kernels.Pass{kernels.Fwd, kernels.Bwd, kernels.FwdBwd} {
			c := Case{Mask: tc.mask, SeqLen: tc.seqlen, Heads: tc.h, HeadDim: tc.d, DType: tensor.BF16, Kernel: "ref", Pass: pass, Seed: 42}
			r := &Runner{Build: tc.build, Iters: 1, CheckBudget: tc.budget, Check: NewKernelCheck(), NewKernel: func(string) (kernels.Kernel, error) { return ref.New(ref.Options{}), nil }}
			var row results.Row
			peak, _ := heaptest.Peak(func() { row = r.Run(context.Background(), c) })
			if row.Status != results.StatusOK {
				t.Fatalf("%s: %s %s", c, row.Status, row.Reason)
			}
			var area CheckArea
			if !CheckSizeBounded(c) {
				area = func(n int, _ Heads) (int64, bool) {
					cc := c
					cc.SeqLen = n
					a, err := PlanArea(cc, tc.build)
					return int64(math.Round(a)), err == nil
				}
			}
			f := KernelFootprintAt(c, true, tc.budget, false, true, area)
			n, h := KernelCheckSize(c, tc.budget, area)
			t.Logf("%s checked at %d, heads %s: peak %s, counted %s (%.2fx)", c, n, h, FormatBytes(peak), FormatBytes(f.Host), f.Host/peak)
			if f.Host < peak {
				t.Errorf("%s: counted %s, under the %s it held", c, FormatBytes(f.Host), FormatBytes(peak))
			}
			if tc.tight && pass == kernels.Fwd {
				b := c
				b.Pass = kernels.Bwd
				if bwd := KernelFootprintAt(b, true, tc.budget, false, true, area); f.Host > 0.6*bwd.Host {
					t.Errorf("%s: counted %s (%.1fx the %s it held), a backward's %s: a forward's check counted as a backward's", c, FormatBytes(f.Host), f.Host/peak, FormatBytes(peak), FormatBytes(bwd.Host))
				}
			}
		}
	}
}
