package harness

import (
	"context"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/results"
)

// KernelCheck is the CheckFunc of kernels/check: check.Forward for fwd, check.Backward
// for bwd, check.Both for fwd+bwd (one run, the five outputs, the references once).
func KernelCheck(ctx context.Context, k kernels.Kernel, p kernels.Problem, pass kernels.Pass, seed uint64) (CheckOutcome, error) {
	var rep check.Report
	var err error
	switch pass {
	case kernels.Fwd:
		rep, err = check.Forward(ctx, k, p, seed)
	case kernels.Bwd:
		rep, err = check.Backward(ctx, k, p, seed)
	default:
		rep, err = check.Both(ctx, k, p, seed)
	}
	if err != nil {
		return CheckOutcome{}, err
	}
	return Outcome(rep), nil
}

// NewKernelCheck is KernelCheck with the references shared between the kernels and passes
// checked on one case (check.Cache): a sweep of N kernels computes each case's float64 and
// naive references once instead of 2N times. The inputs are the same either way
// (check.Inputs of the case's seed), so every row's verdict is the same.
func NewKernelCheck() CheckFunc {
	c := &check.Cache{}
	return func(ctx context.Context, k kernels.Kernel, p kernels.Problem, pass kernels.Pass, seed uint64) (CheckOutcome, error) {
		rep, err := c.Check(ctx, k, p, seed, pass)
		if err != nil {
			return CheckOutcome{}, err
		}
		return Outcome(rep), nil
	}
}

// Outcome is a check report as a row records it: the verdict and the worst figure
// (check.NewReport's choice, the one worst-error rule of kernels and CP alike).
func Outcome(rep check.Report) CheckOutcome {
	w := rep.Worst
	return CheckOutcome{Pass: rep.Pass, Worst: results.CheckFigure{Name: w.Name, Err: w.Err, NaiveErr: w.NaiveErr, Tol: w.Tol, Pass: rep.Pass, NaNs: w.NaNs}}
}

// wrongWhy is a failed check's reason: the worst figure's NaNs first (a NaN fails
// whatever the other elements' error), else its error over the tolerance.
func wrongWhy(w results.CheckFigure) string {
	return check.Figure{Name: w.Name, Err: w.Err, NaiveErr: w.NaiveErr, Tol: w.Tol, NaNs: w.NaNs}.Why()
}
