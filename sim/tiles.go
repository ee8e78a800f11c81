package sim

import (
	"cmp"
	"slices"
	"sync"

	"github.com/longca/longca/mask"
)

// Tiles is what a block-tiled attention kernel does on a mask: the (q block, k block)
// tiles it computes, split into those every pair of which is allowed (no per-element
// masking) and the partial ones (computed whole, masked per element), the q-block rows
// that have any tile, and the tiles of the busiest row (one thread block's sequential
// work: the critical path when rows are few).
type Tiles struct {
	Full, Partial int64
	Rows          int64
	MaxRow        int64
	Area          int64
}

// Total is every computed tile.
func (t Tiles) Total() int64 { return t.Full + t.Partial }

// TilesOf counts the tiles of m on a grid of bq x bk tiles. The work is proportional to
// the (slice, q-block row) pairs, not to the tiles, so a 512K x 512K full mask costs as
// little as a small one. Slices must be canonical (no empty query row, as the mask
// builders and mask.Window make them). A tile that two slices fill together counts as
// partial (mask.Blocks would call it full); slices never overlap, so a tile one slice
// fills is touched by no other.
func TilesOf(m mask.Mask, bq, bk int) Tiles {
	type span struct{ lo, hi int } // k blocks [lo, hi] of one q-block row
	rows := make([][]span, (m.SeqQ+bq-1)/bq)
	var t Tiles
	for _, s := range m.Slices {
		if s.Q.Len() == 0 || s.K.Len() == 0 {
			continue
		}
		if s.Kind == mask.Full {
			t.Area += int64(s.Q.Len()) * int64(s.K.Len())
		} else {
			t.Area += s.Area()
		}
		lo, hi := s.Band()
		for i := s.Q.Start / bq; i*bq < s.Q.End; i++ {
			qb := mask.Range{Start: i * bq, End: min((i+1)*bq, m.SeqQ)}
			part := s.Q.Intersect(qb)
			// The left and right ends of a row's keys grow with q: the first row's left end
			// and the last row's right end bound the keys of the block row, and every key
			// between is allowed for some row (canonical slices have no empty row).
			left := max(s.K.Start, part.Start+lo)
			right := min(s.K.End-1, part.End-1+hi)
			if left > right {
				continue
			}
			jl, jr := left/bk, right/bk
			rows[i] = append(rows[i], span{jl, jr})
			if part != qb {
				continue // covering part of the block's rows, the slice fills no tile
			}
			t.Full += fullTiles(s, qb, jl, jr, bk, m.SeqQ, m.SeqK)
		}
	}
	var total int64
	for _, sp := range rows {
		if len(sp) == 0 {
			continue
		}
		if !slices.IsSortedFunc(sp, func(a, b span) int { return cmp.Compare(a.lo, b.lo) }) {
			slices.SortFunc(sp, func(a, b span) int { return cmp.Compare(a.lo, b.lo) })
		}
		var n int64
		end := -1
		for _, x := range sp {
			if lo := max(x.lo, end+1); x.hi >= lo {
				n += int64(x.hi - lo + 1)
				end = x.hi
			}
		}
		t.Rows++
		t.MaxRow = max(t.MaxRow, n)
		total += n
	}
	t.Partial = total - t.Full
	return t
}

// fullTiles counts the tiles j in [jl, jr] of q block qb that slice s fills: K covers the
// tile and the band holds at its corners (kmin - qmax >= lo, kmax - qmin <= hi).
func fullTiles(s mask.Slice, qb mask.Range, jl, jr, bk, seqQ, seqK int) int64 {
	lo, hi := s.Band()
	jmin := max(jl, ceilDiv(s.K.Start, bk))
	if lo > -seqQ { // else every k - q in the matrix is above lo: tile start >= lo + qmax
		jmin = max(jmin, ceilDiv(lo+qb.End-1, bk))
	}
	end := s.K.End // a tile's end (exclusive) may not pass this
	if hi < seqK { // else every k - q in the matrix is below hi
		end = min(end, hi+qb.Start+1)
	}
	nk := (seqK + bk - 1) / bk
	jmax := nk - 1 // the last tile ends at seqK
	if end < seqK {
		jmax = end/bk - 1
	}
	jmax = min(jmax, jr)
	if jmax < jmin {
		return 0
	}
	return int64(jmax - jmin + 1)
}

// ceilDiv is a/b rounded up, for b > 0 and any a.
func ceilDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a > 0 {
		q++
	}
	return q
}

// TileCache remembers the tiles of masks by content (a 128-bit hash of the slices): the
// sub-masks of CP steps repeat across steps, ranks, passes and methods of one layout.
// It is safe for concurrent use; the zero value is ready.
type TileCache struct {
	mu sync.Mutex
	m  map[tileKey]Tiles
}

// lastTiles remembers the tiles of one large mask by identity (its slices held, so that
// their address is not reused): a traced rank's all-gather sub-mask, too large to hash,
// serves its forward and its backward. One per recorder, so at most one such mask per
// rank being traced stays alive.
type lastTiles struct {
	slices []mask.Slice
	seq    [2]int
	bq, bk int
	t      Tiles
}

// of returns the tiles of m, from memory when m is the last large mask seen.
func (l *lastTiles) of(c *TileCache, m mask.Mask, bq, bk int) Tiles {
	if len(m.Slices) <= cacheSlices {
		return c.Tiles(m, bq, bk)
	}
	if len(l.slices) == len(m.Slices) && &l.slices[0] == &m.Slices[0] && l.seq == [2]int{m.SeqQ, m.SeqK} && l.bq == bq && l.bk == bk {
		return l.t
	}
	*l = lastTiles{slices: m.Slices, seq: [2]int{m.SeqQ, m.SeqK}, bq: bq, bk: bk, t: TilesOf(m, bq, bk)}
	return l.t
}

type tileKey struct {
	h1, h2    uint64
	n, sq, sk int
	bq, bk    int
}

// cacheSlices is the most slices a mask may have to be remembered: larger ones (the
// all-gather's sub-mask of a rank) rarely repeat, and hashing them costs as much as
// counting their tiles.
const cacheSlices = 1 << 14

// Tiles returns TilesOf(m, bq, bk), computed once per distinct mask.
func (c *TileCache) Tiles(m mask.Mask, bq, bk int) Tiles {
	if c == nil || len(m.Slices) > cacheSlices {
		return TilesOf(m, bq, bk)
	}
	k := tileKey{n: len(m.Slices), sq: m.SeqQ, sk: m.SeqK, bq: bq, bk: bk}
	k.h1, k.h2 = 14695981039346656037, 0x9E3779B97F4A7C15
	mix := func(v int) {
		x := uint64(v)
		k.h1 = (k.h1 ^ x) * 1099511628211
		k.h2 = (k.h2 ^ (x + 0x632BE59BD9B4E019)) * 0xBF58476D1CE4E5B9
		k.h2 ^= k.h2 >> 31
	}
	for _, s := range m.Slices {
		mix(s.Q.Start)
		mix(s.Q.End)
		mix(s.K.Start)
		mix(s.K.End)
		mix(int(s.Kind))
	}
	c.mu.Lock()
	t, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return t
	}
	t = TilesOf(m, bq, bk)
	c.mu.Lock()
	if c.m == nil {
		c.m = map[tileKey]Tiles{}
	}
	c.m[k] = t
	c.mu.Unlock()
	return t
}
