package cudnn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/longca/longca/mask"
)

// cudnnKeeps is what cuDNN's mask ops keep at row i, column j of a batch entry of
// sq x sk under bounds b (the right bound row (+ sk - sq) + R >= col, the left bound
// col + L (- sk + sq) > row), written from the graph's ops, not from piece.fits.
func cudnnKeeps(b bounds, sq, sk, i, j int64) bool {
	shift := int64(0)
	if b.Align == bottomRight {
		shift = sk - sq
	}
	if b.Right && !(i+shift+b.R >= j) {
		return false
	}
	if b.Left && !(j+b.L-shift > i) {
		return false
	}
	return true
}

// checkCut verifies a cut of m by brute force: what cuDNN computes for every call's
// pieces is exactly the mask, no pair twice; within a call no query row and no key row
// is shared, and the pieces' query and key orders agree; every piece row has a key;
// the coverage flags are right.
func checkCut(t *testing.T, name string, m mask.Mask, c *cut) {
	t.Helper()
	seen := make([]int, m.SeqQ*m.SeqK)
	rowsQ, rowsK := make([]bool, m.SeqQ), make([]bool, m.SeqK)
	for ci, cl := range c.calls {
		for pi, p := range cl.pieces {
			if pi > 0 {
				o := cl.pieces[pi-1]
				if o.Q.End > p.Q.Start || o.K.End > p.K.Start {
					t.Fatalf("%s: call %d pieces %v and %v overlap or are out of order", name, ci, o, p)
				}
			}
			sq, sk := int64(p.Q.Len()), int64(p.K.Len())
			for q := p.Q.Start; q < p.Q.End; q++ {
				rowsQ[q] = true
				any := false
				for k := p.K.Start; k < p.K.End; k++ {
					rowsK[k] = true
					if cudnnKeeps(cl.bounds, sq, sk, int64(q-p.Q.Start), int64(k-p.K.Start)) {
						seen[q*m.SeqK+k]++
						any = true
						if !p.allows(q, k) {
							t.Fatalf("%s: call %d (%s) keeps (%d,%d) outside piece %v", name, ci, cl.bounds, q, k, p)
						}
					}
				}
				if !any {
					t.Fatalf("%s: call %d piece %v has an empty row %d", name, ci, p, q)
				}
			}
		}
	}
	for q := range m.SeqQ {
		for k := range m.SeqK {
			want := 0
			if m.Allowed(q, k) {
				want = 1
			}
			if seen[q*m.SeqK+k] != want {
				t.Fatalf("%s: pair (%d,%d) computed %d times, the mask allows it %d times (%s)", name, q, k, seen[q*m.SeqK+k], want, c)
			}
		}
	}
	all := func(b []bool) bool {
		for _, x := range b {
			if !x {
				return false
			}
		}
		return true
	}
	if c.coveredQ != all(rowsQ) || c.coveredK != all(rowsK) {
		t.Fatalf("%s: coverage q %v k %v, want %v %v", name, c.coveredQ, c.coveredK, all(rowsQ), all(rowsK))
	}
}

func TestCutStaticMasks(t *testing.T) {
	for _, name := range mask.Names() {
		for _, s := range []int{64, 192, 1024} {
			for seed := uint64(1); seed <= 3; seed++ {
				o := mask.Options{Seed: seed, Window: s / 8, BlockSize: 64, LongMin: s / 8, LongMax: s / 3}
				spec, err := mask.Build(name, s, o)
				if err != nil {
					t.Fatalf("%s at %d: %v", name, s, err)
				}
				c, err := cutMask(spec.Mask)
				if err != nil {
					t.Fatalf("%s at %d: %v", name, s, err)
				}
				checkCut(t, fmt.Sprintf("%s S=%d seed %d", name, s, seed), spec.Mask, c)
			}
		}
	}
}

// TestCutShapes pins the calls of the masks the kernel benchmark runs: one call each,
// dense for full, causal and the sliding window, ragged over the documents.
func TestCutShapes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dense  bool
		bounds string
	}{
		{"full", true, "full"},
		{"causal", true, "right 0 top-left"},
		{"sliding_window_causal", true, "right 0,left 65 top-left"},
		{"full_document", false, "full"},
		{"causal_document", false, "right 0 top-left"},
		{"full_document_long", false, "full"},
		{"causal_document_long", false, "right 0 top-left"},
	} {
		spec, err := mask.Build(tc.name, 4096, mask.Options{Seed: 42, Window: 64, LongMin: 256, LongMax: 1024})
		if err != nil {
			t.Fatal(err)
		}
		c, err := cutMask(spec.Mask)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.calls) != 1 || c.dense(0) != tc.dense || c.calls[0].bounds.String() != tc.bounds || !c.coveredQ || !c.coveredK {
			t.Errorf("%s: %s, dense %v, covered %v %v; want 1 call, dense %v, %s", tc.name, c, len(c.calls) == 1 && c.dense(0), c.coveredQ, c.coveredK, tc.dense, tc.bounds)
		}
	}
}

// zigzag is the local sub-mask of rank r's queries against rank s's keys when the
// sequence is cut into 2n chunks and rank r holds chunks r and 2n-1-r (ring attention's
// zigzag sharding): the windows of the global mask, side by side.
func zigzag(m mask.Mask, n, r, s int) mask.Mask {
	c := m.SeqQ / (2 * n)
	chunks := func(x int) []mask.Range {
		return []mask.Range{{Start: x * c, End: (x + 1) * c}, {Start: (2*n - 1 - x) * c, End: (2*n - x) * c}}
	}
	out := mask.Mask{SeqQ: 2 * c, SeqK: 2 * c}
	for qi, qr := range chunks(r) {
		for ki, kr := range chunks(s) {
			for _, sl := range m.Window(qr, kr).Slices {
				sl.Q.Start, sl.Q.End = sl.Q.Start+qi*c, sl.Q.End+qi*c
				sl.K.Start, sl.K.End = sl.K.Start+ki*c, sl.K.End+ki*c
				out.Slices = append(out.Slices, sl)
			}
		}
	}
	return out
}

// TestCutContextParallelSteps cuts every step of ring attention over the four CP masks
// (zigzag sharding, 2 and 4 ranks): the diagonal step of causal is one dense causal call,
// the others one call of a full rectangle.
func TestCutContextParallelSteps(t *testing.T) {
	for _, name := range mask.CPMasks() {
		for _, n := range []int{2, 4} {
			for seed := uint64(1); seed <= 3; seed++ {
				spec, err := mask.Build(name, 512, mask.Options{Seed: seed, LongMin: 40, LongMax: 200})
				if err != nil {
					t.Fatal(err)
				}
				for r := range n {
					for s := range n {
						sub := zigzag(spec.Mask, n, r, s)
						c, err := cutMask(sub)
						if err != nil {
							t.Fatalf("%s rank %d step %d: %v", name, r, s, err)
						}
						label := fmt.Sprintf("%s n=%d seed %d q%d k%d", name, n, seed, r, s)
						checkCut(t, label, sub, c)
						if name == "causal" && len(c.calls) != 1 {
							t.Errorf("%s: %s, want one call", label, c)
						}
						if name == "causal" && r == s && !c.dense(0) {
							t.Errorf("%s: the diagonal step is not one dense call: %s", label, c)
						}
					}
				}
			}
		}
	}
}

// TestCutRandom cuts random masks: a grid of cells of random kinds, then random
// windows of them.
func TestCutRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for trial := range 300 {
		sq, sk := 1+rng.IntN(40), 1+rng.IntN(40)
		m := mask.Mask{SeqQ: sq, SeqK: sk}
		qc := cuts(rng, sq)
		kc := cuts(rng, sk)
		for i := 0; i+1 < len(qc); i++ {
			for j := 0; j+1 < len(kc); j++ {
				if rng.IntN(3) == 0 {
					continue
				}
				m.Slices = append(m.Slices, mask.Slice{Q: mask.Range{Start: qc[i], End: qc[i+1]}, K: mask.Range{Start: kc[j], End: kc[j+1]}, Kind: mask.Kind(rng.IntN(4))})
			}
		}
		c, err := cutMask(m)
		if err != nil {
			t.Fatal(err)
		}
		checkCut(t, fmt.Sprintf("random %d", trial), m, c)
		qs, ks := rng.IntN(sq), rng.IntN(sk)
		w := m.Window(mask.Range{Start: qs, End: qs + 1 + rng.IntN(sq-qs)}, mask.Range{Start: ks, End: ks + 1 + rng.IntN(sk-ks)})
		if c, err = cutMask(w); err != nil {
			t.Fatal(err)
		}
		checkCut(t, fmt.Sprintf("random window %d", trial), w, c)
	}
}

func cuts(rng *rand.Rand, n int) []int {
	out := []int{0}
	for x := 1 + rng.IntN(8); x < n; x += 1 + rng.IntN(12) {
		out = append(out, x)
	}
	return append(out, n)
}

// TestTightenAndArea compares piece areas and tightening with counting.
func TestTightenAndArea(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for range 2000 {
		q := mask.Range{Start: rng.IntN(20), End: 0}
		q.End = q.Start + rng.IntN(20)
		k := mask.Range{Start: rng.IntN(20), End: 0}
		k.End = k.Start + rng.IntN(20)
		lo, hi := rng.IntN(50)-25, rng.IntN(50)-25
		if rng.IntN(4) == 0 {
			lo = -(1 << 61)
		}
		if rng.IntN(4) == 0 {
			hi = 1 << 61
		}
		var n int64
		minQ, maxQ, minK, maxK := 1<<30, -1, 1<<30, -1
		for a := q.Start; a < q.End; a++ {
			for b := k.Start; b < k.End; b++ {
				if b-a >= lo && b-a <= hi {
					n++
					minQ, maxQ, minK, maxK = min(minQ, a), max(maxQ, a), min(minK, b), max(maxK, b)
				}
			}
		}
		p, ok := tighten(q, k, lo, hi)
		if ok != (n > 0) {
			t.Fatalf("q %v k %v band [%d,%d]: tighten %v, %d pairs", q, k, lo, hi, ok, n)
		}
		if !ok {
			continue
		}
		if p.area() != n || p.Q != (mask.Range{Start: minQ, End: maxQ + 1}) || p.K != (mask.Range{Start: minK, End: maxK + 1}) {
			t.Fatalf("q %v k %v band [%d,%d]: %v area %d, want %d pairs in q[%d,%d] k[%d,%d]", q, k, lo, hi, p, p.area(), n, minQ, maxQ, minK, maxK)
		}
	}
}

// TestCalls: Calls counts the calls of the cut, past MaxCalls too (where the kernel
// refuses the mask), and refuses only an invalid mask: causal documents laid out one
// after another are one call; causal diagonal blocks with their keys reversed (so no two
// share a call: the query and key orders disagree) are one call each.
func TestCalls(t *testing.T) {
	docs := mask.Mask{SeqQ: 300, SeqK: 300}
	for _, r := range [][2]int{{0, 100}, {100, 180}, {180, 300}} {
		docs.Slices = append(docs.Slices, mask.Slice{Q: mask.Range{Start: r[0], End: r[1]}, K: mask.Range{Start: r[0], End: r[1]}, Kind: mask.Causal})
	}
	if n, err := Calls(docs); err != nil || n != 1 {
		t.Fatalf("causal documents: %d calls, %v; want 1", n, err)
	}
	const blocks = MaxCalls + 8
	rev := mask.Mask{SeqQ: 4 * blocks, SeqK: 4 * blocks}
	for i := range blocks {
		k := blocks - 1 - i
		rev.Slices = append(rev.Slices, mask.Slice{Q: mask.Range{Start: 4 * i, End: 4*i + 4}, K: mask.Range{Start: 4 * k, End: 4*k + 4}, Kind: mask.Causal})
	}
	n, err := Calls(rev)
	if err != nil || n != blocks {
		t.Fatalf("reversed blocks: %d calls, %v; want %d", n, err, blocks)
	}
	if _, err := cutMask(rev); err == nil {
		t.Fatalf("the kernel's cut took %d calls, more than MaxCalls %d", n, MaxCalls)
	}
	bad := mask.Mask{SeqQ: 4, SeqK: 4, Slices: []mask.Slice{{Q: mask.Range{Start: 0, End: 8}, K: mask.Range{Start: 0, End: 4}}}}
	if _, err := Calls(bad); err == nil {
		t.Fatal("Calls took a slice outside the mask")
	}
}
