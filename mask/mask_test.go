package mask

import (
	"math/rand/v2"
	"testing"
)

func bruteArea(m Mask) int64 {
	var a int64
	for q := 0; q < m.SeqQ; q++ {
		for k := 0; k < m.SeqK; k++ {
			if m.Allowed(q, k) {
				a++
			}
		}
	}
	return a
}

func randSlice(rng *rand.Rand, sq, sk int) Slice {
	qs := rng.IntN(sq)
	qe := qs + 1 + rng.IntN(sq-qs)
	ks := rng.IntN(sk)
	ke := ks + 1 + rng.IntN(sk-ks)
	return Slice{Range{qs, qe}, Range{ks, ke}, Kind(rng.IntN(4))}
}

// Every slice kind's area, canonical pieces and windows agree with brute force.
func TestSliceAreaWindowCanonicalBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for it := 0; it < 3000; it++ {
		sq, sk := 1+rng.IntN(40), 1+rng.IntN(40)
		s := randSlice(rng, sq, sk)
		m := Mask{SeqQ: sq, SeqK: sk, Slices: []Slice{s}}
		want := bruteArea(m)
		if got := s.Area(); got != want {
			t.Fatalf("%+v: area %d, brute force %d", s, got, want)
		}
		canon := Mask{SeqQ: sq, SeqK: sk, Slices: s.Canonical()}
		for q := 0; q < sq; q++ {
			for k := 0; k < sk; k++ {
				if canon.Allowed(q, k) != s.Allowed(q, k) {
					t.Fatalf("%+v: canonical %+v differs at (%d,%d)", s, canon.Slices, q, k)
				}
			}
		}
		if bruteArea(canon) != want || canon.Area() != want {
			t.Fatalf("%+v: canonical pieces overlap or area differs", s)
		}
		wq := randSlice(rng, sq, sk).Q
		wk := randSlice(rng, sq, sk).K
		w := m.Window(wq, wk)
		if err := w.Validate(); err != nil {
			t.Fatalf("window %v x %v of %+v: %v", wq, wk, s, err)
		}
		for q := 0; q < w.SeqQ; q++ {
			for k := 0; k < w.SeqK; k++ {
				if w.Allowed(q, k) != m.Allowed(q+wq.Start, k+wk.Start) {
					t.Fatalf("window %v x %v of %+v wrong at local (%d,%d): %+v", wq, wk, s, q, k, w.Slices)
				}
			}
		}
		if w.Area() != bruteArea(w) {
			t.Fatalf("window area differs")
		}
	}
}

func TestCausalAreaHugeIsInstant(t *testing.T) {
	const S = 4194304
	m := Mask{SeqQ: S, SeqK: S, Slices: []Slice{{Range{0, S}, Range{0, S}, Causal}}}
	if got, want := m.Area(), int64(S)*int64(S+1)/2; got != want {
		t.Fatalf("area %d, want %d", got, want)
	}
}

func TestRowSpans(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for it := 0; it < 300; it++ {
		sq, sk := 1+rng.IntN(30), 1+rng.IntN(30)
		m := Mask{SeqQ: sq, SeqK: sk, Slices: []Slice{randSlice(rng, sq, sk)}}
		rows := m.RowSpans()
		for q := 0; q < sq; q++ {
			for k := 0; k < sk; k++ {
				in := false
				for _, r := range rows[q] {
					in = in || r.Contains(k)
				}
				if in != m.Allowed(q, k) {
					t.Fatalf("row spans of %+v wrong at (%d,%d)", m.Slices, q, k)
				}
			}
		}
	}
}
