package present

import (
	"fmt"
	"io"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
)

// WritePlan writes the cases of a kernel sweep with their mask area and FLOPs, running
// nothing: the --dry-run output, a TextTable (lines not describing a case start with
// '#'). A static mask is built (which is cheap); a block-sparse one is not, its area
// read from its blocks (harness.PlanArea).
func WritePlan(w io.Writer, cases []harness.Case, build harness.MaskBuilder) error {
	t := TextTable{Columns: []TextColumn{
		{Name: "case"}, {Name: "mask", Left: true}, {Name: "seqlen", Unit: "tokens"}, {Name: "heads", Unit: "q:kv"},
		{Name: "head_dim"}, {Name: "dtype"}, {Name: "kernel"}, {Name: "pass"}, {Name: "area", Unit: "pairs"},
		{Name: "flops", Unit: "GFLOP"}, {Name: "note", Left: true},
	}}
	var total float64
	type planKey struct {
		label  string
		seqlen int
		heads  harness.Heads
	}
	// Only the area of each mask is kept, not the mask.
	areas := map[planKey]float64{}
	for i, c := range cases {
		row := []string{fmt.Sprint(i + 1), c.Label(), fmt.Sprint(c.SeqLen), c.Heads.String(), fmt.Sprint(c.HeadDim),
			c.DType.String(), c.Kernel, c.Pass.String()}
		key := planKey{c.Label(), c.SeqLen, c.Heads}
		area, ok := areas[key]
		if !ok {
			var err error
			if area, err = harness.PlanArea(c, build); err != nil {
				t.Rows = append(t.Rows, append(row, "-", "-", err.Error()))
				continue
			}
			areas[key] = area
		}
		f := kernels.AreaFLOPs(area, c.Heads.Q, c.HeadDim, c.Pass)
		total += f
		note := ""
		if c.Sparse.IsSparse() {
			if kept, keep, nk := c.Sparse.KeptAt(c.SeqLen); kept != c.Sparse.Ratio {
				note = fmt.Sprintf("kept ratio %.4g (%d of %d k blocks per row)", kept, keep, nk)
			}
		}
		t.Rows = append(t.Rows, append(row, fmt.Sprintf("%.0f", area), fmt.Sprintf("%.3f", f/1e9), note))
	}
	t.Summary = []string{fmt.Sprintf("%d cases, %.3f TFLOP in all (dry run: nothing was run)", len(cases), total/1e12)}
	return t.Write(w)
}
