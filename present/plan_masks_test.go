package present

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"weak"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// A dry run keeps only each mask's area, not the mask: sparse --dry-run --block 1
// --seqlens 16K with 10 ratios held all ten masks (5.98 GB against 1.07 GB for one, a Go
// fatal out-of-memory under 5 GB). When each mask after the first is built, the ones
// before it must already be unreachable; the area and FLOPs printed stay the problem's.
func TestWritePlanDropsSparseMasks(t *testing.T) {
	ratios := []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}
	sw := harness.Sweep{SeqLens: []int{256}, Heads: []harness.Heads{{Q: 2, KV: 1}}, HeadDim: 8, DType: tensor.BF16,
		Kernels: []string{"ref"}, Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd}}
	for _, r := range ratios {
		sw.Sparse = append(sw.Sparse, harness.SparseSpec{Block: 8, Ratio: r, Scores: mask.RandomScores})
	}
	var built []weak.Pointer[mask.Slice]
	var want []string
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
			want = append(want, fmt.Sprintf(" %.0f %.3f", p.Area(), p.FLOPs(pass)/1e9))
		}
		return p, nil
	}
	var out bytes.Buffer
	if err := WritePlan(&out, sw.Cases(), harness.BuildMask); err != nil {
		t.Fatal(err)
	}
	if len(built) != len(ratios) {
		t.Fatalf("%d masks built for %d ratios, want one each", len(built), len(ratios))
	}
	if maxHeld > 1 {
		t.Errorf("the dry run still held %d of the earlier masks when building the last of %d: want them dropped once their area is read", maxHeld, len(ratios))
	}
	var rows []string
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) >= 10 && !strings.HasPrefix(l, "#") && f[0] != "case" {
			rows = append(rows, " "+f[8]+" "+f[9])
		}
	}
	if strings.Join(rows, "|") != strings.Join(want, "|") {
		t.Errorf("area and GFLOP columns %q, want the problems' %q\n%s", rows, want, out.String())
	}
}
