package mask

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"

	"github.com/longca/longca/tensor"
)

// checkSparse asserts the per-row kept count, that each head's mask is exactly the kept
// tiles (through Blocks), and that its area is the kept tiles' total area.
func checkSparse(t *testing.T, sp *Sparse, s int, ratio float64) {
	t.Helper()
	nk := len(sp.KEdges) - 1
	if want := max(1, int(ratio*float64(nk))); sp.KeepPerRow != want {
		t.Fatalf("keep per row %d, want %d", sp.KeepPerRow, want)
	}
	for h, m := range sp.Heads {
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		bm := Blocks(m, sp.QEdges, sp.KEdges)
		var want int64
		for i, row := range sp.Kept[h] {
			if len(row) != sp.KeepPerRow {
				t.Fatalf("head %d row %d keeps %d blocks, want %d", h, i, len(row), sp.KeepPerRow)
			}
			for j := 0; j < nk; j++ {
				kept := slices.Contains(row, j)
				if kept {
					want += int64(sp.QEdges[i+1]-sp.QEdges[i]) * int64(sp.KEdges[j+1]-sp.KEdges[j])
				}
				if st := bm.State(i, j); (st == FullBlock) != kept || st == Partial {
					t.Fatalf("head %d tile (%d,%d): state %v, kept %v", h, i, j, st, kept)
				}
			}
		}
		if m.Area() != want {
			t.Fatalf("head %d: area %d, kept tiles %d", h, m.Area(), want)
		}
		// Adjacent kept tiles of a row are one slice: slices <= runs.
		if len(m.Slices) > len(sp.QEdges)-1+len(sp.Kept[h])*sp.KeepPerRow {
			t.Fatalf("head %d: %d slices", h, len(m.Slices))
		}
		for x := 1; x < len(m.Slices); x++ {
			a, b := m.Slices[x-1], m.Slices[x]
			if a.Q == b.Q && a.K.End == b.K.Start {
				t.Fatalf("head %d: adjacent slices %v and %v not merged", h, a, b)
			}
		}
	}
}

func TestBlockSparseUniformRandom(t *testing.T) {
	for _, c := range []struct {
		s, block int
		ratio    float64
	}{{1024, 64, 0.5}, {1000, 128, 0.2}, {4096, 64, 0.8}, {300, 64, 0.1}, {512, 128, 1}} {
		sp, err := BlockSparse(c.s, SparseOptions{Seed: 42, Block: c.block, Ratio: c.ratio, HeadsKV: 3}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sp.QEdges, UniformEdges(c.s, c.block)) || len(sp.Heads) != 3 {
			t.Fatalf("S=%d B=%d: edges %v, %d heads", c.s, c.block, sp.QEdges, len(sp.Heads))
		}
		checkSparse(t, sp, c.s, c.ratio)
		if c.ratio == 1 && sp.Heads[0].Area() != int64(c.s)*int64(c.s) {
			t.Errorf("ratio 1 is not the full mask")
		}
		// Heads differ (independent scores) and a second build is identical.
		again, _ := BlockSparse(c.s, SparseOptions{Seed: 42, Block: c.block, Ratio: c.ratio, HeadsKV: 3}, nil, nil)
		if !slices.Equal(again.Heads[2].Slices, sp.Heads[2].Slices) {
			t.Errorf("S=%d: not reproducible", c.s)
		}
		if c.ratio < 1 && len(sp.KEdges) > 4 && slices.Equal(sp.Heads[0].Slices, sp.Heads[1].Slices) {
			t.Errorf("S=%d: heads 0 and 1 keep the same blocks", c.s)
		}
	}
}

func TestVariableEdges(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, avg := range []int{128, 256, 512, 1024} {
		for _, n := range []int{128, 1000, 32768, 100000} {
			e, err := VariableEdges(n, 128, avg, rng)
			if err != nil {
				t.Fatal(err)
			}
			if err := CheckEdges(e, n); err != nil {
				t.Fatal(err)
			}
			if want := max(1, n/avg); len(e)-1 != want {
				t.Errorf("n=%d avg=%d: %d blocks, want %d", n, avg, len(e)-1, want)
			}
			for i := 1; i < len(e); i++ {
				if e[i]-e[i-1] < 128 {
					t.Fatalf("n=%d avg=%d: block %d of %d < 128", n, avg, i-1, e[i]-e[i-1])
				}
			}
			if avg > 128 && n >= 32768 {
				sizes := map[int]bool{}
				for i := 1; i < len(e); i++ {
					sizes[e[i]-e[i-1]] = true
				}
				if len(sizes) < 10 {
					t.Errorf("n=%d avg=%d: only %d distinct sizes", n, avg, len(sizes))
				}
			}
		}
	}
	if _, err := VariableEdges(100, 128, 256, rng); err == nil {
		t.Error("VariableEdges(100 < min) succeeded")
	}
	sp, err := BlockSparse(20000, SparseOptions{Seed: 3, AvgBlock: 512, Ratio: 0.5, HeadsKV: 2}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(sp.QEdges, sp.KEdges) {
		t.Error("q and k edges are the same draw")
	}
	checkSparse(t, sp, 20000, 0.5)
}

// fill sets a host tensor [s, h, d] from f.
func fill(s, h, d int, f func(s, h, d int) float64) *tensor.Host {
	t := tensor.NewHost(tensor.FP32, s, h, d)
	for a := 0; a < s; a++ {
		for b := 0; b < h; b++ {
			for c := 0; c < d; c++ {
				t.Set((a*h+b)*d+c, f(a, b, c))
			}
		}
	}
	return t
}

func TestBlockSparseContentPicksLargestDot(t *testing.T) {
	// KV head 0 favours k block 5 (its keys point along q's direction), KV head 1 block 2.
	const s, b, d = 512, 64, 4
	q := fill(s, 4, d, func(_, h, x int) float64 {
		if x == h/2 { // heads 0,1 (group of KV 0) along e0; heads 2,3 along e1
			return 1
		}
		return 0
	})
	k := fill(s, 2, d, func(t, h, x int) float64 {
		switch {
		case h == 0 && t/b == 5 && x == 0, h == 1 && t/b == 2 && x == 1:
			return 3
		case x == h:
			return -0.1 * float64(t%7)
		}
		return 0.5
	})
	sp, err := BlockSparse(s, SparseOptions{Block: b, Ratio: 0.01, Scores: ContentScores, HeadsKV: 2}, q, k)
	if err != nil {
		t.Fatal(err)
	}
	checkSparse(t, sp, s, 0.01)
	for i := range sp.Kept[0] {
		if !slices.Equal(sp.Kept[0][i], []int{5}) || !slices.Equal(sp.Kept[1][i], []int{2}) {
			t.Fatalf("row %d kept %v and %v, want [5] and [2]", i, sp.Kept[0][i], sp.Kept[1][i])
		}
	}
}

// On random q and k the kept set is the top-k of brute-force pooled dot products.
func TestBlockSparseContentTopK(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	const s, hq, hkv, d = 700, 6, 2, 8
	q := fill(s, hq, d, func(int, int, int) float64 { return rng.NormFloat64() })
	k := fill(s, hkv, d, func(int, int, int) float64 { return rng.NormFloat64() })
	sp, err := BlockSparse(s, SparseOptions{Seed: 1, AvgBlock: 150, MinBlock: 100, Ratio: 0.4, Scores: ContentScores, HeadsKV: hkv}, q, k)
	if err != nil {
		t.Fatal(err)
	}
	checkSparse(t, sp, s, 0.4)
	g := hq / hkv
	for h := 0; h < hkv; h++ {
		for i := 0; i+1 < len(sp.QEdges); i++ {
			type sc struct {
				j int
				v float64
			}
			var all []sc
			for j := 0; j+1 < len(sp.KEdges); j++ {
				// score = sum over (tq, head, tk) of q.k / (nq*g*nk): the dot of the means.
				var v float64
				for tq := sp.QEdges[i]; tq < sp.QEdges[i+1]; tq++ {
					for hh := h * g; hh < (h+1)*g; hh++ {
						for tk := sp.KEdges[j]; tk < sp.KEdges[j+1]; tk++ {
							for x := 0; x < d; x++ {
								v += q.At((tq*hq+hh)*d+x) * k.At((tk*hkv+h)*d+x)
							}
						}
					}
				}
				v /= float64((sp.QEdges[i+1] - sp.QEdges[i]) * g * (sp.KEdges[j+1] - sp.KEdges[j]))
				all = append(all, sc{j, v})
			}
			sort.SliceStable(all, func(a, b int) bool { return all[a].v > all[b].v })
			var want []int
			for _, e := range all[:sp.KeepPerRow] {
				want = append(want, e.j)
			}
			sort.Ints(want)
			if !slices.Equal(sp.Kept[h][i], want) {
				t.Fatalf("head %d row %d: kept %v, brute force top-%d %v", h, i, sp.Kept[h][i], sp.KeepPerRow, want)
			}
		}
	}
}

func TestBlockSparseErrors(t *testing.T) {
	q := tensor.NewHost(tensor.FP32, 256, 4, 8)
	k := tensor.NewHost(tensor.FP32, 256, 3, 8)
	for _, c := range []SparseOptions{
		{Block: 64, Ratio: 0, HeadsKV: 1},
		{Block: 64, Ratio: 1.5, HeadsKV: 1},
		{Block: 64, Ratio: 0.5, HeadsKV: 0},
		{AvgBlock: 64, Ratio: 0.5, HeadsKV: 1},
		{Block: 64, Ratio: 0.5, HeadsKV: 3, Scores: ContentScores},
		{Block: 64, Ratio: 0.5, HeadsKV: 2, Scores: ContentScores},
	} {
		if _, err := BlockSparse(256, c, q, k); err == nil {
			t.Errorf("BlockSparse(%+v) succeeded", c)
		} else if c.Scores != ContentScores && !IsInputError(err) {
			t.Errorf("BlockSparse(%+v): %v is not an InputError", c, err)
		}
	}
	if _, err := ParseScores("magic"); err == nil {
		t.Error("ParseScores(magic) succeeded")
	}
}

// selectTop keeps exactly the k best by (score desc, block asc), ties included.
func TestSelectTop(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	for it := 0; it < 2000; it++ {
		n := 1 + rng.IntN(60)
		k := 1 + rng.IntN(n)
		s := make([]scored, n)
		for j := range s {
			s[j] = scored{float64(rng.IntN(1 + rng.IntN(5))), j} // many ties
		}
		want := slices.Clone(s)
		sort.SliceStable(want, func(a, b int) bool { return want[a].v > want[b].v })
		rng.Shuffle(n, func(a, b int) { s[a], s[b] = s[b], s[a] })
		selectTop(s, k)
		got := make([]int, k)
		wj := make([]int, k)
		for x := 0; x < k; x++ {
			got[x], wj[x] = s[x].j, want[x].j
		}
		slices.Sort(got)
		slices.Sort(wj)
		if !slices.Equal(got, wj) {
			t.Fatalf("n=%d k=%d: top %v, want %v", n, k, got, wj)
		}
	}
}
