package check

import (
	"context"
	"slices"
	"sync"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// A Cache keeps the inputs and references of the last problem it checked, so that a
// sweep checking several kernels (and both passes) on one case computes the float64 and
// naive references once instead of once per kernel and pass: the inputs are Inputs(p,
// seed) whichever kernel is checked, so the references are the same. A backward's
// references hold the forward's outputs too, so after one backward check a forward check
// of the same problem costs nothing more; a forward's are replaced by the backward's when
// a backward check follows. It holds one problem (the last) at a time: the memory of one
// check, kept between calls. Safe for concurrent use; the zero value is ready.
type Cache struct {
	mu       sync.Mutex
	have     bool
	p        kernels.Problem
	seed     uint64
	backward bool // the references include dq, dk and dv
	q, k, v  *tensor.Host
	dout     *tensor.Host
	exact    Outputs
	naive    Outputs
	runs     int // references computed (each call of References): what the cache saves
}

// Check is Forward, Backward or Both (by pass) with the references from the cache.
func (c *Cache) Check(ctx context.Context, k kernels.Kernel, p kernels.Problem, seed uint64, pass kernels.Pass) (Report, error) {
	return runWith(ctx, k, p, seed, pass, c)
}

// References computed so far.
func (c *Cache) Runs() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs
}

// inputs are Inputs(p, seed), the cached ones when the cache holds this problem.
func (c *Cache) inputs(p kernels.Problem, seed uint64) (q, k, v, dout *tensor.Host) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holdLocked(p, seed)
	return c.q, c.k, c.v, c.dout
}

// holdLocked makes the cache hold p at seed: unless it already does, fresh inputs and no
// references yet. The caller holds c.mu.
func (c *Cache) holdLocked(p kernels.Problem, seed uint64) {
	if c.have && c.seed == seed && sameProblem(c.p, p) {
		return
	}
	c.q, c.k, c.v, c.dout = Inputs(p, seed)
	c.have, c.p, c.seed, c.backward = true, p, seed, false
	c.exact, c.naive = Outputs{}, Outputs{}
}

// references are References(p, inputs, backward), computed once per problem (and once
// more when a backward follows a forward). The lock is held while they run: a second
// kernel's check of the same case waits for them rather than computing them again.
func (c *Cache) references(ctx context.Context, p kernels.Problem, seed uint64, backward bool) (exact, naive Outputs, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.holdLocked(p, seed)
	if c.exact.Out != nil && (c.backward || !backward) {
		return c.exact, c.naive, nil
	}
	c.runs++
	exact, naive, err = References(ctx, p, c.q, c.k, c.v, c.dout, backward)
	if err != nil {
		return exact, naive, err
	}
	c.exact, c.naive, c.backward = exact, naive, backward
	return exact, naive, nil
}

// sameProblem says whether a and b are the same problem, slice for slice.
func sameProblem(a, b kernels.Problem) bool {
	if a.HeadsQ != b.HeadsQ || a.HeadsKV != b.HeadsKV || a.HeadDim != b.HeadDim || a.DType != b.DType ||
		a.Scale != b.Scale || !sameMask(a.Mask, b.Mask) || len(a.HeadMasks) != len(b.HeadMasks) {
		return false
	}
	for i := range a.HeadMasks {
		if !sameMask(a.HeadMasks[i], b.HeadMasks[i]) {
			return false
		}
	}
	return true
}

func sameMask(a, b mask.Mask) bool {
	return a.SeqQ == b.SeqQ && a.SeqK == b.SeqK && slices.Equal(a.Slices, b.Slices)
}
