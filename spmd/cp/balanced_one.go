package cp

import (
	"context"
	"fmt"
	"math"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// The one-stage path of balanced (every fetch in one piece: --cp-stages 1, the default
// up to 8 ranks): the rank's own K/V are copied to the head of one buffer and what it
// fetches lands after them, so one kernel call over the buffer writes out and lse (dq in
// the backward) directly: no partial outputs and no log-sum-exp merges, whose cost (three
// passes over the rank's whole output per stage) is more than the fetch they would hide
// when it moves inside a node. Only the fetch is exposed.

// oneMask is the sub-mask of rank r's queries against its own blocks followed by its
// stage-0 fetch, rows rows in all.
func (pl *Plan) oneMask(r int) (rows int, m mask.Mask) {
	d := pl.Dispatch
	lr := pl.Layout.Local
	rows = lr + d.RecvStage(r, 0).Slots*d.Block
	return rows, pl.cached(r, -2-d.NumStages(), func() mask.Mask {
		keys := append(append([]Piece(nil), pl.Layout.Shards[r]...), shiftPieces(d.stageKeys(r, 0), lr)...)
		return SubMask(pl.Problem.Mask, pl.Layout.Shards[r], lr, keys, rows)
	})
}

// oneBuffer is the K/V buffer of the one-stage path (own rows copied in) and the group
// that fills the rest, started; k and v themselves when the rank fetches nothing.
func (b *balancedRun) oneBuffer(a *arena, k, v tensor.Tensor, rows int) (kvPair, func() error, error) {
	lr := b.r.Plan.Layout.Local
	if rows == lr {
		wait, err := (&balancedQueue{b: b}).start(b.fetchPost(0, k, v, kvPair{}))
		return kvPair{k, v}, wait, err
	}
	buf, err := newKVScratch(a, k.DType(), append([]int{rows}, k.Shape()[1:]...))
	if err != nil {
		return buf, nil, err
	}
	var rest kvPair
	if rest.k, err = rowsOf(buf.k, lr, rows); err == nil {
		rest.v, err = rowsOf(buf.v, lr, rows)
	}
	if err != nil {
		return buf, nil, err
	}
	wait, err := (&balancedQueue{b: b}).start(b.fetchPost(0, k, v, rest))
	if err != nil {
		return buf, nil, err
	}
	head, err := b.stageKV(buf, lr)
	if err == nil {
		if err = b.r.ops.convert(head.k, k); err == nil {
			err = b.r.ops.convert(head.v, v)
		}
	}
	if err != nil {
		_ = waitFor(wait)
		return buf, nil, err
	}
	return buf, wait, nil
}

// settleRing waits for what the ring's ordered transfers issued.
func (b *balancedRun) settleRing() error {
	if oc, ok := b.r.ring.(comm.Ordered); ok && oc.StreamOrdered() {
		return oc.Settle()
	}
	return nil
}

// fetchOne is how both one-stage passes start: the rank's sub-mask (rows keys) and its
// K/V buffer (in a), once the fetch into it has landed.
func (b *balancedRun) fetchOne(a *arena, k, v tensor.Tensor) (rows int, m mask.Mask, kv kvPair, err error) {
	rows, m = b.r.Plan.oneMask(b.me)
	kv, wait, err := b.oneBuffer(a, k, v, rows)
	if err != nil {
		return 0, m, kv, fmt.Errorf("balanced: %w", err)
	}
	if err := waitFor(wait); err != nil {
		return 0, m, kv, fmt.Errorf("balanced: fetch: %w", err)
	}
	return rows, m, kv, nil
}

func (b *balancedRun) forwardOne(ctx context.Context, q, k, v, out, lse tensor.Tensor) error {
	r, pl := b.r, b.r.Plan
	a := &arena{o: r.ops}
	defer a.release()
	_, m, kv, err := b.fetchOne(a, k, v)
	if err != nil {
		return err
	}
	if dl := pl.docsOf(b.me); dl != nil { // packed documents (balanced_thd.go)
		if kv, err = b.docsKV(a, kv, dl); err != nil {
			return err
		}
		m = dl.Mask
	}
	if len(m.Slices) == 0 {
		if err := r.ops.fill(out, 0); err != nil {
			return err
		}
		if err := r.ops.fill(lse, math.Inf(-1)); err != nil {
			return err
		}
	} else if err := r.Kernel.Forward(ctx, pl.stepProblem(m), q, kv.k, kv.v, out, lse); err != nil {
		return fmt.Errorf("balanced: %w", err)
	}
	if err := b.settleRing(); err != nil {
		return fmt.Errorf("balanced: %w", err)
	}
	return nil
}

func (b *balancedRun) backwardOne(ctx context.Context, q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	r, pl, d := b.r, b.r.Plan, b.d
	lr := pl.Layout.Local
	a := &arena{o: r.ops}
	defer a.release()
	rows, m, kv, err := b.fetchOne(a, k, v)
	if err != nil {
		return err
	}
	fetched, owed := rows > lr, b.busy(0) && len(d.Sends(b.me, 0)) > 0
	// dl: the packed-documents layout (balanced_thd.go), nil for the blocks one.
	dl := pl.docsOf(b.me)
	if !fetched && !owed && dl == nil { // nothing travels: the kernel writes the gradients
		if len(m.Slices) == 0 {
			for _, t := range []tensor.Tensor{dq, dk, dv} {
				if err := r.ops.fill(t, 0); err != nil {
					return err
				}
			}
			return b.settleRing()
		}
		if err := r.Kernel.Backward(ctx, pl.stepProblem(m), q, k, v, out, lse, dout, dq, dk, dv); err != nil {
			return fmt.Errorf("balanced: %w", err)
		}
		return b.settleRing()
	}
	tail := k.Shape()[1:]
	pdt := r.ops.partDType(pl.Problem.DType)
	var grads kvPair
	if dl == nil {
		if grads, err = newKV(a, pdt, append([]int{rows}, tail...)); err != nil {
			return err
		}
	}
	// dq in the partials' dtype beside them (a kernel with fp32 partials), else directly.
	dqOut := dq
	if pdt != dq.DType() {
		if dqOut, err = a.scratch(pdt, dq.Shape()...); err != nil {
			return err
		}
	}
	if dl != nil { // the kernel on the THD buffers, whose dK/dV sum into fp32 grads
		if grads, err = b.backwardDocs(ctx, a, dl, rows, q, kv, out, lse, dout, dqOut); err != nil {
			return err
		}
		if dqOut != dq {
			if err := r.ops.convert(dq, dqOut); err != nil {
				return err
			}
		}
	} else if len(m.Slices) == 0 {
		if err := r.ops.fill(dq, 0); err != nil {
			return err
		}
	} else if err := r.Kernel.Backward(ctx, pl.stepProblem(m), q, kv.k, kv.v, out, lse, dout, dqOut, grads.k, grads.v); err != nil {
		return fmt.Errorf("balanced: %w", err)
	} else if dqOut != dq {
		if err := r.ops.convert(dq, dqOut); err != nil {
			return err
		}
	}
	// The fetched blocks' partials go back to their owners (fp32); this rank's own come
	// back from the ranks that fetched them.
	var send, ret kvPair
	if fetched {
		if send.k, err = rowsOf(grads.k, lr, rows); err == nil {
			send.v, err = rowsOf(grads.v, lr, rows)
		}
		if err != nil {
			return err
		}
		if grads.k.DType() != tensor.FP32 {
			s32, err := newKVScratch(a, tensor.FP32, send.k.Shape())
			if err != nil {
				return err
			}
			if err := r.ops.convert(s32.k, send.k); err != nil {
				return err
			}
			if err := r.ops.convert(s32.v, send.v); err != nil {
				return err
			}
			send = s32
		}
	}
	sent := 0
	for _, x := range d.Sends(b.me, 0) {
		sent += int(x.N)
	}
	if owed {
		if ret, err = newKVScratch(a, tensor.FP32, append([]int{sent * d.Block}, tail...)); err != nil {
			return err
		}
	}
	var back func() error
	if fetched || owed {
		back, err = (&balancedQueue{b: b}).start(func(c comm.Comm) error { return b.giveBack(c, 0, send, ret) })
	}
	if err != nil {
		return fmt.Errorf("balanced: %w", err)
	}
	own, err := b.stageKV(grads, lr)
	if err != nil {
		_ = waitFor(back)
		return err
	}
	if !owed {
		err = r.ops.convert(dk, own.k)
		if err == nil {
			err = r.ops.convert(dv, own.v)
		}
		if werr := waitFor(back); err == nil {
			err = werr
		}
		if err == nil {
			err = b.settleRing()
		}
		return err
	}
	acc, err := newKVScratch(a, tensor.FP32, k.Shape())
	if err == nil {
		if err = r.ops.convert(acc.k, own.k); err == nil {
			err = r.ops.convert(acc.v, own.v)
		}
	}
	if werr := waitFor(back); err == nil && werr != nil {
		err = fmt.Errorf("balanced: gradient return: %w", werr)
	}
	if err != nil {
		return err
	}
	if err := b.land(0, acc, ret); err != nil {
		return fmt.Errorf("balanced: %w", err)
	}
	if err := b.settleRing(); err != nil {
		return fmt.Errorf("balanced: %w", err)
	}
	if err := r.ops.convert(dk, acc.k); err != nil {
		return err
	}
	return r.ops.convert(dv, acc.v)
}
