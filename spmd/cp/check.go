package cp

import (
	"context"
	"fmt"
	"slices"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/tensor"
)

// Outputs are one rank's (or, gathered, the global) results of a forward and backward.
type Outputs = check.Outputs

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

// CheckOptions configure CheckRank.
type CheckOptions struct {
	// Seed draws the global inputs (check.Inputs of the plan's problem).
	Seed uint64
	// Backward checks dq, dk and dv too.
	Backward bool
	// Agree, when set, is called by every rank after its run of the method, with its
	// error (nil on success); what it returns replaces that error. The CP harness agrees
	// on the outcome there (aborting the run's sub-groups when this rank failed), so no
	// rank gathers outputs through the world while another is still inside the method.
	Agree func(err error) error
	// References computes, or recalls, the single-device references; nil means
	// check.References.
	References func(ctx context.Context, p kernels.Problem, q, k, v, dout *tensor.Host, backward bool) (exact, naive check.Outputs, err error)
}

// checkFigures are the names a shared verdict can carry.
var checkFigures = []string{"", "out", "lse", "dq", "dk", "dv"}

// CheckRank is the correctness check of one CP case, run by every rank of r: inputs
// come from check.Inputs(problem, seed), every rank's outputs are gathered, and rank 0
// compares them with the single-device references by the rule of MASKS.md
// (check.CompareOutputs). Every rank returns the same Pass and Worst figure (rank 0's,
// shared); Figures are rank 0's alone.
func CheckRank(ctx context.Context, m Method, r *Run, o CheckOptions) (check.Report, error) {
	pl := r.Plan
	q, k, v, dout := check.Inputs(pl.Problem, o.Seed)
	out, err := Execute(ctx, m, r, q, k, v, dout, o.Backward)
	if o.Agree != nil {
		err = o.Agree(err)
	}
	if err != nil {
		return check.Report{}, err
	}
	got, err := GatherOutputs(r.Comm, pl, out, o.Backward)
	if err != nil {
		return check.Report{}, err
	}
	pass := kernels.Fwd
	if o.Backward {
		pass = kernels.FwdBwd
	}
	var rep check.Report
	// The verdict every rank learns: failed, and the worst figure (rank 0 fills it in,
	// the others add zeros).
	verdict := tensor.NewHost(tensor.FP64, 5)
	var refErr error
	if r.Comm.Rank() == 0 {
		refs := o.References
		if refs == nil {
			refs = check.References
		}
		exact, naive, err := refs(ctx, pl.Problem, q, k, v, dout, o.Backward)
		if err != nil {
			// Rank 0 could not compare: it still joins the verdict, which says so.
			refErr = err
			verdict.Set(0, 2)
		} else {
			rep = check.CompareOutputs(got, exact, naive, pass)
		}
	}
	if refErr == nil && r.Comm.Rank() == 0 {
		if !rep.Pass {
			verdict.Set(0, 1)
		}
		w := rep.Worst
		verdict.Set(1, w.Err)
		verdict.Set(2, w.NaiveErr)
		verdict.Set(3, w.Tol)
		verdict.Set(4, float64(slices.Index(checkFigures, w.Name)))
	}
	if err := r.Comm.AllReduce(verdict, comm.Max); err != nil {
		return rep, fmt.Errorf("%s: check verdict: %w", pl.Method, err)
	}
	if verdict.At(0) == 2 {
		if refErr != nil {
			return rep, refErr
		}
		return rep, fmt.Errorf("%s: rank 0 could not compute the reference", pl.Method)
	}
	if r.Comm.Rank() != 0 {
		rep.Pass = verdict.At(0) == 0
		rep.Worst = check.Figure{Err: verdict.At(1), NaiveErr: verdict.At(2), Tol: verdict.At(3), Pass: rep.Pass}
		if i := int(verdict.At(4)); i > 0 && i < len(checkFigures) {
			rep.Worst.Name = checkFigures[i]
		}
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
