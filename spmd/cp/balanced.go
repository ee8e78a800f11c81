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
// to from the ranks that own them (each rank owns the K/V of its own query blocks), in
// stages of grouped sends and receives, each overlapping the previous stage's attention.
// The backward fetches the same blocks again and returns their dK/dV partials to their
// owners the same way, one stage behind, where the owner adds them up.
type Balanced struct{}

func init() { Register(Balanced{}) }

// Name is "balanced".
func (Balanced) Name() string { return "balanced" }

// Doc is a one-line description.
func (Balanced) Doc() string {
	return "blocks placed by mask area (equal work per rank); each rank fetches exactly the K/V blocks it attends to, staged p2p; dK/dV back to owners"
}

// Meshes implements Method: one mesh, 1 x N, with the user's block.
func (Balanced) Meshes(fixed Config) []Config {
	c := fixed
	c.Ulysses, c.Ring, c.Windows = 0, 0, 0
	return []Config{c}
}

// Plan validates the problem and computes the dispatch (Balance) with cfg.Block, or
// DefaultBlock.
func (Balanced) Plan(cfg Config, p kernels.Problem) (*Plan, error) {
	const method = "balanced"
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if len(p.HeadMasks) != 0 {
		return nil, fmt.Errorf("%s: per-head (block-sparse) masks are not supported by CP methods", method)
	}
	if p.Mask.SeqQ != p.Mask.SeqK {
		return nil, fmt.Errorf("%s: self-attention only: %d queries against %d keys", method, p.Mask.SeqQ, p.Mask.SeqK)
	}
	n := cfg.Ranks
	if n < 1 {
		return nil, fmt.Errorf("%s: %d ranks: need at least 1 (--ranks)", method, n)
	}
	if cfg.Block < 0 {
		return nil, fmt.Errorf("%s: block of %d tokens (--cp-block): use a positive size, or 0 for the default", method, cfg.Block)
	}
	if cfg.Block == 0 {
		cfg.Block = DefaultBlock(p.Mask.SeqQ, n)
	}
	d, err := Balance(p.Mask, n, cfg.Block)
	if err != nil {
		return nil, err
	}
	cfg.Ulysses, cfg.Ring, cfg.Windows = 1, n, 1
	lay := d.Layout()
	return &Plan{Method: method, Problem: p, Config: cfg, Layout: lay, Tokens: lay.Local,
		HeadsQ: p.HeadsQ, HeadsKV: p.HeadsKV, Dispatch: d}, nil
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

// busy says whether stage s moves anything for this rank (fetch: K/V; else gradients).
func (b *balancedRun) busy(s int) bool {
	if s < 0 || s >= b.d.NumStages() {
		return false
	}
	return len(b.d.Sends(b.me, s)) > 0 || len(b.d.RecvStage(b.me, s).Recv) > 0
}

// start starts a group of the given posts (nil: none to post) on the run's ring.
func (b *balancedRun) start(posts ...func(c comm.Comm) error) (func() error, error) {
	var todo []func(c comm.Comm) error
	for _, p := range posts {
		if p != nil {
			todo = append(todo, p)
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}
	c := b.r.ring
	return b.r.ops.startGroup(c, func() error {
		for _, p := range todo {
			if err := p(c); err != nil {
				return err
			}
		}
		return nil
	})
}

// settle waits for what the ring's ordered transfers issued (Run.settle for the rings).
func (b *balancedRun) settle() error {
	if oc, ok := b.r.ring.(comm.Ordered); ok && oc.StreamOrdered() {
		return oc.Settle()
	}
	return nil
}

// maxSlots is the largest stage buffer of this rank (receives), and the most of its own
// blocks returned in one stage (sends).
func (b *balancedRun) maxSlots() (recv, sent int) {
	for s := range b.d.NumStages() {
		recv = max(recv, b.d.RecvStage(b.me, s).Slots)
		n := 0
		for _, x := range b.d.Sends(b.me, s) {
			n += int(x.N)
		}
		sent = max(sent, n)
	}
	return recv, sent
}

// Forward implements Method: the local blocks' attention overlaps stage 0's fetch, each
// stage's attention overlaps the next stage's fetch; partials merge by log-sum-exp.
func (Balanced) Forward(ctx context.Context, r *Run, q, k, v, out, lse tensor.Tensor) error {
	b, err := newBalancedRun(r)
	if err != nil {
		return err
	}
	pl, d := r.Plan, b.d
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
	recvSlots, _ := b.maxSlots()
	kvShape := append([]int{recvSlots * d.Block}, k.Shape()[1:]...)
	bufs, err := newKV2(a, k.DType(), kvShape, 2)
	if err != nil {
		return err
	}
	fetch := func(s int) (func() error, error) {
		if !b.busy(s) {
			return nil, nil
		}
		return b.start(func(c comm.Comm) error { return b.fetch(c, s, k, v, bufs[s%2]) })
	}
	attend := func(m mask.Mask, kk, vv tensor.Tensor, what string) error {
		if len(m.Slices) == 0 {
			return nil
		}
		if err := r.Kernel.Forward(ctx, pl.stepProblem(m), q, kk, vv, partOut, partLSE); err != nil {
			return fmt.Errorf("balanced: %s: %w", what, err)
		}
		return merger.add(partOut, partLSE)
	}
	wait, err := fetch(0)
	if err != nil {
		return fmt.Errorf("balanced: stage 0: %w", err)
	}
	err = attend(pl.StepMask(b.me, b.me), k, v, "local blocks")
	for s := 0; err == nil && s < d.NumStages(); s++ {
		if err = waitFor(wait); err != nil {
			wait = nil
			err = fmt.Errorf("balanced: stage %d: %w", s, err)
			break
		}
		if wait, err = fetch(s + 1); err != nil {
			err = fmt.Errorf("balanced: stage %d: %w", s+1, err)
			break
		}
		rows, m := pl.stageMask(b.me, s)
		if rows == 0 {
			continue
		}
		var kk, vv tensor.Tensor
		if kk, err = rowsOf(bufs[s%2].k, 0, rows); err == nil {
			vv, err = rowsOf(bufs[s%2].v, 0, rows)
		}
		if err == nil {
			err = attend(m, kk, vv, fmt.Sprintf("stage %d", s))
		}
	}
	if werr := waitFor(wait); err == nil && werr != nil {
		err = fmt.Errorf("balanced: %w", werr)
	}
	if err != nil {
		return err
	}
	if err := b.settle(); err != nil {
		return fmt.Errorf("balanced: %w", err)
	}
	return merger.write(out, lse)
}

// Backward implements Method: the same fetches as the forward; each stage's kernel
// backward writes the fetched blocks' dK/dV partials, which go back to their owners
// during the next stage's compute (together with the fetch after it), and the owner adds
// what comes back into its fp32 accumulators. dQ accumulates locally.
func (Balanced) Backward(ctx context.Context, r *Run, q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	b, err := newBalancedRun(r)
	if err != nil {
		return err
	}
	pl, d := r.Plan, b.d
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
	recvSlots, sentSlots := b.maxSlots()
	stageShape := append([]int{recvSlots * d.Block}, tail...)
	bufs, err := newKV2(a, k.DType(), stageShape, 2)
	if err != nil {
		return err
	}
	grads, err := newKV2(a, pdt, stageShape, 2) // the kernel's partials per stage
	if err != nil {
		return err
	}
	send := grads // what returns: fp32
	if pdt != tensor.FP32 {
		if send, err = newKV2(a, tensor.FP32, stageShape, 2); err != nil {
			return err
		}
	}
	ret, err := newKV(a, tensor.FP32, append([]int{sentSlots * d.Block}, tail...))
	if err != nil {
		return err
	}
	// step s's group: the fetch of stage s and the return of stage s-2's gradients (the
	// previous stage's are being computed while it runs).
	step := func(s int) (func() error, error) {
		var f, g func(c comm.Comm) error
		if b.busy(s) {
			f = func(c comm.Comm) error { return b.fetch(c, s, k, v, bufs[s%2]) }
		}
		if b.busy(s - 2) {
			g = func(c comm.Comm) error { return b.giveBack(c, s-2, send[s%2], ret) }
		}
		return b.start(f, g)
	}
	// landed adds the returned partials of stage s into the owner's accumulators.
	landed := func(s int) error {
		if !b.busy(s) {
			return nil
		}
		at := 0
		for _, x := range d.Sends(b.me, s) {
			for i, pair := range [][2]tensor.Tensor{{acc.k, ret.k}, {acc.v, ret.v}} {
				dst, err := b.rows(pair[0], int(x.Slot), int(x.N))
				if err != nil {
					return err
				}
				src, err := b.rows(pair[1], at, int(x.N))
				if err != nil {
					return err
				}
				if err := r.ops.accumulate(dst, src); err != nil {
					return fmt.Errorf("balanced: gradient %d of stage %d: %w", i, s, err)
				}
			}
			at += int(x.N)
		}
		return nil
	}
	compute := func(m mask.Mask, kk, vv, gk, gv tensor.Tensor, what string) error {
		if len(m.Slices) == 0 {
			return nil
		}
		err := r.Kernel.Backward(ctx, pl.stepProblem(m), q, kk, vv, out, lse, dout, dqPart, gk, gv)
		if err == nil {
			err = r.ops.accumulate(dqAcc, dqPart)
		}
		if err != nil {
			return fmt.Errorf("balanced: backward %s: %w", what, err)
		}
		return nil
	}
	ns := d.NumStages()
	wait, err := step(0)
	if err != nil {
		return fmt.Errorf("balanced: stage 0: %w", err)
	}
	m := pl.StepMask(b.me, b.me)
	err = compute(m, k, v, dLocal.k, dLocal.v, "local blocks")
	if err == nil && len(m.Slices) > 0 {
		err = r.accumulateAll(acc.list(), dLocal.list())
	}
	// Step s (s = 0..ns+1) waits for group s (fetch s, return s-2), then starts group
	// s+1, then computes stage s.
	for s := 0; err == nil && s < ns+2; s++ {
		if err = waitFor(wait); err != nil {
			wait = nil
			break
		}
		if err = landed(s - 2); err != nil {
			break
		}
		if wait, err = step(s + 1); err != nil {
			break
		}
		if s >= ns {
			continue
		}
		rows, m := pl.stageMask(b.me, s)
		if rows == 0 || len(m.Slices) == 0 {
			continue
		}
		var views [4]tensor.Tensor
		for i, t := range []tensor.Tensor{bufs[s%2].k, bufs[s%2].v, grads[s%2].k, grads[s%2].v} {
			if views[i], err = rowsOf(t, 0, rows); err != nil {
				break
			}
		}
		if err == nil {
			err = compute(m, views[0], views[1], views[2], views[3], fmt.Sprintf("stage %d", s))
		}
		if err == nil && pdt != tensor.FP32 {
			// The return of stage s goes out from send[(s+2)%2] = send[s%2].
			if err = r.ops.convert(send[s%2].k, grads[s%2].k); err == nil {
				err = r.ops.convert(send[s%2].v, grads[s%2].v)
			}
		}
	}
	if werr := waitFor(wait); err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		return fmt.Errorf("balanced: %w", err)
	}
	if err := b.settle(); err != nil {
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

// RankCommBytes implements RankBytes: what rank sends in one pass: the forward sends its
// blocks to the ranks that fetch them (K and V); the backward sends them again and the
// fp32 dK/dV partials of the blocks it fetched back to their owners.
func (Balanced) RankCommBytes(pl *Plan, rank int, pass kernels.Pass) int64 {
	d := pl.Dispatch
	if d == nil {
		return 0
	}
	row := int64(pl.HeadsKV * pl.Problem.HeadDim)
	var sent int64
	for s := range d.NumStages() {
		for _, x := range d.Sends(rank, s) {
			sent += int64(x.N)
		}
	}
	blk := int64(d.Block)
	kv := 2 * sent * blk * row * int64(pl.Problem.DType.Size())
	back := 2 * int64(d.Fetched[rank]) * blk * row * 4
	var b int64
	if pass == kernels.Fwd || pass == kernels.FwdBwd {
		b += kv
	}
	if pass == kernels.Bwd || pass == kernels.FwdBwd {
		b += kv + back
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
