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

// Outputs are one run's results on the host: out and lse, and dq, dk and dv after a
// backward (nil otherwise).
type Outputs struct {
	Out, LSE, DQ, DK, DV *tensor.Host
}

// References runs the single-device references on the same inputs: exact (kernels/ref
// with float64 outputs) and naive (ref emulating a plain kernel in p.DType: outputs in
// p.DType, lse fp32). Every check, of a kernel or of a CP method, compares with these.
func References(ctx context.Context, p kernels.Problem, q, k, v, dout *tensor.Host, backward bool) (exact, naive Outputs, err error) {
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
func runHost(ctx context.Context, k kernels.Kernel, p kernels.Problem, q, kk, v, dout *tensor.Host, outDT, lseDT tensor.DType, backward bool) (Outputs, error) {
	qs, kvs, ls := p.Shapes()
	o := Outputs{Out: tensor.NewHost(outDT, qs...), LSE: tensor.NewHost(lseDT, ls...)}
	if err := k.Forward(ctx, p, q, kk, v, o.Out, o.LSE); err != nil {
		return Outputs{}, err
	}
	if !backward {
		return o, nil
	}
	o.DQ, o.DK, o.DV = tensor.NewHost(outDT, qs...), tensor.NewHost(outDT, kvs...), tensor.NewHost(outDT, kvs...)
	if err := k.Backward(ctx, p, q, kk, v, o.Out, o.LSE, dout, o.DQ, o.DK, o.DV); err != nil {
		return Outputs{}, err
	}
	return o, nil
}

// CompareOutputs applies the rule to the outputs a pass produces: out and lse for Fwd,
// dq, dk and dv for Bwd, all five for FwdBwd. Worst is chosen by NewReport, the one
// worst-error rule of every check.
func CompareOutputs(got, exact, naive Outputs, pass kernels.Pass) Report {
	var figs []Figure
	f := func(name string, g, e, n *tensor.Host) {
		figs = append(figs, Compare(name, g.Float64s(), e.Float64s(), n.Float64s()))
	}
	if pass != kernels.Bwd {
		f("out", got.Out, exact.Out, naive.Out)
		f("lse", got.LSE, exact.LSE, naive.LSE)
	}
	if pass != kernels.Fwd {
		f("dq", got.DQ, exact.DQ, naive.DQ)
		f("dk", got.DK, exact.DK, naive.DK)
		f("dv", got.DV, exact.DV, naive.DV)
	}
	return NewReport(figs...)
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
	return runWith(ctx, k, p, seed, pass, nil)
}

// runWith is run with the inputs and references from c (nil: computed here).
func runWith(ctx context.Context, k kernels.Kernel, p kernels.Problem, seed uint64, pass kernels.Pass, c *Cache) (Report, error) {
	if err := k.Supports(p); err != nil {
		return Report{}, fmt.Errorf("check: %s: %w", k.Name(), err)
	}
	backward := pass != kernels.Fwd
	var q, kk, v, dout *tensor.Host
	if c != nil {
		q, kk, v, dout = c.inputs(p, seed)
	} else {
		q, kk, v, dout = Inputs(p, seed)
	}
	cand, err := runDevice(ctx, k, p, q, kk, v, dout, backward)
	if err != nil {
		return Report{}, err
	}
	var exact, naive Outputs
	if c != nil {
		exact, naive, err = c.references(ctx, p, seed, backward)
	} else {
		exact, naive, err = References(ctx, p, q, kk, v, dout, backward)
	}
	if err != nil {
		return Report{}, err
	}
	return CompareOutputs(cand, exact, naive, pass), nil
}
