package mask

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
)

// BlockState is how much of one (q block, k block) tile a mask allows.
type BlockState uint8

const (
	// Empty tiles allow no pair: a kernel skips them.
	Empty BlockState = iota
	// Partial tiles allow some pairs: a kernel tests each pair against the tile's slices.
	Partial
	// FullBlock tiles allow every pair: a kernel needs no per-element test.
	FullBlock
)

func (s BlockState) String() string {
	switch s {
	case Empty:
		return "empty"
	case Partial:
		return "partial"
	case FullBlock:
		return "full"
	}
	return fmt.Sprintf("blockstate(%d)", uint8(s))
}

// BlockEntry is one non-empty tile of a q-block row: the k block's index, its state, and
// the indices (into Mask.Slices) of the slices that allow pairs in it, ascending.
type BlockEntry struct {
	K      int
	State  BlockState
	Area   int64
	Slices []int
}

// BlockMap is a mask seen through a grid of blocks: for every q block, the non-empty k
// blocks in ascending order. It is the work list a block-tiled kernel consumes.
type BlockMap struct {
	// QEdges and KEdges are the block boundaries: block i is [QEdges[i], QEdges[i+1]).
	QEdges, KEdges []int
	// Rows[i] lists q block i's non-empty tiles by ascending K.
	Rows [][]BlockEntry
}

// UniformEdges cuts n positions into blocks of b: 0, b, 2b, ..., n (the last block is
// shorter when b does not divide n).
func UniformEdges(n, b int) []int {
	if b < 1 {
		b = 1
	}
	edges := make([]int, 0, (n+b-1)/b+1)
	for e := 0; e < n; e += b {
		edges = append(edges, e)
	}
	return append(edges, n)
}

// CheckEdges says whether edges are strictly increasing from 0 to n.
func CheckEdges(edges []int, n int) error {
	if len(edges) < 2 || edges[0] != 0 || edges[len(edges)-1] != n {
		return fmt.Errorf("mask: block edges must run from 0 to %d, got %d edges", n, len(edges))
	}
	for i := 1; i < len(edges); i++ {
		if edges[i] <= edges[i-1] {
			return fmt.Errorf("mask: block edges not increasing at %d: %d after %d", i, edges[i], edges[i-1])
		}
	}
	return nil
}

// Blocks computes the block map of m on the given edges (see UniformEdges; CheckEdges
// must accept them, else Blocks panics). The work is proportional to the tiles the
// slices touch, not to SeqQ x SeqK: a tile is full when its slices' areas in it sum to
// its size (slices never overlap).
func Blocks(m Mask, qEdges, kEdges []int) *BlockMap {
	if err := CheckEdges(qEdges, m.SeqQ); err != nil {
		panic("mask.Blocks: q " + err.Error())
	}
	if err := CheckEdges(kEdges, m.SeqK); err != nil {
		panic("mask.Blocks: k " + err.Error())
	}
	nq := len(qEdges) - 1
	bm := &BlockMap{QEdges: qEdges, KEdges: kEdges, Rows: make([][]BlockEntry, nq)}
	// Bucket the slices by the q blocks they cross.
	byRow := make([][]int, nq)
	for si, s := range m.Slices {
		if s.Q.Len() == 0 || s.K.Len() == 0 {
			continue
		}
		for i := findBlock(qEdges, s.Q.Start); i < nq && qEdges[i] < s.Q.End; i++ {
			byRow[i] = append(byRow[i], si)
		}
	}
	type hit struct {
		j, si int
		area  int64
	}
	var hits []hit
	for i := range nq {
		qb := Range{qEdges[i], qEdges[i+1]}
		hits = hits[:0]
		for _, si := range byRow[i] {
			s := m.Slices[si]
			rows := s.Q.Intersect(qb)
			lo, hi := s.Band()
			// Left and right ends grow with q: the first row's left end and the last
			// row's right end bound the keys the slice reaches in this block row.
			left, right := max(s.K.Start, rows.Start+lo), min(s.K.End-1, rows.End-1+hi)
			if left > right {
				continue
			}
			for j := findBlock(kEdges, left); j < len(kEdges)-1 && kEdges[j] <= right; j++ {
				if a := s.areaIn(qb, Range{kEdges[j], kEdges[j+1]}); a > 0 {
					hits = append(hits, hit{j, si, a})
				}
			}
		}
		if len(byRow[i]) > 1 { // one slice's hits come in k order already
			slices.SortFunc(hits, func(a, b hit) int {
				if a.j != b.j {
					return cmp.Compare(a.j, b.j)
				}
				return cmp.Compare(a.si, b.si)
			})
		}
		// One backing array per row for the entries' slice lists.
		idx := make([]int, len(hits))
		tiles := 0
		for x, h := range hits {
			idx[x] = h.si
			if x == 0 || h.j != hits[x-1].j {
				tiles++
			}
		}
		row := make([]BlockEntry, 0, tiles)
		for x, h := range hits {
			if n := len(row); n > 0 && row[n-1].K == h.j {
				row[n-1].Area += h.area
				row[n-1].Slices = idx[x-len(row[n-1].Slices) : x+1 : x+1]
				continue
			}
			row = append(row, BlockEntry{K: h.j, Area: h.area, Slices: idx[x : x+1 : x+1]})
		}
		for e := range row {
			size := int64(qb.Len()) * int64(kEdges[row[e].K+1]-kEdges[row[e].K])
			row[e].State = Partial
			if row[e].Area == size {
				row[e].State = FullBlock
			}
		}
		bm.Rows[i] = row
	}
	return bm
}

// State is the state of tile (q block i, k block j).
func (b *BlockMap) State(i, j int) BlockState {
	if e := b.Entry(i, j); e != nil {
		return e.State
	}
	return Empty
}

// Entry is tile (i, j)'s entry, nil when the tile is empty.
func (b *BlockMap) Entry(i, j int) *BlockEntry {
	row := b.Rows[i]
	n := sort.Search(len(row), func(x int) bool { return row[x].K >= j })
	if n < len(row) && row[n].K == j {
		return &row[n]
	}
	return nil
}

// Counts returns how many tiles are full and how many partial.
func (b *BlockMap) Counts() (full, partial int) {
	for _, row := range b.Rows {
		for _, e := range row {
			if e.State == FullBlock {
				full++
			} else {
				partial++
			}
		}
	}
	return full, partial
}
