package harness

import (
	"fmt"

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
// (the last varies fastest). A block-sparse setting that keeps exactly the blocks an
// earlier one keeps at a length (the same layout, block and scores, and a ratio that
// rounds to the same k blocks per row) is left out there: it would measure the same mask
// under another label. Dropped says which.
func (s Sweep) Cases() []Case {
	cases, _ := s.expand()
	return cases
}

// Dropped describes the block-sparse cases Cases leaves out as duplicates, one line per
// setting and length.
func (s Sweep) Dropped() []string {
	_, d := s.expand()
	return d
}

func (s Sweep) expand() ([]Case, []string) {
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
	var dropped []string
	type sparseKey struct {
		name          string
		block, seqlen int
		scores        mask.Scores
		keep          int
	}
	first := map[sparseKey]SparseSpec{}
	for _, m := range ms {
		for _, n := range s.SeqLens {
			if m.sparse.IsSparse() {
				kept, keep, nk := m.sparse.KeptAt(n)
				k := sparseKey{m.name, m.sparse.BlockSize(), n, m.sparse.Scores, keep}
				if f, dup := first[k]; dup {
					dropped = append(dropped, fmt.Sprintf("%s at %s: keeps %d of %d k blocks per row (kept ratio %g), as r=%g does: left out", m.sparse, FormatSize(n), keep, nk, kept, f.Ratio))
					continue
				}
				first[k] = m.sparse
			}
			for _, h := range s.Heads {
				for _, k := range s.Kernels {
					for _, p := range s.Passes {
						out = append(out, Case{m.name, n, h, s.HeadDim, s.DType, k, p, s.Seed, m.sparse})
					}
				}
			}
		}
	}
	return out, dropped
}

// PlanProblem is the problem an estimate lays out for case c (its kernel's Supports is
// asked about it), building its mask but running nothing. A block-sparse case is built
// for KV head 0 only, so that 128K tokens and 64 heads stay quick: its area (what an
// estimate and a dry run show, PlanArea) is head 0's, exact for the uniform layout when
// the block divides the length, one head's sample otherwise.
func PlanProblem(c Case, build MaskBuilder) (kernels.Problem, error) {
	r := &Runner{Build: build}
	if !c.Sparse.IsSparse() {
		cp, err := r.problemAt(c, c.SeqLen, c.Heads)
		return cp.p, err
	}
	cp, err := r.problemAt(c, c.SeqLen, Heads{Q: c.Heads.Q / c.Heads.KV, KV: 1})
	cp.p.HeadsQ, cp.p.HeadsKV = c.Heads.Q, c.Heads.KV
	return cp.p, err
}

// PlanArea is the area of PlanProblem(c, build)'s mask, to the pair, without building a
// block-sparse one (mask.BlockSparseArea, of KV head 0 as PlanProblem's): what an
// estimate or a dry run needs of a case, where 1-token blocks over 16K tokens are most
// of a GiB and seconds to build, built again when the case runs.
func PlanArea(c Case, build MaskBuilder) (float64, error) {
	if !c.Sparse.IsSparse() {
		p, err := PlanProblem(c, build)
		if err != nil {
			return 0, err
		}
		return p.Area(), nil
	}
	c.Heads = Heads{Q: c.Heads.Q / c.Heads.KV, KV: 1}
	a, err := mask.BlockSparseArea(c.SeqLen, sparseOptions(c), sparseInputs(c))
	if err != nil {
		return 0, err
	}
	return float64(a), nil
}
