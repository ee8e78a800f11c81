// Package cuda is longca's own flash-attention kernel for NVIDIA GPUs: CUDA C compiled at
// run time by NVRTC for the device found, visiting only the tiles a mask allows through
// work lists derived from the mask's slices. It registers as "cuda".
package cuda

import (
	"fmt"
	"sort"

	"github.com/longca/longca/mask"
)

// Band bounds beyond this are "unbounded" in the kernel's int32 arithmetic (a position
// plus a bound stays inside int32).
const bandLimit = 1 << 29

// WorkList says, for every row tile, which column tiles a kernel visits and how. In the
// forward (and the backward's Q-side) rows are query tiles and columns key tiles; in the
// backward's K-side pass (Transposed) rows are key tiles and columns query tiles. Every
// row tile appears (a row tile with nothing to visit still writes its zeros).
//
// Layout, all int32 so it is copied to the device as is:
//   - Order[l*RowTiles+i]: the i-th row tile of list l to run; heaviest (most column
//     tiles) first, so imbalanced masks finish together.
//   - Start[l*(RowTiles+1)+r] .. Start[l*(RowTiles+1)+r+1]: the entries of row tile r of
//     list l, as indices of entry pairs.
//   - Entries[2e] is the column tile; Entries[2e+1] is -1 for a full tile (every pair
//     allowed, no per-element test) or the offset in Refs of a partial tile's slices:
//     Refs[off] = n, then n indices into Slices.
//   - Slices[6s:6s+6] = qs, qe, ks, ke, lo, hi of a canonical slice, in query and key
//     coordinates: (q, k) is allowed by it when qs <= q < qe, ks <= k < ke and
//     lo <= k-q <= hi.
//
// There is one list, or one per KV head when the problem has per-head masks.
type WorkList struct {
	RowTile, ColTile int // tile sizes along rows and columns
	Rows, Cols       int // positions along rows and columns
	RowTiles         int
	ColTiles         int
	Transposed       bool
	Lists            int
	Order            []int32
	Start            []int32
	Entries          []int32
	Refs             []int32
	Slices           []int32
	Ranks            []int32
	// FullTiles and PartialTiles count the entries of each kind, over all lists.
	FullTiles, PartialTiles int
}

// tileInfo accumulates one tile's allowed area and the slices touching it.
type tileInfo struct {
	area   int64
	slices []int32
}

// BuildWorkList derives the work list of one or more masks (one list each, all of the
// same SeqQ x SeqK) for tiles of qTile queries by kTile keys. With transposed, rows are
// key tiles.
func BuildWorkList(masks []mask.Mask, qTile, kTile int, transposed bool) (*WorkList, error) {
	if len(masks) == 0 {
		return nil, fmt.Errorf("cuda: work list of no masks")
	}
	if qTile <= 0 || kTile <= 0 {
		return nil, fmt.Errorf("cuda: tiles %dx%d must be positive", qTile, kTile)
	}
	sq, sk := masks[0].SeqQ, masks[0].SeqK
	for i, m := range masks {
		if m.SeqQ != sq || m.SeqK != sk {
			return nil, fmt.Errorf("cuda: mask %d is %dx%d, mask 0 %dx%d", i, m.SeqQ, m.SeqK, sq, sk)
		}
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("cuda: mask %d: %w", i, err)
		}
	}
	if int64(sq) >= bandLimit || int64(sk) >= bandLimit {
		return nil, fmt.Errorf("cuda: sequence %dx%d too long for int32 indexing", sq, sk)
	}
	nqt, nkt := (sq+qTile-1)/qTile, (sk+kTile-1)/kTile
	w := &WorkList{RowTile: qTile, ColTile: kTile, Rows: sq, Cols: sk, RowTiles: nqt, ColTiles: nkt,
		Transposed: transposed, Lists: len(masks)}
	if transposed {
		w.RowTile, w.ColTile, w.Rows, w.Cols, w.RowTiles, w.ColTiles = kTile, qTile, sk, sq, nkt, nqt
	}
	for _, m := range masks {
		w.addList(m, qTile, kTile, nqt, nkt)
	}
	return w, nil
}

// addList appends one mask's list.
func (w *WorkList) addList(m mask.Mask, qTile, kTile, nqt, nkt int) {
	tiles := make([]tileInfo, nqt*nkt)
	for _, s := range m.Slices {
		for _, c := range s.Canonical() {
			si := int32(len(w.Slices) / 6)
			lo, hi := c.Band()
			w.Slices = append(w.Slices, int32(c.Q.Start), int32(c.Q.End), int32(c.K.Start), int32(c.K.End),
				int32(max(lo, -bandLimit)), int32(min(hi, bandLimit)))
			for qt := c.Q.Start / qTile; qt*qTile < c.Q.End; qt++ {
				tq := mask.Range{Start: qt * qTile, End: min((qt+1)*qTile, m.SeqQ)}.Intersect(c.Q)
				// the keys the slice allows for these rows
				kl := max(c.K.Start, tq.Start+lo)
				kr := min(c.K.End-1, tq.End-1+hi)
				if kl > kr {
					continue
				}
				for kt := kl / kTile; kt*kTile <= kr; kt++ {
					tk := mask.Range{Start: kt * kTile, End: min((kt+1)*kTile, m.SeqK)}.Intersect(c.K)
					a := bandArea(tq, tk, lo, hi)
					if a == 0 {
						continue
					}
					t := &tiles[qt*nkt+kt]
					t.area += a
					t.slices = append(t.slices, si)
				}
			}
		}
	}
	rows, cols := nqt, nkt
	if w.Transposed {
		rows, cols = nkt, nqt
	}
	starts := make([]int32, rows+1)
	weight := make([]int, rows)
	var seen []int32 // transposed: key tiles so far that visit each query tile
	if w.Transposed {
		seen = make([]int32, cols)
	}
	for r := 0; r < rows; r++ {
		starts[r] = int32(len(w.Entries) / 2)
		for c := 0; c < cols; c++ {
			qt, kt := r, c
			if w.Transposed {
				qt, kt = c, r
			}
			t := tiles[qt*nkt+kt]
			if t.area == 0 {
				continue
			}
			nq := min((qt+1)*qTile, m.SeqQ) - qt*qTile
			nk := min((kt+1)*kTile, m.SeqK) - kt*kTile
			ref := int32(-1)
			if t.area != int64(nq)*int64(nk) || nq != qTile || nk != kTile {
				ref = int32(len(w.Refs))
				w.Refs = append(w.Refs, int32(len(t.slices)))
				w.Refs = append(w.Refs, t.slices...)
				w.PartialTiles++
			} else {
				w.FullTiles++
			}
			w.Entries = append(w.Entries, int32(c), ref)
			if w.Transposed {
				w.Ranks = append(w.Ranks, seen[c])
				seen[c]++
			}
			weight[r]++
		}
	}
	starts[rows] = int32(len(w.Entries) / 2)
	w.Start = append(w.Start, starts...)
	order := make([]int32, rows)
	for i := range order {
		order[i] = int32(i)
	}
	sort.SliceStable(order, func(i, j int) bool { return weight[order[i]] > weight[order[j]] })
	w.Order = append(w.Order, order...)
}

// bandArea counts pairs q in Q, k in K with lo <= k-q <= hi.
func bandArea(q, k mask.Range, lo, hi int) int64 {
	if lo <= k.Start-(q.End-1) && hi >= k.End-1-q.Start {
		return int64(q.Len()) * int64(k.Len())
	}
	var a int64
	for r := q.Start; r < q.End; r++ {
		l, h := max(k.Start, r+lo), min(k.End-1, r+hi)
		if h >= l {
			a += int64(h - l + 1)
		}
	}
	return a
}

// Row returns the entries (column tile, ref) of row tile r of list l.
func (w *WorkList) Row(l, r int) []int32 {
	s := w.Start[l*(w.RowTiles+1)+r]
	e := w.Start[l*(w.RowTiles+1)+r+1]
	return w.Entries[2*s : 2*e]
}

// Allowed evaluates a partial entry's test as the kernel does.
func (w *WorkList) Allowed(ref int32, q, k int) bool {
	n := int(w.Refs[ref])
	for _, si := range w.Refs[ref+1 : int(ref)+1+n] {
		s := w.Slices[6*si : 6*si+6]
		if q >= int(s[0]) && q < int(s[1]) && k >= int(s[2]) && k < int(s[3]) && k-q >= int(s[4]) && k-q <= int(s[5]) {
			return true
		}
	}
	return false
}
