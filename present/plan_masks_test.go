package present

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// A dry run builds no block-sparse mask: it reads each one's area from its blocks
// (harness.PlanArea), where it once held every mask at once (sparse --dry-run --block 1
// --seqlens 16K with 10 ratios: 5.98 GB against 1.07 GB for one, a Go fatal
// out-of-memory under 5 GB), then built each and gave it back (4 minutes and 4.9 GB for
// ratios 0.1 to 1 on 2 busy cores). The area and FLOPs printed stay the built problems'.
func TestWritePlanDropsSparseMasks(t *testing.T) {
	ratios := []float64{0.1, 0.2, 0.3, 0.4, 0.5, 0.6}
	for _, tc := range []struct {
		layout        string
		block, seqlen int
	}{{"uniform", 8, 256}, {"uniform", 7, 250}, {"variable", 160, 1000}} {
		sw := harness.Sweep{SeqLens: []int{tc.seqlen}, Heads: []harness.Heads{{Q: 2, KV: 1}, {Q: 4, KV: 2}}, HeadDim: 8, DType: tensor.BF16,
			Kernels: []string{"ref"}, Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd}, Seed: 3}
		for _, r := range ratios {
			for _, sc := range []mask.Scores{mask.RandomScores, mask.ContentScores} {
				sp := harness.SparseSpec{Block: tc.block, Ratio: r, Scores: sc}
				if tc.layout == "variable" {
					sp = harness.SparseSpec{AvgBlock: tc.block, Ratio: r, Scores: sc}
				}
				sw.Sparse = append(sw.Sparse, sp)
			}
		}
		var want []string
		for _, c := range sw.Cases() {
			p, err := harness.PlanProblem(c, harness.BuildMask)
			if err != nil {
				t.Fatalf("case %s: %v", c, err)
			}
			want = append(want, fmt.Sprintf(" %.0f %.3f", p.Area(), p.FLOPs(c.Pass)/1e9))
		}
		var out bytes.Buffer
		if err := WritePlan(&out, sw.Cases(), harness.BuildMask); err != nil {
			t.Fatal(err)
		}
		var rows []string
		for _, l := range strings.Split(out.String(), "\n") {
			if f := strings.Fields(l); len(f) >= 10 && !strings.HasPrefix(l, "#") && f[0] != "case" {
				rows = append(rows, " "+f[8]+" "+f[9])
			}
		}
		if strings.Join(rows, "|") != strings.Join(want, "|") {
			t.Errorf("%s: area and GFLOP columns %q, want the built problems' %q\n%s", tc.layout, rows, want, out.String())
		}
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
	if err := WritePlan(&bytes.Buffer{}, sw.Cases(), harness.BuildMask); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Errorf("the dry run of 6 masks of 1-token blocks over 4K tokens allocated %.1f MB: want their areas without the masks", float64(got)/1e6)
	}
}
