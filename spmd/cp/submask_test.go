package cp

import (
	"slices"
	"testing"

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
