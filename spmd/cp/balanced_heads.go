package cp

import (
	"fmt"

	"github.com/longca/longca/tensor"
)

// balanced past one node (BalancedUlysses > 1): the engine's Ulysses all-to-alls (toHeads,
// fromHeads, the lse's) around the dispatch, which then runs over the ring of N/U ranks
// on the head shards: each holds its ring rank's blocks (Local rows) for H/U heads.

// headsForward turns q, k, v into head shards, runs core on them (writing the head
// shards' out and lse) and turns out and lse back, saving the head shards for the
// backward as the engine does.
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

// headsBackward turns dout into head shards, runs core on the head shards the forward
// of the same q saved, and turns dq, dk, dv back.
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
	dqh, err := a.scratch(dt, s.qh.Shape()...)
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
