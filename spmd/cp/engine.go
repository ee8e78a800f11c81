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

var fwdNames = []string{"q", "k", "v", "out", "lse"}
var bwdNames = []string{"q", "k", "v", "out", "lse", "dout", "dq", "dk", "dv"}

// Forward implements Method.
func (engine) Forward(ctx context.Context, r *Run, q, k, v, out, lse tensor.Tensor) error {
	hs, err := hosts(fwdNames, q, k, v, out, lse)
	if err != nil {
		return err
	}
	pl := r.Plan
	u := pl.Config.Ulysses
	if u == 1 {
		r.saved = nil
		return r.ringForward(ctx, hs[0], hs[1], hs[2], hs[3], hs[4])
	}
	// Sequence shards -> head shards: after the all-to-all this rank holds its ring
	// shard (the group's tokens in group order) for its group of heads.
	qh, err := r.toHeads("q", hs[0], false)
	if err != nil {
		return err
	}
	kh, err := r.toHeads("k", hs[1], pl.ReplicateKV)
	if err != nil {
		return err
	}
	vh, err := r.toHeads("v", hs[2], pl.ReplicateKV)
	if err != nil {
		return err
	}
	lr := pl.Layout.Local
	outh := tensor.NewHost(hs[3].DType(), lr, pl.HeadsQ, pl.Problem.HeadDim)
	lseh := tensor.NewHost(tensor.FP32, pl.HeadsQ, lr)
	if err := r.ringForward(ctx, qh, kh, vh, outh, lseh); err != nil {
		return err
	}
	r.saved = &saved{q: q, qh: qh, kh: kh, vh: vh, outh: outh, lseh: lseh}
	// Head shards -> sequence shards.
	if err := r.fromHeads("out", outh, hs[3], false); err != nil {
		return err
	}
	back := tensor.NewHost(tensor.FP32, pl.Problem.HeadsQ, pl.Tokens)
	if err := r.ulysses.AllToAll(lseOut(lseh, u), back); err != nil {
		return fmt.Errorf("%s: all-to-all of lse: %w", pl.Method, err)
	}
	return convert(hs[4], back)
}

// toHeads is the all-to-all from [T, H, D] sequence shards to [u*T, H/u, D] head shards.
func (r *Run) toHeads(name string, x *tensor.Host, replicate bool) (*tensor.Host, error) {
	send := headsOut(x, r.Plan.Config.Ulysses, replicate)
	recv := tensor.NewHost(send.DType(), send.Shape()...)
	if err := r.ulysses.AllToAll(send, recv); err != nil {
		return nil, fmt.Errorf("%s: all-to-all of %s: %w", r.Plan.Method, name, err)
	}
	return recv, nil
}

// fromHeads is the all-to-all back from head shards xh to the sequence shard x.
func (r *Run) fromHeads(name string, xh, x *tensor.Host, replicate bool) error {
	recv := tensor.NewHost(xh.DType(), xh.Shape()...)
	if err := r.ulysses.AllToAll(xh, recv); err != nil {
		return fmt.Errorf("%s: all-to-all of %s: %w", r.Plan.Method, name, err)
	}
	headsIn(recv, x, r.Plan.Config.Ulysses, replicate)
	return nil
}

// Backward implements Method.
func (engine) Backward(ctx context.Context, r *Run, q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	hs, err := hosts(bwdNames, q, k, v, out, lse, dout, dq, dk, dv)
	if err != nil {
		return err
	}
	pl := r.Plan
	if pl.Config.Ulysses == 1 {
		return r.ringBackward(ctx, hs[0], hs[1], hs[2], hs[3], hs[4], hs[5], hs[6], hs[7], hs[8])
	}
	s := r.saved
	if s == nil || s.q != q {
		return fmt.Errorf("%s: backward needs the forward of the same q on this run first", pl.Method)
	}
	doh, err := r.toHeads("dout", hs[5], false)
	if err != nil {
		return err
	}
	dt := pl.Problem.DType
	dqh := tensor.NewHost(dt, s.qh.Shape()...)
	dkh := tensor.NewHost(dt, s.kh.Shape()...)
	dvh := tensor.NewHost(dt, s.vh.Shape()...)
	if err := r.ringBackward(ctx, s.qh, s.kh, s.vh, s.outh, s.lseh, doh, dqh, dkh, dvh); err != nil {
		return err
	}
	if err := r.fromHeads("dq", dqh, hs[6], false); err != nil {
		return err
	}
	if err := r.fromHeads("dk", dkh, hs[7], pl.ReplicateKV); err != nil {
		return err
	}
	return r.fromHeads("dv", dvh, hs[8], pl.ReplicateKV)
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
	u, r, w := int64(c.Ulysses), int64(c.Ring), int64(c.Windows)
	ws := r / w
	es := int64(pl.Problem.DType.Size())
	t, lr, d := int64(pl.Tokens), int64(pl.Layout.Local), int64(pl.Problem.HeadDim)
	hq, hkv := int64(pl.HeadsQ), int64(pl.HeadsKV)
	qBlock, kvBlock := t*hq*d*es, t*hkv*d*es // one all-to-all block
	ringKV := (r - 1) * 2 * lr * hkv * d * es
	if !backward {
		// q, k, v in; out and lse back.
		return (u-1)*(2*qBlock+2*kvBlock+hq*t*4) + ringKV
	}
	var hops int64
	if ws > 1 {
		hops += w * ws
	}
	if w > 1 {
		hops += w
	}
	// dout in; dq, dk, dv back.
	return (u-1)*(2*qBlock+2*kvBlock) + ringKV + hops*2*lr*hkv*d*4
}
