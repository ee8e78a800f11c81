package cp

import (
	"context"
	"fmt"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// Balanced is longca's own method: the sequence is cut into blocks and every rank given
// the same number of them so that the mask's area in its rows (its attention work) is
// equal (Balance), and each rank receives exactly the key/value blocks its rows attend
// to from the ranks that own them (each rank owns the K/V of its own query blocks), by
// grouped sends and receives. Up to 8 ranks the fetch is one piece beside the rank's own
// K/V and one kernel call attends to both (balanced_one.go); past that it comes in stages,
// each overlapping the attention of what came before, and Ulysses runs inside the node
// with the dispatch across nodes (the engine's headsForward). The backward fetches the same
// blocks again and returns their dK/dV partials to their owners the same way, where the
// owner adds them up.
type Balanced struct{}

func init() { Register(Balanced{}) }

// Name is "balanced".
func (Balanced) Name() string { return "balanced" }

// Doc is a one-line description.
func (Balanced) Doc() string {
	return "blocks placed by mask area (equal work per rank); each rank fetches exactly the K/V blocks it attends to, staged p2p; dK/dV back to owners"
}

// Meshes implements Method: one mesh U x N/U per head-parallel degree the user names
// (Splits, --cp-ulysses; 0: the plan chooses per mask), with the user's block and
// stages. The 2-D methods' --ulysses/--ring do not apply.
func (Balanced) Meshes(fixed Config) []Config {
	c := fixed
	c.Ulysses, c.Ring, c.Windows, c.Splits = 0, 0, 0, nil
	var out []Config
	seen := map[int]bool{}
	for _, u := range fixed.Splits {
		if !seen[u] {
			seen[u] = true
			cu := c
			cu.Ulysses = u
			out = append(out, cu)
		}
	}
	if len(out) == 0 {
		out = append(out, c)
	}
	return out
}

// Plan validates the problem and computes the dispatch (Balance) over N/U ranks with
// cfg.Block, or DefaultBlock, and cfg.Stages (DefaultStages): U is cfg.Ulysses when set
// (the user's --cp-ulysses), else BalancedMeshChoice's.
func (Balanced) Plan(cfg Config, p kernels.Problem) (*Plan, error) {
	const method = "balanced"
	if err := checkProblem(method, cfg, p); err != nil {
		return nil, err
	}
	n := cfg.Ranks
	if cfg.Block < 0 {
		return nil, fmt.Errorf("%s: block of %d tokens (--cp-block): use a positive size, or 0 for the default", method, cfg.Block)
	}
	if cfg.Stages < 0 {
		return nil, fmt.Errorf("%s: %d stages (--cp-stages): use a positive number, or 0 for the default", method, cfg.Stages)
	}
	if cfg.Ulysses < 0 {
		return nil, fmt.Errorf("%s: --cp-ulysses %d: use a positive divisor of the ranks, or 0 to let the plan choose", method, cfg.Ulysses)
	}
	var u int
	var d *Dispatch
	if u = cfg.Ulysses; u > 0 {
		if err := balancedSplitErr(n, u, p); err != nil {
			return nil, err
		}
		if cfg.Block == 0 {
			cfg.Block = DefaultBlock(p.Mask.SeqQ, n/u, u)
		}
		var err error
		if d, err = Balance(p.Mask, n/u, cfg.Block, DefaultStages(n, cfg.Stages)); err != nil {
			return nil, err
		}
	} else {
		var err error
		if u, d, _, err = BalancedMeshChoice(p, n, cfg.Block, cfg.Stages); err != nil {
			return nil, err
		}
	}
	cfg.Ulysses, cfg.Ring, cfg.Windows, cfg.HeadFirst, cfg.Block, cfg.Stages = u, n/u, 1, true, d.Block, d.NumStages()
	lay := d.Layout()
	if lay.Local%u != 0 {
		return nil, fmt.Errorf("%s: %d rows per dispatch rank do not split over the %d ranks of a Ulysses group: choose --cp-block so that they do, or another --cp-ulysses", method, lay.Local, u)
	}
	pl := &Plan{Method: method, Problem: p, Config: cfg, Layout: lay, Tokens: lay.Local / u,
		HeadsQ: p.HeadsQ / u, Dispatch: d}
	pl.HeadsKV, pl.ReplicateKV = kvHeads(p.HeadsKV, u)
	if err := pl.chooseKV(cfg); err != nil {
		return nil, err
	}
	return pl, nil
}

// BalancedUlysses is balanced's Ulysses degree on n ranks when the user names none, past
// 8 ranks (up to 8, BalancedMeshChoice's model chooses): 1 up to 8 ranks, else the largest divisor of n of at most 8 (a node's GPUs) that the
// query heads split over and the KV heads split over or replicate onto: Ulysses inside
// the node, the dispatch across nodes, so what crosses nodes is K/V of 1/U of the heads
// and the blocks are placed node by node.
func BalancedUlysses(n int, p kernels.Problem) int {
	if n <= 8 {
		return 1
	}
	u := 1
	for c := 2; c <= 8; c++ {
		if n%c == 0 && p.HeadsQ%c == 0 && p.HeadsKV > 0 && (p.HeadsKV%c == 0 || c%p.HeadsKV == 0) {
			u = c
		}
	}
	return u
}

// stageMask is the sub-mask of rank r's queries against the keys of its stage s.
func (pl *Plan) stageMask(r, s int) (rows int, m mask.Mask) {
	d := pl.Dispatch
	rows = d.RecvStage(r, s).Slots * d.Block
	return rows, pl.cached(r, -2-s, func() mask.Mask {
		return SubMask(pl.Problem.Mask, pl.Layout.Shards[r], pl.Layout.Local, d.stageKeys(r, s), rows)
	})
}

// balancedRun is one pass's transfers on rank me.
type balancedRun struct {
	r    *Run
	d    *Dispatch
	me   int
	rows func(t tensor.Tensor, slot, n int) (tensor.Tensor, error)
}

func newBalancedRun(r *Run) (*balancedRun, error) {
	d := r.Plan.Dispatch
	if d == nil {
		return nil, fmt.Errorf("balanced: the plan has no dispatch (made by %s)", r.Plan.Method)
	}
	b := d.Block
	return &balancedRun{r: r, d: d, me: r.R, rows: func(t tensor.Tensor, slot, n int) (tensor.Tensor, error) {
		return rowsOf(t, slot*b, (slot+n)*b)
	}}, nil
}

// fetch posts stage s's K/V: this rank's blocks to the ranks that fetch them, the blocks
// it fetches into buf (inside the caller's group).
func (b *balancedRun) fetch(c comm.Comm, s int, k, v tensor.Tensor, buf kvPair) error {
	for _, x := range b.d.Sends(b.me, s) {
		for _, t := range []tensor.Tensor{k, v} {
			src, err := b.rows(t, int(x.Slot), int(x.N))
			if err != nil {
				return err
			}
			if err := c.Send(src, int(x.Peer)); err != nil {
				return err
			}
		}
	}
	for _, x := range b.d.RecvStage(b.me, s).Recv {
		for _, t := range []tensor.Tensor{buf.k, buf.v} {
			dst, err := b.rows(t, int(x.At), int(x.N))
			if err != nil {
				return err
			}
			if err := c.Recv(dst, int(x.Peer)); err != nil {
				return err
			}
		}
	}
	return nil
}

// giveBack posts stage s's gradient return: the dK/dV partials of the blocks this rank
// fetched (grads, laid out as its stage buffer) to their owners, and the owners' side:
// the partials of its own blocks into ret (one after another, in Sends order).
func (b *balancedRun) giveBack(c comm.Comm, s int, grads, ret kvPair) error {
	for _, x := range b.d.RecvStage(b.me, s).Recv {
		for _, t := range []tensor.Tensor{grads.k, grads.v} {
			src, err := b.rows(t, int(x.At), int(x.N))
			if err != nil {
				return err
			}
			if err := c.Send(src, int(x.Peer)); err != nil {
				return err
			}
		}
	}
	at := 0
	for _, x := range b.d.Sends(b.me, s) {
		for _, t := range []tensor.Tensor{ret.k, ret.v} {
			dst, err := b.rows(t, at, int(x.N))
			if err != nil {
				return err
			}
			if err := c.Recv(dst, int(x.Peer)); err != nil {
				return err
			}
		}
		at += int(x.N)
	}
	return nil
}

// land adds the dK/dV partials of this rank's own blocks that came back in stage s (in
// ret, one after another in Sends order, as giveBack receives them) into its fp32
// accumulators acc.
func (b *balancedRun) land(s int, acc, ret kvPair) error {
	at := 0
	for _, x := range b.d.Sends(b.me, s) {
		for i, pair := range [][2]tensor.Tensor{{acc.k, ret.k}, {acc.v, ret.v}} {
			dst, err := b.rows(pair[0], int(x.Slot), int(x.N))
			if err != nil {
				return err
			}
			src, err := b.rows(pair[1], at, int(x.N))
			if err != nil {
				return err
			}
			if err := b.r.ops.accumulate(dst, src); err != nil {
				return fmt.Errorf("gradient %d of stage %d: %w", i, s, err)
			}
		}
		at += int(x.N)
	}
	return nil
}

// busy says whether stage s moves anything for this rank (fetch: K/V; else gradients).
func (b *balancedRun) busy(s int) bool {
	if s < 0 || s >= b.d.NumStages() {
		return false
	}
	return len(b.d.Sends(b.me, s)) > 0 || len(b.d.RecvStage(b.me, s).Recv) > 0
}

// balancedQueue starts the groups of a pass on the run's ring, every rank in the same
// order (a rank skips the ones it has no part in), each after the one before.
type balancedQueue struct {
	b    *balancedRun
	last func() error
}

// start starts post (nil: nothing, and a nil wait) as a group after the compute so far.
func (q *balancedQueue) start(post func(c comm.Comm) error) (func() error, error) {
	if post == nil {
		return nil, nil
	}
	c := q.b.r.ring
	w, err := q.b.r.ops.startGroup(c, q.last, func() error { return post(c) })
	if err != nil {
		return nil, err
	}
	q.last = w
	return w, nil
}

// drain waits for every group started (the last one waits for those before it).
func (q *balancedQueue) drain() error {
	if err := waitFor(q.last); err != nil {
		return err
	}
	if oc, ok := q.b.r.ring.(comm.Ordered); ok && oc.StreamOrdered() {
		return oc.Settle()
	}
	return nil
}

// buffers allocates the fetch window: buffer i holds the stages s = i mod Window, sized
// for the largest of them, in dt with the row shape tail.
func (b *balancedRun) buffers(a *arena, dt tensor.DType, tail []int) ([]kvPair, error) {
	w := b.d.Window
	out := make([]kvPair, w)
	for i := range w {
		slots := 0
		for s := i; s < b.d.NumStages(); s += w {
			slots = max(slots, b.d.RecvStage(b.me, s).Slots)
		}
		var err error
		if out[i], err = newKV(a, dt, append([]int{max(slots, 1) * b.d.Block}, tail...)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// stageKV is the first rows of buf holding stage s.
func (b *balancedRun) stageKV(buf kvPair, rows int) (kvPair, error) {
	k, err := rowsOf(buf.k, 0, rows)
	if err != nil {
		return kvPair{}, err
	}
	v, err := rowsOf(buf.v, 0, rows)
	return kvPair{k, v}, err
}

// fetchPost is stage s's fetch into buf, or nil when this rank has no part in it.
func (b *balancedRun) fetchPost(s int, k, v tensor.Tensor, buf kvPair) func(c comm.Comm) error {
	if !b.busy(s) {
		return nil
	}
	return func(c comm.Comm) error { return b.fetch(c, s, k, v, buf) }
}

// Forward implements Method: balancedForward over the dispatch ring; past one node
// (BalancedUlysses > 1) inside the engine's Ulysses all-to-alls (headsForward), so the
// ring is N/U ranks on head shards (each holds its ring rank's blocks, Local rows, for
// H/U heads).
func (Balanced) Forward(ctx context.Context, r *Run, q, k, v, out, lse tensor.Tensor) error {
	r.dropSaved()
	if r.Plan.Config.Ulysses > 1 {
		return r.headsForward(q, k, v, out, lse, func(q, k, v, out, lse tensor.Tensor) error {
			return balancedForward(ctx, r, q, k, v, out, lse)
		})
	}
	return balancedForward(ctx, r, q, k, v, out, lse)
}

// balancedForward is the forward over the ring of dispatch ranks (after the all-to-all
// to head shards when Ulysses > 1): with one stage, forwardOne; else the first Window
// stages' fetches start at once (their buffers are fresh, so they wait for nothing but
// each other), the local blocks' attention runs meanwhile, then each stage's attention
// once its blocks are in, and the fetch of stage s+Window after it, into its buffer.
// Partials merge by log-sum-exp.
func balancedForward(ctx context.Context, r *Run, q, k, v, out, lse tensor.Tensor) error {
	b, err := newBalancedRun(r)
	if err != nil {
		return err
	}
	pl, d := r.Plan, b.d
	if d.NumStages() <= 1 {
		return b.forwardOne(ctx, q, k, v, out, lse)
	}
	lr, hq, dim := pl.Layout.Local, pl.HeadsQ, pl.Problem.HeadDim
	a := &arena{o: r.ops}
	defer a.release()
	merger, err := r.ops.merger(lr, hq, dim)
	if err != nil {
		return err
	}
	defer merger.close()
	partOut, err := a.alloc(r.ops.partDType(pl.Problem.DType), lr, hq, dim)
	if err != nil {
		return err
	}
	partLSE, err := a.alloc(tensor.FP32, hq, lr)
	if err != nil {
		return err
	}
	bufs, err := b.buffers(a, k.DType(), k.Shape()[1:])
	if err != nil {
		return err
	}
	attend := func(m mask.Mask, kv kvPair, what string) error {
		if len(m.Slices) == 0 {
			return nil
		}
		if err := r.Kernel.Forward(ctx, pl.stepProblem(m), q, kv.k, kv.v, partOut, partLSE); err != nil {
			return fmt.Errorf("balanced: %s: %w", what, err)
		}
		return merger.add(partOut, partLSE)
	}
	ns, w := d.NumStages(), d.Window
	queue := &balancedQueue{b: b}
	waits := make([]func() error, ns)
	for s := range min(w, ns) {
		if waits[s], err = queue.start(b.fetchPost(s, k, v, bufs[s%w])); err != nil {
			return fmt.Errorf("balanced: stage %d: %w", s, err)
		}
	}
	err = attend(pl.StepMask(b.me, b.me), kvPair{k, v}, "local blocks")
	for s := 0; err == nil && s < ns; s++ {
		if err = waitFor(waits[s]); err != nil {
			err = fmt.Errorf("balanced: stage %d: %w", s, err)
			break
		}
		rows, m := pl.stageMask(b.me, s)
		if rows > 0 {
			var kv kvPair
			if kv, err = b.stageKV(bufs[s%w], rows); err == nil {
				err = attend(m, kv, fmt.Sprintf("stage %d", s))
			}
		}
		if n := s + w; err == nil && n < ns {
			if waits[n], err = queue.start(b.fetchPost(n, k, v, bufs[n%w])); err != nil {
				err = fmt.Errorf("balanced: stage %d: %w", n, err)
			}
		}
	}
	if derr := queue.drain(); err == nil && derr != nil {
		err = fmt.Errorf("balanced: %w", derr)
	}
	if err != nil {
		return err
	}
	return merger.write(out, lse)
}

// Backward implements Method: on the head shards the forward saved past one node
// (headsBackward), then over the dispatch ring (balancedBackward).
func (Balanced) Backward(ctx context.Context, r *Run, q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	if r.Plan.Config.Ulysses > 1 {
		return r.headsBackward(q, dout, dq, dk, dv, func(q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
			return balancedBackward(ctx, r, q, k, v, out, lse, dout, dq, dk, dv)
		})
	}
	return balancedBackward(ctx, r, q, k, v, out, lse, dout, dq, dk, dv)
}

// balancedBackward is the backward over the ring of dispatch ranks (on the head shards
// when Ulysses > 1): with one stage, backwardOne; else the fetches as in the forward,
// each stage's kernel backward writing the fetched blocks' dK/dV partials, which go back
// to their owners in a group started right after it (before the fetch that reuses its
// buffer), and the owner adds what came back into its fp32 accumulators one stage later.
// dQ accumulates locally.
func balancedBackward(ctx context.Context, r *Run, q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	b, err := newBalancedRun(r)
	if err != nil {
		return err
	}
	pl, d := r.Plan, b.d
	if d.NumStages() <= 1 {
		return b.backwardOne(ctx, q, k, v, out, lse, dout, dq, dk, dv)
	}
	lr, hq, dim := pl.Layout.Local, pl.HeadsQ, pl.Problem.HeadDim
	kvShape := k.Shape()
	tail := kvShape[1:]
	a := &arena{o: r.ops}
	defer a.release()
	pdt := r.ops.partDType(pl.Problem.DType)
	dqAcc, err := a.alloc(r.ops.accDType(), lr, hq, dim)
	if err != nil {
		return err
	}
	dqPart, err := a.alloc(pdt, lr, hq, dim)
	if err != nil {
		return err
	}
	acc, err := newKV(a, tensor.FP32, kvShape)
	if err != nil {
		return err
	}
	dLocal, err := newKV(a, pdt, kvShape)
	if err != nil {
		return err
	}
	bufs, err := b.buffers(a, k.DType(), tail)
	if err != nil {
		return err
	}
	grads, err := b.buffers(a, pdt, tail) // the kernel's partials per stage
	if err != nil {
		return err
	}
	send := grads // what returns: fp32
	if pdt != tensor.FP32 {
		if send, err = b.buffers(a, tensor.FP32, tail); err != nil {
			return err
		}
	}
	sentSlots := 0
	for s := range d.NumStages() {
		n := 0
		for _, x := range d.Sends(b.me, s) {
			n += int(x.N)
		}
		sentSlots = max(sentSlots, n)
	}
	var ret [2]kvPair
	for i := range ret {
		if ret[i], err = newKV(a, tensor.FP32, append([]int{max(sentSlots, 1) * d.Block}, tail...)); err != nil {
			return err
		}
	}
	// landed adds the returned partials of stage s (in ret[s%2]) into the accumulators.
	landed := func(s int) error { return b.land(s, acc, ret[s%2]) }
	compute := func(m mask.Mask, kv, g kvPair, what string) error {
		err := r.Kernel.Backward(ctx, pl.stepProblem(m), q, kv.k, kv.v, out, lse, dout, dqPart, g.k, g.v)
		if err == nil {
			err = r.ops.accumulate(dqAcc, dqPart)
		}
		if err != nil {
			return fmt.Errorf("balanced: backward %s: %w", what, err)
		}
		return nil
	}
	ns, w := d.NumStages(), d.Window
	queue := &balancedQueue{b: b}
	fetched := make([]func() error, ns)
	returned := make([]func() error, ns)
	for s := range min(w, ns) {
		if fetched[s], err = queue.start(b.fetchPost(s, k, v, bufs[s%w])); err != nil {
			return fmt.Errorf("balanced: stage %d: %w", s, err)
		}
	}
	if m := pl.StepMask(b.me, b.me); len(m.Slices) > 0 {
		err = compute(m, kvPair{k, v}, dLocal, "local blocks")
		if err == nil {
			err = r.accumulateAll(acc.list(), dLocal.list())
		}
	}
	for s := 0; err == nil && s < ns; s++ {
		if err = waitFor(fetched[s]); err != nil {
			break
		}
		rows, m := pl.stageMask(b.me, s)
		if rows > 0 && len(m.Slices) > 0 {
			var kv, g kvPair
			if kv, err = b.stageKV(bufs[s%w], rows); err == nil {
				g, err = b.stageKV(grads[s%w], rows)
			}
			if err == nil {
				err = compute(m, kv, g, fmt.Sprintf("stage %d", s))
			}
			if err == nil && pdt != tensor.FP32 {
				if err = r.ops.convert(send[s%w].k, grads[s%w].k); err == nil {
					err = r.ops.convert(send[s%w].v, grads[s%w].v)
				}
			}
			if err != nil {
				break
			}
		}
		// The return of stage s, then the fetch that reuses its buffer: every rank starts
		// them in this order.
		if b.busy(s) {
			if returned[s], err = queue.start(func(c comm.Comm) error { return b.giveBack(c, s, send[s%w], ret[s%2]) }); err != nil {
				break
			}
		}
		if n := s + w; n < ns {
			if fetched[n], err = queue.start(b.fetchPost(n, k, v, bufs[n%w])); err != nil {
				break
			}
		}
		if s > 0 && returned[s-1] != nil {
			if err = waitFor(returned[s-1]); err == nil {
				err = landed(s - 1)
			}
		}
	}
	if err == nil && ns > 0 && returned[ns-1] != nil {
		if err = waitFor(returned[ns-1]); err == nil {
			err = landed(ns - 1)
		}
	}
	if derr := queue.drain(); err == nil && derr != nil {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("balanced: %w", err)
	}
	if err := r.ops.convert(dq, dqAcc); err != nil {
		return err
	}
	if err := r.ops.convert(dk, acc.k); err != nil {
		return err
	}
	return r.ops.convert(dv, acc.v)
}

// RankCommBytes implements RankBytes: what rank sends in one pass: the all-to-alls of a
// Ulysses group (as the engine's: q, k, v, out and lse forward; dout, dq, dk, dv
// backward), and over the dispatch ring the forward sends its blocks to the ranks that
// fetch them (K and V); the backward sends them again and the fp32 dK/dV partials of the
// blocks it fetched back to their owners.
func (Balanced) RankCommBytes(pl *Plan, rank int, pass kernels.Pass) int64 {
	d := pl.Dispatch
	if d == nil {
		return 0
	}
	_, ring := pl.Coords(rank)
	row := int64(pl.HeadsKV * pl.Problem.HeadDim)
	var sent int64
	for s := range d.NumStages() {
		for _, x := range d.Sends(ring, s) {
			sent += int64(x.N)
		}
	}
	blk := int64(d.Block)
	es := int64(pl.Problem.DType.Size())
	kv := 2 * sent * blk * row * es
	back := 2 * int64(d.Fetched[ring]) * blk * row * 4
	var b int64
	if pass == kernels.Fwd || pass == kernels.FwdBwd {
		b += kv + ulyssesBytes(pl, false)
	}
	if pass == kernels.Bwd || pass == kernels.FwdBwd {
		b += kv + back + ulyssesBytes(pl, true)
	}
	return b
}

// CommBytes implements Method: the most any rank sends (the ranks send different
// amounts: RankCommBytes is each one's).
func (m Balanced) CommBytes(pl *Plan, pass kernels.Pass) int64 {
	var top int64
	for r := range pl.Config.Ranks {
		top = max(top, m.RankCommBytes(pl, r, pass))
	}
	return top
}
