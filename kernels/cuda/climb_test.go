package cuda

import (
	"fmt"
	"math"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// climbingInputs are check.Inputs(p, seed) with scores that climb key tile by key tile: every
// query's first component 1 and every key's first component c times its 128-key tile's index
// (c = 128 at head dim 64, 192 at 128: 23-25 log2 units of the softmax's exponent a tile at
// the default scale, against random parts that move a tile's maximum by a few; the scores
// stay fp32 in the kernel and in both references, so the rule's tolerance is as sharp). In
// the order the forward visits a row's key tiles (ascending) each tile's maximum then passes
// the row's running maximum by more than 8: the rescale of O runs at every tile, and so does
// the move of the d128 forward's lazy subtraction point (call 75's sm90lz, sm90's since),
// which random scores reach about never after a row's first tile (TestClimbingScores on the
// GPU; TestClimbingInputs here checks that they climb).
func climbingInputs(p kernels.Problem, seed uint64) (q, k, v, dout *tensor.Host) {
	q, k, v, dout = check.Inputs(p, seed)
	c := 128.0
	if p.HeadDim > 64 {
		c = 192
	}
	d := p.HeadDim
	for i := 0; i < p.Mask.SeqQ*p.HeadsQ; i++ {
		q.Set(i*d, 1)
	}
	for j := 0; j < p.Mask.SeqK; j++ {
		for h := 0; h < p.HeadsKV; h++ {
			k.Set((j*p.HeadsKV+h)*d, c*float64(j/128))
		}
	}
	return q, k, v, dout
}

// climbProblem is one of TestClimbingScores's problems, named.
type climbProblem struct {
	what string
	p    kernels.Problem
}

// climbProblems are the problems TestClimbingScores runs (GQA 4:2, 1,024 tokens, both head
// dims, full and causal).
func climbProblems(t *testing.T) []climbProblem {
	var ps []climbProblem
	for _, d := range []int{64, 128} {
		for _, name := range []string{"full", "causal"} {
			spec, err := mask.Build(name, 1024, mask.Options{Seed: 42})
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, climbProblem{fmt.Sprintf("%s d%d", name, d), kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: d, DType: tensor.BF16, Mask: spec.Mask}})
		}
	}
	return ps
}

// The climbing inputs climb: for every query row and head, over the 128-key tiles holding
// keys the row may see, in ascending order, each tile's maximum of s scale log2(e) passes the
// maximum of the tiles before it by more than 8 (the lazy point's threshold), so the GPU test's
// premise (the point moves at every tile) holds by construction, not by luck.
func TestClimbingInputs(t *testing.T) {
	for _, c := range climbProblems(t) {
		p := c.p
		q, k, _, _ := climbingInputs(p, 91)
		d, g := p.HeadDim, p.HeadsQ/p.HeadsKV
		scale := 1 / math.Sqrt(float64(d)) * math.Log2E
		worst, moves := math.Inf(1), 0
		for i := 0; i < p.Mask.SeqQ; i++ {
			for h := 0; h < p.HeadsQ; h++ {
				run := math.Inf(-1)
				for kt := 0; kt*128 < p.Mask.SeqK; kt++ {
					tile := math.Inf(-1)
					for j := kt * 128; j < min(p.Mask.SeqK, (kt+1)*128); j++ {
						if !p.Mask.Allowed(i, j) {
							continue
						}
						s := 0.0
						for e := 0; e < d; e++ {
							s += q.At((i*p.HeadsQ+h)*d+e) * k.At((j*p.HeadsKV+h/g)*d+e)
						}
						tile = math.Max(tile, s*scale)
					}
					if math.IsInf(tile, -1) {
						continue
					}
					if !math.IsInf(run, -1) {
						worst = math.Min(worst, tile-run)
						moves++
					}
					run = math.Max(run, tile)
				}
			}
		}
		what := c.what
		if moves == 0 || worst <= 8 {
			t.Errorf("%s: %d later tiles, the least a tile's maximum passes the running one by is %.2f log2 units, want more than 8", what, moves, worst)
		}
		t.Logf("%s: %d later tiles, each passing the running maximum by %.1f log2 units or more", what, moves, worst)
	}
}
