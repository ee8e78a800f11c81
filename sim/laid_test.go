package sim

import (
	"testing"

	"github.com/longca/longca/mask"
)

// zzLoose is how many times its measured peak a zigzag estimate may be: short documents on
// 16 GPUs, every rank traced, read 2.99-3.0x (60.9-61.1 MB measured, 182.7 estimated), so
// 3 failed on half a megabyte; 3.5 keeps a margin over it.
const zzLoose = 3.5

// TestZigzagLaidBoundsMeasured: the memory of a zigzag case counted from its documents'
// lengths (ZigzagLaid) is at least the heap its prediction takes (heaptest.Peak of
// Predict, fwd and bwd) and within zzLoose (3.5) times it, on 1-token and 1- to 64-token documents,
// rings of 8 to 64 ranks, every rank traced or a sample, ring-p2p, usp and
// ring-allgather, and on the default (long) documents; never above ZigzagDocs' figure
// (one slice a document and piece pair, as these masks have).
// ZigzagDocs counts every document as long: 64 GPUs of 1-token documents were estimated
// at 19 GiB a case where the prediction's heap peaked at 2.3 GB (rank 0 holds every
// document, and each of its 64 steps' sub-masks was given a slot for each); 0.2 GB since
// they hold their slices alone (spmd/cp subMask), estimated at 0.29 GB. The masks are
// simulate's (seed 42, the CP purpose, as session's builder draws them).
func TestZigzagLaidBoundsMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("predicts zigzag cases of up to 131,072 documents (5-10 s)")
	}
	ones := countsSource(t, 10, func(int) int { return 1 })
	short := countsSource(t, 5000, func(i int) int { return 1 + i*37%64 })
	for _, c := range []struct {
		name string
		sqCase
		far bool // every document long is far above the heap
	}{
		{"1-token, 8 GPUs, every rank traced", sqCase{src: ones, method: "ring-p2p", n: 8, tpr: 8192, mk: "causal_document"}, true},
		{"1-token, 32 GPUs, sampled", sqCase{src: ones, method: "ring-p2p", n: 32, tpr: 2048, mk: "causal_document"}, true},
		{"1-token, ring-allgather, 32 GPUs", sqCase{src: ones, method: "ring-allgather", n: 32, tpr: 4096, mk: "causal_document"}, true},
		{"short, 16 GPUs, every rank traced", sqCase{src: short, method: "ring-p2p", n: 16, tpr: 8192, mk: "causal_document"}, false},
		{"short, 64 GPUs, sampled", sqCase{src: short, method: "ring-p2p", n: 64, tpr: 8192, mk: "causal_document"}, false},
		{"short, usp 2x32", sqCase{src: short, method: "usp", n: 64, tpr: 8192, ulysses: 2, mk: "full_document"}, false},
		{"long, 64 GPUs", sqCase{method: "ring-p2p", n: 64, tpr: 8192, mk: "full_document_long"}, false},
	} {
		c.zigzag = true
		r := measureLaid(t, c.sqCase, zzLoose)
		got, est, old := r.got, r.est, r.everyLong
		t.Logf("%s (%d documents): peak heap %.1f MB, estimated %.1f MB (%.1fx), every document long %.1f MB (%.1fx)",
			c.name, r.docs, got/1e6, est/1e6, est/got, old/1e6, old/got)
		switch {
		case got > est:
			t.Errorf("%s: %.1f MB of heap, estimated %.1f MB", c.name, got/1e6, est/1e6)
		case est > zzLoose*got && got > 20e6: // (below, a case's fixed cost, 16 MB, is most of the estimate)
			t.Errorf("%s: estimated %.1f MB, over %.1f times the %.1f MB of heap", c.name, est/1e6, zzLoose, got/1e6)
		case est > old:
			t.Errorf("%s: estimated %.1f MB, above the %.1f MB of every document long", c.name, est/1e6, old/1e6)
		case c.far && old < 5*got:
			t.Errorf("%s: every document long is %.1f MB, not far above the %.1f MB of heap: the case does not show the layout", c.name, old/1e6, got/1e6)
		}
	}
}

// documents is a mask of documents of the given lengths, one back after another, each
// with one slice of kind (causal_document's shape), and their ranges.
func documents(kind mask.Kind, lens ...int) (mask.Mask, []mask.Range) {
	var m mask.Mask
	var docs []mask.Range
	for _, l := range lens {
		r := mask.Range{Start: m.SeqQ, End: m.SeqQ + l}
		docs = append(docs, r)
		m.Slices = append(m.Slices, mask.Slice{Q: r, K: r, Kind: kind})
		m.SeqQ += l
	}
	m.SeqK = m.SeqQ
	return m, docs
}

// repeat is n copies of l.
func repeat(l, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = l
	}
	return out
}

// TestZigzagChunks: a document's chunks that hold a token and its pieces on one rank, as
// spmd/cp's zigzag layout cuts it (2 x ring chunks of ceil(L/2n) x n/ring tokens).
func TestZigzagChunks(t *testing.T) {
	for _, c := range []struct {
		n, R, L int
		k, p    float64
	}{
		{8, 8, 1, 1, 1},          // one token: one chunk, one rank
		{8, 8, 8, 8, 1},          // chunks of 1 token: 8 of them, one a rank
		{8, 8, 9, 9, 2},          // past the ring: a rank holds two
		{8, 8, 16, 16, 2},        // a long document: 2 x ring
		{8, 8, 1 << 20, 16, 2},   // as long as any
		{64, 8, 1, 1, 1},         // chunks of n/ring tokens on a ring of a larger world
		{64, 8, 64, 8, 1},        // 8 chunks of 8 tokens
		{64, 8, 65, 9, 2},        // 9 chunks of 8 tokens: past the ring
		{64, 8, 129, 9, 2},       // chunks of 2 x 8 tokens
		{64, 8, 128 * 8, 16, 2},  // long
		{16, 1, 100, 2, 2},       // a ring of one: both chunks on rank 0
		{1024, 1024, 3, 3, 1},    // 3 chunks of one token
		{1024, 64, 1000, 63, 1},  // 63 chunks of 16 tokens
		{1024, 64, 2048, 128, 2}, // 128 chunks of 16 tokens: long
		{1024, 64, 2049, 65, 2},  // chunks of 2 x 16 tokens
		{1024, 64, 2048 * 16, 128, 2},
	} {
		k, p := ZigzagChunks(c.n, c.R, c.L)
		if k != c.k || p != c.p {
			t.Errorf("n %d ring %d L %d: %v chunks, %v pieces a rank; want %v, %v", c.n, c.R, c.L, k, p, c.k, c.p)
		}
	}
}

// TestZigzagLaidLongIsZigzagDocs: documents long enough to fill every chunk, one slice
// each, are ZigzagDocs' layout: 2 x ring pieces a document, every step's sub-mask meeting
// every document (4 ring slots a document); ZigzagLaidExpected of their count and length
// is the same, and so is MemLayout of every rank traced, which holds rank 0's alone.
func TestZigzagLaidLongIsZigzagDocs(t *testing.T) {
	for _, c := range []struct{ n, ring, d int }{{8, 8, 3}, {64, 64, 7}, {64, 8, 5}, {16, 1, 4}} {
		L := 2 * c.n * 4
		m, docs := documents(mask.Causal, repeat(L, c.d)...)
		got := ZigzagLaid(c.n, c.ring, docs, m)
		want := ZigzagDocs(c.ring, c.d)
		if got.Lay != want {
			t.Errorf("n %d ring %d, %d long documents: %+v, want ZigzagDocs' %+v", c.n, c.ring, c.d, got.Lay, want)
		}
		if got.Pieces != float64(2*c.d) || got.RankSlices != float64(4*c.ring*c.d) || got.Cuts != float64(2*c.ring*c.d) {
			t.Errorf("n %d ring %d: %v pieces, %v slices, %v cuts a rank; want %d, %d, %d", c.n, c.ring, got.Pieces, got.RankSlices, got.Cuts, 2*c.d, 4*c.ring*c.d, 2*c.ring*c.d)
		}
		if exp := ZigzagLaidExpected(c.n, c.ring, float64(c.d), m.SeqQ); exp != got {
			t.Errorf("n %d ring %d: expected %+v, drawn %+v", c.n, c.ring, exp, got)
		}
		if lay := got.MemLayout(1, false); lay != want {
			t.Errorf("n %d ring %d: one rank alive %+v, want %+v", c.n, c.ring, lay, want)
		}
	}
}

// TestZigzagLaidOneTokenDocuments: 1-token documents are on ring rank 0 alone, a piece
// and a slice each; its slots are its slices and walkSteps walks' garbage, far below
// ZigzagDocs' (every document long); every rank alive at once holds rank 0's alone, and a
// rank against every rank's keys (gather) two slots a piece and the keys' copy.
func TestZigzagLaidOneTokenDocuments(t *testing.T) {
	const d = 1000
	for _, ring := range []int{2, 8, 64} {
		m, docs := documents(mask.Causal, repeat(1, d)...)
		l := ZigzagLaid(ring, ring, docs, m)
		slots := float64(d * (1 + min(ring, walkSteps)))
		if l.Pieces != d || l.Lay.Pieces != d || l.RankSlices != d || l.AllSlices != d || l.RankSlots != slots || l.AllSlots != slots {
			t.Errorf("ring %d: %+v; want %d pieces and slices, %v slots", ring, l, d, slots)
		}
		if z := ZigzagDocs(ring, d); ring >= 8 && l.Lay.RankDocs*4 > z.RankDocs {
			t.Errorf("ring %d: %v documents a step, not far below every document long (%v)", ring, l.Lay.RankDocs, z.RankDocs)
		}
		if lay := l.MemLayout(ring, false); lay.RankDocs != slots/(4*float64(ring)*float64(ring)) {
			t.Errorf("ring %d, every rank alive: %v documents a step, want rank 0's slots alone (%v)", ring, lay.RankDocs, slots)
		}
		if lay := l.MemLayout(1, true); lay.RankDocs != (3*d+2*d)/(4*float64(ring)) {
			t.Errorf("ring %d, gather: %v documents a step, want %v", ring, lay.RankDocs, (3*d+2*d)/(4*float64(ring)))
		}
		if e := ZigzagLaidExpected(ring, ring, d, d); e != l {
			t.Errorf("ring %d: expected %+v, drawn %+v", ring, e, l)
		}
	}
}

// TestZigzagLaidCrossDocuments: a slice across documents (share_question's shape: a
// question's keys seen by the next document's queries) meets every piece of its keys'
// documents for each piece of its queries' a rank holds; counted above the documents'
// own slices, and never above every step holding a slot a piece with the slices past it.
func TestZigzagLaidCrossDocuments(t *testing.T) {
	const n = 8
	m, docs := documents(mask.Causal, 1, 1, 2*n, 2*n)
	own := ZigzagLaid(n, n, docs, m)
	m.Slices = append(m.Slices, mask.Slice{Q: docs[3], K: docs[2], Kind: mask.Full}) // 2 x 16 pieces
	m.Slices = append(m.Slices, mask.Slice{Q: docs[1], K: docs[0], Kind: mask.Full}) // 1 x 1
	got := ZigzagLaid(n, n, docs, m)
	if d := got.RankSlices - own.RankSlices; d != 2*16+1 {
		t.Errorf("a rank's slices across documents: %v, want %d", d, 2*16+1)
	}
	if d := got.AllSlices - own.AllSlices; d != 16*16+1 {
		t.Errorf("every rank's slices across documents: %v, want %d", d, 16*16+1)
	}
	if got.RankSlots > 2*float64(n)*got.Pieces+got.RankSlices {
		t.Errorf("%v slots, above every step's slot a piece and the slices past it", got.RankSlots)
	}
}

// TestContiguousLaid: a rank's chunk meets its own chunk's 1-token documents at its own
// step alone (a slice each), and a slice whose keys span chunks gives one for each.
func TestContiguousLaid(t *testing.T) {
	const ring = 4
	m, docs := documents(mask.Causal, repeat(1, 64)...)
	l := ContiguousLaid(ring, docs, m)
	if l.RankSlices != 16 || l.AllSlices != 64 || l.Pieces != 1 || l.Lay != ContiguousDocs(ring, docs, m.SeqQ) {
		t.Errorf("1-token documents: %+v; want 16 slices a rank, 64 in all, ContiguousDocs' layout", l)
	}
	m.Slices = append(m.Slices, mask.Slice{Q: mask.Range{Start: 60, End: 64}, K: mask.Range{Start: 0, End: 64}, Kind: mask.Full})
	l = ContiguousLaid(ring, docs, m)
	if l.RankSlices != 20 || l.AllSlices != 68 {
		t.Errorf("with a slice across every chunk's keys: %v slices a rank, %v in all; want 20, 68", l.RankSlices, l.AllSlices)
	}
	if l.RankSlots != 0 || l.MemLayout(ring, true) != l.Lay {
		t.Errorf("contiguous counts no slots: %+v", l)
	}
}

// TestContiguousLaidExpected: before the documents are drawn, a rank's chunk meets
// ContiguousDocsExpected's documents, a slice each but the two at its ends.
func TestContiguousLaidExpected(t *testing.T) {
	for _, c := range []struct {
		ring      int
		docs      float64
		seqlen    int
		rankSlice float64
	}{
		{8, 1 << 16, 1 << 16, (1<<13 + 2) + 16}, // 1-token documents: a chunk's, and its two ends' at every step
		{8, 4, 1 << 16, 3 + 2*8},                // few long documents: a chunk's 3, its two ends' at every step
		{1, 100, 1000, 100},
	} {
		l := ContiguousLaidExpected(c.ring, c.docs, c.seqlen)
		lay := ContiguousDocsExpected(c.ring, c.docs, c.seqlen)
		if l.Lay != lay || l.Pieces != 1 || l.RankSlices != c.rankSlice || l.AllSlices != c.rankSlice*float64(c.ring) {
			t.Errorf("ring %d, %v documents of %d tokens: %+v; want %v slices a rank, %v in all", c.ring, c.docs, c.seqlen, l, c.rankSlice, c.rankSlice*float64(c.ring))
		}
	}
}

// TestBalancedLaid: balanced's dispatch holds each document once over its ranks, once a
// mesh its plan dispatches them on.
func TestBalancedLaid(t *testing.T) {
	l := BalancedLaid(1000, 4)
	if l.Lay != BalancedDocs(1000) || l.Dispatched != 4000 || l.RankSlices != 1 {
		t.Errorf("%+v", l)
	}
	if l := BalancedLaid(0, 0); l.Dispatched != 1 {
		t.Errorf("no documents, no mesh: %+v, want one dispatched", l)
	}
}

// TestLaidSeconds: a case's time grows with its layout's work and its passes, takes 0 for
// the default --exact-ranks, and charges zigzag's 1-token documents on 256 GPUs far below
// every document on every GPU (Seconds with the documents, as it was charged), and
// balanced each document a mesh.
func TestLaidSeconds(t *testing.T) {
	const n, d = 256, 1 << 16
	m, docs := documents(mask.Causal, repeat(1, d)...)
	seqlen := m.SeqQ
	z := ZigzagLaid(n, n, docs, m)
	base := LaidSeconds(n, z, n, d, seqlen, 2, 0, 0)
	if def := LaidSeconds(n, z, n, d, seqlen, 2, DefaultExactRanks, 0); def != base {
		t.Errorf("exact 0: %v s, the default's %v s", base, def)
	}
	if every := Seconds(n, d, seqlen, 2, TracedSteps(n, 0, 0)); base*5 > every {
		t.Errorf("zigzag of 1-token documents: %v s, not far below every document on every GPU (%v s)", base, every)
	}
	if one := LaidSeconds(n, z, n, d, seqlen, 1, 0, 0); one >= base {
		t.Errorf("one pass %v s, two %v s", one, base)
	}
	if all := LaidSeconds(n, z, n, d, seqlen, 2, n, 0); all <= base {
		t.Errorf("every rank traced %v s, sampled %v s", all, base)
	}
	b1, b4 := LaidSeconds(8, BalancedLaid(d, 1), 1, d, seqlen, 2, 0, 0), LaidSeconds(8, BalancedLaid(d, 4), 1, d, seqlen, 2, 0, 0)
	if diff := b4 - b1; diff < 3*d*dispatchDocSeconds*0.999 || diff > 3*d*dispatchDocSeconds*1.001 {
		t.Errorf("balanced on 4 meshes %v s, on 1 %v s: want %v s a document and mesh", b4, b1, dispatchDocSeconds)
	}
}
