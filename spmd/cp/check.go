package cp

import (
	"context"
	"fmt"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/tensor"
)

// Outputs are one rank's results of a forward (and backward) on its shard.
type Outputs struct {
	Out, LSE, DQ, DK, DV *tensor.Host
}

// Execute runs the method on this rank's shard of global inputs (the same on every
// rank): Forward, then Backward when backward is set, on NaN-poisoned outputs (out in
// the problem's dtype, lse fp32). Collective over the run's ranks.
func Execute(ctx context.Context, m Method, r *Run, q, k, v, dout *tensor.Host, backward bool) (Outputs, error) {
	pl := r.Plan
	rank := r.Comm.Rank()
	lq, lk, lv := pl.Shard(q, rank), pl.Shard(k, rank), pl.Shard(v, rank)
	o := Outputs{Out: poisoned(pl.Problem.DType, lq.Shape()), LSE: poisoned(tensor.FP32, []int{pl.Problem.HeadsQ, pl.Tokens})}
	if backward {
		o.DQ = poisoned(pl.Problem.DType, lq.Shape())
		o.DK, o.DV = poisoned(pl.Problem.DType, lk.Shape()), poisoned(pl.Problem.DType, lk.Shape())
	}
	// On a device, every input and output is uploaded first (the poisoned outputs too,
	// so an unwritten element stays NaN) and the outputs come back at the end.
	hostTs := []*tensor.Host{lq, lk, lv, o.Out, o.LSE}
	if backward {
		hostTs = append(hostTs, pl.Shard(dout, rank), o.DQ, o.DK, o.DV)
	}
	ts := make([]tensor.Tensor, len(hostTs))
	defer func() { r.Free(ts...) }()
	for i, h := range hostTs {
		t, err := r.Upload(h)
		if err != nil {
			return o, fmt.Errorf("%s: uploading inputs: %w", pl.Method, err)
		}
		ts[i] = t
	}
	if err := m.Forward(ctx, r, ts[0], ts[1], ts[2], ts[3], ts[4]); err != nil {
		return o, err
	}
	if backward {
		if err := m.Backward(ctx, r, ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6], ts[7], ts[8]); err != nil {
			return o, err
		}
	}
	for i, h := range hostTs {
		if i < 3 || i == 5 {
			continue // inputs
		}
		if err := r.Download(h, ts[i]); err != nil {
			return o, fmt.Errorf("%s: downloading outputs: %w", pl.Method, err)
		}
	}
	return o, nil
}

func poisoned(dt tensor.DType, shape []int) *tensor.Host {
	h := tensor.NewHost(dt, shape...)
	_ = (&tensor.CPU{}).Poison(h) // a host tensor cannot fail
	return h
}

// CheckRank is the correctness check of one CP case, run by every rank of r: inputs
// come from check.Inputs(problem, seed), every rank's outputs are gathered, and rank 0
// compares them (out and lse; dq, dk and dv with backward) with the single-device
// reference by the rule of MASKS.md (kernels/check: error at most 3x the naive bf16
// kernel's). Every rank returns the same Pass; the figures are rank 0's.
func CheckRank(ctx context.Context, m Method, r *Run, seed uint64, backward bool) (check.Report, error) {
	pl := r.Plan
	q, k, v, dout := check.Inputs(pl.Problem, seed)
	o, err := Execute(ctx, m, r, q, k, v, dout, backward)
	if err != nil {
		return check.Report{}, err
	}
	got, err := GatherOutputs(r.Comm, pl, o, backward)
	if err != nil {
		return check.Report{}, err
	}
	var rep check.Report
	verdict := tensor.NewHost(tensor.FP64, 1) // 1 when rank 0 saw a failure
	if r.Comm.Rank() == 0 {
		rep, err = Compare(ctx, pl.Problem, q, k, v, dout, got, backward)
		if err != nil {
			return rep, err
		}
		if !rep.Pass {
			verdict.Set(0, 1)
		}
	}
	if err := r.Comm.AllReduce(verdict, comm.Max); err != nil {
		return rep, fmt.Errorf("%s: check verdict: %w", pl.Method, err)
	}
	if r.Comm.Rank() != 0 {
		rep.Pass = verdict.At(0) == 0
	}
	return rep, nil
}

// GatherOutputs all-gathers every rank's outputs and joins them into global tensors
// (padding dropped). Collective.
func GatherOutputs(c comm.Comm, pl *Plan, o Outputs, backward bool) (Outputs, error) {
	n := c.Size()
	join := func(loc *tensor.Host, lse bool) (*tensor.Host, error) {
		sh := loc.Shape()
		all := tensor.NewHost(loc.DType(), append([]int{n * sh[0]}, sh[1:]...)...)
		if err := c.AllGather(loc, all); err != nil {
			return nil, fmt.Errorf("%s: gathering outputs: %w", pl.Method, err)
		}
		parts := make([]*tensor.Host, n)
		for r := range parts {
			parts[r] = all.Rows(r*sh[0], (r+1)*sh[0])
		}
		if lse {
			return pl.GatherLSE(parts), nil
		}
		return pl.Gather(parts), nil
	}
	var g Outputs
	var err error
	if g.Out, err = join(o.Out, false); err != nil {
		return g, err
	}
	if g.LSE, err = join(o.LSE, true); err != nil {
		return g, err
	}
	if !backward {
		return g, nil
	}
	if g.DQ, err = join(o.DQ, false); err != nil {
		return g, err
	}
	if g.DK, err = join(o.DK, false); err != nil {
		return g, err
	}
	g.DV, err = join(o.DV, false)
	return g, err
}

// Compare checks global outputs against the exact float64 reference, with the naive
// kernel in the problem's dtype as the baseline (kernels/check.Compare).
func Compare(ctx context.Context, p kernels.Problem, q, k, v, dout *tensor.Host, got Outputs, backward bool) (check.Report, error) {
	exact, naive, err := References(ctx, p, q, k, v, dout, backward)
	if err != nil {
		return check.Report{}, err
	}
	return CompareOutputs(got, exact, naive, backward), nil
}

// References runs the single-device references: exact (float64 outputs) and naive
// (the ref kernel emulating a plain kernel in p.DType: outputs in p.DType, lse fp32).
func References(ctx context.Context, p kernels.Problem, q, k, v, dout *tensor.Host, backward bool) (exact, naive Outputs, err error) {
	exact, err = reference(ctx, ref.New(ref.Options{}), p, q, k, v, dout, tensor.FP64, tensor.FP64, backward)
	if err != nil {
		return exact, naive, fmt.Errorf("check: reference: %w", err)
	}
	naive, err = reference(ctx, ref.New(ref.Options{Emulate: p.DType}), p, q, k, v, dout, p.DType, tensor.FP32, backward)
	if err != nil {
		return exact, naive, fmt.Errorf("check: naive %s reference: %w", p.DType, err)
	}
	return exact, naive, nil
}

// CompareOutputs applies the rule to every output (out, lse; dq, dk, dv with backward).
func CompareOutputs(got, exact, naive Outputs, backward bool) check.Report {
	figs := []check.Figure{
		check.Compare("out", got.Out.Float64s(), exact.Out.Float64s(), naive.Out.Float64s()),
		check.Compare("lse", got.LSE.Float64s(), exact.LSE.Float64s(), naive.LSE.Float64s()),
	}
	if backward {
		figs = append(figs,
			check.Compare("dq", got.DQ.Float64s(), exact.DQ.Float64s(), naive.DQ.Float64s()),
			check.Compare("dk", got.DK.Float64s(), exact.DK.Float64s(), naive.DK.Float64s()),
			check.Compare("dv", got.DV.Float64s(), exact.DV.Float64s(), naive.DV.Float64s()))
	}
	return report(figs)
}

// report summarises figures as check's own reports do: Pass when all pass, Worst the
// figure furthest from its tolerance.
func report(figs []check.Figure) check.Report {
	r := check.Report{Pass: true, Figures: figs}
	worst := -1.0
	for _, f := range figs {
		r.Pass = r.Pass && f.Pass
		s := f.Err / max(f.Tol, 1e-300)
		if f.NaNs > 0 || f.Err != f.Err {
			s = 1e300
		}
		if s > worst {
			worst, r.Worst = s, f
		}
	}
	return r
}

// reference runs a single-device kernel on the whole problem.
func reference(ctx context.Context, kern kernels.Kernel, p kernels.Problem, q, k, v, dout *tensor.Host, outDT, lseDT tensor.DType, backward bool) (Outputs, error) {
	qs, kvs, ls := p.Shapes()
	o := Outputs{Out: tensor.NewHost(outDT, qs...), LSE: tensor.NewHost(lseDT, ls...)}
	if err := kern.Forward(ctx, p, q, k, v, o.Out, o.LSE); err != nil {
		return o, err
	}
	if !backward {
		return o, nil
	}
	o.DQ, o.DK, o.DV = tensor.NewHost(outDT, qs...), tensor.NewHost(outDT, kvs...), tensor.NewHost(outDT, kvs...)
	return o, kern.Backward(ctx, p, q, k, v, o.Out, o.LSE, dout, o.DQ, o.DK, o.DV)
}
