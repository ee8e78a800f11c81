package mask

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/longca/longca/tensor"
)

// BlockSparseArea is the area of BlockSparse's head-0 mask, to the pair: over seeds,
// ratios, uniform blocks that divide the length and blocks that do not (a short last
// block, kept in some rows only), variable blocks (widths all different, and all equal:
// avg = min block on a multiple of it), random and content scores (content with ties:
// inputs all equal, every block scoring the same), one KV head and several.
func TestBlockSparseAreaIsTheMasks(t *testing.T) {
	type layout struct{ block, avg, min int }
	layouts := []layout{
		{block: 1}, {block: 2}, {block: 3}, {block: 7}, {block: 8}, {block: 64}, {block: 100}, {block: 128},
		{block: 500}, {block: 1000}, {block: 1023}, {block: 1024},
		{avg: 128}, {avg: 150, min: 100}, {avg: 200, min: 128}, {avg: 300}, {avg: 128, min: 128},
	}
	ratios := []float64{1e-9, 0.01, 0.1, 0.2, 0.25, 0.3, 1.0 / 3, 0.5, 0.75, 0.8, 0.999, 1}
	lengths := func(l layout) []int {
		if l.block > 0 && l.block < 8 { // (nq x nk draws: short lengths keep the test quick)
			return []int{200, 256, 257}
		}
		return []int{1000, 1024, 1031}
	}
	rng := rand.New(rand.NewPCG(4, 2))
	inputs := func(s, hq, hkv int, flat bool) func() (*tensor.Host, *tensor.Host) {
		return func() (*tensor.Host, *tensor.Host) {
			v := func(int, int, int) float64 { return rng.NormFloat64() }
			if flat {
				v = func(int, int, int) float64 { return 1 }
			}
			return fill(s, hq, 4, v), fill(s, hkv, 4, v)
		}
	}
	cases, closed := 0, 0
	for _, l := range layouts {
		for _, s := range lengths(l) {
			if l.block == 0 && s < max(l.min, DefaultMinBlock) {
				continue
			}
			for _, r := range ratios {
				for seed := range uint64(3) {
					for _, sc := range []struct {
						scores  Scores
						flat    bool
						hq, hkv int
					}{{RandomScores, false, 1, 1}, {RandomScores, false, 4, 2}, {ContentScores, false, 2, 1}, {ContentScores, false, 4, 2}, {ContentScores, true, 2, 1}} {
						o := SparseOptions{Seed: seed*977 + 1, Block: l.block, AvgBlock: l.avg, MinBlock: l.min, Ratio: r, Scores: sc.scores, HeadsKV: sc.hkv}
						in := inputs(s, sc.hq, sc.hkv, sc.flat)
						q, k := in()
						name := fmt.Sprintf("S=%d %+v q:kv %d:%d flat %v", s, o, sc.hq, sc.hkv, sc.flat)
						sp, err := BlockSparse(s, o, q, k)
						if err != nil {
							t.Fatalf("%s: BlockSparse: %v", name, err)
						}
						calls := 0
						got, err := BlockSparseArea(s, o, func() (*tensor.Host, *tensor.Host) { calls++; return q, k })
						if err != nil {
							t.Fatalf("%s: BlockSparseArea: %v", name, err)
						}
						if want := sp.Heads[0].Area(); got != want {
							t.Fatalf("%s: BlockSparseArea %d, the built mask's %d", name, got, want)
						}
						if calls > 1 || (sc.scores == RandomScores && calls > 0) {
							t.Fatalf("%s: inputs called %d times", name, calls)
						}
						equal := true
						for j := 1; j+1 < len(sp.KEdges); j++ {
							equal = equal && sp.KEdges[j+1]-sp.KEdges[j] == sp.KEdges[1]-sp.KEdges[0]
						}
						if equal {
							closed++
							// no draw needed: the same area without inputs at all
							if a, err := BlockSparseArea(s, o, nil); err != nil || a != got {
								t.Fatalf("%s: without inputs %d, %v; want %d", name, a, err, got)
							}
						}
						cases++
					}
				}
			}
		}
	}
	if closed == 0 || closed == cases {
		t.Fatalf("%d of %d cases of one block width: want both kinds", closed, cases)
	}
	t.Logf("%d cases, %d of one block width", cases, closed)
}

// A large mask's area is read without building it: 1-token blocks over 16K tokens (most
// of a GiB and seconds to build) in well under a second, and without allocating it.
func TestBlockSparseAreaOfHugeMaskIsCheap(t *testing.T) {
	o := SparseOptions{Seed: 42, Block: 1, Ratio: 0.3, HeadsKV: 1}
	var area int64
	allocs := testing.AllocsPerRun(3, func() {
		var err error
		if area, err = BlockSparseArea(16<<10, o, nil); err != nil {
			t.Fatal(err)
		}
	})
	if keep := int64(4915); area != 16<<10*keep { // max(1, int(0.3 x 16K))
		t.Fatalf("area %d, want 16K x %d", area, keep)
	}
	if allocs > 10 {
		t.Fatalf("%v allocations for the area of a 1-token-block mask: want the edges only", allocs)
	}
}

// BlockSparseArea refuses what BlockSparse refuses, with the same errors.
func TestBlockSparseAreaErrors(t *testing.T) {
	q := tensor.NewHost(tensor.FP32, 256, 4, 8)
	k := tensor.NewHost(tensor.FP32, 256, 3, 8)
	in := func() (*tensor.Host, *tensor.Host) { return q, k }
	for _, c := range []struct {
		s int
		o SparseOptions
	}{
		{256, SparseOptions{Block: 64, Ratio: 0, HeadsKV: 1}},
		{256, SparseOptions{Block: 64, Ratio: 1.5, HeadsKV: 1}},
		{256, SparseOptions{Block: 64, Ratio: 0.5, HeadsKV: 0}},
		{256, SparseOptions{Block: -1, Ratio: 0.5, HeadsKV: 1}},
		{256, SparseOptions{AvgBlock: 64, Ratio: 0.5, HeadsKV: 1}},
		{100, SparseOptions{AvgBlock: 128, Ratio: 0.5, HeadsKV: 1}},
		{0, SparseOptions{Block: 64, Ratio: 0.5, HeadsKV: 1}},
		{250, SparseOptions{Block: 64, Ratio: 0.5, HeadsKV: 3, Scores: ContentScores}}, // content, blocks of two widths: q and k read
	} {
		_, werr := BlockSparse(c.s, c.o, q, k)
		_, err := BlockSparseArea(c.s, c.o, in)
		if err == nil || werr == nil || err.Error() != werr.Error() || IsInputError(err) != IsInputError(werr) {
			t.Errorf("S=%d %+v: BlockSparseArea's error %v, BlockSparse's %v", c.s, c.o, err, werr)
		}
	}
	if _, err := BlockSparseArea(250, SparseOptions{Block: 64, Ratio: 0.5, HeadsKV: 1, Scores: ContentScores}, nil); err == nil {
		t.Error("content scores over blocks of two widths without inputs: no error")
	}
}
