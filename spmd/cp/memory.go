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
		if d.NumStages() <= 1 { // the one-stage path (balanced_one.go)
			var sent int64
			for _, x := range d.Sends(r, 0) {
				sent += int64(x.N)
			}
			fetched := int64(d.RecvStage(r, 0).Slots)
			if dl := pl.docsOf(r); dl != nil {
				top = max(top, docsBytes(pl, pass, fetched*int64(d.Block), sent*int64(d.Block), dl))
				continue
			}
			top = max(top, oneBytes(pl, pass, fetched*int64(d.Block), sent*int64(d.Block)))
			continue
		}
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
	return top + headShardBytes(pl, pass)
}

// headShardBytes are the head shards of a Ulysses group (BalancedUlysses > 1): q, k, v,
// out and lse saved by the forward, an all-to-all's send copy, and the backward's dout,
// dq, dk, dv.
func headShardBytes(pl *Plan, pass kernels.Pass) int64 {
	if pl.Config.Ulysses <= 1 {
		return 0
	}
	lr := int64(pl.Layout.Local)
	q := int64(pl.HeadsQ * pl.Problem.HeadDim)
	kv := int64(pl.HeadsKV * pl.Problem.HeadDim)
	es := int64(pl.Problem.DType.Size())
	b := 3*lr*q*es + 2*lr*kv*es + int64(pl.HeadsQ)*lr*4
	if pass != kernels.Fwd {
		b += 2*lr*q*es + 2*lr*kv*es
	}
	return b
}

// oneBytes is one rank's buffers on the one-stage path: its K/V and what it fetches in one
// buffer; in the backward the kernel's partials for all of it, fp32 copies of the
// fetched part, the returned partials and the fp32 accumulators.
func oneBytes(pl *Plan, pass kernels.Pass, fetched, sent int64) int64 {
	const f32 = 4
	lr := int64(pl.Layout.Local)
	kv := int64(pl.HeadsKV * pl.Problem.HeadDim)
	es := int64(pl.Problem.DType.Size())
	buf := int64(0)
	if fetched > 0 {
		buf = 2 * (lr + fetched) * kv * es
	}
	if pass == kernels.Fwd {
		return buf
	}
	if fetched == 0 && sent == 0 {
		return 0 // the kernel writes the gradients
	}
	// the kernel's partials: fp32, or in the problem's dtype with fp32 copies of the
	// fetched part, whichever is more
	parts := max(2*(lr+fetched)*kv*f32, 2*(lr+fetched)*kv*es+2*fetched*kv*f32)
	q := int64(pl.HeadsQ * pl.Problem.HeadDim)
	bwd := buf + parts + 2*sent*kv*f32 + lr*q*f32 // and dq in fp32 beside fp32 partials
	if sent > 0 {
		bwd += 2 * lr * kv * f32
	}
	return bwd
}

// docsBytes is one rank's buffers on the one-stage path in the THD layout dl
// (balanced_thd.go): the one-stage buffer, the THD K/V and the runs table of their copies;
// in the backward the kernel's dK/dV in THD rows (fp32, the larger case, with dq in fp32
// beside them), their sum in the one-stage layout (fp32, which also returns), the tables
// of its waves, the returned partials and the fp32 accumulators.
func docsBytes(pl *Plan, pass kernels.Pass, fetched, sent int64, dl *docLayout) int64 {
	table := func(runs []rowCopy) int64 { return 8 * int64(4*len(runs)+1) }
	docs := int64(dl.Rows)
	const f32 = 4
	lr := int64(pl.Layout.Local)
	kv := int64(pl.HeadsKV * pl.Problem.HeadDim)
	es := int64(pl.Problem.DType.Size())
	fwd := oneBytes(pl, kernels.Fwd, fetched, sent) + 2*docs*kv*es + table(dl.Fill) // the one-stage buffer, then the THD K/V
	if pass == kernels.Fwd {
		return fwd
	}
	q := int64(pl.HeadsQ * pl.Problem.HeadDim)
	bwd := fwd + lr*q*f32 + 2*docs*kv*f32 + 2*(lr+fetched)*kv*f32 + 2*sent*kv*f32
	for _, w := range dl.Sum {
		bwd += table(w)
	}
	if sent > 0 {
		bwd += 2 * lr * kv * f32
	}
	return bwd
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
		max(2*window*kv*f32, 2*window*kv*(es+f32)) + // the window's dK/dV partials (fp32, or with fp32 copies)
		2*2*sent*kv*f32 // the returned partials, two stages
	if pass == kernels.FwdBwd {
		return max(fwd, bwd)
	}
	return bwd
}

// BalancedBoundBytes bounds balanced's buffers per rank before any mask is built (the
// memory guard of longca cp): the worst mask fetches every other rank's blocks, of which
// at most maxFetchUnits ranks' are in flight, unless stages is 1 (all in one piece). With
// thd (the THD layout may be taken: --cp-layout thd, or auto with a kernel that counts its
// calls) the one-stage path's keys may be copied up to maxDocsGrowth times.
func BalancedBoundBytes(tokens, ranks, hq, hkv, dim int, dt tensor.DType, passes []kernels.Pass, stages int, thd bool) float64 {
	units := min(ranks-1, maxFetchUnits)
	if stages == 1 {
		units = ranks - 1
	}
	lr := int64(tokens)
	rows := int64(max(units, 0)) * lr
	kv, es := int64(hkv*dim), int64(dt.Size())
	var top int64
	for _, p := range passes {
		top = max(top, balancedBound(p, lr, int64(hq), int64(hq*dim), kv, es, rows, rows))
		if stages == 1 || ranks <= 8 { // the one-stage path: own K/V beside the fetch
			one := 2 * (lr + rows) * kv * es
			if p != kernels.Fwd {
				one += max(2*(lr+rows)*kv*4, 2*(lr+rows)*kv*es+2*rows*kv*4) + 2*rows*kv*4 + 2*lr*kv*4
			}
			top = max(top, one)
			if thd {
				all, docs := lr+rows, int64(maxDocsGrowth)*(lr+rows)
				b := 2*all*kv*es + 2*docs*kv*es
				if p != kernels.Fwd {
					b += lr*int64(hq*dim)*4 + 2*docs*kv*4 + 2*all*kv*4 + 2*rows*kv*4 + 2*lr*kv*4
				}
				top = max(top, b)
			}
		}
	}
	return float64(top)
}

// MethodBufferBound is the most any of the named methods' buffers may need per rank
// beyond the generic estimate (harness.CPFootprint's two copies of the inputs): 0 for
// every method but balanced. thd: balanced may take the THD layout (BalancedBoundBytes).
func MethodBufferBound(methods []string, tokens, ranks, hq, hkv, dim int, dt tensor.DType, passes []kernels.Pass, stages int, thd bool) float64 {
	if len(methods) != 0 && !slices.Contains(methods, "balanced") {
		return 0
	}
	return BalancedBoundBytes(tokens, ranks, hq, hkv, dim, dt, passes, stages, thd)
}
