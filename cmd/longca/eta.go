package main

import (
	"math"
	"time"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/mask"
)

// eta weighs each case of a sweep by its estimated time, so that progress and the time
// left follow the work rather than the count of cases: an estimate of
// perCase + reps * FLOPs / rate, scaled by how fast the finished cases actually went.
type eta struct {
	weights []float64 // estimated seconds per case
	total   float64
	doneW   float64
	start   time.Time
}

// Rates of the estimate: what a case costs besides its repetitions (check, compile,
// setup), and the rate its repetitions run at. Only the proportions matter once cases
// have finished; before that, they give the first estimate.
const (
	etaPerCase = 1.5    // seconds
	etaRate    = 200e12 // FLOP/s
)

func newETA(cases []harness.Case, build harness.MaskBuilder, reps int) *eta {
	if build == nil {
		build = harness.BuildMask
	}
	area := map[[2]any]float64{}
	e := &eta{start: time.Now()}
	for _, c := range cases {
		key := [2]any{c.Label(), c.SeqLen}
		a, ok := area[key]
		if !ok {
			a = float64(c.SeqLen) * float64(c.SeqLen) // a dense guess when the mask cannot be laid out
			if c.Sparse.IsSparse() {
				a *= c.Sparse.Ratio
			} else if spec, err := build(c.Mask, c.SeqLen, c.Seed); err == nil {
				a = float64(spec.Mask.Area())
			} else if mask.IsInputError(err) {
				a = 0 // unsupported at once
			}
			area[key] = a
		}
		flops := 4 * a * float64(c.Heads.Q) * float64(c.HeadDim) * c.Pass.FLOPsFactor()
		w := etaPerCase + float64(reps)*flops/etaRate
		e.weights = append(e.weights, w)
		e.total += w
	}
	return e
}

// estimate is the first guess of the sweep's time.
func (e *eta) estimate() time.Duration { return time.Duration(e.total * float64(time.Second)) }

func (e *eta) totalMs() int64 { return int64(math.Ceil(e.total * 1000)) }

func (e *eta) weightMs(i int) int64 { return int64(e.weights[i] * 1000) }

func (e *eta) done(i int) { e.doneW += e.weights[i] }

// remaining scales the work left by the time the work done took.
func (e *eta) remaining() time.Duration {
	if e.doneW <= 0 {
		return e.estimate()
	}
	return time.Duration(float64(time.Since(e.start)) * (e.total - e.doneW) / e.doneW)
}
