package present

import (
	"fmt"
	"io"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/spmd/cp"
)

// WriteCPPlan prints the cases of a CP dry run on n ranks: each case's mesh, tokens per
// rank, padding, forward FLOPs and bytes per rank from the plan of its first sample (a
// case the method cannot run here shows its reason).
func WriteCPPlan(w io.Writer, s harness.CPSweep, cases []harness.CPCase, n int) error {
	t := TextTable{
		Title: []string{fmt.Sprintf("longca cp: %d ranks, seqlen %d, %d case(s) x %d sample(s) x %d pass(es) (dry run: nothing was run)", n, s.SeqLen, len(cases), s.Samples, len(s.Passes))},
		Columns: []TextColumn{{Name: "method", Left: true}, {Name: "mesh", Left: true}, {Name: "mask", Left: true},
			{Name: "heads", Unit: "q:kv"}, {Name: "tok/rank", Unit: "tokens"}, {Name: "padding", Unit: "tokens"},
			{Name: "fwd", Unit: "GFLOP"}, {Name: "fwd_bytes/rank", Unit: "bytes"}, {Name: "note", Left: true}},
	}
	skipped := 0
	for _, cs := range cases {
		if cs.Skip != nil {
			skipped++
			t.Rows = append(t.Rows, []string{cs.Method, "-", cs.Mask, cs.Heads.String(), "-", "-", "-", "-", "unsupported: " + cs.Skip.Error()})
			continue
		}
		m, pl, _, err := s.PlanSample(cs, 0)
		if err != nil {
			return err
		}
		t.Rows = append(t.Rows, []string{cs.Method, MeshLabel(pl.Config), cs.Mask, cs.Heads.String(), fmt.Sprint(pl.Tokens),
			fmt.Sprint(pl.Padding()), fmt.Sprintf("%.2f", pl.Problem.FLOPs(kernels.Fwd)/1e9), fmt.Sprint(m.CommBytes(pl, kernels.Fwd)), ""})
	}
	t.Summary = []string{fmt.Sprintf("%d case(s) to run, %d unsupported here", len(cases)-skipped, skipped)}
	return t.Write(w)
}

// MeshLabel is a resolved mesh in one word: UxR, wW for windows, -hf head-first, -bB-sS
// balanced's block and stages.
func MeshLabel(c cp.Config) string {
	s := fmt.Sprintf("%dx%d", c.Ulysses, c.Ring)
	if c.Windows > 1 {
		s += fmt.Sprintf("w%d", c.Windows)
	}
	if c.Ulysses > 1 && c.Ring > 1 && c.HeadFirst {
		s += "-hf"
	}
	if c.Block > 0 { // balanced: its block and stages
		s += fmt.Sprintf("-b%d-s%d", c.Block, c.Stages)
	}
	return s
}
