package cp

import (
	"context"
	"fmt"
	"math"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// RingAllGather all-gathers K and V, attends the local queries to the whole sequence,
// and in the backward all-gathers K and V again and reduce-scatters dK and dV (fp32).
type RingAllGather struct{}

func init() { Register(RingAllGather{}) }

// Name is "ring-allgather".
func (RingAllGather) Name() string { return "ring-allgather" }

// Doc is a one-line description.
func (RingAllGather) Doc() string {
	return "all-gather K/V, attend locally; backward reduce-scatters dK/dV"
}

// Plan is a 1 x N mesh.
func (RingAllGather) Plan(cfg Config, p kernels.Problem) (*Plan, error) {
	return newPlan("ring-allgather", cfg, p, mesh{u: 1, r: cfg.Ranks, w: 1, sharding: cfg.Sharding})
}

// gather all-gathers this rank's k and v into the whole padded sequence, allocated in a
// (k and v themselves on a ring of one rank: nothing to gather).
func (RingAllGather) gather(r *Run, a *arena, k, v tensor.Tensor) (kvPair, error) {
	if r.Plan.Config.Ring == 1 {
		return kvPair{k, v}, nil
	}
	shape := append([]int{r.Plan.Layout.Padded}, k.Shape()[1:]...)
	all, err := newKVScratch(a, k.DType(), shape) // the all-gather writes it whole
	if err != nil {
		return all, err
	}
	if err := r.ops.fence(); err != nil {
		return all, err
	}
	if err := r.ring.AllGather(k, all.k); err != nil {
		return all, fmt.Errorf("ring-allgather: all-gather of k: %w", err)
	}
	if err := r.ring.AllGather(v, all.v); err != nil {
		return all, fmt.Errorf("ring-allgather: all-gather of v: %w", err)
	}
	return all, nil
}

// Forward implements Method.
func (m RingAllGather) Forward(ctx context.Context, r *Run, q, k, v, out, lse tensor.Tensor) error {
	a := &arena{o: r.ops}
	defer a.release()
	all, err := m.gather(r, a, k, v)
	if err != nil {
		return err
	}
	sub := r.Plan.GatherMask(r.R)
	if len(sub.Slices) == 0 {
		if err := r.ops.fill(out, 0); err != nil {
			return err
		}
		return r.ops.fill(lse, math.Inf(-1))
	}
	return r.Kernel.Forward(ctx, r.Plan.stepProblem(sub), q, all.k, all.v, out, lse)
}

// Backward implements Method. On a ring of one rank the kernel writes dq, dk and dv
// itself, as it does alone.
func (m RingAllGather) Backward(ctx context.Context, r *Run, q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	a := &arena{o: r.ops}
	defer a.release()
	sub := r.Plan.GatherMask(r.R)
	if r.Plan.Config.Ring == 1 {
		if len(sub.Slices) == 0 {
			for _, t := range []tensor.Tensor{dq, dk, dv} {
				if err := r.ops.fill(t, 0); err != nil {
					return err
				}
			}
			return nil
		}
		return r.Kernel.Backward(ctx, r.Plan.stepProblem(sub), q, k, v, out, lse, dout, dq, dk, dv)
	}
	all, err := m.gather(r, a, k, v)
	if err != nil {
		return err
	}
	pdt := r.ops.partDType(r.Plan.Problem.DType)
	grads, err := newKVScratch(a, pdt, all.k.Shape())
	if err != nil {
		return err
	}
	if len(sub.Slices) == 0 {
		for _, t := range []tensor.Tensor{dq, grads.k, grads.v} {
			if err := r.ops.fill(t, 0); err != nil {
				return err
			}
		}
	} else if err := r.Kernel.Backward(ctx, r.Plan.stepProblem(sub), q, all.k, all.v, out, lse, dout, dq, grads.k, grads.v); err != nil {
		return err
	}
	if pdt != tensor.FP32 { // the reduce-scatter sums fp32 gradients
		g32, err := newKVScratch(a, tensor.FP32, all.k.Shape())
		if err != nil {
			return err
		}
		if err := r.ops.convert(g32.k, grads.k); err != nil {
			return err
		}
		if err := r.ops.convert(g32.v, grads.v); err != nil {
			return err
		}
		grads = g32
	}
	mine, err := newKVScratch(a, tensor.FP32, dk.Shape()) // the reduce-scatter writes it whole
	if err != nil {
		return err
	}
	if err := r.ops.fence(); err != nil {
		return err
	}
	if err := r.ring.ReduceScatter(grads.k, mine.k); err != nil {
		return fmt.Errorf("ring-allgather: reduce-scatter of dk: %w", err)
	}
	if err := r.ring.ReduceScatter(grads.v, mine.v); err != nil {
		return fmt.Errorf("ring-allgather: reduce-scatter of dv: %w", err)
	}
	if err := r.ops.convert(dk, mine.k); err != nil {
		return err
	}
	return r.ops.convert(dv, mine.v)
}

// CommBytes implements Method: each all-gather sends the rank's block to R-1 ranks; the
// reduce-scatter sends R-1 fp32 blocks per gradient.
func (RingAllGather) CommBytes(pl *Plan, pass kernels.Pass) int64 {
	r, t := int64(pl.Config.Ring), int64(pl.Tokens)
	kv := t * int64(pl.HeadsKV*pl.Problem.HeadDim)
	gather := (r - 1) * 2 * kv * int64(pl.Problem.DType.Size())
	var b int64
	if pass == kernels.Fwd || pass == kernels.FwdBwd {
		b += gather
	}
	if pass == kernels.Bwd || pass == kernels.FwdBwd {
		b += gather + (r-1)*2*kv*4
	}
	return b
}
