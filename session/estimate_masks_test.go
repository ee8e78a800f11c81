package session

import (
	"runtime"
	"testing"
	"weak"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// A sparse sweep's estimate keeps only each mask's area, not the mask: a sweep of many
// ratios (or lengths, or head settings) held every block-sparse mask at once before
// anything ran (sparse --block 1 --seqlens 16K with 10 ratios: 5.98 GB against 1.07 GB
// for one, a Go fatal out-of-memory under 5 GB). When each mask after the first is
// built, the ones before it must already be unreachable; the FLOPs stay those of the
// problem.
func TestEstimateDropsSparseMasks(t *testing.T) {
	ratios := []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}
	sw := harness.Sweep{SeqLens: []int{256}, Heads: []harness.Heads{{Q: 2, KV: 1}}, HeadDim: 8, DType: tensor.BF16,
		Kernels: []string{"ref"}, Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd}}
	for _, r := range ratios {
		sw.Sparse = append(sw.Sparse, harness.SparseSpec{Block: 8, Ratio: r, Scores: mask.RandomScores})
	}
	var built []weak.Pointer[mask.Slice]
	maxHeld := 0
	orig := planProblem
	t.Cleanup(func() { planProblem = orig })
	planProblem = func(c harness.Case, b harness.MaskBuilder) (kernels.Problem, error) {
		runtime.GC()
		held := 0
		for _, w := range built {
			if w.Value() != nil {
				held++
			}
		}
		maxHeld = max(maxHeld, held)
		p, err := orig(c, b)
		if err != nil {
			t.Fatalf("case %s: %v", c, err)
		}
		built = append(built, weak.Make(&p.HeadMasks[0].Slices[0]))
		for _, pass := range sw.Passes {
			cp := c
			cp.Pass = pass
			if got, want := kernels.AreaFLOPs(p.Area(), cp.Heads.Q, cp.HeadDim, pass), p.FLOPs(pass); got != want {
				t.Errorf("case %s: FLOPs %g from the area, want the problem's %g", cp, got, want)
			}
		}
		return p, nil
	}
	var pl place
	pl.k, pl.onDevice, pl.isRef, pl.devBytes, pl.ok = KernelPlace("ref", kernels.Options{})
	cases := sw.Cases()
	k := KernelSweep{Sweep: sw, Warmup: 0, Iters: 1}
	(&Session{}).newEstimate(k, cases, map[string]place{"ref": pl}, harness.Machine{DeviceFLOPs: 1e14, RefFLOPs: 1e9})
	if len(built) != len(ratios) {
		t.Fatalf("%d masks built for %d ratios, want one each", len(built), len(ratios))
	}
	if maxHeld > 1 {
		t.Errorf("the estimate still held %d of the earlier masks when building the last of %d: want them dropped once their area is read", maxHeld, len(ratios))
	}
}
