package harness

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestRunningSpreadIsSpread: for every prefix of sequences with ties, even and odd counts,
// and a NaN, RunningSpread gives bit for bit what Spread of the prefix gives (the running
// median longca simulate writes had sorted every prefix: --samples 100000 took minutes).
func TestRunningSpreadIsSpread(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	seqs := [][]float64{{}, {3}, {2, 2, 2, 2}, {5, 4, 3, 2, 1, 0}, {1, math.Inf(1), -1, math.Inf(-1), 0}}
	for range 20 {
		s := make([]float64, 1+rng.IntN(300))
		for i := range s {
			s[i] = math.Round(rng.NormFloat64()*50)/7 + 0 // many ties (+0: the sort orders -0 and 0 as it likes)
		}
		seqs = append(seqs, s)
	}
	seqs = append(seqs, []float64{4, 1, math.NaN(), 3, 2})
	same := func(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) || (a != a && b != b) }
	for si, s := range seqs {
		var r RunningSpread
		if m, lo, hi := r.Spread(); m != 0 || lo != 0 || hi != 0 || r.Len() != 0 {
			t.Fatalf("empty: %v %v %v", m, lo, hi)
		}
		for i, v := range s {
			r.Add(v)
			wm, wlo, whi := Spread(s[:i+1])
			m, lo, hi := r.Spread()
			if !same(m, wm) || !same(lo, wlo) || !same(hi, whi) || r.Len() != i+1 {
				t.Fatalf("sequence %d, prefix %d: running spread %v %v %v; Spread %v %v %v", si, i+1, m, lo, hi, wm, wlo, whi)
			}
		}
	}
}
