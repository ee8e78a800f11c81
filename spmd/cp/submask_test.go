package cp

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"unsafe"

	"github.com/longca/longca/mask"
)

// subMaskPairs is SubMask as first written: every (query piece, slice) and (key piece,
// slice) pair tested. The indexed SubMask must return exactly its slices, in its order.
func subMaskPairs(m mask.Mask, qs []Piece, lq int, ks []Piece, lk int) mask.Mask {
	out := mask.Mask{SeqQ: lq, SeqK: lk}
	var rows []mask.Slice
	for _, qp := range qs {
		rows = rows[:0]
		for _, s := range m.Slices {
			if s.Q.Intersect(qp.Src).Len() > 0 {
				rows = append(rows, s)
			}
		}
		if len(rows) == 0 {
			continue
		}
		for _, kp := range ks {
			var hit []mask.Slice
			for _, s := range rows {
				if s.K.Intersect(kp.Src).Len() > 0 {
					hit = append(hit, s)
				}
			}
			if len(hit) == 0 {
				continue
			}
			w := mask.Mask{SeqQ: m.SeqQ, SeqK: m.SeqK, Slices: hit}.Window(qp.Src, kp.Src)
			for _, s := range w.Slices {
				s.Q.Start += qp.At
				s.Q.End += qp.At
				s.K.Start += kp.At
				s.K.End += kp.At
				out.Slices = append(out.Slices, s)
			}
		}
	}
	return out
}

func sameMask(a, b mask.Mask) bool {
	return a.SeqQ == b.SeqQ && a.SeqK == b.SeqK && slices.Equal(a.Slices, b.Slices)
}

// TestSubMaskIndexedEqualsPairs compares the indexed SubMask with the pair test on every
// mask, zigzag and contiguous layouts of several ring sizes, every (q shard, k shard) step
// and the all-gather's keys (pieces of every shard, not in source order).
func TestSubMaskIndexedEqualsPairs(t *testing.T) {
	const s = 240
	for _, name := range mask.Names() {
		for seed := range uint64(3) {
			spec, err := mask.Build(name, s, testMaskOptions(seed))
			if err != nil {
				continue
			}
			docs, _ := spec.Docs()
			for _, ring := range []int{1, 2, 3, 4, 8} {
				layouts := []Layout{}
				if l, err := ZigzagLayout(docs, s, ring, 2*ring); err == nil {
					layouts = append(layouts, l)
				}
				if s%ring == 0 {
					layouts = append(layouts, ContiguousLayout(s, ring))
				}
				for _, l := range layouts {
					var all []Piece
					for r, ps := range l.Shards {
						all = append(all, shiftPieces(ps, r*l.Local)...)
					}
					for a := range ring {
						for b := range ring {
							want := subMaskPairs(spec.Mask, l.Shards[a], l.Local, l.Shards[b], l.Local)
							got := SubMask(spec.Mask, l.Shards[a], l.Local, l.Shards[b], l.Local)
							if !sameMask(got, want) {
								t.Fatalf("%s seed %d ring %d shards %d,%d: indexed %v, pairs %v", name, seed, ring, a, b, got.Slices, want.Slices)
							}
						}
						want := subMaskPairs(spec.Mask, l.Shards[a], l.Local, all, l.Padded)
						got := SubMask(spec.Mask, l.Shards[a], l.Local, all, l.Padded)
						if !sameMask(got, want) {
							t.Fatalf("%s seed %d ring %d shard %d against all keys: indexed %d slices, pairs %d", name, seed, ring, a, len(got.Slices), len(want.Slices))
						}
					}
				}
			}
		}
	}
}

// BenchmarkSubMaskDocuments512 is one zigzag step of causal_document_long at 512 ranks
// x 8K tokens (852 documents): the sub-mask every ring step of a rank computes.
func BenchmarkSubMaskDocuments512(b *testing.B) {
	const ranks, seq = 512, 512 * 8192
	spec, err := mask.Build("causal_document_long", seq, mask.Options{Seed: 42, Purpose: mask.PurposeCP})
	if err != nil {
		b.Fatal(err)
	}
	docs, _ := spec.Docs()
	l, err := ZigzagLayout(docs, seq, ranks, 2*ranks)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		SubMask(spec.Mask, l.Shards[i%ranks], l.Local, l.Shards[(i*7)%ranks], l.Local)
	}
}

// BenchmarkSubMaskPairsDocuments512 is the same step by the pair test (for comparison).
func BenchmarkSubMaskPairsDocuments512(b *testing.B) {
	const ranks, seq = 512, 512 * 8192
	spec, err := mask.Build("causal_document_long", seq, mask.Options{Seed: 42, Purpose: mask.PurposeCP})
	if err != nil {
		b.Fatal(err)
	}
	docs, _ := spec.Docs()
	l, err := ZigzagLayout(docs, seq, ranks, 2*ranks)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		subMaskPairs(spec.Mask, l.Shards[i%ranks], l.Local, l.Shards[(i*7)%ranks], l.Local)
	}
}

// subMaskPrealloc is subMask as it was before its slices were sized by what they hold:
// room for a slice per query piece given to every step's sub-mask, empty or not. The
// sub-masks must come out the same, slice for slice.
func subMaskPrealloc(m mask.Mask, qs []Piece, lq int, ks []Piece, lk int, kOrder []int, inOrder bool) mask.Mask {
	out := mask.Mask{SeqQ: lq, SeqK: lk, Slices: make([]mask.Slice, 0, len(qs))}
	rows := slicesCrossingFresh(m.Slices, qs)
	var cand []int
	var hit []mask.Slice
	for qi, qp := range qs {
		row := rows.of(qi)
		if len(row) == 0 {
			continue
		}
		cand = cand[:0]
		for _, si := range row {
			s := m.Slices[si]
			lo := sort.Search(len(kOrder), func(x int) bool { return ks[kOrder[x]].Src.End > s.K.Start })
			for x := lo; x < len(kOrder) && ks[kOrder[x]].Src.Start < s.K.End; x++ {
				cand = append(cand, kOrder[x])
			}
		}
		if len(row) > 1 || !inOrder {
			slices.Sort(cand)
			cand = slices.Compact(cand)
		}
		for _, ki := range cand {
			kp := ks[ki]
			hit = hit[:0]
			for _, si := range row {
				if s := m.Slices[si]; s.K.Intersect(kp.Src).Len() > 0 {
					hit = append(hit, s)
				}
			}
			if len(hit) == 0 {
				continue
			}
			out.Slices = mask.Mask{SeqQ: m.SeqQ, SeqK: m.SeqK, Slices: hit}.AppendWindow(out.Slices, qp.Src, kp.Src, qp.At, kp.At)
		}
	}
	return out
}

// randomPieces cuts [0, seq) into pieces of 1 to most tokens, keeps each with probability
// keep, in source order or shuffled, and places them one after another from a random
// start, with random gaps (padding) between them; it returns them and the local length.
func randomPieces(rng *rand.Rand, seq, most int, keep float64, shuffle bool) ([]Piece, int) {
	var ps []Piece
	for at := 0; at < seq; {
		end := min(at+1+rng.IntN(most), seq)
		if rng.Float64() < keep {
			ps = append(ps, Piece{Src: mask.Range{Start: at, End: end}})
		}
		at = end
	}
	if shuffle {
		rng.Shuffle(len(ps), func(i, j int) { ps[i], ps[j] = ps[j], ps[i] })
	}
	local := rng.IntN(3)
	for i := range ps {
		ps[i].At = local
		local += ps[i].Src.Len() + rng.IntN(2)
	}
	return ps, local
}

// TestSubMaskSizedEqualsPreallocated compares subMask with its preallocating form on every
// mask and random pieces: few or many, short or long, sparse or dense, in source order or
// not, queries and keys.
func TestSubMaskSizedEqualsPreallocated(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 42))
	grown, cut, empty := 0, 0, 0 // sub-masks past a slice a query piece, under half of one, none
	for _, name := range mask.Names() {
		for seed := range uint64(3) {
			seq := 200 + rng.IntN(120)
			spec, err := mask.Build(name, seq, testMaskOptions(seed))
			if err != nil {
				continue
			}
			for try := range 40 {
				most := []int{1, 3, 16, 64, seq}[try%5]
				qs, lq := randomPieces(rng, seq, most, []float64{0.05, 0.3, 1}[try%3], try%4 == 3)
				ks, lk := randomPieces(rng, seq, 1+rng.IntN(most), []float64{0.02, 0.5, 1}[rng.IntN(3)], try%2 == 1)
				kOrder, inOrder := bySource(ks)
				want := subMaskPrealloc(spec.Mask, qs, lq, ks, lk, kOrder, inOrder)
				got := subMask(spec.Mask, qs, lq, ks, lk, kOrder, inOrder)
				if !sameMask(got, want) || got.Slices == nil {
					t.Fatalf("%s seed %d try %d (%d query pieces, %d key pieces): %d slices %v, preallocated %d %v",
						name, seed, try, len(qs), len(ks), len(got.Slices), got.Slices, len(want.Slices), want.Slices)
				}
				if c, n := cap(got.Slices), len(got.Slices); c > 2*n {
					t.Fatalf("%s seed %d try %d: %d slices in room for %d", name, seed, try, n, c)
				}
				switch n := len(got.Slices); {
				case n > len(qs):
					grown++
				case n > 0 && 2*n < len(qs):
					cut++
				case n == 0:
					empty++
				}
			}
		}
	}
	t.Logf("%d sub-masks past a slice a query piece, %d under half of one, %d empty", grown, cut, empty)
	if grown == 0 || cut == 0 || empty == 0 {
		t.Errorf("the random pieces missed a kind of sub-mask: %d past a slice a query piece, %d under half of one, %d empty", grown, cut, empty)
	}
}

// TestSubMaskEmptyStepsHoldNothing: zigzag puts 1-token documents on ring rank 0, a piece
// each, and only its own step meets a key; its other steps' sub-masks hold no room, and
// all its steps' sub-masks, kept as a plan caches them, take about one step's slices of
// memory, not a slot per piece at every step (ring x pieces: 64 GPUs of 1-token documents
// were 70% of simulate's 2.3 GB).
func TestSubMaskEmptyStepsHoldNothing(t *testing.T) {
	const ring, docs = 16, 1 << 16
	ds := make([]mask.Range, docs)
	m := mask.Mask{SeqQ: docs, SeqK: docs, Slices: make([]mask.Slice, docs)}
	for i := range ds {
		ds[i] = mask.Range{Start: i, End: i + 1}
		m.Slices[i] = mask.Slice{Q: ds[i], K: ds[i], Kind: mask.Causal}
	}
	l, err := ZigzagLayout(ds, docs, ring, 2*ring)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Shards[0]) != docs {
		t.Fatalf("rank 0 holds %d pieces, want every document's (%d)", len(l.Shards[0]), docs)
	}
	room := 0
	for k := range ring {
		s := SubMask(m, l.Shards[0], l.Local, l.Shards[k], l.Local)
		want := 0
		if k == 0 {
			want = docs
		}
		if len(s.Slices) != want || cap(s.Slices) > 2*want {
			t.Errorf("step %d: %d slices in room for %d, want %d", k, len(s.Slices), cap(s.Slices), want)
		}
		room += cap(s.Slices)
	}
	size := int(unsafe.Sizeof(mask.Slice{}))
	t.Logf("rank 0's %d steps hold room for %d slices, %.1f MB", ring, room, float64(room*size)/1e6)
	if room > 2*docs {
		t.Errorf("rank 0's %d steps hold room for %d slices (%.1f MB), over twice one step's %d", ring, room, float64(room*size)/1e6, docs)
	}
}

// oneTokenRank0 is zigzag's layout of docs 1-token documents (causal) on a ring of ring
// ranks: every document is on rank 0, a piece each.
func oneTokenRank0(tb testing.TB, ring, docs int) (mask.Mask, Layout) {
	tb.Helper()
	ds := make([]mask.Range, docs)
	m := mask.Mask{SeqQ: docs, SeqK: docs, Slices: make([]mask.Slice, docs)}
	for i := range ds {
		ds[i] = mask.Range{Start: i, End: i + 1}
		m.Slices[i] = mask.Slice{Q: ds[i], K: ds[i], Kind: mask.Causal}
	}
	l, err := ZigzagLayout(ds, docs, ring, 2*ring)
	if err != nil {
		tb.Fatal(err)
	}
	return m, l
}

// BenchmarkSubMaskOneTokenSteps is rank 0's ring steps of 65,536 1-token documents on a
// ring of 16 (zigzag): every step walks all of its pieces, and only its own step meets a
// key. Its bytes a step are the walk's garbage simulate counts (walkSteps).
func BenchmarkSubMaskOneTokenSteps(b *testing.B) {
	const ring = 16
	m, l := oneTokenRank0(b, ring, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		SubMask(m, l.Shards[0], l.Local, l.Shards[1+i%(ring-1)], l.Local)
	}
}

// slicesCrossingFresh is slicesCrossing as it was before its arrays were kept for the
// next walk: every array built anew. The kept arrays must give the same crossing, index
// for index.
func slicesCrossingFresh(ss []mask.Slice, qs []Piece) crossing {
	per := make([][2]int, len(qs)) // [from, to) into flat, per piece
	var flat []int
	qOrder, _ := bySource(qs)
	sOrder := make([]int, len(ss))
	for i := range sOrder {
		sOrder[i] = i
	}
	if !slices.IsSortedFunc(ss, func(a, b mask.Slice) int { return cmp.Compare(a.Q.Start, b.Q.Start) }) {
		slices.SortStableFunc(sOrder, func(a, b int) int { return cmp.Compare(ss[a].Q.Start, ss[b].Q.Start) })
	}
	var open []int
	next := 0
	for _, qi := range qOrder {
		src := qs[qi].Src
		for next < len(sOrder) && ss[sOrder[next]].Q.Start < src.End {
			open = append(open, sOrder[next])
			next++
		}
		// Pieces come by ascending start, so a slice that ends before this one starts is
		// done for good.
		kept := open[:0]
		for _, si := range open {
			if ss[si].Q.End > src.Start {
				kept = append(kept, si)
			}
		}
		open = kept
		from := len(flat)
		for _, si := range open {
			if s := ss[si]; s.Q.Intersect(src).Len() > 0 && s.K.Len() > 0 {
				flat = append(flat, si)
			}
		}
		slices.Sort(flat[from:])
		per[qi] = [2]int{from, len(flat)}
	}
	// Lay the runs out in piece order.
	c := crossing{start: make([]int, len(qs)+1), idx: make([]int, 0, len(flat))}
	for i, p := range per {
		c.idx = append(c.idx, flat[p[0]:p[1]]...)
		c.start[i+1] = len(c.idx)
	}
	return c
}

// TestSlicesCrossingReusedEqualsFresh: one walk, kept from crossing to crossing (as the
// pool keeps it from step to step), gives the crossing the fresh arrays give, index for
// index, on every mask and random pieces, few or many (a walk that held more before must
// say nothing of it), in source order or not; and, warm, allocates nothing.
func TestSlicesCrossingReusedEqualsFresh(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 5))
	var w walk
	compared := 0
	for _, name := range mask.Names() {
		for seed := range uint64(3) {
			seq := 200 + rng.IntN(120)
			spec, err := mask.Build(name, seq, testMaskOptions(seed))
			if err != nil {
				continue
			}
			for try := range 40 {
				most := []int{1, 3, 16, 64, seq}[try%5]
				qs, _ := randomPieces(rng, seq, most, []float64{0.05, 0.3, 1}[try%3], try%4 == 3)
				ss := spec.Mask.Slices
				if try%7 == 6 { // slices out of query order
					ss = slices.Clone(ss)
					rng.Shuffle(len(ss), func(i, j int) { ss[i], ss[j] = ss[j], ss[i] })
				}
				want := slicesCrossingFresh(ss, qs)
				got := w.slicesCrossing(ss, qs)
				if !slices.Equal(got.start, want.start) || !slices.Equal(got.idx, want.idx) {
					t.Fatalf("%s seed %d try %d (%d query pieces, %d slices): kept arrays %v %v, fresh %v %v",
						name, seed, try, len(qs), len(ss), got.start, got.idx, want.start, want.idx)
				}
				compared++
			}
		}
	}
	m, l := oneTokenRank0(t, 16, 1<<12)
	want := slicesCrossingFresh(m.Slices, l.Shards[0])
	w.slicesCrossing(m.Slices, l.Shards[0]) // (warm)
	var got crossing
	if a := testing.AllocsPerRun(10, func() { got = w.slicesCrossing(m.Slices, l.Shards[0]) }); a != 0 {
		t.Errorf("a warm walk's crossing of %d pieces: %v allocations, want none", len(l.Shards[0]), a)
	}
	if !slices.Equal(got.start, want.start) || !slices.Equal(got.idx, want.idx) {
		t.Errorf("1-token documents: the kept arrays' crossing differs from the fresh one")
	}
	t.Logf("%d crossings compared", compared)
}

// BenchmarkSlicesCrossingOneToken is rank 0's crossing of 65,536 1-token documents (every
// step of its ring walks it): kept arrays (Reused) against arrays built anew (Fresh).
func BenchmarkSlicesCrossingOneToken(b *testing.B) {
	m, l := oneTokenRank0(b, 16, 1<<16)
	b.Run("Fresh", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			slicesCrossingFresh(m.Slices, l.Shards[0])
		}
	})
	b.Run("Reused", func(b *testing.B) {
		var w walk
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			w.slicesCrossing(m.Slices, l.Shards[0])
		}
	})
}
