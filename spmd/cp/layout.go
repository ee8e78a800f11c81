package cp

import (
	"fmt"

	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// Piece is a run of real tokens of the global sequence, Src, placed at local offset At
// of a shard. Padding tokens belong to no piece.
type Piece struct {
	Src mask.Range
	At  int
}

// Layout places the sequence on the R ranks of a ring: each ring shard is Local tokens
// (real ones in Pieces, the rest padding).
type Layout struct {
	Seq    int       // real tokens
	Padded int       // tokens with padding, R * Local
	Ring   int       // R
	Local  int       // tokens per ring shard
	Shards [][]Piece // per ring rank, ascending At
}

// Padding is the number of padding tokens the layout added.
func (l Layout) Padding() int { return l.Padded - l.Seq }

// ContiguousLayout gives ring rank r tokens [r*S/R, (r+1)*S/R).
func ContiguousLayout(seq, ring int) Layout {
	l := Layout{Seq: seq, Padded: seq, Ring: ring, Local: seq / ring, Shards: make([][]Piece, ring)}
	for r := range ring {
		l.Shards[r] = []Piece{{mask.Range{Start: r * l.Local, End: (r + 1) * l.Local}, 0}}
	}
	return l
}

// ZigzagLayout pads each document to a multiple of pad (a multiple of 2*ring), cuts it
// into 2*ring equal chunks and gives ring rank r chunks r and 2*ring-1-r of every
// document, in document order. Padding sits at the end of each document.
func ZigzagLayout(docs []mask.Range, seq, ring, pad int) (Layout, error) {
	if pad%(2*ring) != 0 {
		return Layout{}, fmt.Errorf("cp: zigzag padding %d is not a multiple of 2 x %d ring ranks", pad, ring)
	}
	if len(docs) == 0 {
		docs = []mask.Range{{Start: 0, End: seq}}
	}
	l := Layout{Seq: seq, Ring: ring, Shards: make([][]Piece, ring)}
	at := make([]int, ring)
	prev := 0
	for _, d := range docs {
		if d.Start != prev || d.Len() == 0 {
			return Layout{}, fmt.Errorf("cp: documents must tile the sequence: %v follows %d", d, prev)
		}
		prev = d.End
		padded := (d.Len() + pad - 1) / pad * pad
		l.Padded += padded
		c := padded / (2 * ring)
		for r := range ring {
			for _, idx := range []int{r, 2*ring - 1 - r} {
				src := mask.Range{Start: d.Start + idx*c, End: d.Start + (idx+1)*c}.Intersect(d)
				if src.Len() > 0 {
					l.Shards[r] = appendPiece(l.Shards[r], Piece{src, at[r]})
				}
				at[r] += c
			}
		}
	}
	if prev != seq {
		return Layout{}, fmt.Errorf("cp: documents cover %d of %d tokens", prev, seq)
	}
	l.Local = l.Padded / ring
	return l, nil
}

// appendPiece appends p, merging it into the last piece when both are contiguous.
func appendPiece(ps []Piece, p Piece) []Piece {
	if n := len(ps); n > 0 {
		last := &ps[n-1]
		if last.Src.End == p.Src.Start && last.At+last.Src.Len() == p.At {
			last.Src.End = p.Src.End
			return ps
		}
	}
	return append(ps, p)
}

// ShardTokens copies the rows [from, from+n) of ring shard r out of g, a global
// tensor with tokens on axis 0 ([S, ...]) or, for lse, on axis 1 ([H, S]); padding rows
// are zero.
func (l Layout) ShardTokens(g *tensor.Host, r, axis, from, n int) *tensor.Host {
	sh := g.Shape()
	out := tensor.NewHost(g.DType(), withAxis(sh, axis, n)...)
	l.move(g, out, r, axis, from, n, false)
	return out
}

// GatherTokens copies loc, the rows [from, from+n) of ring shard r, into the global
// tensor g (padding rows dropped).
func (l Layout) GatherTokens(g, loc *tensor.Host, r, axis, from, n int) {
	l.move(g, loc, r, axis, from, n, true)
}

func withAxis(sh []int, axis, n int) []int {
	out := append([]int(nil), sh...)
	out[axis] = n
	return out
}

// move copies between global g and local loc (rows [from, from+n) of shard r).
func (l Layout) move(g, loc *tensor.Host, r, axis, from, n int, toGlobal bool) {
	es := g.DType().Size()
	sh := g.Shape()
	outer, inner := 1, 1 // elements before and after the token axis
	for i := 0; i < axis; i++ {
		outer *= sh[i]
	}
	for i := axis + 1; i < len(sh); i++ {
		inner *= sh[i]
	}
	row := inner * es
	for _, p := range l.Shards[r] {
		lo, hi := max(p.At, from), min(p.At+p.Src.Len(), from+n)
		if lo >= hi {
			continue
		}
		gs := p.Src.Start + lo - p.At
		for o := range outer {
			gOff := (o*sh[axis] + gs) * row
			lOff := (o*n + lo - from) * row
			cnt := (hi - lo) * row
			if toGlobal {
				copy(g.Data[gOff:gOff+cnt], loc.Data[lOff:lOff+cnt])
			} else {
				copy(loc.Data[lOff:lOff+cnt], g.Data[gOff:gOff+cnt])
			}
		}
	}
}
