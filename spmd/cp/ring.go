package cp

import (
	"context"
	"fmt"

	"github.com/longca/longca/tensor"
)

// kvPair is a travelling block of keys and values (or their gradients).
type kvPair struct{ k, v *tensor.Host }

func newKV(dt tensor.DType, shape []int) kvPair {
	return kvPair{tensor.NewHost(dt, shape...), tensor.NewHost(dt, shape...)}
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

// ringForward attends this rank's queries q ([Lr, hq, D], the ring shard after any
// all-to-all) to every ring shard's K/V as they travel around the double ring: the
// next inner step's transfer runs while the current step computes, and the outer ring's
// transfer runs during the whole inner ring. Partial results merge by log-sum-exp.
func (r *Run) ringForward(ctx context.Context, q, k, v, out, lse *tensor.Host) error {
	pl, g := r.Plan, r.geometry()
	lr, hq, d := pl.Layout.Local, pl.HeadsQ, pl.Problem.HeadDim
	kvShape := k.Shape()
	merger := NewLSEMerger(lr, hq, d)
	partOut := tensor.NewHost(tensor.FP32, lr, hq, d)
	partLSE := tensor.NewHost(tensor.FP32, hq, lr)
	outerBuf := [2]kvPair{newKV(k.DType(), kvShape), newKV(k.DType(), kvShape)}
	innerBuf := [2]kvPair{newKV(k.DType(), kvShape), newKV(k.DType(), kvShape)}
	cur := kvPair{k, v}
	for o := range g.w {
		var outerDone <-chan error
		next := outerBuf[o%2]
		if o < g.w-1 {
			send := cur
			outerDone = async(func() error {
				return exchange(r.outer, (g.a+1)%g.w, (g.a-1+g.w)%g.w, send.list(), next.list())
			})
		}
		blk := cur
		for i := range g.ws {
			var innerDone <-chan error
			recv := innerBuf[i%2]
			if i < g.ws-1 {
				send := blk
				innerDone = async(func() error {
					return exchange(r.inner, (g.b+1)%g.ws, (g.b-1+g.ws)%g.ws, send.list(), recv.list())
				})
			}
			m := pl.StepMask(g.rr, g.source(o, i))
			if len(m.Slices) > 0 {
				if err := r.Kernel.Forward(ctx, pl.stepProblem(m), q, blk.k, blk.v, partOut, partLSE); err != nil {
					return fmt.Errorf("%s: step (%d, %d): %w", pl.Method, o, i, err)
				}
				if err := merger.Add(partOut, partLSE); err != nil {
					return err
				}
			}
			if err := wait(innerDone); err != nil {
				return fmt.Errorf("%s: inner ring: %w", pl.Method, err)
			}
			blk = recv
		}
		if err := wait(outerDone); err != nil {
			return fmt.Errorf("%s: outer ring: %w", pl.Method, err)
		}
		cur = next
	}
	return merger.Write(out, lse)
}

// ringBackward is the standard ring backward: K/V travel as in the forward, each step
// runs the kernel's backward with the final out and lse, dQ accumulates locally, and
// the dK/dV accumulators (fp32) travel with their K/V block, around the inner ring and
// then to the next window, until they come home.
func (r *Run) ringBackward(ctx context.Context, q, k, v, out, lse, dout, dq, dk, dv *tensor.Host) error {
	pl, g := r.Plan, r.geometry()
	lr, hq, d := pl.Layout.Local, pl.HeadsQ, pl.Problem.HeadDim
	kvShape := k.Shape()
	dqAcc := make([]float64, lr*hq*d)
	dqPart := tensor.NewHost(tensor.FP32, lr, hq, d)
	dPart := newKV(tensor.FP32, kvShape)
	acc, accRecv := newKV(tensor.FP32, kvShape), newKV(tensor.FP32, kvShape)
	outerBuf := [2]kvPair{newKV(k.DType(), kvShape), newKV(k.DType(), kvShape)}
	innerBuf := [2]kvPair{newKV(k.DType(), kvShape), newKV(k.DType(), kvShape)}
	cur := kvPair{k, v}
	for o := range g.w {
		var outerDone <-chan error
		next := outerBuf[o%2]
		if o < g.w-1 {
			send := cur
			outerDone = async(func() error {
				return exchange(r.outer, (g.a+1)%g.w, (g.a-1+g.w)%g.w, send.list(), next.list())
			})
		}
		blk := cur
		for i := range g.ws {
			var innerDone <-chan error
			recv := innerBuf[i%2]
			if i < g.ws-1 {
				send := blk
				innerDone = async(func() error {
					return exchange(r.inner, (g.b+1)%g.ws, (g.b-1+g.ws)%g.ws, send.list(), recv.list())
				})
			}
			m := pl.StepMask(g.rr, g.source(o, i))
			if len(m.Slices) > 0 {
				err := r.Kernel.Backward(ctx, pl.stepProblem(m), q, blk.k, blk.v, out, lse, dout, dqPart, dPart.k, dPart.v)
				if err != nil {
					return fmt.Errorf("%s: backward step (%d, %d): %w", pl.Method, o, i, err)
				}
				addInto(dqAcc, dqPart)
				accumulate(acc.k, dPart.k)
				accumulate(acc.v, dPart.v)
			}
			if err := wait(innerDone); err != nil {
				return fmt.Errorf("%s: inner ring: %w", pl.Method, err)
			}
			blk = recv
			if g.ws > 1 { // the accumulator follows its block to the next rank
				if err := exchange(r.inner, (g.b+1)%g.ws, (g.b-1+g.ws)%g.ws, acc.list(), accRecv.list()); err != nil {
					return fmt.Errorf("%s: inner ring dK/dV: %w", pl.Method, err)
				}
				acc, accRecv = accRecv, acc
			}
		}
		if err := wait(outerDone); err != nil {
			return fmt.Errorf("%s: outer ring: %w", pl.Method, err)
		}
		cur = next
		if g.w > 1 {
			if err := exchange(r.outer, (g.a+1)%g.w, (g.a-1+g.w)%g.w, acc.list(), accRecv.list()); err != nil {
				return fmt.Errorf("%s: outer ring dK/dV: %w", pl.Method, err)
			}
			acc, accRecv = accRecv, acc
		}
	}
	dq.SetFloat64s(dqAcc)
	if err := convert(dk, acc.k); err != nil {
		return err
	}
	return convert(dv, acc.v)
}

// accumulate adds src into dst in dst's precision (an fp32 accumulator).
func accumulate(dst, src *tensor.Host) {
	for i := range dst.Numel() {
		dst.Set(i, dst.At(i)+src.At(i))
	}
}
