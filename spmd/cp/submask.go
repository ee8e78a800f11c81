package cp

import (
	"cmp"
	"slices"
	"sort"
	"sync"

	"github.com/longca/longca/mask"
)

// SubMask is the part of the global mask m that the queries of local sequence qs
// (lq tokens) see of the keys of local sequence ks (lk tokens), in local coordinates.
// It is assembled from m.Window of every (query piece, key piece) pair that some slice
// of m touches, offset to the pieces' local positions; padding rows and columns allow
// nothing. The pairs are found through indexes (slices by query start, key pieces by
// source start), not by testing every pair: with D documents a zigzag shard has 2D
// pieces, and testing every (piece, slice) pair made a step's sub-mask cost O(D^2),
// seconds per rank at 512 ranks. The slices come out in the order of the pair test:
// query pieces in order, then key pieces in order, then m's slices in order.
func SubMask(m mask.Mask, qs []Piece, lq int, ks []Piece, lk int) mask.Mask {
	w := walks.Get().(*walk)
	defer walks.Put(w)
	w.kOrder, w.kInOrder = bySourceInto(w.kOrder, ks)
	return w.subMask(m, qs, lq, ks, lk, w.kOrder, w.kInOrder)
}

// subMask is SubMask with the key pieces' order by source given (bySource).
//
// Its slices are given room at the first pair that gives one, a slot for that query
// piece and each after it (a step of long documents: a slice each, all it needs), and cut
// to their length where they fill less than half of it. A step that meets no key holds no
// slots: zigzag puts 1-token documents on rank 0, a piece each, and a slot per piece at
// every step was rank 0's ring x pieces slots, 70% of simulate's peak on 64 GPUs (2.3 GB).
func subMask(m mask.Mask, qs []Piece, lq int, ks []Piece, lk int, kOrder []int, inOrder bool) mask.Mask {
	w := walks.Get().(*walk)
	defer walks.Put(w)
	return w.subMask(m, qs, lq, ks, lk, kOrder, inOrder)
}

// subMask is subMask walking with w's arrays: only the sub-mask it returns is new, the
// arrays it walks with are w's, left for its next walk.
func (w *walk) subMask(m mask.Mask, qs []Piece, lq int, ks []Piece, lk int, kOrder []int, inOrder bool) mask.Mask {
	out := mask.Mask{SeqQ: lq, SeqK: lk, Slices: []mask.Slice{}}
	rows := w.slicesCrossing(m.Slices, qs)
	cand, hit := w.cand[:0], w.hit[:0]
	for qi, qp := range qs {
		row := rows.of(qi)
		if len(row) == 0 {
			continue
		}
		// The key pieces some row slice reaches: for each slice a run of kOrder.
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
			if cap(out.Slices) == 0 {
				out.Slices = make([]mask.Slice, 0, len(qs)-qi)
			}
			out.Slices = mask.Mask{SeqQ: m.SeqQ, SeqK: m.SeqK, Slices: hit}.AppendWindow(out.Slices, qp.Src, kp.Src, qp.At, kp.At)
		}
	}
	w.cand, w.hit = cand[:0], hit[:0]
	if 2*len(out.Slices) < cap(out.Slices) {
		out.Slices = slices.Clone(out.Slices)
	}
	return out
}

// crossing is, for each query piece, the indices (ascending) of the slices whose query
// range meets the piece's source range, in one flat list.
type crossing struct {
	start []int // piece i's slices are idx[start[i]:start[i+1]]
	idx   []int
}

func (c crossing) of(i int) []int { return c.idx[c.start[i]:c.start[i+1]] }

// walk is the arrays a step's sub-mask is walked with (subMask, slicesCrossing), kept
// from step to step. Built anew at every step they were about a slot a query piece of
// garbage (rank 0's step of 65,536 1-token documents: 5.7 MB in 28 allocations, none
// now; a prediction of 64 ranks of them allocated 7.2 GB, 0.2 GB now), which simulate's
// estimate counts for the walks the collector lets pile up (sim walkSteps). A walk is
// taken from walks and given back once its sub-mask is made; the crossing its
// slicesCrossing returns lies in its arrays until then.
type walk struct {
	per            [][2]int // slicesCrossing: [from, to) into flat, per piece
	flat, open     []int
	qOrder, sOrder []int
	start, idx     []int // the crossing returned
	kOrder         []int // SubMask: the key pieces by source
	kInOrder       bool
	cand           []int
	hit            []mask.Slice
}

// walks keeps the walks between sub-masks: as many as are made at once, dropped by the
// collector when unused (sync.Pool).
var walks = sync.Pool{New: func() any { return new(walk) }}

// grow is s with length n, its room reused where it holds n.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// slicesCrossing finds the slices each query piece meets: a sweep over the pieces by
// source start and the slices by query start, keeping the slices still open. The crossing
// it returns is in w's arrays: it holds until w's next walk.
func (w *walk) slicesCrossing(ss []mask.Slice, qs []Piece) crossing {
	per := grow(w.per, len(qs)) // [from, to) into flat, per piece
	flat := w.flat[:0]
	qOrder, _ := bySourceInto(w.qOrder, qs)
	sOrder := grow(w.sOrder, len(ss))
	for i := range sOrder {
		sOrder[i] = i
	}
	if !slices.IsSortedFunc(ss, func(a, b mask.Slice) int { return cmp.Compare(a.Q.Start, b.Q.Start) }) {
		slices.SortStableFunc(sOrder, func(a, b int) int { return cmp.Compare(ss[a].Q.Start, ss[b].Q.Start) })
	}
	open := w.open[:0]
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
	c := crossing{start: grow(w.start, len(qs)+1), idx: grow(w.idx, len(flat))[:0]}
	c.start[0] = 0
	for i, p := range per {
		c.idx = append(c.idx, flat[p[0]:p[1]]...)
		c.start[i+1] = len(c.idx)
	}
	w.per, w.flat, w.open, w.qOrder, w.sOrder, w.start, w.idx = per, flat, open, qOrder, sOrder, c.start, c.idx
	return c
}

// bySource returns the indices of ps ordered by source start (pieces never overlap, so
// also by source end), and whether that is their own order.
func bySource(ps []Piece) ([]int, bool) {
	return bySourceInto(nil, ps)
}

// bySourceInto is bySource in order's room where it holds them.
func bySourceInto(order []int, ps []Piece) ([]int, bool) {
	order = grow(order, len(ps))
	for i := range order {
		order[i] = i
	}
	if slices.IsSortedFunc(ps, func(a, b Piece) int { return cmp.Compare(a.Src.Start, b.Src.Start) }) {
		return order, true
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(ps[a].Src.Start, ps[b].Src.Start) })
	return order, false
}

// shiftPieces returns ps moved by delta local positions.
func shiftPieces(ps []Piece, delta int) []Piece {
	out := make([]Piece, len(ps))
	for i, p := range ps {
		out[i] = Piece{p.Src, p.At + delta}
	}
	return out
}
