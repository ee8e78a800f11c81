package harness

import (
	"fmt"
	"io"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// Case is one measurement to make: one kernel on one problem in one pass.
type Case struct {
	Mask    string
	SeqLen  int
	Heads   Heads
	HeadDim int
	DType   tensor.DType
	Kernel  string
	Pass    kernels.Pass
	Seed    uint64
	// Sparse, when set, makes the case block-sparse (Mask is then its MaskName).
	Sparse SparseSpec
}

// Label names the case's mask: the mask's name, or for block-sparse cases
// block_sparse_<layout>_b<block>_r<ratio>[_content].
func (c Case) Label() string {
	if !c.Sparse.IsSparse() {
		return c.Mask
	}
	l := fmt.Sprintf("%s_b%d_r%g", c.Sparse.MaskName(), c.Sparse.BlockSize(), c.Sparse.Ratio)
	if c.Sparse.Scores == mask.ContentScores {
		l += "_content"
	}
	return l
}

func (c Case) String() string {
	if c.Sparse.IsSparse() {
		return fmt.Sprintf("%s S=%s heads=%s d=%d %s %s %s", c.Sparse, FormatSize(c.SeqLen), c.Heads, c.HeadDim, c.DType, c.Kernel, c.Pass)
	}
	return fmt.Sprintf("%s S=%s heads=%s d=%d %s %s %s", c.Mask, FormatSize(c.SeqLen), c.Heads, c.HeadDim, c.DType, c.Kernel, c.Pass)
}

// Sweep is the cross product the CLI's flags describe.
type Sweep struct {
	Masks   []string
	SeqLens []int
	Heads   []Heads
	HeadDim int
	DType   tensor.DType
	Kernels []string
	Passes  []kernels.Pass
	Seed    uint64
	// Sparse, when not empty, replaces Masks: one block-sparse setting per entry.
	Sparse []SparseSpec
}

// Cases expands the sweep: masks x seqlens x heads x kernels x passes, in that order
// (the last varies fastest).
func (s Sweep) Cases() []Case {
	type maskSetting struct {
		name   string
		sparse SparseSpec
	}
	var ms []maskSetting
	for _, m := range s.Masks {
		ms = append(ms, maskSetting{name: m})
	}
	if len(s.Sparse) > 0 {
		ms = ms[:0]
		for _, sp := range s.Sparse {
			ms = append(ms, maskSetting{sp.MaskName(), sp})
		}
	}
	var out []Case
	for _, m := range ms {
		for _, n := range s.SeqLens {
			for _, h := range s.Heads {
				for _, k := range s.Kernels {
					for _, p := range s.Passes {
						out = append(out, Case{m.name, n, h, s.HeadDim, s.DType, k, p, s.Seed, m.sparse})
					}
				}
			}
		}
	}
	return out
}

// planProblem is the problem PrintPlan reports. A block-sparse case is built for KV
// head 0 only (the first head's selection is the same whatever the head count), so a
// dry run of 128K tokens and 64 heads stays quick: the area shown is head 0's, exact for
// the uniform layout, one head's sample for the variable one.
func (r *Runner) planProblem(c Case) (caseProblem, error) {
	if !c.Sparse.IsSparse() {
		return r.problemAt(c, c.SeqLen, c.Heads)
	}
	cp, err := r.problemAt(c, c.SeqLen, Heads{Q: c.Heads.Q / c.Heads.KV, KV: 1})
	cp.p.HeadsQ, cp.p.HeadsKV = c.Heads.Q, c.Heads.KV
	return cp, err
}

// PrintPlan writes the cases with their mask area and FLOPs, building each mask (which
// is cheap) but running nothing: the --dry-run output, a results.TextTable (lines not
// describing a case start with '#').
func PrintPlan(w io.Writer, cases []Case, build MaskBuilder) error {
	r := &Runner{Build: build}
	t := results.TextTable{Columns: []results.TextColumn{
		{Name: "case"}, {Name: "mask", Left: true}, {Name: "seqlen", Unit: "tokens"}, {Name: "heads", Unit: "q:kv"},
		{Name: "head_dim"}, {Name: "dtype"}, {Name: "kernel"}, {Name: "pass"}, {Name: "area", Unit: "pairs"},
		{Name: "flops", Unit: "GFLOP"}, {Name: "note", Left: true},
	}}
	var total float64
	type planKey struct {
		label  string
		seqlen int
		heads  Heads
	}
	plans := map[planKey]caseProblem{}
	for i, c := range cases {
		row := []string{fmt.Sprint(i + 1), c.Label(), fmt.Sprint(c.SeqLen), c.Heads.String(), fmt.Sprint(c.HeadDim),
			c.DType.String(), c.Kernel, c.Pass.String()}
		key := planKey{c.Label(), c.SeqLen, c.Heads}
		cp, ok := plans[key]
		var err error
		if !ok {
			cp, err = r.planProblem(c)
		}
		if err != nil {
			t.Rows = append(t.Rows, append(row, "-", "-", err.Error()))
			continue
		}
		plans[key] = cp
		f := cp.p.FLOPs(c.Pass)
		total += f
		t.Rows = append(t.Rows, append(row, fmt.Sprintf("%.0f", cp.p.Area()), fmt.Sprintf("%.3f", f/1e9), ""))
	}
	t.Summary = []string{fmt.Sprintf("%d cases, %.3f TFLOP in all (dry run: nothing was run)", len(cases), total/1e12)}
	return t.Write(w)
}
