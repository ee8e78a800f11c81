package harness

import (
	"context"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// CalibrationMasks are the masks `longca simulate --calibrate` measures on the spot for
// sim's kernel model: the shapes CP steps take (dense, causal diagonal, documents of
// both kinds).
var CalibrationMasks = []string{"full", "causal", "full_document", "causal_document"}

// CalibrationSweep is the kernel sweep whose rows calibrate sim's kernel model: kernel on
// the calibration masks at the given lengths, one head setting, forward and backward,
// seed 42 (sim.SamplesFromRows rebuilds each mask from its row).
func CalibrationSweep(kernel string, seqlens []int, h Heads, dim int, dt tensor.DType) Sweep {
	return Sweep{Masks: CalibrationMasks, SeqLens: seqlens, Heads: []Heads{h}, HeadDim: dim, DType: dt,
		Kernels: []string{kernel}, Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd}, Seed: 42}
}

// RunAll checks and times cases in order through r, handing each finished row to each
// (which may stop the loop with an error, returned as is). A cancelled ctx stops before
// the next case with ctx's error; a case it interrupted measured nothing and is not
// handed to each (a case that finished anyway is). It is the one case loop of kernel
// sweeps.
func (r *Runner) RunAll(ctx context.Context, cases []Case, each func(i int, row results.Row) error) error {
	for i, c := range cases {
		if err := ctx.Err(); err != nil {
			return err
		}
		row, err := r.runRow(ctx, c)
		if Interrupted(ctx, err) {
			return ctx.Err()
		}
		if err := each(i, row); err != nil {
			return err
		}
	}
	return nil
}
