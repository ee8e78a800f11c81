package cp

import (
	"context"
	"fmt"
	"math"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// kvPair is a travelling block of keys and values (or their gradients).
type kvPair struct{ k, v tensor.Tensor }

func newKV(a *arena, dt tensor.DType, shape []int) (kvPair, error) {
	k, err := a.alloc(dt, shape...)
	if err != nil {
		return kvPair{}, err
	}
	v, err := a.alloc(dt, shape...)
	return kvPair{k, v}, err
}

// newKV2 is a double buffer of blocks (none when n is 1: no transfer happens), received
// whole before they are read (no fill).
func newKV2(a *arena, dt tensor.DType, shape []int, n int) ([2]kvPair, error) {
	var b [2]kvPair
	if n <= 1 {
		return b, nil
	}
	var err error
	if b[0], err = newKVScratch(a, dt, shape); err != nil {
		return b, err
	}
	b[1], err = newKVScratch(a, dt, shape)
	return b, err
}

// newKVScratch is newKV without the zero fill (arena.scratch), for blocks written whole
// before they are read.
func newKVScratch(a *arena, dt tensor.DType, shape []int) (kvPair, error) {
	k, err := a.scratch(dt, shape...)
	if err != nil {
		return kvPair{}, err
	}
	v, err := a.scratch(dt, shape...)
	return kvPair{k, v}, err
}

func (p kvPair) list() []tensor.Tensor { return []tensor.Tensor{p.k, p.v} }

// waitFor collects an overlapped transfer (nil: none was started).
func waitFor(w func() error) error {
	if w == nil {
		return nil
	}
	return w()
}

// ringGeometry is this rank's place on the double ring: window a of W, position b of
// ws ranks per window.
type ringGeometry struct{ rr, w, ws, a, b int }

func (r *Run) geometry() ringGeometry {
	w := r.Plan.Config.Windows
	ws := r.Plan.Config.Ring / w
	return ringGeometry{rr: r.R, w: w, ws: ws, a: r.R / ws, b: r.R % ws}
}

// source is the ring rank whose K/V block this rank holds at outer step o, inner step i.
func (g ringGeometry) source(o, i int) int {
	return ((g.a-o+g.w)%g.w)*g.ws + (g.b-i+g.ws)%g.ws
}

// liveSteps is how many of this rank's ring steps have keys to attend to (a non-empty
// sub-mask): 1 on a ring of one rank, and on a rank whose queries see only its own
// shard (a document mask whose documents this rank holds whole).
func (r *Run) liveSteps() int {
	pl, g := r.Plan, r.geometry()
	n := 0
	for o := range g.w {
		for i := range g.ws {
			if len(pl.StepMask(g.rr, g.source(o, i)).Slices) > 0 {
				n++
			}
		}
	}
	return n
}

// ringForward attends this rank's queries q ([Lr, hq, D], the ring shard after any
// all-to-all) to every ring shard's K/V as they travel around the double ring: the
// next inner step's transfer runs while the current step computes, and the outer ring's
// transfer runs during the whole inner ring. Partial results merge by log-sum-exp.
//
// A rank with one step that has keys (every rank of a ring of one: one rank, or
// Ulysses) has nothing to merge: the kernel writes out and lse itself, as it does alone,
// with no partial buffers, accumulators, merge or conversion around it. With more, the
// first partial goes straight into out and the last merge writes out and lse
// (stepMerge).
func (r *Run) ringForward(ctx context.Context, q, k, v, out, lse tensor.Tensor) error {
	pl, g := r.Plan, r.geometry()
	a := &arena{o: r.ops}
	defer a.release()
	live := r.liveSteps()
	var sm *stepMerge
	if live > 1 {
		var err error
		if sm, err = newStepMerge(r.ops, a, out, lse, live, r.ops.partDType(pl.Problem.DType)); err != nil {
			return err
		}
	}
	err := r.walkRing(a, k, v, func(o, i int, blk kvPair) error {
		m := pl.StepMask(g.rr, g.source(o, i))
		if len(m.Slices) == 0 {
			return nil
		}
		if live == 1 {
			if err := r.Kernel.Forward(ctx, pl.stepProblem(m), q, blk.k, blk.v, out, lse); err != nil {
				return fmt.Errorf("%s: step (%d, %d): %w", pl.Method, o, i, err)
			}
			return nil
		}
		po, plse := sm.next()
		if err := r.Kernel.Forward(ctx, pl.stepProblem(m), q, blk.k, blk.v, po, plse); err != nil {
			return fmt.Errorf("%s: step (%d, %d): %w", pl.Method, o, i, err)
		}
		return sm.add()
	}, nil, nil)
	if err == nil {
		switch live {
		case 0: // only padding rows, or keys nowhere: out = 0, lse = -inf
			if err = r.ops.fill(out, 0); err == nil {
				err = r.ops.fill(lse, math.Inf(-1))
			}
		case 1: // the kernel wrote them
		default: // the last merge wrote them
			err = sm.done()
		}
	}
	return r.settled(err)
}

// ringBackward is the standard ring backward: K/V travel as in the forward, each step
// runs the kernel's backward with the final out and lse, dQ accumulates locally, and
// the dK/dV accumulators (fp32) travel with their K/V block, around the inner ring and
// then to the next window, until they come home.
//
// What needs no accumulation is written by the kernel directly: dq on a rank with one
// step that has keys, and dk, dv too when nothing travels (a ring of one). Accumulators
// are not zero-filled: the first partial is copied in.
func (r *Run) ringBackward(ctx context.Context, q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	pl, g := r.Plan, r.geometry()
	kvShape := k.Shape()
	a := &arena{o: r.ops}
	defer a.release()
	pdt := r.ops.partDType(pl.Problem.DType)
	live := r.liveSteps()
	hops := g.ws > 1 || g.w > 1
	kvDirect := live == 1 && !hops
	var dqSum *stepSum
	var err error
	if live > 1 {
		if dqSum, err = newStepSum(r.ops, a, dq, live, pdt); err != nil {
			return err
		}
	}
	var dPart, acc, accRecv kvPair
	if !kvDirect {
		if dPart, err = newKVScratch(a, pdt, kvShape); err != nil {
			return err
		}
		if acc, err = newKVScratch(a, tensor.FP32, kvShape); err != nil {
			return err
		}
		if hops { // received whole at every hop
			if accRecv, err = newKVScratch(a, tensor.FP32, kvShape); err != nil {
				return err
			}
		}
	}
	// hop passes the dK/dV accumulator to the next rank of c, ordered after the compute
	// that wrote it, and takes the previous rank's; what follows is ordered after it (on
	// the device, with a stream-ordered communicator).
	hop := func(name string, c comm.Comm, next, prev int) error {
		wait, err := r.ops.startExchange(c, next, prev, acc.list(), accRecv.list())
		if err == nil {
			err = wait()
		}
		if err != nil {
			return fmt.Errorf("%s: %s ring dK/dV: %w", pl.Method, name, err)
		}
		acc, accRecv = accRecv, acc
		return nil
	}
	err = r.walkRing(a, k, v, func(o, i int, blk kvPair) error {
		m := pl.StepMask(g.rr, g.source(o, i))
		// The first step starts this rank's dK/dV accumulator (before any hop): a copy
		// of its partial, or zeros when it has no keys.
		first := o == 0 && i == 0 && !kvDirect
		if len(m.Slices) == 0 {
			if first {
				if err := r.ops.fill(acc.k, 0); err != nil {
					return err
				}
				return r.ops.fill(acc.v, 0)
			}
			return nil
		}
		dqOut, dkOut, dvOut := dq, dPart.k, dPart.v
		if live > 1 {
			dqOut = dqSum.next()
		}
		if kvDirect {
			dkOut, dvOut = dk, dv
		}
		err := r.Kernel.Backward(ctx, pl.stepProblem(m), q, blk.k, blk.v, out, lse, dout, dqOut, dkOut, dvOut)
		if err == nil && live > 1 {
			err = dqSum.add()
		}
		if err == nil && !kvDirect {
			if first {
				err = r.copyAll([]tensor.Tensor{acc.k, acc.v}, []tensor.Tensor{dPart.k, dPart.v})
			} else {
				err = r.accumulateAll([]tensor.Tensor{acc.k, acc.v}, []tensor.Tensor{dPart.k, dPart.v})
			}
		}
		if err != nil {
			return fmt.Errorf("%s: backward step (%d, %d): %w", pl.Method, o, i, err)
		}
		return nil
	}, func() error { // the accumulator follows its block to the next rank
		if g.ws == 1 {
			return nil
		}
		return hop("inner", r.inner, (g.b+1)%g.ws, (g.b-1+g.ws)%g.ws)
	}, func() error {
		if g.w == 1 {
			return nil
		}
		return hop("outer", r.outer, (g.a+1)%g.w, (g.a-1+g.w)%g.w)
	})
	if err == nil {
		switch live {
		case 0:
			err = r.ops.fill(dq, 0)
		case 1: // the kernel wrote dq
		default: // the last sum wrote dq
			err = dqSum.done()
		}
	}
	if err == nil && !kvDirect {
		if err = r.ops.convert(dk, acc.k); err == nil {
			err = r.ops.convert(dv, acc.v)
		}
	}
	return r.settled(err)
}

// walkRing moves K/V around the double ring and calls step for every (outer o, inner i)
// position with the block present then: the next inner step's transfer runs while step
// computes, and the outer ring's transfer during the whole inner ring. afterInner runs
// after each inner step's transfer has landed, afterOuter after each outer one (nil: none).
//
// A transfer is ordered after the compute enqueued before it (the step that last read
// its receive buffer), and the compute that uses what it received after it: on a
// stream-ordered communicator (comm.Ordered) both by events on the device, so no host
// thread waits in the loop; otherwise in a goroutine after a host wait.
func (r *Run) walkRing(a *arena, k, v tensor.Tensor, step func(o, i int, blk kvPair) error, afterInner, afterOuter func() error) error {
	pl, g := r.Plan, r.geometry()
	kvShape := k.Shape()
	outerBuf, err := newKV2(a, k.DType(), kvShape, g.w)
	if err != nil {
		return err
	}
	innerBuf, err := newKV2(a, k.DType(), kvShape, g.ws)
	if err != nil {
		return err
	}
	cur := kvPair{k, v}
	for o := range g.w {
		var outerDone func() error
		next := outerBuf[o%2]
		if o < g.w-1 {
			if outerDone, err = r.ops.startExchange(r.outer, (g.a+1)%g.w, (g.a-1+g.w)%g.w, cur.list(), next.list()); err != nil {
				return fmt.Errorf("%s: outer ring: %w", pl.Method, err)
			}
		}
		blk := cur
		for i := range g.ws {
			var innerDone func() error
			recv := innerBuf[i%2]
			if i < g.ws-1 {
				if innerDone, err = r.ops.startExchange(r.inner, (g.b+1)%g.ws, (g.b-1+g.ws)%g.ws, blk.list(), recv.list()); err != nil {
					_ = waitFor(outerDone)
					return fmt.Errorf("%s: inner ring: %w", pl.Method, err)
				}
			}
			if err := step(o, i, blk); err != nil {
				_ = waitFor(innerDone)
				_ = waitFor(outerDone)
				return err
			}
			if err := waitFor(innerDone); err != nil {
				_ = waitFor(outerDone)
				return fmt.Errorf("%s: inner ring: %w", pl.Method, err)
			}
			blk = recv
			if afterInner != nil {
				if err := afterInner(); err != nil {
					_ = waitFor(outerDone)
					return err
				}
			}
		}
		if err := waitFor(outerDone); err != nil {
			return fmt.Errorf("%s: outer ring: %w", pl.Method, err)
		}
		cur = next
		if afterOuter != nil {
			if err := afterOuter(); err != nil {
				return err
			}
		}
	}
	return nil
}

// copyAll converts each partial into its accumulator (the first partial of a sum).
func (r *Run) copyAll(accs, parts []tensor.Tensor) error {
	for i := range accs {
		if err := r.ops.convert(accs[i], parts[i]); err != nil {
			return err
		}
	}
	return nil
}

// accumulateAll adds each partial into its accumulator.
func (r *Run) accumulateAll(accs, parts []tensor.Tensor) error {
	for i := range accs {
		if err := r.ops.accumulate(accs[i], parts[i]); err != nil {
			return err
		}
	}
	return nil
}
