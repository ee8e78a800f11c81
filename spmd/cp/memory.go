package cp

import (
	"slices"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// Buffers is implemented by a method whose buffers are not bounded by a few copies of a
// rank's inputs (balanced: what a rank fetches depends on the mask): BufferBytes is the
// most device memory any rank's method buffers hold at once in the pass, beyond its
// inputs and outputs, from the plan, with the kernel's partial outputs taken as fp32 (the
// larger case).
type Buffers interface {
	BufferBytes(pl *Plan, pass kernels.Pass) int64
}

// BufferBytes implements Buffers: per rank, the fetch window (K and V), and the partial
// output and merge (forward) or the dQ and dK/dV accumulators, the window's dK/dV
// partials and their fp32 copies, and the two buffers of returned partials (backward),
// as Forward and Backward allocate them; the most of any rank.
func (Balanced) BufferBytes(pl *Plan, pass kernels.Pass) int64 {
	d := pl.Dispatch
	if d == nil {
		return 0
	}
	var top int64
	for r := range d.Ranks {
		var window, sent int64
		for i := range d.Window {
			slots := 0
			for s := i; s < d.NumStages(); s += d.Window {
				slots = max(slots, d.RecvStage(r, s).Slots)
			}
			window += int64(max(slots, 1))
		}
		for s := range d.NumStages() {
			n := 0
			for _, x := range d.Sends(r, s) {
				n += int(x.N)
			}
			sent = max(sent, int64(n))
		}
		top = max(top, balancedBytes(pl, pass, window*int64(d.Block), int64(max(sent, 1))*int64(d.Block)))
	}
	return top
}

// balancedBytes is one rank's buffers for a fetch window of window rows and returns of
// at most sent rows per stage.
func balancedBytes(pl *Plan, pass kernels.Pass, window, sent int64) int64 {
	lr := int64(pl.Layout.Local)
	hq := int64(pl.HeadsQ)
	q := hq * int64(pl.Problem.HeadDim)
	kv := int64(pl.HeadsKV * pl.Problem.HeadDim)
	es := int64(pl.Problem.DType.Size())
	return balancedBound(pass, lr, hq, q, kv, es, window, sent)
}

// balancedBound is balanced's buffers for a rank of lr rows and hq query heads, q and kv
// elements a row of Q and of K, es bytes an element, a fetch window of window rows and
// returns of sent rows.
func balancedBound(pass kernels.Pass, lr, hq, q, kv, es, window, sent int64) int64 {
	const f32 = 4
	fetch := 2 * window * kv * es
	fwd := fetch + 2*lr*q*f32 + 2*hq*lr*f32 // partial out and merge accumulator (fp32), their lse
	if pass == kernels.Fwd {
		return fwd
	}
	bwd := fetch + 2*lr*q*f32 + // dq accumulator and partial
		2*lr*kv*f32 + 2*lr*kv*f32 + // dK/dV accumulators and the local blocks' partials
		2*2*window*kv*f32 + // the window's dK/dV partials and their fp32 copies
		2*2*sent*kv*f32 // the returned partials, two stages
	if pass == kernels.FwdBwd {
		return max(fwd, bwd)
	}
	return bwd
}

// BalancedBoundBytes bounds balanced's buffers per rank before any mask is built (the
// memory guard of longca cp): the worst mask fetches every other rank's blocks, of which
// at most maxFetchUnits ranks' are in flight, unless stages is 1 (all in one piece).
func BalancedBoundBytes(tokens, ranks, hq, hkv, dim int, dt tensor.DType, passes []kernels.Pass, stages int) float64 {
	units := min(ranks-1, maxFetchUnits)
	if stages == 1 {
		units = ranks - 1
	}
	lr := int64(tokens)
	rows := int64(max(units, 0)) * lr
	var top int64
	for _, p := range passes {
		top = max(top, balancedBound(p, lr, int64(hq), int64(hq*dim), int64(hkv*dim), int64(dt.Size()), rows, rows))
	}
	return float64(top)
}

// MethodBufferBound is the most any of the named methods' buffers may need per rank
// beyond the generic estimate (harness.CPFootprint's two copies of the inputs): 0 for
// every method but balanced.
func MethodBufferBound(methods []string, tokens, ranks, hq, hkv, dim int, dt tensor.DType, passes []kernels.Pass, stages int) float64 {
	if len(methods) != 0 && !slices.Contains(methods, "balanced") {
		return 0
	}
	return BalancedBoundBytes(tokens, ranks, hq, hkv, dim, dt, passes, stages)
}
