package harness

import (
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// SetPlanColumns, the one place a plan's columns are set for cp's and simulate's rows:
// the resolved mesh, the dimension inside a node, the sharding, and balanced's block and
// stages (null for the other methods).
func TestSetPlanColumns(t *testing.T) {
	sw := CPSweep{Methods: []string{"ring-p2p", "ulysses", "usp", "balanced"}, Masks: []string{"causal"}, SeqLen: 256, Heads: []Heads{{4, 4}},
		HeadDim: 8, DType: tensor.FP32, Passes: []kernels.Pass{kernels.Fwd}, Samples: 1, Seed: 1, Kernel: "ref",
		Mesh: cp.Config{HeadFirst: true, Ulysses: 2, Ring: 2}}
	cases, err := sw.Cases(4)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		u, r        int64
		inner, shrd string
		block       bool
	}{
		"ring-p2p": {1, 4, "ring", "zigzag", false},
		"ulysses":  {4, 1, "ulysses", "contiguous", false},
		"usp":      {2, 2, "ulysses", "zigzag", false},
		"balanced": {0, 0, "", "", true},
	}
	for _, cs := range cases {
		_, pl, _, err := sw.PlanSample(cs, 0)
		if err != nil {
			t.Fatalf("%s: %v", cs, err)
		}
		var row results.Row
		SetPlanColumns(&row, pl)
		w := want[cs.Method]
		if row.Ulysses == nil || row.Ring == nil || row.Windows == nil || row.PadTokens == nil || row.SeqLenPerRank != int64(pl.Tokens) {
			t.Errorf("%s: mesh or tokens columns not set: %+v", cs, row)
			continue
		}
		if w.u > 0 && (*row.Ulysses != w.u || *row.Ring != w.r || row.InnerDim != w.inner || row.CPSharding != w.shrd) {
			t.Errorf("%s: %dx%d inner %s sharding %s, want %dx%d %s %s", cs, *row.Ulysses, *row.Ring, row.InnerDim, row.CPSharding, w.u, w.r, w.inner, w.shrd)
		}
		if (row.CPBlock != nil) != w.block || (row.CPStages != nil) != w.block {
			t.Errorf("%s: cp_block set %v, cp_stages set %v, want %v", cs, row.CPBlock != nil, row.CPStages != nil, w.block)
		}
	}
}
