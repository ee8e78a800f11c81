package cp

import (
	"fmt"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
)

// balanced's mesh U x B: U ranks split the heads (Ulysses all-to-alls, as the engine's
// headsForward), B = N/U split the sequence by area (the dispatch). U = 1 is the
// dispatch alone; U = N is Ulysses on a contiguous layout. What changes with U, per
// rank: the kernel's shape (B's share of the sequence, on H/U query heads and HKV/U KV
// heads: fewer KV-head groups per call as U grows), what the dispatch moves (the fetched
// K/V and the returned dK/dV partials of HKV/U heads, over B ranks) and the all-to-alls.

// MeshModel prices a mesh U x B of balanced from its dispatch, to choose U per mask
// before running (BalancedMeshChoice). Rates are a whole GPU's: on one GPU shared by N
// ranks both the compute and the copies are shared alike, so the comparison holds.
type MeshModel struct {
	// FwdTFLOPs and BwdTFLOPs are the kernel's dense rates.
	FwdTFLOPs, BwdTFLOPs float64
	// FwdGroup and BwdGroup are the kernel's extra time per KV-head group beyond the
	// first in one call, as a fraction of its time on the mask's full (non-causal) area
	// (GQA: a call on 8 KV groups of 8 query heads each against one on 1 group of 8, the
	// same FLOPs; measured on the full mask, and not seen on causal). The share is the
	// global mask's, not a call's slices': a causal rank's sub-mask is mostly full
	// rectangles, yet the measured causal calls showed no such cost.
	FwdGroup, BwdGroup float64
	// LinkGBs prices what a rank receives from the dispatch (the fetch, the gradient
	// return), AllToAllGBs what it receives by the engine's all-to-alls (U > 1), CopyGBs
	// the dispatch's passes over device memory (copies, conversions, sums; read plus
	// write). The all-to-alls have a rate of their own: each tensor's comes with a
	// packing pass over the whole tensor and a fence, which the fetch does not.
	LinkGBs, AllToAllGBs, CopyGBs float64
	// Gain is how much faster (a fraction of the dispatch alone's time) another mesh
	// must be predicted to leave the dispatch alone (U = 1); 0: the least predicted
	// time wins.
	Gain float64
}

// DefaultMeshModel is the H200 of docs/cp-gpu.md (8 ranks on one GPU, 8K tokens each,
// 64:8, d 128, longca's cuda kernel), fitted to balanced's rows of 8x1, 2x4 and 1x8 on
// the four CP masks of the call of 2026-12-03 16:31 (docs/results/
// h200-cp-ranks8-cuda-mesh-20261203.txt; TestMeshModelMeasured): the parameters that
// best predict each mesh's forward plus backward time against 8x1's on the same mask,
// over a grid, among those whose choice is the measured best within 1% on every mask.
// Dense rates 575 / 450 TFLOP/s; the group cost 6% both ways over 7 groups on full
// area (the 14:38 call without transfers: ring-allgather, balanced's shape, 4.5% /
// 7.1% slower than ulysses on full, the same on causal); the dispatch's transfers at
// 500 GB/s, the all-to-alls at 300 GB/s, device passes at 4.3 TB/s. The two rates are
// effective, not the links': one rate for both cannot choose 8x1 on causal and 1x8 on
// causal_document_long (neither has a group cost; the dispatch fetches 112 blocks on
// one, 71 on the other, while the all-to-alls move the same), which the rows need. No
// preference for the dispatch alone (Gain 0, was 3%): the model's gain of 8x1 on causal
// is 1.2% (measured 2.6%), so a 3% rule would keep 1x8 there; and 1x8 was the slowest
// of the three meshes on causal and full_document_long, within 1% of it on full.
var DefaultMeshModel = MeshModel{FwdTFLOPs: 575, BwdTFLOPs: 450, FwdGroup: 0.06 / 7, BwdGroup: 0.06 / 7, LinkGBs: 500, AllToAllGBs: 300, CopyGBs: 4300}

// MeshCost is a mesh's predicted seconds per pass, the slowest rank's, and their parts.
type MeshCost struct {
	U, B int
	// Fwd and Bwd are the slowest rank's seconds; Kernel, Link and Copy the parts of
	// that rank's forward plus backward.
	Fwd, Bwd, Kernel, Link, Copy float64
}

// Total is forward plus backward.
func (c MeshCost) Total() float64 { return c.Fwd + c.Bwd }

func (c MeshCost) String() string {
	return fmt.Sprintf("%dx%d: %.3f + %.3f ms (kernel %.3f, link %.3f, copies %.3f)", c.U, c.B, c.Fwd*1e3, c.Bwd*1e3, c.Kernel*1e3, c.Link*1e3, c.Copy*1e3)
}

// balancedSplits are the head-parallel degrees U of n ranks that balanced can run: U
// divides n and the query heads, and the KV heads split over U or replicate onto it.
func balancedSplits(n int, p kernels.Problem) []int {
	var out []int
	for u := 1; u <= n; u++ {
		if balancedSplitErr(n, u, p) == nil {
			out = append(out, u)
		}
	}
	return out
}

// balancedSplitErr says why U x n/U is no mesh of balanced for p (nil: it is).
func balancedSplitErr(n, u int, p kernels.Problem) error {
	switch {
	case u < 1 || n%u != 0:
		return fmt.Errorf("balanced: --cp-ulysses %d does not divide %d ranks: use a divisor of %d, or 0 to let the plan choose", u, n, n)
	case p.HeadsQ%u != 0:
		return fmt.Errorf("balanced: --cp-ulysses %d does not split %d query heads: use a divisor of both %d and the ranks, or 0", u, p.HeadsQ, p.HeadsQ)
	case p.HeadsKV <= 0 || (p.HeadsKV%u != 0 && u%p.HeadsKV != 0):
		return fmt.Errorf("balanced: --cp-ulysses %d neither splits %d KV heads nor is a multiple of them: use a divisor or a multiple of %d, or 0", u, p.HeadsKV, p.HeadsKV)
	}
	return nil
}

// Cost prices balanced on the mesh u x d.Ranks for p (d: the dispatch over the B ranks,
// one stage or more): per rank, the kernel on its area at H/U heads (with the group
// cost), what it receives (the fetch twice, the fp32 return, u > 1: the all-to-alls of
// its share), and the device passes (its own K/V copied beside the fetch, the return's
// conversion and sums, the dK/dV conversions). The rank slowest over both passes.
func (mm MeshModel) Cost(p kernels.Problem, u int, d *Dispatch) MeshCost {
	hq := p.HeadsQ / u
	hkv, _ := kvHeads(p.HeadsKV, u)
	dim, es := float64(p.HeadDim), float64(p.DType.Size())
	groups := float64(hkv)
	var fullArea int64
	for _, sl := range p.Mask.Slices {
		if sl.Kind == mask.Full {
			fullArea += sl.Area()
		}
	}
	full := 0.0 // the share of the area the group cost applies to
	if a := p.Mask.Area(); a > 0 {
		full = float64(fullArea) / float64(a)
	}
	kvRow := float64(hkv) * dim // elements of one row of K (or V)
	lr := float64(d.PerRank * d.Block)
	tokens := lr / float64(u) // a rank's own tokens, before the all-to-all
	link, a2a, copyRate := mm.LinkGBs*1e9, mm.AllToAllGBs*1e9, mm.CopyGBs*1e9
	var a2aF, a2aB float64
	if u > 1 { // the engine's all-to-alls (ulyssesBytes), received as much as sent
		frac := float64(u-1) / float64(u)
		qb, kvb := tokens*float64(p.HeadsQ)*dim*es, tokens*float64(p.HeadsKV)*dim*es
		a2aF = frac * (2*qb + 2*kvb + float64(p.HeadsQ)*tokens*4)
		a2aB = frac * (2*qb + 2*kvb)
	}
	c := MeshCost{U: u, B: d.Ranks}
	var worst MeshCost
	for r := range d.Ranks {
		flops := 4 * float64(d.Area[r]) * float64(hq) * dim
		kf := flops / (mm.FwdTFLOPs * 1e12) * (1 + full*mm.FwdGroup*(groups-1))
		kb := 2.5 * flops / (mm.BwdTFLOPs * 1e12) * (1 + full*mm.BwdGroup*(groups-1))
		fetched := float64(d.Fetched[r] * d.Block)
		sent := 0.0
		for s := range d.NumStages() {
			for _, x := range d.Sends(r, s) {
				sent += float64(int(x.N) * d.Block)
			}
		}
		kvIn := 2 * fetched * kvRow * es
		lf := kvIn/link + a2aF/a2a
		lb := (kvIn+2*fetched*kvRow*4)/link + a2aB/a2a
		var cf, cb float64
		if fetched > 0 {
			cf = 2 * 2 * lr * kvRow * es / copyRate // its own K/V beside the fetch
			cb = cf
		}
		if fetched > 0 || sent > 0 {
			cb += 2 * (fetched*kvRow*(es+4) + // the fetched partials to fp32
				sent*kvRow*12 + // the returned ones summed into the accumulator
				lr*kvRow*(es+4)*2) / copyRate // its own into the accumulator, and out
		}
		fwd, bwd := kf+lf+cf, kb+lb+cb
		if fwd+bwd > worst.Fwd+worst.Bwd {
			worst = MeshCost{Fwd: fwd, Bwd: bwd, Kernel: kf + kb, Link: lf + lb, Copy: cf + cb}
		}
	}
	c.Fwd, c.Bwd, c.Kernel, c.Link, c.Copy = worst.Fwd, worst.Bwd, worst.Kernel, worst.Link, worst.Copy
	return c
}

// BalancedMeshChoice is the mesh balanced runs on n ranks when the user names none
// (--cp-ulysses 0): up to 8 ranks (one node) the U of the least forward plus backward
// time by DefaultMeshModel over every split (balancedSplits; the dispatch alone unless
// another gains Gain), each with its own
// dispatch of block (0: DefaultBlock) and stages; past 8 ranks BalancedUlysses (Ulysses
// inside the node, the dispatch across nodes). It returns U, the dispatch over n/U ranks,
// and every candidate's cost (none past 8 ranks).
func BalancedMeshChoice(p kernels.Problem, n, block, stages int) (int, *Dispatch, []MeshCost, error) {
	us := []int{BalancedUlysses(n, p)}
	if n <= 8 {
		us = balancedSplits(n, p)
	}
	var ds []*Dispatch
	var costs []MeshCost
	for _, u := range us {
		b := block
		if b == 0 {
			b = DefaultBlock(p.Mask.SeqQ, n/u, u)
		}
		d, err := Balance(p.Mask, n/u, b, DefaultStages(n, stages))
		if err != nil {
			return 0, nil, nil, err
		}
		if len(us) == 1 {
			return u, d, nil, nil
		}
		ds = append(ds, d)
		costs = append(costs, DefaultMeshModel.Cost(p, u, d))
	}
	// us[0] is 1, the dispatch alone: another mesh must beat it by Gain (0: any gain).
	best := 0
	for i, c := range costs {
		if c.Total() < costs[best].Total() {
			best = i
		}
	}
	if costs[best].Total() > (1-DefaultMeshModel.Gain)*costs[0].Total() {
		best = 0
	}
	return costs[best].U, ds[best], costs, nil
}
