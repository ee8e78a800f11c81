package harness

import (
	"fmt"
	"io"
	"strings"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
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
// is cheap) but running nothing: the --dry-run output. Lines not describing a case start
// with '#'.
func PrintPlan(w io.Writer, cases []Case, build MaskBuilder) error {
	r := &Runner{Build: build}
	mw := len("mask")
	for _, c := range cases {
		mw = max(mw, len(c.Label()))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#%5s  %-*s %8s %7s %8s %5s %8s %7s %14s %12s\n", "case", mw, "mask", "seqlen", "heads", "head_dim", "dtype", "kernel", "pass", "area", "GFLOP")
	var total float64
	type planKey struct {
		label  string
		seqlen int
		heads  Heads
	}
	plans := map[planKey]caseProblem{}
	for i, c := range cases {
		fmt.Fprintf(&b, " %5d  %-*s %8d %7s %8d %5s %8s %7s", i+1, mw, c.Label(), c.SeqLen, c.Heads, c.HeadDim, c.DType, c.Kernel, c.Pass)
		key := planKey{c.Label(), c.SeqLen, c.Heads}
		cp, ok := plans[key]
		var err error
		if !ok {
			cp, err = r.planProblem(c)
		}
		if err != nil {
			fmt.Fprintf(&b, " %14s %12s  # %v\n", "-", "-", err)
			continue
		}
		plans[key] = cp
		f := cp.p.FLOPs(c.Pass)
		total += f
		fmt.Fprintf(&b, " %14.0f %12.3f\n", cp.p.Area(), f/1e9)
	}
	fmt.Fprintf(&b, "# %d cases, %.3f TFLOP in all (dry run: nothing was run)\n", len(cases), total/1e12)
	_, err := io.WriteString(w, b.String())
	return err
}
