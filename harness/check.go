package harness

import (
	"context"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/results"
)

// KernelCheck is the CheckFunc of kernels/check: check.Forward for fwd, check.Backward
// for bwd, both for fwd+bwd (the worse report wins).
func KernelCheck(ctx context.Context, k kernels.Kernel, p kernels.Problem, pass kernels.Pass, seed uint64) (CheckOutcome, error) {
	var reps []check.Report
	if pass == kernels.Fwd || pass == kernels.FwdBwd {
		r, err := check.Forward(ctx, k, p, seed)
		if err != nil {
			return CheckOutcome{}, err
		}
		reps = append(reps, r)
	}
	if pass == kernels.Bwd || pass == kernels.FwdBwd {
		r, err := check.Backward(ctx, k, p, seed)
		if err != nil {
			return CheckOutcome{}, err
		}
		reps = append(reps, r)
	}
	out := CheckOutcome{Pass: true}
	worst := -1.0
	for _, r := range reps {
		w := r.Worst
		score := w.Err / max(w.Tol, 1e-300)
		if !w.Pass {
			score += 1e300 // a failing figure is worse than any passing one
		}
		if score > worst {
			worst = score
			out.Worst = results.CheckFigure{Name: w.Name, Err: w.Err, NaiveErr: w.NaiveErr, Tol: w.Tol, Pass: w.Pass}
		}
		out.Pass = out.Pass && r.Pass
	}
	return out, nil
}
