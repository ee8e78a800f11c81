package harness

import (
	"fmt"
	"strconv"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// SparseSpec describes a block-sparse case (MASKS.md, the two dynamic masks); the zero
// value means a static mask.
type SparseSpec struct {
	// Block is the uniform layout's block size; 0 selects the variable layout.
	Block int
	// AvgBlock is the variable layout's average block size (minimum 128).
	AvgBlock int
	// Ratio is the kept ratio r in (0, 1]; 0 means not sparse.
	Ratio float64
	// Scores ranks the k blocks: random (published) or content.
	Scores mask.Scores
}

// KeptAt is the kept ratio the spec's masks really have at seqlen tokens
// (mask.KeptBlocks): keep of nk k blocks per row.
func (s SparseSpec) KeptAt(seqlen int) (ratio float64, keep, nk int) {
	keep, nk = mask.KeptBlocks(seqlen, s.Block, s.AvgBlock, s.Ratio)
	return float64(keep) / float64(nk), keep, nk
}

// IsSparse says whether the spec describes a block-sparse case.
func (s SparseSpec) IsSparse() bool { return s.Ratio > 0 }

// MaskName is block_sparse_uniform or block_sparse_variable.
func (s SparseSpec) MaskName() string {
	if s.Block > 0 {
		return "block_sparse_uniform"
	}
	return "block_sparse_variable"
}

// BlockSize is the uniform block, or the variable layout's average block.
func (s SparseSpec) BlockSize() int {
	if s.Block > 0 {
		return s.Block
	}
	return s.AvgBlock
}

func (s SparseSpec) String() string {
	return fmt.Sprintf("%s b=%d r=%g %s", s.MaskName(), s.BlockSize(), s.Ratio, s.Scores)
}

// caseProblem is a case's problem at a length and head setting, with the mask's
// parameters.
type caseProblem struct {
	p      kernels.Problem
	params map[string]string
	// kept is a block-sparse case's kept ratio as built (mask.Sparse.KeptRatio), which
	// the row records: it is coarser than the ratio asked for when blocks are large.
	kept float64
}

// problemAt builds the problem of case c at seqlen tokens with heads h: the static mask
// by name, or the block-sparse masks (one per KV head; content scores read the check's
// inputs for the same seed, so the check and the timing see the same selection).
func (r *Runner) problemAt(c Case, seqlen int, h Heads) (caseProblem, error) {
	cc := c
	cc.SeqLen, cc.Heads = seqlen, h
	if !c.Sparse.IsSparse() {
		spec, err := r.build(c.Mask, seqlen, c.Seed)
		if err != nil {
			return caseProblem{}, err
		}
		return caseProblem{p: problem(cc, spec.Mask), params: spec.Params}, nil
	}
	s := c.Sparse
	p := problem(cc, mask.Mask{SeqQ: seqlen, SeqK: seqlen})
	var sp *mask.Sparse
	var err error
	if s.Scores == mask.ContentScores {
		q, k := sparseInputs(cc)()
		sp, err = mask.BlockSparse(seqlen, sparseOptions(cc), q, k)
	} else {
		sp, err = mask.BlockSparse(seqlen, sparseOptions(cc), nil, nil)
	}
	if err != nil {
		return caseProblem{}, err
	}
	p.HeadMasks = sp.Heads
	params := map[string]string{
		"layout":       map[bool]string{true: "uniform", false: "variable"}[s.Block > 0],
		"block":        strconv.Itoa(s.BlockSize()),
		"ratio":        strconv.FormatFloat(s.Ratio, 'g', -1, 64),
		"scores":       s.Scores.String(),
		"keep_per_row": strconv.Itoa(sp.KeepPerRow),
		"q_blocks":     strconv.Itoa(len(sp.QEdges) - 1),
		"k_blocks":     strconv.Itoa(len(sp.KEdges) - 1),
	}
	return caseProblem{p: p, params: params, kept: sp.KeptRatio()}, nil
}

// sparseOptions are the mask options of block-sparse case c, at its length and heads.
func sparseOptions(c Case) mask.SparseOptions {
	s := c.Sparse
	return mask.SparseOptions{Seed: c.Seed, Block: s.Block, AvgBlock: s.AvgBlock, Ratio: s.Ratio, Scores: s.Scores, HeadsKV: c.Heads.KV}
}

// sparseInputs gives the q and k content scores read for case c: the check's inputs for
// the case's seed, so that the check and the timing see the same selection.
func sparseInputs(c Case) func() (q, k *tensor.Host) {
	return func() (*tensor.Host, *tensor.Host) {
		q, k, _, _ := check.Inputs(problem(c, mask.Mask{SeqQ: c.SeqLen, SeqK: c.SeqLen}), c.Seed)
		return q, k
	}
}

// caseProblem is the problem of case c at its own length and heads, as the case runs
// it. A block-sparse one is kept for the next case (cases of one mask follow one
// another, a kernel and pass at a time) and built again only for another mask, the one
// kept dropped first: each such mask is built once, and one is held at a time.
func (r *Runner) caseProblem(c Case) (caseProblem, error) {
	if !c.Sparse.IsSparse() {
		return r.problemAt(c, c.SeqLen, c.Heads)
	}
	key := c
	key.Kernel, key.Pass = "", 0
	if r.sparse != nil && r.sparse.key == key {
		return r.sparse.cp, r.sparse.err
	}
	r.sparse = nil // the last mask is unreachable before the next is built
	cp, err := r.problemAt(c, c.SeqLen, c.Heads)
	r.sparse = &builtSparse{key, cp, err}
	return cp, err
}

// builtSparse is the block-sparse problem the last case built, by the case less what its
// mask does not depend on (the kernel and the pass; content scores read inputs of the
// head dim and dtype).
type builtSparse struct {
	key Case
	cp  caseProblem
	err error
}
