package cp

import (
	"fmt"
	"sync"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// Plan is a method's resolved configuration for one problem: the mesh, the sharding,
// the per-rank head counts and the sub-masks of its steps (computed on first use and
// cached; a Plan may be shared by the in-process ranks).
type Plan struct {
	Method  string
	Problem kernels.Problem // the global problem (unpadded mask)
	Config  Config          // resolved: Ulysses*Ring = Ranks, Windows >= 1, a Sharding
	Layout  Layout          // the sequence over the ring
	// Tokens is the rows each rank holds: Layout.Local / Ulysses.
	Tokens int
	// HeadsQ and HeadsKV are each rank's heads inside the Ulysses group; ReplicateKV
	// says the KV heads are replicated (HeadsKV < Ulysses).
	HeadsQ, HeadsKV int
	ReplicateKV     bool
	// Dispatch is balanced's placement of the blocks (nil for the other methods).
	Dispatch *Dispatch
	// kvDocs are balanced's THD key layouts per dispatch rank (nil: blocks), chooseKV.
	kvDocs []*docLayout

	mu    sync.Mutex
	steps map[[2]int]mask.Mask
	// making are the sub-masks being made (cached): a rank that asks for one another rank
	// is making waits for it instead of making its own.
	making map[[2]int]*making
	// The all-gather's keys: every ring shard's pieces in ring order, and their order by
	// source position (GatherMask), laid out once under gatherMu (gathered).
	gatherMu     sync.Mutex
	gatherBuilt  bool
	gatherKeys   []Piece
	gatherOrder  []int
	gatherSorted bool
}

// Padding is the padding tokens zigzag sharding added (0 for contiguous).
func (pl *Plan) Padding() int { return pl.Layout.Padding() }

// Coords returns rank's place (u, r) in the Ulysses x Ring mesh.
func (pl *Plan) Coords(rank int) (u, r int) {
	c := pl.Config
	if c.HeadFirst {
		return rank % c.Ulysses, rank / c.Ulysses
	}
	return rank / c.Ring, rank % c.Ring
}

// StepMask is the sub-mask of ring shard q's queries against ring shard k's keys.
func (pl *Plan) StepMask(q, k int) mask.Mask {
	return pl.cached(q, k, func() mask.Mask {
		l := pl.Layout
		return SubMask(pl.Problem.Mask, l.Shards[q], l.Local, l.Shards[k], l.Local)
	})
}

// GatherMask is the sub-mask of ring shard q's queries against the keys of every ring
// shard concatenated in ring order (ring-allgather).
func (pl *Plan) GatherMask(q int) mask.Mask {
	return pl.cached(q, -1, func() mask.Mask {
		l := pl.Layout
		keys, order, sorted := pl.gathered()
		return subMask(pl.Problem.Mask, l.Shards[q], l.Local, keys, l.Padded, order, sorted)
	})
}

// gatherSort orders the all-gather's keys by source position (bySource; a test's seam).
var gatherSort = bySource

// gathered is the all-gather's keys and their order, laid out by the first caller; a
// layout that panics keeps nothing, so the next caller lays them out whole (a sync.Once
// would have kept the keys appended before the panic, unordered, for every later call).
func (pl *Plan) gathered() ([]Piece, []int, bool) {
	pl.gatherMu.Lock()
	defer pl.gatherMu.Unlock()
	if !pl.gatherBuilt {
		l := pl.Layout
		var keys []Piece
		for r, ps := range l.Shards {
			keys = append(keys, shiftPieces(ps, r*l.Local)...)
		}
		order, sorted := gatherSort(keys)
		pl.gatherKeys, pl.gatherOrder, pl.gatherSorted, pl.gatherBuilt = keys, order, sorted, true
	}
	return pl.gatherKeys, pl.gatherOrder, pl.gatherSorted
}

// ForgetSteps drops the cached sub-masks of ring shard q's queries (StepMask(q, *) and
// GatherMask(q)): a tracer that has walked a rank's steps frees them (at 512 ranks a
// rank's document sub-masks hold tens of megabytes). A later call computes them again.
func (pl *Plan) ForgetSteps(q int) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for key := range pl.steps {
		if key[0] == q {
			delete(pl.steps, key)
		}
	}
}

// making is a sub-mask one rank is making for the plan's cache; done is closed when it is
// made (ok) or its maker stopped without it (a panic), when a waiter makes it itself.
type making struct {
	done chan struct{}
	m    mask.Mask
	ok   bool
}

// cached is the sub-mask (q, k), made by f once however many ranks ask for it at once:
// the ranks of one ring position (usp's and loongtrain's Ulysses groups, in one process
// under simulate or local ranks) had each made their own copy when they missed the cache
// together, each a rank's worth of memory and time.
func (pl *Plan) cached(q, k int, f func() mask.Mask) mask.Mask {
	key := [2]int{q, k}
	for {
		pl.mu.Lock()
		if m, ok := pl.steps[key]; ok {
			pl.mu.Unlock()
			return m
		}
		if c, ok := pl.making[key]; ok {
			pl.mu.Unlock()
			<-c.done
			if c.ok {
				return c.m
			}
			continue // its maker stopped: make it here
		}
		c := &making{done: make(chan struct{})}
		if pl.making == nil {
			pl.making = map[[2]int]*making{}
		}
		pl.making[key] = c
		pl.mu.Unlock()
		return pl.makeStep(key, c, f)
	}
}

// makeStep runs f for cached's key, keeps what it made and wakes the ranks waiting for it,
// also when f panics (they then make it themselves).
func (pl *Plan) makeStep(key [2]int, c *making, f func() mask.Mask) mask.Mask {
	defer func() {
		pl.mu.Lock()
		delete(pl.making, key)
		if c.ok {
			if pl.steps == nil {
				pl.steps = map[[2]int]mask.Mask{}
			}
			pl.steps[key] = c.m
		}
		pl.mu.Unlock()
		close(c.done)
	}()
	c.m = f()
	c.ok = true
	return c.m
}

// stepProblem is the kernel problem of one step: this rank's heads, the given mask.
func (pl *Plan) stepProblem(m mask.Mask) kernels.Problem {
	p := pl.Problem
	return kernels.Problem{HeadsQ: pl.HeadsQ, HeadsKV: pl.HeadsKV, HeadDim: p.HeadDim, DType: p.DType, Mask: m, Scale: p.SoftmaxScale()}
}

// Shard cuts rank's rows out of a global [S, heads, dim] tensor (padding rows zero).
func (pl *Plan) Shard(g *tensor.Host, rank int) *tensor.Host {
	u, r := pl.Coords(rank)
	return pl.Layout.ShardTokens(g, r, 0, u*pl.Tokens, pl.Tokens)
}

// ShardLSE cuts rank's columns out of a global [heads, S] tensor.
func (pl *Plan) ShardLSE(g *tensor.Host, rank int) *tensor.Host {
	u, r := pl.Coords(rank)
	return pl.Layout.ShardTokens(g, r, 1, u*pl.Tokens, pl.Tokens)
}

// Gather joins every rank's [Tokens, heads, dim] rows into a global [S, heads, dim]
// tensor, dropping padding.
func (pl *Plan) Gather(locals []*tensor.Host) *tensor.Host {
	return pl.gather(locals, 0)
}

// GatherLSE joins every rank's [heads, Tokens] into a global [heads, S].
func (pl *Plan) GatherLSE(locals []*tensor.Host) *tensor.Host {
	return pl.gather(locals, 1)
}

func (pl *Plan) gather(locals []*tensor.Host, axis int) *tensor.Host {
	g := tensor.NewHost(locals[0].DType(), withAxis(locals[0].Shape(), axis, pl.Layout.Seq)...)
	for rank, loc := range locals {
		u, r := pl.Coords(rank)
		pl.Layout.GatherTokens(g, loc, r, axis, u*pl.Tokens, pl.Tokens)
	}
	return g
}

// mesh is what a method asks of newPlan.
type mesh struct {
	u, r, w  int
	sharding Sharding
}

// newPlan validates a resolved mesh against the problem and lays out the sequence.
// Every error is one line naming the flag to change.
func newPlan(method string, cfg Config, p kernels.Problem, m mesh) (*Plan, error) {
	if err := checkProblem(method, cfg, p); err != nil {
		return nil, err
	}
	n := cfg.Ranks
	if m.u < 1 || m.r < 1 || m.u*m.r != n {
		return nil, fmt.Errorf("%s: mesh %dx%d (--ulysses x --ring) has %d ranks, not the %d of the world", method, m.u, m.r, m.u*m.r, n)
	}
	if m.w < 1 || m.r%m.w != 0 {
		return nil, fmt.Errorf("%s: %d windows (--windows) do not divide a ring of %d ranks", method, m.w, m.r)
	}
	hq, hkv := p.HeadsQ, p.HeadsKV
	// the flags that set the Ulysses group: --ranks too where the group is every rank (the
	// ulysses method's, or a --ulysses of the whole world)
	uflags := "--heads, --ulysses"
	if m.u == n {
		uflags = "--heads, --ulysses or --ranks: the Ulysses group is every rank"
	}
	if hq%m.u != 0 {
		return nil, fmt.Errorf("%s: %d query heads do not split over %d Ulysses ranks (%s)", method, hq, m.u, uflags)
	}
	if hkv%m.u != 0 && m.u%hkv != 0 {
		return nil, fmt.Errorf("%s: %d KV heads neither split over nor replicate evenly onto %d Ulysses ranks (%s)", method, hkv, m.u, uflags)
	}
	seq := p.Mask.SeqQ
	if m.sharding == DefaultSharding {
		// zigzag for a ring of two ranks or more; on a ring of one its chunks are the
		// documents in order and its padding (each document to a multiple of 2N) is all it
		// adds: call 98a's one-rank rows of ring-allgather and loongtrain, 8,196 rows for
		// 8,192 tokens, read 0.89-0.90 of the kernel alone on the two document masks (the
		// 65th row tile unbalanced the kernel's static persistent walk, docs/cp-gpu.md)
		m.sharding = Zigzag
		if m.r == 1 && seq%n == 0 {
			m.sharding = Contiguous
		}
	}
	cfg.Ulysses, cfg.Ring, cfg.Windows, cfg.Sharding, cfg.Block, cfg.Stages = m.u, m.r, m.w, m.sharding, 0, 0
	var lay Layout
	switch m.sharding {
	case Contiguous:
		if seq%n != 0 {
			return nil, fmt.Errorf("%s: %d tokens do not split over %d ranks (--seqlen or --tokens-per-rank: use a multiple of %d, or --sharding zigzag)", method, seq, n, n)
		}
		lay = ContiguousLayout(seq, m.r)
	case Zigzag:
		var err error
		if lay, err = ZigzagLayout(cfg.Docs, seq, m.r, 2*n); err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
	default:
		return nil, fmt.Errorf("%s: unknown sharding %d", method, m.sharding)
	}
	pl := &Plan{Method: method, Problem: p, Config: cfg, Layout: lay, Tokens: lay.Local / m.u, HeadsQ: hq / m.u}
	pl.HeadsKV, pl.ReplicateKV = kvHeads(hkv, m.u)
	return pl, nil
}

// checkProblem is what every CP method asks of the problem and the world before it
// plans: a valid problem, one mask for all heads, self-attention, at least one rank.
func checkProblem(method string, cfg Config, p kernels.Problem) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	if len(p.HeadMasks) != 0 {
		return fmt.Errorf("%s: per-head (block-sparse) masks are not supported by CP methods", method)
	}
	if p.Mask.SeqQ != p.Mask.SeqK {
		return fmt.Errorf("%s: self-attention only: %d queries against %d keys", method, p.Mask.SeqQ, p.Mask.SeqK)
	}
	if cfg.Ranks < 1 {
		return fmt.Errorf("%s: %d ranks: need at least 1 (--ranks)", method, cfg.Ranks)
	}
	return nil
}

// kvHeads is how many of hkv KV heads each of u Ulysses ranks holds: its share, or one
// replicated onto several ranks when there are fewer KV heads than ranks.
func kvHeads(hkv, u int) (heads int, replicate bool) {
	if hkv >= u {
		return hkv / u, false
	}
	return 1, true
}
