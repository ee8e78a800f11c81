package session

import (
	"runtime"
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// A sparse sweep's estimate builds no block-sparse mask: it reads each one's area from
// its blocks (harness.PlanArea), where it once held every mask at once (sparse --block 1
// --seqlens 16K with 10 ratios: 5.98 GB against 1.07 GB for one, a Go fatal
// out-of-memory under 5 GB), then built each and gave it back (15-22 s before the sweep
// line, each mask built again when its case runs). The estimate's times stay those of
// the built problems' FLOPs.
func TestEstimateDropsSparseMasks(t *testing.T) {
	ratios := []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}
	sweep := func(block, seqlen int, layout string) harness.Sweep {
		sw := harness.Sweep{SeqLens: []int{seqlen}, Heads: []harness.Heads{{Q: 2, KV: 1}, {Q: 4, KV: 2}}, HeadDim: 8, DType: tensor.BF16,
			Kernels: []string{"ref"}, Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd}, Seed: 7}
		for _, r := range ratios {
			sp := harness.SparseSpec{Block: block, Ratio: r, Scores: mask.RandomScores}
			if layout == "variable" {
				sp = harness.SparseSpec{AvgBlock: block, Ratio: r, Scores: mask.RandomScores}
			}
			sw.Sparse = append(sw.Sparse, sp, harness.SparseSpec{Block: sp.Block, AvgBlock: sp.AvgBlock, Ratio: r, Scores: mask.ContentScores})
		}
		return sw
	}
	orig := planProblem
	t.Cleanup(func() { planProblem = orig })
	built := 0
	planProblem = func(c harness.Case, b harness.MaskBuilder) (kernels.Problem, error) {
		if c.Sparse.IsSparse() {
			built++
		}
		return orig(c, b)
	}
	var pl place
	pl.k, pl.onDevice, pl.isRef, pl.devBytes, pl.ok = KernelPlace("ref", kernels.Options{})
	m := harness.Machine{DeviceFLOPs: 1e14, RefFLOPs: 1e9}
	for _, tc := range []struct {
		layout        string
		block, seqlen int
	}{{"uniform", 8, 256}, {"uniform", 7, 250}, {"variable", 160, 1000}} {
		sw := sweep(tc.block, tc.seqlen, tc.layout)
		cases := sw.Cases()
		k := KernelSweep{Sweep: sw, Warmup: 0, Iters: 1}
		est := (&Session{}).newEstimate(k, cases, map[string]place{"ref": pl}, m)
		// the estimate of the same cases at the built problems' FLOPs
		want := make([]harness.EstimateCase, len(cases))
		for i, c := range cases {
			p, err := harness.PlanProblem(c, harness.BuildMask)
			if err != nil {
				t.Fatalf("case %s: %v", c, err)
			}
			want[i] = harness.EstimateCase{Case: c, FLOPs: p.FLOPs(c.Pass)}
		}
		we := harness.NewEstimate(want, harness.EstimatePrior{DeviceFLOPs: m.DeviceFLOPs, RefFLOPs: m.RefFLOPs, PerCase: harness.DefaultPerCase, Reps: 1})
		for i, c := range cases {
			if got, w := est.Seconds(i), we.Seconds(i); got != w {
				t.Errorf("%s: case %s: %g s, want the built problem's %g s", tc.layout, c, got, w)
			}
		}
	}
	if built > 0 {
		t.Errorf("the estimate built %d block-sparse masks: want their areas read from their blocks", built)
	}

	// 1-token blocks over 4K tokens at six ratios: building the masks allocated 1.9 GB
	// (16K: 16 times that); their areas take the blocks' edges.
	sw := harness.Sweep{SeqLens: []int{4096}, Heads: []harness.Heads{{Q: 1, KV: 1}}, HeadDim: 8, DType: tensor.BF16,
		Kernels: []string{"ref"}, Passes: []kernels.Pass{kernels.Fwd}}
	for _, r := range ratios {
		sw.Sparse = append(sw.Sparse, harness.SparseSpec{Block: 1, Ratio: r})
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	(&Session{}).newEstimate(KernelSweep{Sweep: sw, Iters: 1}, sw.Cases(), map[string]place{"ref": pl}, m)
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Errorf("the estimate of 6 masks of 1-token blocks over 4K tokens allocated %.1f MB: want their areas without the masks", float64(got)/1e6)
	}
}
