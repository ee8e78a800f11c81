package cp

import (
	"context"
	"fmt"

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

// newKV2 is a double buffer of blocks (none when n is 1: no transfer happens).
func newKV2(a *arena, dt tensor.DType, shape []int, n int) ([2]kvPair, error) {
	var b [2]kvPair
	if n <= 1 {
		return b, nil
	}
	var err error
	if b[0], err = newKV(a, dt, shape); err != nil {
		return b, err
	}
	b[1], err = newKV(a, dt, shape)
	return b, err
}

func (p kvPair) list() []tensor.Tensor { return []tensor.Tensor{p.k, p.v} }

// wait collects an overlapped transfer (nil channel: none was started).
func wait(ch <-chan error) error {
	if ch == nil {
		return nil
	}
	return <-ch
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

// transfer starts an overlapped exchange: it first waits (in its own goroutine, not
// the compute's) until the compute enqueued so far is done, since the receive buffer
// was read by the step before the current one.
func (r *Run) transfer(fn func() error) (<-chan error, error) {
	if in, ok := r.ops.(inlineTransfers); ok { // a trace: in program order
		ch := make(chan error, 1)
		ch <- in.transfer(fn)
		return ch, nil
	}
	ready, err := r.ops.mark()
	if err != nil {
		return nil, fmt.Errorf("%s: marking the compute stream: %w", r.Plan.Method, err)
	}
	return async(func() error {
		if err := ready(); err != nil {
			return err
		}
		return fn()
	}), nil
}

// ringForward attends this rank's queries q ([Lr, hq, D], the ring shard after any
// all-to-all) to every ring shard's K/V as they travel around the double ring: the
// next inner step's transfer runs while the current step computes, and the outer ring's
// transfer runs during the whole inner ring. Partial results merge by log-sum-exp.
func (r *Run) ringForward(ctx context.Context, q, k, v, out, lse tensor.Tensor) error {
	pl, g := r.Plan, r.geometry()
	lr, hq, d := pl.Layout.Local, pl.HeadsQ, pl.Problem.HeadDim
	a := &arena{o: r.ops}
	defer a.release()
	merger, err := r.ops.merger(lr, hq, d)
	if err != nil {
		return err
	}
	defer merger.close()
	partOut, err := a.alloc(r.ops.partDType(pl.Problem.DType), lr, hq, d)
	if err != nil {
		return err
	}
	partLSE, err := a.alloc(tensor.FP32, hq, lr)
	if err != nil {
		return err
	}
	err = r.walkRing(a, k, v, func(o, i int, blk kvPair) error {
		m := pl.StepMask(g.rr, g.source(o, i))
		if len(m.Slices) == 0 {
			return nil
		}
		if err := r.Kernel.Forward(ctx, pl.stepProblem(m), q, blk.k, blk.v, partOut, partLSE); err != nil {
			return fmt.Errorf("%s: step (%d, %d): %w", pl.Method, o, i, err)
		}
		return merger.add(partOut, partLSE)
	}, nil, nil)
	if err != nil {
		return err
	}
	return merger.write(out, lse)
}

// ringBackward is the standard ring backward: K/V travel as in the forward, each step
// runs the kernel's backward with the final out and lse, dQ accumulates locally, and
// the dK/dV accumulators (fp32) travel with their K/V block, around the inner ring and
// then to the next window, until they come home.
func (r *Run) ringBackward(ctx context.Context, q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	pl, g := r.Plan, r.geometry()
	lr, hq, d := pl.Layout.Local, pl.HeadsQ, pl.Problem.HeadDim
	kvShape := k.Shape()
	a := &arena{o: r.ops}
	defer a.release()
	pdt := r.ops.partDType(pl.Problem.DType)
	dqAcc, err := a.alloc(r.ops.accDType(), lr, hq, d)
	if err != nil {
		return err
	}
	dqPart, err := a.alloc(pdt, lr, hq, d)
	if err != nil {
		return err
	}
	dPart, err := newKV(a, pdt, kvShape)
	if err != nil {
		return err
	}
	acc, err := newKV(a, tensor.FP32, kvShape)
	if err != nil {
		return err
	}
	var accRecv kvPair
	if g.ws > 1 || g.w > 1 {
		if accRecv, err = newKV(a, tensor.FP32, kvShape); err != nil {
			return err
		}
	}
	// hop passes the dK/dV accumulator to the next rank of c (after the compute that
	// wrote it) and takes the previous rank's.
	hop := func(name string, c comm.Comm, next, prev int) error {
		if err := r.ops.fence(); err != nil {
			return err
		}
		if err := exchange(c, next, prev, acc.list(), accRecv.list()); err != nil {
			return fmt.Errorf("%s: %s ring dK/dV: %w", pl.Method, name, err)
		}
		acc, accRecv = accRecv, acc
		return nil
	}
	err = r.walkRing(a, k, v, func(o, i int, blk kvPair) error {
		m := pl.StepMask(g.rr, g.source(o, i))
		if len(m.Slices) == 0 {
			return nil
		}
		err := r.Kernel.Backward(ctx, pl.stepProblem(m), q, blk.k, blk.v, out, lse, dout, dqPart, dPart.k, dPart.v)
		if err == nil {
			err = r.accumulateAll([]tensor.Tensor{dqAcc, acc.k, acc.v}, []tensor.Tensor{dqPart, dPart.k, dPart.v})
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
	if err != nil {
		return err
	}
	if err := r.ops.convert(dq, dqAcc); err != nil {
		return err
	}
	if err := r.ops.convert(dk, acc.k); err != nil {
		return err
	}
	return r.ops.convert(dv, acc.v)
}

// walkRing moves K/V around the double ring and calls step for every (outer o, inner i)
// position with the block present then: the next inner step's transfer runs while step
// computes, and the outer ring's transfer during the whole inner ring. afterInner runs
// after each inner step's transfer has landed, afterOuter after each outer one (nil: none).
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
		var outerDone <-chan error
		next := outerBuf[o%2]
		if o < g.w-1 {
			send := cur
			if outerDone, err = r.transfer(func() error {
				return exchange(r.outer, (g.a+1)%g.w, (g.a-1+g.w)%g.w, send.list(), next.list())
			}); err != nil {
				return err
			}
		}
		blk := cur
		for i := range g.ws {
			var innerDone <-chan error
			recv := innerBuf[i%2]
			if i < g.ws-1 {
				send := blk
				if innerDone, err = r.transfer(func() error {
					return exchange(r.inner, (g.b+1)%g.ws, (g.b-1+g.ws)%g.ws, send.list(), recv.list())
				}); err != nil {
					return err
				}
			}
			if err := step(o, i, blk); err != nil {
				_ = wait(innerDone)
				_ = wait(outerDone)
				return err
			}
			if err := wait(innerDone); err != nil {
				_ = wait(outerDone)
				return fmt.Errorf("%s: inner ring: %w", pl.Method, err)
			}
			blk = recv
			if afterInner != nil {
				if err := afterInner(); err != nil {
					_ = wait(outerDone)
					return err
				}
			}
		}
		if err := wait(outerDone); err != nil {
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

// accumulateAll adds each partial into its accumulator.
func (r *Run) accumulateAll(accs, parts []tensor.Tensor) error {
	for i := range accs {
		if err := r.ops.accumulate(accs[i], parts[i]); err != nil {
			return err
		}
	}
	return nil
}
