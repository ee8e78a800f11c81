package cp

import (
	"context"
	"fmt"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// engine is Ulysses around a double ring: the shared Forward, Backward and CommBytes
// of ring-p2p, ulysses, usp and loongtrain.
type engine struct{}

// Forward implements Method.
func (engine) Forward(ctx context.Context, r *Run, q, k, v, out, lse tensor.Tensor) error {
	r.dropSaved()
	if r.Plan.Config.Ulysses == 1 {
		return r.ringForward(ctx, q, k, v, out, lse)
	}
	return r.headsForward(q, k, v, out, lse, func(q, k, v, out, lse tensor.Tensor) error {
		return r.ringForward(ctx, q, k, v, out, lse)
	})
}

// headsForward is the Ulysses wrapper of the engine and of balanced past one node: it
// turns the sequence shards q, k, v into head shards, runs core on them (writing the
// head shards' out and lse), turns out and lse back into sequence shards, and saves the
// head shards on r for headsBackward.
func (r *Run) headsForward(q, k, v, out, lse tensor.Tensor, core func(q, k, v, out, lse tensor.Tensor) error) error {
	pl := r.Plan
	u := pl.Config.Ulysses
	s := &saved{q: q, a: &arena{o: r.ops}}
	ok := false
	defer func() {
		if !ok {
			s.a.release()
		}
	}()
	// Sequence shards -> head shards: after the all-to-all this rank holds its ring
	// shard (the group's tokens in group order) for its group of heads.
	var err error
	if s.qh, err = r.toHeads(s.a, "q", q, false); err != nil {
		return err
	}
	if s.kh, err = r.toHeads(s.a, "k", k, pl.ReplicateKV); err != nil {
		return err
	}
	if s.vh, err = r.toHeads(s.a, "v", v, pl.ReplicateKV); err != nil {
		return err
	}
	lr := pl.Layout.Local
	// Every buffer below is written whole before it is read (by the core, a row copy
	// or an all-to-all): none is zero-filled.
	if s.outh, err = s.a.scratch(out.DType(), lr, pl.HeadsQ, pl.Problem.HeadDim); err != nil {
		return err
	}
	if s.lseh, err = s.a.scratch(tensor.FP32, pl.HeadsQ, lr); err != nil {
		return err
	}
	if err := core(s.qh, s.kh, s.vh, s.outh, s.lseh); err != nil {
		return err
	}
	ok = true
	r.saved = s
	// Head shards -> sequence shards.
	if err := r.fromHeads("out", s.outh, out, false); err != nil {
		return err
	}
	tmp := &arena{o: r.ops}
	defer tmp.release()
	send, err := r.ops.lseOut(s.lseh, u)
	if err != nil {
		return err
	}
	tmp.keep(send)
	back, err := tmp.scratch(tensor.FP32, pl.Problem.HeadsQ, pl.Tokens)
	if err != nil {
		return err
	}
	if err := r.ops.fence(); err != nil {
		return err
	}
	if err := r.ulysses.AllToAll(send, back); err != nil {
		return fmt.Errorf("%s: all-to-all of lse: %w", pl.Method, err)
	}
	return r.ops.convert(lse, back)
}

// toHeads is the all-to-all from [T, H, D] sequence shards to [u*T, H/u, D] head shards,
// allocated in a.
func (r *Run) toHeads(a *arena, name string, x tensor.Tensor, replicate bool) (tensor.Tensor, error) {
	tmp := &arena{o: r.ops}
	defer tmp.release()
	send, err := r.ops.headsOut(x, r.Plan.Config.Ulysses, replicate)
	if err != nil {
		return nil, err
	}
	tmp.keep(send)
	recv, err := a.scratch(send.DType(), send.Shape()...)
	if err != nil {
		return nil, err
	}
	if err := r.ops.fence(); err != nil {
		return nil, err
	}
	if err := r.ulysses.AllToAll(send, recv); err != nil {
		return nil, fmt.Errorf("%s: all-to-all of %s: %w", r.Plan.Method, name, err)
	}
	return recv, nil
}

// fromHeads is the all-to-all back from head shards xh to the sequence shard x.
func (r *Run) fromHeads(name string, xh, x tensor.Tensor, replicate bool) error {
	tmp := &arena{o: r.ops}
	defer tmp.release()
	recv, err := tmp.scratch(xh.DType(), xh.Shape()...)
	if err != nil {
		return err
	}
	if err := r.ops.fence(); err != nil {
		return err
	}
	if err := r.ulysses.AllToAll(xh, recv); err != nil {
		return fmt.Errorf("%s: all-to-all of %s: %w", r.Plan.Method, name, err)
	}
	return r.ops.headsIn(recv, x, r.Plan.Config.Ulysses, replicate)
}

// Backward implements Method.
func (engine) Backward(ctx context.Context, r *Run, q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	if r.Plan.Config.Ulysses == 1 {
		return r.ringBackward(ctx, q, k, v, out, lse, dout, dq, dk, dv)
	}
	return r.headsBackward(q, dout, dq, dk, dv, func(q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
		return r.ringBackward(ctx, q, k, v, out, lse, dout, dq, dk, dv)
	})
}

// headsBackward is headsForward's backward: it turns dout into head shards, runs core on
// the head shards the forward of the same q saved, and turns dq, dk, dv back.
func (r *Run) headsBackward(q, dout, dq, dk, dv tensor.Tensor, core func(q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error) error {
	pl := r.Plan
	s := r.saved
	if s == nil || s.q != q {
		return fmt.Errorf("%s: backward needs the forward of the same q on this run first", pl.Method)
	}
	a := &arena{o: r.ops}
	defer a.release()
	doh, err := r.toHeads(a, "dout", dout, false)
	if err != nil {
		return err
	}
	dt := pl.Problem.DType
	dqh, err := a.scratch(dt, s.qh.Shape()...) // the core writes dq, dk, dv whole
	if err != nil {
		return err
	}
	dkh, err := a.scratch(dt, s.kh.Shape()...)
	if err != nil {
		return err
	}
	dvh, err := a.scratch(dt, s.vh.Shape()...)
	if err != nil {
		return err
	}
	if err := core(s.qh, s.kh, s.vh, s.outh, s.lseh, doh, dqh, dkh, dvh); err != nil {
		return err
	}
	if err := r.fromHeads("dq", dqh, dq, false); err != nil {
		return err
	}
	if err := r.fromHeads("dk", dkh, dk, pl.ReplicateKV); err != nil {
		return err
	}
	return r.fromHeads("dv", dvh, dv, pl.ReplicateKV)
}

// CommBytes implements Method: the all-to-alls send (U-1)/U of each tensor they move,
// the ring sends R-1 K/V blocks, and the backward's fp32 dK/dV accumulators take W*ws
// inner hops (when ws > 1) and W outer hops (when W > 1).
func (engine) CommBytes(pl *Plan, pass kernels.Pass) int64 {
	var b int64
	if pass == kernels.Fwd || pass == kernels.FwdBwd {
		b += engineBytes(pl, false)
	}
	if pass == kernels.Bwd || pass == kernels.FwdBwd {
		b += engineBytes(pl, true)
	}
	return b
}

func engineBytes(pl *Plan, backward bool) int64 {
	c := pl.Config
	r, w := int64(c.Ring), int64(c.Windows)
	ws := r / w
	es := int64(pl.Problem.DType.Size())
	lr, d, hkv := int64(pl.Layout.Local), int64(pl.Problem.HeadDim), int64(pl.HeadsKV)
	ringKV := (r - 1) * 2 * lr * hkv * d * es
	if !backward {
		return ulyssesBytes(pl, false) + ringKV
	}
	var hops int64
	if ws > 1 {
		hops += w * ws
	}
	if w > 1 {
		hops += w
	}
	return ulyssesBytes(pl, true) + ringKV + hops*2*lr*hkv*d*4
}

// ulyssesBytes is what one rank sends in the all-to-alls of a pass of headsForward
// (q, k, v in; out and lse back) or headsBackward (dout in; dq, dk, dv back): (U-1)/U
// of each tensor, one block of it to each other rank of its Ulysses group.
func ulyssesBytes(pl *Plan, backward bool) int64 {
	u := int64(pl.Config.Ulysses)
	es := int64(pl.Problem.DType.Size())
	t, d := int64(pl.Tokens), int64(pl.Problem.HeadDim)
	hq, hkv := int64(pl.HeadsQ), int64(pl.HeadsKV)
	qBlock, kvBlock := t*hq*d*es, t*hkv*d*es // one all-to-all block
	if !backward {
		return (u - 1) * (2*qBlock + 2*kvBlock + hq*t*4)
	}
	return (u - 1) * (2*qBlock + 2*kvBlock)
}
