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
//   - Bounds: RowStart[RowTiles], RowEnd[RowTiles], then ColStart[ColTiles]: where each row
//     tile starts and where its rows end (a kernel writes rows RowStart .. RowEnd-1), and
//     where each column tile starts, the same for every list. Tile i starts at i * tile
//     unless the list is Ragged.
//
// A Ragged list (BuildRaggedWorkList: the forward, one mask) starts its tiles at the mask's
// segments (the documents: wherever a slice starts or ends) instead of at multiples of the
// tile, as cuDNN's ragged (THD) layout does, so that a document's tiles do not cross into the
// next one's; a segment's last tile is shorter. Its rows past their tile's RowEnd are
// computed and never written (they are the next tile's), so a tile whose valid rows are all
// allowed over a whole column tile is full; columns past a tile's end are another segment's
// and always masked (a short column tile's slices are copies clipped to its columns).
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
	Bounds           []int32
	Ragged           bool
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
	return buildWorkList(masks, qTile, kTile, transposed, false)
}

// BuildRaggedWorkList is BuildWorkList's forward list of one mask with its tiles started at
// the mask's segments (WorkList's Ragged).
func BuildRaggedWorkList(m mask.Mask, qTile, kTile int) (*WorkList, error) {
	return buildWorkList([]mask.Mask{m}, qTile, kTile, false, true)
}

func buildWorkList(masks []mask.Mask, qTile, kTile int, transposed, ragged bool) (*WorkList, error) {
	if len(masks) == 0 {
		return nil, fmt.Errorf("cuda: work list of no masks")
	}
	if qTile <= 0 || kTile <= 0 {
		return nil, fmt.Errorf("cuda: tiles %dx%d must be positive", qTile, kTile)
	}
	if ragged && (transposed || len(masks) != 1) {
		return nil, fmt.Errorf("cuda: a ragged work list is a forward list of one mask")
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
	qTiles, kTiles := packedTiling(sq, qTile), packedTiling(sk, kTile)
	if ragged {
		qb, kb := segments(masks[0])
		qTiles, kTiles = raggedTiling(qb, qTile), raggedTiling(kb, kTile)
	}
	nqt, nkt := len(qTiles), len(kTiles)
	w := &WorkList{RowTile: qTile, ColTile: kTile, Rows: sq, Cols: sk, RowTiles: nqt, ColTiles: nkt,
		Transposed: transposed, Lists: len(masks), Ragged: ragged}
	rowT, colT := qTiles, kTiles
	if transposed {
		w.RowTile, w.ColTile, w.Rows, w.Cols, w.RowTiles, w.ColTiles = kTile, qTile, sk, sq, nkt, nqt
		rowT, colT = kTiles, qTiles
	}
	for _, t := range rowT {
		w.Bounds = append(w.Bounds, int32(t.Start))
	}
	for _, t := range rowT {
		w.Bounds = append(w.Bounds, int32(t.End))
	}
	for _, t := range colT {
		w.Bounds = append(w.Bounds, int32(t.Start))
	}
	for _, m := range masks {
		w.addList(m, qTiles, kTiles, qTile, kTile)
	}
	return w, nil
}

// tiling is the positions of each tile of a list along one axis, in order: they partition
// 0 .. the axis's length.
type tiling []mask.Range

// packedTiling is n positions in tiles of tile from 0 (the last one shorter).
func packedTiling(n, tile int) tiling {
	t := make(tiling, 0, (n+tile-1)/tile)
	for x := 0; x < n; x += tile {
		t = append(t, mask.Range{Start: x, End: min(x+tile, n)})
	}
	return t
}

// raggedTiling is tiles of tile from each segment's start (bounds: the segments' starts,
// ascending, then the axis's length), each segment's last tile shorter.
func raggedTiling(bounds []int, tile int) tiling {
	var t tiling
	for i := 0; i+1 < len(bounds); i++ {
		for x := bounds[i]; x < bounds[i+1]; x += tile {
			t = append(t, mask.Range{Start: x, End: min(x+tile, bounds[i+1])})
		}
	}
	return t
}

// find is the index of the tile holding position x (len(t) past the end).
func (t tiling) find(x int) int {
	return sort.Search(len(t), func(i int) bool { return t[i].End > x })
}

// segments are m's row and column segment bounds, ascending from 0 to its length: wherever
// one of its canonical slices starts or ends (the documents of a document mask; 0 and the
// length alone for full and causal).
func segments(m mask.Mask) (rows, cols []int) {
	rs, cs := map[int]bool{0: true, m.SeqQ: true}, map[int]bool{0: true, m.SeqK: true}
	for _, s := range m.Slices {
		for _, c := range s.Canonical() {
			rs[c.Q.Start], rs[c.Q.End], cs[c.K.Start], cs[c.K.End] = true, true, true, true
		}
	}
	for x := range rs {
		rows = append(rows, x)
	}
	for x := range cs {
		cols = append(cols, x)
	}
	sort.Ints(rows)
	sort.Ints(cols)
	return rows, cols
}

// addList appends one mask's list over the tiles qTiles x kTiles (nominally qTile x kTile).
func (w *WorkList) addList(m mask.Mask, qTiles, kTiles tiling, qTile, kTile int) {
	nqt, nkt := len(qTiles), len(kTiles)
	tiles := make([]tileInfo, nqt*nkt)
	for _, s := range m.Slices {
		for _, c := range s.Canonical() {
			si := int32(len(w.Slices) / 6)
			lo, hi := c.Band()
			w.Slices = append(w.Slices, int32(c.Q.Start), int32(c.Q.End), int32(c.K.Start), int32(c.K.End),
				int32(max(lo, -bandLimit)), int32(min(hi, bandLimit)))
			for qt := qTiles.find(c.Q.Start); qt < nqt && qTiles[qt].Start < c.Q.End; qt++ {
				tq := qTiles[qt].Intersect(c.Q)
				// the keys the slice allows for these rows
				kl := max(c.K.Start, tq.Start+lo)
				kr := min(c.K.End-1, tq.End-1+hi)
				if kl > kr {
					continue
				}
				for kt := kTiles.find(kl); kt < nkt && kTiles[kt].Start <= kr; kt++ {
					tk := kTiles[kt].Intersect(c.K)
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
			nq, nk := qTiles[qt].Len(), kTiles[kt].Len()
			ref := int32(-1)
			// a ragged list's rows past the tile's end are never written: its short tiles
			// are full where their rows are (WorkList's Ragged)
			if t.area != int64(nq)*int64(nk) || nq != qTile && !w.Ragged || nk != kTile {
				ref = int32(len(w.Refs))
				w.Refs = append(w.Refs, int32(len(t.slices)))
				if w.Ragged && nk != kTile {
					// the keys past a short ragged tile are the next one's: its slices are
					// clipped to its own keys, so that no slice lets them in twice
					for _, si := range t.slices {
						c := w.Slices[6*si : 6*si+6]
						w.Refs = append(w.Refs, int32(len(w.Slices)/6))
						w.Slices = append(w.Slices, c[0], c[1], max(c[2], int32(kTiles[kt].Start)), min(c[3], int32(kTiles[kt].End)), c[4], c[5])
					}
				} else {
					w.Refs = append(w.Refs, t.slices...)
				}
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

// raggedWorth says whether m's ragged tiles are at most 1.25x the packed ones along each
// axis, asked before BuildRaggedWorkList: segments much shorter than a tile (a block-sparse
// map's blocks) only multiply the tiles, and the builder's table of tile pairs with them
// (a 64-token map at 128K in 128-token tiles: 4x, 4 million pairs).
func raggedWorth(m mask.Mask, qTile, kTile int) bool {
	qb, kb := segments(m)
	return 4*len(raggedTiling(qb, qTile)) <= 5*len(packedTiling(m.SeqQ, qTile)) &&
		4*len(raggedTiling(kb, kTile)) <= 5*len(packedTiling(m.SeqK, kTile))
}

// raggedPays says whether a ragged forward list visits at least 2% fewer tiles than the
// packed one of the same tiles (full_document and causal_document at 8K and 16K, seed 42:
// 3-4% fewer key positions; 1% at 32K, where it does not pay).
func raggedPays(packed, ragged *WorkList) bool {
	return 100*len(ragged.Entries) <= 98*len(packed.Entries)
}

// raggedOr is the forward's list of mask m in qTile x kTile tiles: BuildRaggedWorkList's
// where raggedWorth and raggedPays say so, else packed (m's BuildWorkList, as built).
func raggedOr(packed *WorkList, m mask.Mask, qTile, kTile int) *WorkList {
	if !raggedWorth(m, qTile, kTile) {
		return packed
	}
	if r, err := BuildRaggedWorkList(m, qTile, kTile); err == nil && raggedPays(packed, r) {
		return r
	}
	return packed
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
