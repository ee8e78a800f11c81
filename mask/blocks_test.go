package mask

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestBandAreaBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for it := 0; it < 20000; it++ {
		q := Range{rng.IntN(30), 0}
		q.End = q.Start + rng.IntN(30)
		k := Range{rng.IntN(30), 0}
		k.End = k.Start + rng.IntN(30)
		lo, hi := rng.IntN(60)-30, rng.IntN(60)-30
		switch rng.IntN(4) {
		case 1:
			lo = -unbounded
		case 2:
			hi = unbounded
		case 3:
			lo, hi = -unbounded, unbounded
		}
		var want int64
		for x := q.Start; x < q.End; x++ {
			for y := k.Start; y < k.End; y++ {
				if y-x >= lo && y-x <= hi {
					want++
				}
			}
		}
		if got := bandArea(q, k, lo, hi); got != want {
			t.Fatalf("bandArea(%v, %v, %d, %d) = %d, want %d", q, k, lo, hi, got, want)
		}
	}
}

// randomEdges cuts n into blocks of random sizes 1..maxB.
func randomEdges(rng *rand.Rand, n, maxB int) []int {
	edges := []int{0}
	for e := 0; e < n; {
		e = min(n, e+1+rng.IntN(maxB))
		edges = append(edges, e)
	}
	return edges
}

func checkBlocks(t *testing.T, m Mask, qe, ke []int) {
	t.Helper()
	bm := Blocks(m, qe, ke)
	for i := 0; i+1 < len(qe); i++ {
		for j := 0; j+1 < len(ke); j++ {
			var n int64
			var touching []int
			for si, s := range m.Slices {
				hit := false
				for q := qe[i]; q < qe[i+1]; q++ {
					for k := ke[j]; k < ke[j+1]; k++ {
						if s.Allowed(q, k) {
							n++
							hit = true
						}
					}
				}
				if hit {
					touching = append(touching, si)
				}
			}
			want := Empty
			if size := int64(qe[i+1]-qe[i]) * int64(ke[j+1]-ke[j]); n == size {
				want = FullBlock
			} else if n > 0 {
				want = Partial
			}
			if got := bm.State(i, j); got != want {
				t.Fatalf("S=%d edges %v / %v: tile (%d,%d) is %v, brute force %v (%d pairs); slices %v", m.SeqQ, qe, ke, i, j, got, want, n, m.Slices)
			}
			if e := bm.Entry(i, j); e != nil && (e.Area != n || !slices.Equal(e.Slices, touching)) {
				t.Fatalf("tile (%d,%d): area %d slices %v, brute force %d %v", i, j, e.Area, e.Slices, n, touching)
			}
		}
		for x := 1; x < len(bm.Rows[i]); x++ {
			if bm.Rows[i][x].K <= bm.Rows[i][x-1].K {
				t.Fatalf("row %d not in ascending k order", i)
			}
		}
	}
}

func TestBlocksBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, name := range Names() {
		for it := 0; it < 12; it++ {
			s := 1 + rng.IntN(120)
			o := Options{Seed: uint64(it), Source: smallSource, Window: 1 + rng.IntN(s), BlockSize: 1, LongMin: 10, LongMax: 30}
			sp, err := Build(name, s, o)
			if err != nil {
				t.Fatal(err)
			}
			b := 1 + rng.IntN(16)
			checkBlocks(t, sp.Mask, UniformEdges(s, b), UniformEdges(s, b))
			checkBlocks(t, sp.Mask, randomEdges(rng, s, 20), randomEdges(rng, s, 20))
		}
	}
	// Single slices of every kind, anywhere, with rectangular matrices.
	for it := 0; it < 400; it++ {
		sq, sk := 1+rng.IntN(50), 1+rng.IntN(50)
		m := Mask{SeqQ: sq, SeqK: sk, Slices: []Slice{randSlice(rng, sq, sk), randSlice(rng, sq, sk)}}
		if m.Slices[0].Q.Intersect(m.Slices[1].Q).Len() > 0 {
			m.Slices = m.Slices[:1] // keep them disjoint
		}
		checkBlocks(t, m, randomEdges(rng, sq, 9), randomEdges(rng, sk, 9))
	}
}

// At sizes far beyond brute force, the tiles' areas still add up to the mask's area.
func TestBlocksLarge(t *testing.T) {
	for _, name := range []string{"causal_document", "sliding_window", "global_sliding_window", "full_document_long"} {
		sp, err := Build(name, 1<<22, Options{Seed: 42})
		if err != nil {
			t.Fatal(err)
		}
		bm := Blocks(sp.Mask, UniformEdges(1<<22, 4096), UniformEdges(1<<22, 4096))
		var sum int64
		for _, row := range bm.Rows {
			for _, e := range row {
				sum += e.Area
			}
		}
		full, partial := bm.Counts()
		if sum != sp.Mask.Area() || full+partial == 0 {
			t.Errorf("%s at 4M: tile areas sum to %d, mask area %d (%d full, %d partial)", name, sum, sp.Mask.Area(), full, partial)
		}
	}
	if e := UniformEdges(10, 4); !slices.Equal(e, []int{0, 4, 8, 10}) {
		t.Errorf("UniformEdges(10, 4) = %v", e)
	}
	if CheckEdges([]int{0, 5, 5, 10}, 10) == nil || CheckEdges([]int{1, 10}, 10) == nil || CheckEdges([]int{0, 10}, 10) != nil {
		t.Error("CheckEdges accepts bad edges or rejects good ones")
	}
}
