package check

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/tensor"
)

// Inputs returns fresh standard normal q, k, v and dout of problem p in p.DType, the
// same for the same seed.
func Inputs(p kernels.Problem, seed uint64) (q, k, v, dout *tensor.Host) {
	rng := rand.New(rand.NewPCG(seed, 0x6c6f6e676361)) // "longca"
	qs, kvs, _ := p.Shapes()
	q, k, v = tensor.NewHost(p.DType, qs...), tensor.NewHost(p.DType, kvs...), tensor.NewHost(p.DType, kvs...)
	dout = tensor.NewHost(p.DType, qs...)
	for _, t := range []*tensor.Host{q, k, v, dout} {
		t.FillNormal(rng, 1)
	}
	return q, k, v, dout
}

// outputs are one kernel's results on the host, as float64.
type outputs struct {
	out, lse, dq, dk, dv []float64
}

// reference runs the exact reference (float64 outputs) and the naive low-precision one
// (outputs in p.DType, lse fp32) on the same inputs.
func reference(ctx context.Context, p kernels.Problem, q, k, v, dout *tensor.Host, backward bool) (exact, naive outputs, err error) {
	exact, err = runHost(ctx, ref.New(ref.Options{}), p, q, k, v, dout, tensor.FP64, tensor.FP64, backward)
	if err != nil {
		return exact, naive, fmt.Errorf("check: reference: %w", err)
	}
	naive, err = runHost(ctx, ref.New(ref.Options{Emulate: p.DType}), p, q, k, v, dout, p.DType, tensor.FP32, backward)
	if err != nil {
		return exact, naive, fmt.Errorf("check: naive %s reference: %w", p.DType, err)
	}
	return exact, naive, nil
}

// runHost runs a CPU kernel on host tensors with outputs in outDT and lse in lseDT.
func runHost(ctx context.Context, k kernels.Kernel, p kernels.Problem, q, kk, v, dout *tensor.Host, outDT, lseDT tensor.DType, backward bool) (outputs, error) {
	qs, kvs, ls := p.Shapes()
	out, lse := tensor.NewHost(outDT, qs...), tensor.NewHost(lseDT, ls...)
	if err := k.Forward(ctx, p, q, kk, v, out, lse); err != nil {
		return outputs{}, err
	}
	o := outputs{out: out.Float64s(), lse: lse.Float64s()}
	if !backward {
		return o, nil
	}
	dq, dk, dv := tensor.NewHost(outDT, qs...), tensor.NewHost(outDT, kvs...), tensor.NewHost(outDT, kvs...)
	if err := k.Backward(ctx, p, q, kk, v, out, lse, dout, dq, dk, dv); err != nil {
		return outputs{}, err
	}
	o.dq, o.dk, o.dv = dq.Float64s(), dk.Float64s(), dv.Float64s()
	return o, nil
}

// Forward checks the candidate's out and lse on the problem with inputs Inputs(p, seed).
// An error means the check could not run (unsupported problem, allocation, a kernel
// error); a wrong result is a Report that does not pass.
func Forward(ctx context.Context, k kernels.Kernel, p kernels.Problem, seed uint64) (Report, error) {
	return run(ctx, k, p, seed, kernels.Fwd)
}

// Backward runs the candidate's own forward, then its backward with a random dout, and
// checks dq, dk and dv.
func Backward(ctx context.Context, k kernels.Kernel, p kernels.Problem, seed uint64) (Report, error) {
	return run(ctx, k, p, seed, kernels.Bwd)
}

// Both checks out, lse, dq, dk and dv from one forward and one backward of the
// candidate: what Forward and Backward check together, with the references computed
// once.
func Both(ctx context.Context, k kernels.Kernel, p kernels.Problem, seed uint64) (Report, error) {
	return run(ctx, k, p, seed, kernels.FwdBwd)
}

func run(ctx context.Context, k kernels.Kernel, p kernels.Problem, seed uint64, pass kernels.Pass) (Report, error) {
	if err := k.Supports(p); err != nil {
		return Report{}, fmt.Errorf("check: %s: %w", k.Name(), err)
	}
	backward := pass != kernels.Fwd
	q, kk, v, dout := Inputs(p, seed)
	cand, err := runDevice(ctx, k, p, q, kk, v, dout, backward)
	if err != nil {
		return Report{}, err
	}
	exact, naive, err := reference(ctx, p, q, kk, v, dout, backward)
	if err != nil {
		return Report{}, err
	}
	var figs []Figure
	if pass != kernels.Bwd {
		figs = append(figs,
			Compare("out", cand.out, exact.out, naive.out),
			Compare("lse", cand.lse, exact.lse, naive.lse))
	}
	if backward {
		figs = append(figs,
			Compare("dq", cand.dq, exact.dq, naive.dq),
			Compare("dk", cand.dk, exact.dk, naive.dk),
			Compare("dv", cand.dv, exact.dv, naive.dv))
	}
	return NewReport(figs...), nil
}
