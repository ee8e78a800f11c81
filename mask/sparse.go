package mask

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/tensor"
)

// Scores is how block-sparse selection ranks the k blocks of a q-block row.
type Scores uint8

const (
	// RandomScores are seeded uniform scores, as published.
	RandomScores Scores = iota
	// ContentScores are mean-pooled q block . mean-pooled k block per KV head (the
	// input-adaptive selection of MoBA/NSA-style sparse attention).
	ContentScores
)

func (s Scores) String() string {
	if s == ContentScores {
		return "content"
	}
	return "random"
}

// ParseScores reads random or content.
func ParseScores(s string) (Scores, error) {
	switch strings.ToLower(s) {
	case "random":
		return RandomScores, nil
	case "content":
		return ContentScores, nil
	}
	return 0, inputErr("--scores", "--scores: unknown score %q: use random or content", s)
}

// Default block sizes of the variable layout (MASKS.md).
const (
	DefaultMinBlock = 128
)

// SparseOptions are the parameters of a block-sparse mask (MASKS.md, the two dynamic
// masks).
type SparseOptions struct {
	// Seed seeds the variable block sizes and the random scores.
	Seed uint64
	// Block, when set, is the uniform layout's block size (64 or 128 published).
	Block int
	// MinBlock and AvgBlock define the variable layout (used when Block is 0): sizes
	// are MinBlock (default 128) plus a random partition of the rest, averaging AvgBlock.
	MinBlock, AvgBlock int
	// Ratio is the kept ratio r: every (KV head, q-block row) keeps max(1, int(r*nK))
	// k blocks.
	Ratio float64
	// Scores ranks the k blocks.
	Scores Scores
	// HeadsKV is the number of KV heads, one mask each (with content scores, k's heads).
	HeadsKV int
}

// Sparse is a block-sparse mask: one mask per KV head (for kernels.Problem.HeadMasks),
// made of Full slices over the kept tiles, and the block edges it was cut on.
type Sparse struct {
	QEdges, KEdges []int
	// Heads[h] is KV head h's mask: every kept tile, adjacent tiles of a row merged.
	Heads []Mask
	// Kept[h][i] lists the kept k blocks of KV head h, q block i, ascending.
	Kept [][][]int
	// KeepPerRow is max(1, int(Ratio * nKBlocks)).
	KeepPerRow int
}

// VariableEdges cuts n positions into max(1, n/avg) blocks of at least minBlock: each is
// minBlock plus its share of a random partition of the rest (sorted uniform cut points).
func VariableEdges(n, minBlock, avg int, rng *rand.Rand) ([]int, error) {
	if minBlock < 1 || avg < minBlock {
		return nil, inputErr("--avg-block", "--avg-block %d must be at least the minimum block %d", avg, minBlock)
	}
	nb := max(1, n/avg)
	if n < nb*minBlock {
		return nil, inputErr("--seqlen", "--seqlen %d is shorter than one block of %d", n, minBlock)
	}
	rest := n - nb*minBlock
	cuts := make([]int, nb+1)
	for i := 1; i < nb; i++ {
		cuts[i] = rng.IntN(rest + 1)
	}
	cuts[nb] = rest
	sort.Ints(cuts[1:nb])
	edges := make([]int, nb+1)
	for i := 1; i <= nb; i++ {
		edges[i] = edges[i-1] + minBlock + cuts[i] - cuts[i-1]
	}
	return edges, nil
}

// KeptBlocks is how many k blocks each q-block row keeps, and how many there are, for
// seqlen tokens cut into blocks of block (uniform) or averaging avgBlock (variable):
// max(1, int(ratio x nK)) of nK. Their quotient is the kept ratio a mask really has,
// which is coarser than ratio when the blocks are large for the length (1K tokens in
// blocks of 512: 1 of 2 for every ratio below 1).
func KeptBlocks(seqlen, block, avgBlock int, ratio float64) (keep, nk int) {
	if block > 0 {
		nk = (seqlen + block - 1) / block
	} else if avgBlock > 0 {
		nk = max(1, seqlen/avgBlock)
	}
	nk = max(nk, 1)
	return max(1, int(ratio*float64(nk))), nk
}

// KeptRatio is the ratio of k blocks each q-block row keeps: KeepPerRow / k blocks.
func (sp *Sparse) KeptRatio() float64 {
	return float64(sp.KeepPerRow) / float64(len(sp.KEdges)-1)
}

// BlockSparse builds the block-sparse masks over seqlen tokens. q ([S, HeadsQ, D]) and
// k ([S, HeadsKV, D]) are read only for ContentScores and may be nil otherwise. Bad
// options are InputErrors naming the flag (--ratio, --block, --avg-block, --seqlen).
func BlockSparse(seqlen int, o SparseOptions, q, k *tensor.Host) (*Sparse, error) {
	sp, rng, err := sparseLayout(seqlen, o)
	if err != nil {
		return nil, err
	}
	score, err := sparseScores(sp, o, seqlen, rng, func() (*tensor.Host, *tensor.Host) { return q, k })
	if err != nil {
		return nil, err
	}
	nq, nk := len(sp.QEdges)-1, len(sp.KEdges)-1
	scores := make([]float64, nk)
	order := make([]scored, nk)
	mark := make([]bool, nk)
	keep := sp.KeepPerRow
	for h := 0; h < o.HeadsKV; h++ {
		// At most min(keep, nk-keep+1) runs of adjacent kept blocks per row.
		m := Mask{SeqQ: seqlen, SeqK: seqlen, Slices: make([]Slice, 0, nq*min(keep, nk-keep+1))}
		backing := make([]int, nq*keep)
		kept := make([][]int, nq)
		for i := 0; i < nq; i++ {
			topBlocks(score, h, i, scores, order, keep)
			clear(mark)
			for _, e := range order[:keep] {
				mark[e.j] = true
			}
			row := backing[i*keep : (i+1)*keep : (i+1)*keep]
			x := 0
			for j, in := range mark {
				if in {
					row[x] = j
					x++
				}
			}
			kept[i] = row
			qr := Range{sp.QEdges[i], sp.QEdges[i+1]}
			for a := 0; a < len(row); {
				b := a + 1
				for b < len(row) && row[b] == row[b-1]+1 {
					b++
				}
				m.Slices = append(m.Slices, Slice{qr, Range{sp.KEdges[row[a]], sp.KEdges[row[b-1]+1]}, Full})
				a = b
			}
		}
		sp.Heads = append(sp.Heads, m)
		sp.Kept = append(sp.Kept, kept)
	}
	return sp, nil
}

// BlockSparseArea is the area of KV head 0's mask of BlockSparse(seqlen, o, q, k), to the
// pair, without building it (what an estimate or a dry run needs: 1-token blocks over
// 16K tokens are a mask of most of a GiB and seconds of work). When every k block has
// one width w it is seqlen x keep x w, and no score is drawn; otherwise each q-block
// row's kept blocks are chosen as BlockSparse chooses them (the same draws in the same
// order, the same ranking), their widths summed, in memory of one row. inputs gives q
// and k and is called only for ContentScores when the blocks differ in width (then they
// are checked as BlockSparse checks them); it may be nil otherwise. Bad options are
// BlockSparse's errors.
func BlockSparseArea(seqlen int, o SparseOptions, inputs func() (q, k *tensor.Host)) (int64, error) {
	sp, rng, err := sparseLayout(seqlen, o)
	if err != nil {
		return 0, err
	}
	nq, nk, keep := len(sp.QEdges)-1, len(sp.KEdges)-1, sp.KeepPerRow
	rows := int64(sp.QEdges[nq] - sp.QEdges[0])
	width := func(j int) int64 { return int64(sp.KEdges[j+1] - sp.KEdges[j]) }
	equal := true
	for j := 1; j < nk && equal; j++ {
		equal = width(j) == width(0)
	}
	if equal {
		return rows * int64(keep) * width(0), nil
	}
	if inputs == nil {
		inputs = func() (*tensor.Host, *tensor.Host) { return nil, nil }
	}
	score, err := sparseScores(sp, o, seqlen, rng, inputs)
	if err != nil {
		return 0, err
	}
	scores := make([]float64, nk)
	order := make([]scored, nk)
	var area int64
	for i := 0; i < nq; i++ {
		topBlocks(score, 0, i, scores, order, keep)
		var w int64
		for _, e := range order[:keep] {
			w += width(e.j)
		}
		area += int64(sp.QEdges[i+1]-sp.QEdges[i]) * w
	}
	return area, nil
}

// sparseLayout checks the options of a block-sparse mask and cuts its q and k blocks
// (Sparse's edges and KeepPerRow, no heads yet), returning the generator the scores are
// then drawn from: the variable layout's edges are its first draws.
func sparseLayout(seqlen int, o SparseOptions) (*Sparse, *rand.Rand, error) {
	if seqlen < 1 {
		return nil, nil, inputErr("--seqlen", "--seqlen must be at least 1, got %d", seqlen)
	}
	if err := checkSeqLen(seqlen); err != nil {
		return nil, nil, err
	}
	if !(o.Ratio > 0 && o.Ratio <= 1) {
		return nil, nil, inputErr("--ratio", "--ratio %v must be in (0, 1]", o.Ratio)
	}
	if o.HeadsKV < 1 {
		return nil, nil, inputErr("--heads", "--heads: %d KV heads for block-sparse masks: need at least 1", o.HeadsKV)
	}
	rng := dataset.NewRand(o.Seed)
	sp := &Sparse{}
	switch {
	case o.Block > 0:
		sp.QEdges, sp.KEdges = UniformEdges(seqlen, o.Block), UniformEdges(seqlen, o.Block)
	case o.Block < 0:
		return nil, nil, inputErr("--block", "--block %d must be positive", o.Block)
	default:
		minB := o.MinBlock
		if minB == 0 {
			minB = DefaultMinBlock
		}
		var err error
		if sp.QEdges, err = VariableEdges(seqlen, minB, o.AvgBlock, rng); err != nil {
			return nil, nil, err
		}
		if sp.KEdges, err = VariableEdges(seqlen, minB, o.AvgBlock, rng); err != nil {
			return nil, nil, err
		}
	}
	sp.KeepPerRow = max(1, int(o.Ratio*float64(len(sp.KEdges)-1)))
	return sp, rng, nil
}

// scoreFunc fills out with the scores of every k block for KV head h, q block i. Random
// scores are drawn in call order, so rows are scored head by head, row by row.
type scoreFunc func(h, i int, out []float64)

// sparseScores is how the k blocks of sp are scored: rng's draws, or for ContentScores
// the pooled q . pooled k of inputs' tensors.
func sparseScores(sp *Sparse, o SparseOptions, seqlen int, rng *rand.Rand, inputs func() (q, k *tensor.Host)) (scoreFunc, error) {
	if o.Scores != ContentScores {
		return func(h, i int, out []float64) {
			for j := range out {
				out[j] = rng.Float64()
			}
		}, nil
	}
	q, k := inputs()
	qp, kp, err := pooled(sp, o.HeadsKV, seqlen, q, k)
	if err != nil {
		return nil, err
	}
	return func(h, i int, out []float64) {
		for j := range out {
			out[j] = dot(qp[h][i], kp[h][j])
		}
	}, nil
}

// topBlocks scores q block i of KV head h into scores and moves the keep best k blocks
// (highest score; ties to the lower block, so the choice is deterministic) to
// order[:keep], in no order.
func topBlocks(score scoreFunc, h, i int, scores []float64, order []scored, keep int) {
	score(h, i, scores)
	for j, v := range scores {
		order[j] = scored{v, j}
	}
	selectTop(order, keep)
}

// pooled mean-pools q over each q block's tokens and the query heads of each KV head's
// group, and k over each k block's tokens, per KV head: [head][block][D].
func pooled(sp *Sparse, headsKV, seqlen int, q, k *tensor.Host) (qp, kp [][][]float64, err error) {
	if q == nil || k == nil {
		return nil, nil, fmt.Errorf("block-sparse: content scores need q and k")
	}
	qs, ks := q.Shape(), k.Shape()
	if len(qs) != 3 || len(ks) != 3 || qs[0] != seqlen || ks[0] != seqlen || qs[2] != ks[2] {
		return nil, nil, fmt.Errorf("block-sparse: q %v and k %v are not [S=%d, heads, D] with one D", qs, ks, seqlen)
	}
	if ks[1] != headsKV || qs[1]%headsKV != 0 {
		return nil, nil, fmt.Errorf("block-sparse: q has %d heads and k %d for %d KV heads: need k's heads = KV heads dividing q's (--heads)", qs[1], ks[1], headsKV)
	}
	group, d := qs[1]/headsKV, qs[2]
	pool := func(t *tensor.Host, edges []int, heads, group int) [][][]float64 {
		out := make([][][]float64, headsKV)
		for h := range out {
			out[h] = make([][]float64, len(edges)-1)
			for b := range out[h] {
				acc := make([]float64, d)
				for s := edges[b]; s < edges[b+1]; s++ {
					for g := 0; g < group; g++ {
						base := (s*heads + h*group + g) * d
						for x := 0; x < d; x++ {
							acc[x] += t.At(base + x)
						}
					}
				}
				n := float64((edges[b+1] - edges[b]) * group)
				for x := range acc {
					acc[x] /= n
				}
				out[h][b] = acc
			}
		}
		return out
	}
	return pool(q, sp.QEdges, qs[1], group), pool(k, sp.KEdges, ks[1], 1), nil
}

// scored is a k block and its score.
type scored struct {
	v float64
	j int
}

// better ranks a before b: higher score, then lower block.
func (a scored) better(b scored) bool { return a.v > b.v || (a.v == b.v && a.j < b.j) }

// selectTop moves the k best entries of s to s[:k] (in no order), in expected linear
// time (quickselect with a median-of-three pivot; entries are distinct by block).
func selectTop(s []scored, k int) {
	lo, hi := 0, len(s)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		// Order s[lo], s[mid], s[hi] so that the median sits at mid.
		if s[mid].better(s[lo]) {
			s[lo], s[mid] = s[mid], s[lo]
		}
		if s[hi].better(s[lo]) {
			s[lo], s[hi] = s[hi], s[lo]
		}
		if s[hi].better(s[mid]) {
			s[mid], s[hi] = s[hi], s[mid]
		}
		pivot := s[mid]
		s[mid], s[hi] = s[hi], s[mid]
		p := lo
		for x := lo; x < hi; x++ {
			if s[x].better(pivot) {
				s[p], s[x] = s[x], s[p]
				p++
			}
		}
		s[p], s[hi] = s[hi], s[p]
		switch {
		case p == k || p == k-1:
			return
		case p < k:
			lo = p + 1
		default:
			hi = p - 1
		}
	}
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}
