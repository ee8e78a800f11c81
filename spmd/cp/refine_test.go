package cp

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

// refinePairwise is refine as it was, every pair of two ranks' blocks tried in turn
// (quadratic in the blocks per rank): the reference the sorted search must agree with.
func (d *Dispatch) refinePairwise(area []int64, total int64) {
	n := d.Ranks
	if n < 2 {
		return
	}
	held := make([][]int32, n)
	for b, r := range d.Owner {
		held[r] = append(held[r], int32(b))
	}
	target := int64(float64(total) / float64(n) * (1 + DispatchTolerance/2))
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	for iter := 0; iter < 4*n; iter++ {
		hi := 0
		for r := range n {
			if d.Area[r] > d.Area[hi] {
				hi = r
			}
		}
		top := d.Area[hi]
		if top <= target {
			return
		}
		if iter%16 == 0 || n <= 128 {
			slices.SortFunc(order, func(a, b int) int { return cmp.Compare(d.Area[a], d.Area[b]) })
		}
		best, bx, by, bestR := top, -1, -1, -1
		for _, r := range order[:min(n, refinePartners)] {
			gap := top - d.Area[r]
			if r == hi || gap <= 0 {
				continue
			}
			for x, xb := range held[hi] {
				for y, yb := range held[r] {
					diff := area[xb] - area[yb]
					if diff <= 0 || diff >= gap {
						continue
					}
					if worse := max(top-diff, d.Area[r]+diff); worse < best {
						best, bx, by, bestR = worse, x, y, r
					}
				}
			}
		}
		if bestR < 0 {
			return
		}
		a, b := held[hi][bx], held[bestR][by]
		held[hi][bx], held[bestR][by] = b, a
		d.Owner[a], d.Owner[b] = int32(bestR), int32(hi)
		diff := area[a] - area[b]
		d.Area[hi] -= diff
		d.Area[bestR] += diff
	}
}

// TestRefineMatchesPairwise: refine's sorted search makes the very swaps, in the same
// order, as trying every pair (ties included: areas drawn from few values, as a
// document mask's full blocks are), on random placements, on the real masks' blocks,
// and on more ranks than refreshes its partners every step.
func TestRefineMatchesPairwise(t *testing.T) {
	check := func(name string, area []int64, n int, owner []int32) {
		t.Helper()
		load := make([]int64, n)
		var total int64
		for b, r := range owner {
			load[r] += area[b]
			total += area[b]
		}
		got := &Dispatch{Ranks: n, Owner: slices.Clone(owner), Area: slices.Clone(load)}
		want := &Dispatch{Ranks: n, Owner: slices.Clone(owner), Area: slices.Clone(load)}
		got.refine(area, total)
		want.refinePairwise(area, total)
		if !slices.Equal(got.Owner, want.Owner) || !slices.Equal(got.Area, want.Area) {
			t.Fatalf("%s: refine placed blocks otherwise than the pairwise search (loads %v, want %v)", name, got.Area, want.Area)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	swapped := 0
	for trial := range 300 {
		n := 2 + rng.IntN(12)
		if trial%30 == 0 {
			n = 130 + rng.IntN(40) // partners refreshed every 16 steps only
		}
		per := 1 + rng.IntN(40)
		levels := 1 + rng.IntN(20)
		area := make([]int64, n*per)
		for b := range area {
			area[b] = int64(rng.IntN(levels)) * int64(1+rng.IntN(3)) * 97
		}
		owner := make([]int32, len(area))
		for b := range owner {
			owner[b] = int32(b / per)
		}
		rng.Shuffle(len(owner), func(i, j int) { owner[i], owner[j] = owner[j], owner[i] })
		before := slices.Clone(owner)
		check("random", area, n, owner)
		d := &Dispatch{Ranks: n, Owner: slices.Clone(before), Area: make([]int64, n)}
		var total int64
		for b, r := range before {
			d.Area[r] += area[b]
			total += area[b]
		}
		d.refine(area, total)
		if !slices.Equal(d.Owner, before) {
			swapped++
		}
	}
	if swapped < 100 {
		t.Fatalf("only %d of 300 random placements were refined: the test does not exercise the search", swapped)
	}
	for _, name := range []string{"causal", "causal_document_long", "full_document_long"} {
		for _, n := range []int{8, 64} {
			m := cpMask(t, name, 1<<16, 3)
			d, needs := newDispatch(m, n, 64)
			var total int64
			for _, a := range needs.area {
				total += a
			}
			owner, _ := cutAndFill(needs.area, n, d.PerRank, total)
			check(name, needs.area, n, owner)
		}
	}
}
