package harness

import (
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
)

// The CPU reference's work besides its multiply-adds, in FLOPs at DefaultRefFLOPs (one
// core): a nanosecond each. kernels/ref converts every element of its inputs and outputs
// between the tensors' layout and its float64 head-major copies, keeps each query row's
// bookkeeping (spans, softmax, lse) for every head, and walks each block of 16 query rows
// (key columns in the backward's key side) over the 64-key tiles of the block's extent,
// visiting every span of every row of the block at each tile. Where documents are short
// that is most of the time: 1-token documents at 16K tokens (8:2 heads, head dim 32) took
// 0.11 s forward and 0.21 s backward on one core of the 2-core build machine, where their
// FLOPs are 0.02 and 0.04 s at the reference's rate; share_question, whose rows all see
// the question at the start, walked 4M tiles a head for 0.36 s forward. Measured there
// (kernels/ref on causal_document, full_document, share_question, causal_blockwise,
// prefix_lm_document of 1- to 64-token documents, 2K-64K tokens, heads 1:1 to 32:8, head
// dim 8 to 128, the CPU time of one core, the machine otherwise idle): 0.36 us a query row
// and head forward and 0.67 backward, 6-6.5 ns an element converted, 4-7 ns a span
// visited at a tile; taken about 1.2-1.4x.
const (
	refRowFwd  = 500  // a query row of one head, forward
	refRowBwd  = 1000 // a query row of one head, backward
	refElement = 9    // an element converted in or out
	refVisit   = 8    // a span of a row visited at a key tile
)

// RefWorkScale is what the reference's work (in FLOPs at DefaultRefFLOPs on one core)
// that its workers share (rows and tile visits, walked by parallelFor) counts at a rate
// measured on this host (CalibrateRef: its dense FLOPs on every core): spread over the
// cores, not sped up as dense FLOPs are. At the assumed rate it is 1.
func RefWorkScale(rate float64, cores int) float64 {
	return max(1, rate/(DefaultRefFLOPs*float64(max(cores, 1))))
}

// RefSerialScale is RefWorkScale for the work of a call that one core does alone (its
// elements converted in and out: RefShape.Elements): at one core's assumed rate
// whatever the rate measured on every core. At the assumed rate it is 1. kernels/ref on
// 1-token documents at 64K tokens (8:2 heads, head dim 64, one core, profiled) spent 64%
// of its time outside parallelFor, converting elements, as Elements counts (64% of
// FLOPs + Work), and the cores of the 2-core build machine took it 1.0-1.2x faster than
// one; spread over them, the kernel sweep of 256K's backward was estimated at 68 s for
// 102 s.
func RefSerialScale(rate float64) float64 {
	return max(1, rate/DefaultRefFLOPs)
}

// WorkAt is Work at rate on cores (CalibrateRef's rate, GOMAXPROCS), in FLOPs at rate:
// its elements at one core's rate (RefSerialScale), the rest spread over the cores
// (RefWorkScale).
func (rs RefShape) WorkAt(hq, hkv, d int, pass kernels.Pass, rate float64, cores int) float64 {
	el := rs.Elements(hq, hkv, d, pass)
	return RefWorkScale(rate, cores)*(rs.Work(hq, hkv, d, pass)-el) + RefSerialScale(rate)*el
}

// refTileRows and refTileCols are kernels/ref's block of rows (blockRows) and tile of
// keys (tileCols).
const (
	refTileRows = 16
	refTileCols = 64
)

// RefShape is what the CPU reference's work besides its FLOPs depends on in a mask: its
// rows and columns, and the spans it visits at the key tiles of each block of rows (and
// of query tiles of each block of columns, in the backward's key side), per head.
type RefShape struct {
	Rows, Cols           float64
	RowVisits, ColVisits float64
}

// NewRefShape walks m's slices once (no row is listed): for each block of 16 rows the
// extent of its spans and how many spans its rows hold, likewise for blocks of columns.
// A span counted is a slice's part of one row, before kernels/ref merges a row's
// touching spans: an upper bound.
func NewRefShape(m mask.Mask) RefShape {
	rs := RefShape{Rows: float64(m.SeqQ), Cols: float64(m.SeqK)}
	rs.RowVisits = blockVisits(m.SeqQ, m.Slices, false)
	rs.ColVisits = blockVisits(m.SeqK, m.Slices, true)
	return rs
}

// blockVisits is the sum over the blocks of 16 rows (columns with cols) of the tiles of
// the block's extent times the spans its rows hold.
func blockVisits(n int, slices []mask.Slice, cols bool) float64 {
	nb := (n + refTileRows - 1) / refTileRows
	if nb == 0 {
		return 0
	}
	lo := make([]int, nb)
	hi := make([]int, nb)
	spans := make([]int64, nb)
	for i := range lo {
		lo[i] = 1 << 62
	}
	for _, s := range slices {
		blo, bhi := s.Band()
		// the rows q of s with a span, [a, b), and a row's span [l(q), r(q)] (both
		// non-decreasing in q); for columns, the transpose: k - q in [blo, bhi] with q the
		// span, so a column k's queries are [k - bhi, k - blo]
		var a, b int
		var l, r func(int) int
		if !cols {
			a, b = max(s.Q.Start, s.K.Start-bhi), min(s.Q.End, s.K.End-blo)
			l = func(q int) int { return max(s.K.Start, q+blo) }
			r = func(q int) int { return min(s.K.End-1, q+bhi) }
		} else {
			a, b = max(s.K.Start, s.Q.Start+blo), min(s.K.End, s.Q.End+bhi)
			l = func(k int) int { return max(s.Q.Start, k-bhi) }
			r = func(k int) int { return min(s.Q.End-1, k-blo) }
		}
		a, b = max(a, 0), min(b, n)
		if a >= b {
			continue
		}
		for blk := a / refTileRows; blk <= (b-1)/refTileRows; blk++ {
			i0, i1 := max(blk*refTileRows, a), min((blk+1)*refTileRows, b)
			spans[blk] += int64(i1 - i0)
			lo[blk] = min(lo[blk], l(i0))
			hi[blk] = max(hi[blk], r(i1-1)+1)
		}
	}
	var v float64
	for blk := range spans {
		if spans[blk] > 0 && hi[blk] > lo[blk] {
			tiles := (hi[blk] - lo[blk] + refTileCols - 1) / refTileCols
			v += float64(tiles) * float64(spans[blk])
		}
	}
	return v
}

// Work is the CPU reference's work besides its FLOPs for one pass of heads hq:hkv at
// head dim d on the shape, in FLOPs at DefaultRefFLOPs: a forward's rows, elements (q,
// k, v in, out out) and tile visits (scores, then P x V); a backward's (q, k, v, out,
// dout in, dq, dk, dv out; the query side's two walks and the key side's two, every
// query head); a forward and backward, both. A backward alone is what a timed backward
// repeats (its forward runs once, outside the repetitions).
func (rs RefShape) Work(hq, hkv, d int, pass kernels.Pass) float64 {
	q := float64(hq)
	fwd := rs.Rows*q*refRowFwd + 2*refVisit*q*rs.RowVisits
	bwd := rs.Rows*q*refRowBwd + 2*refVisit*q*(rs.RowVisits+rs.ColVisits)
	el := rs.Elements(hq, hkv, d, pass)
	switch pass {
	case kernels.Fwd:
		return fwd + el
	case kernels.Bwd:
		return bwd + el
	}
	return fwd + bwd + el
}

// Elements is the part of Work that converts elements in and out (kernels/ref's
// headMajor and storeTokenMajor, outside its workers: one core's).
func (rs RefShape) Elements(hq, hkv, d int, pass kernels.Pass) float64 {
	q, kv, dd := float64(hq), float64(hkv), float64(d)
	fwd := refElement * dd * (2*rs.Rows*q + 2*rs.Cols*kv)
	bwd := refElement * dd * (4*rs.Rows*q + 4*rs.Cols*kv)
	switch pass {
	case kernels.Fwd:
		return fwd
	case kernels.Bwd:
		return bwd
	}
	return fwd + bwd
}

// RefWork is RefShape's Work of m.
func RefWork(m mask.Mask, hq, hkv, d int, pass kernels.Pass) float64 {
	return NewRefShape(m).Work(hq, hkv, d, pass)
}
