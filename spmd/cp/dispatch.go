package cp

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"github.com/longca/longca/mask"
)

// Dispatch is balanced's placement of a packed sequence on N ranks, computed on the host
// from the mask's slices alone: the sequence is cut into blocks of Block tokens (the last
// real one short, then empty blocks up to N x PerRank), every rank holds PerRank blocks
// (the same number of tokens on every rank: its query rows, and the keys and values it
// owns), chosen so that the mask's area in every rank's rows (its attention work) is
// equal within a tolerance, preferring a rank that already holds blocks of the same
// document, and Fetch says which of the other ranks' blocks each rank needs: exactly
// the key blocks some row of its blocks attends to.
type Dispatch struct {
	Seq, Block, Ranks, PerRank int
	// Owner[b] is the rank holding block b, at position Slot[b] of its Blocks.
	Owner, Slot []int32
	// Blocks[r] are rank r's blocks, ascending (its local rows in that order).
	Blocks [][]int32
	// Area[r] is the mask's area (allowed pairs) in rank r's rows.
	Area []int64
	// Fetched[r] is how many blocks rank r receives from others (each pass).
	Fetched []int
	// Stages[r] are rank r's receiving stages, in order; stage s of every rank runs at
	// the same time. sends[r][s] are the transfers rank r sends in stage s.
	Stages [][]Stage
	sends  [][][]Xfer
	nStage int
}

// Stage is one step of a rank's fetch: the blocks it receives, side by side in one
// buffer of Slots blocks.
type Stage struct {
	Recv  []Xfer
	Slots int
}

// Xfer is one message pair (keys and values): N blocks that sit at Slot.. of the owner's
// local rows, placed at At.. (in blocks) of the receiver's stage buffer. Peer is the
// other side (the owner for a receive, the receiver for a send).
type Xfer struct {
	Peer, Slot, N, At int32
}

// DispatchTolerance is the stated balance of the dispatch: after the greedy placement and
// the swap refinement, no rank's area exceeds the mean by more than this fraction, unless
// the blocks are too coarse for it (one block's area is more than that: Imbalance says
// what was reached).
const DispatchTolerance = 0.01

// maxStageUnits caps a stage at this many ranks' worth of blocks (PerRank each): the
// stage buffers are two such (and their gradients), so a full mask on 512 ranks holds 32
// shards of K/V at once, not 511.
const maxStageUnits = 16

// DefaultBlock is the dispatch block when --cp-block is 0: the largest power of two of at
// most 512 tokens that gives every rank at least 8 blocks (1 at the least).
func DefaultBlock(seq, ranks int) int {
	per := (seq + ranks - 1) / max(ranks, 1)
	b := max(per/8, 1)
	b = 1 << (bits.Len(uint(b)) - 1)
	return min(b, 512)
}

// Imbalance is the largest rank's area over the mean, less one (0: perfect).
func (d *Dispatch) Imbalance() float64 {
	var sum, top int64
	for _, a := range d.Area {
		sum += a
		top = max(top, a)
	}
	if sum == 0 {
		return 0
	}
	return float64(top)*float64(d.Ranks)/float64(sum) - 1
}

// NumStages is the number of stages every rank steps through (the most any rank needs).
func (d *Dispatch) NumStages() int { return d.nStage }

// Sends are the transfers rank r sends in stage s (in the order its receivers list them).
func (d *Dispatch) Sends(r, s int) []Xfer {
	if s >= len(d.sends[r]) {
		return nil
	}
	return d.sends[r][s]
}

// RecvStage is rank r's stage s (empty past its last).
func (d *Dispatch) RecvStage(r, s int) Stage {
	if s >= len(d.Stages[r]) {
		return Stage{}
	}
	return d.Stages[r][s]
}

// blockRange is block b's real tokens (empty for a padding block).
func (d *Dispatch) blockRange(b int) mask.Range {
	return mask.Range{Start: min(b*d.Block, d.Seq), End: min((b+1)*d.Block, d.Seq)}
}

// Layout is the dispatch as a layout: rank r's local rows are its blocks in order.
func (d *Dispatch) Layout() Layout {
	local := d.PerRank * d.Block
	l := Layout{Seq: d.Seq, Padded: d.Ranks * local, Ring: d.Ranks, Local: local, Shards: make([][]Piece, d.Ranks)}
	for r, bs := range d.Blocks {
		for i, b := range bs {
			if src := d.blockRange(int(b)); src.Len() > 0 {
				l.Shards[r] = appendPiece(l.Shards[r], Piece{src, i * d.Block})
			}
		}
	}
	return l
}

// stageKeys are the keys of rank r's stage s as pieces of its stage buffer.
func (d *Dispatch) stageKeys(r, s int) []Piece {
	var ps []Piece
	for _, x := range d.RecvStage(r, s).Recv {
		for i := range int(x.N) {
			b := d.Blocks[x.Peer][int(x.Slot)+i]
			if src := d.blockRange(int(b)); src.Len() > 0 {
				ps = appendPiece(ps, Piece{src, (int(x.At) + i) * d.Block})
			}
		}
	}
	return ps
}

// blockNeeds are, per query block, its area and the key ranges its rows attend to (one
// per slice crossing the block, exact: the union of the rows' allowed keys in it).
type blockNeeds struct {
	area  []int64
	lo    []int // the first key any row of the block attends to (-1: none)
	start []int // block b's ranges are ranges[start[b]:start[b+1]]
	rng   []mask.Range
}

func needsOf(m mask.Mask, nb, block int) blockNeeds {
	n := blockNeeds{area: make([]int64, nb), lo: make([]int, nb), start: make([]int, nb+1)}
	// Count the crossings of each block, then fill them in block order.
	for _, s := range m.Slices {
		if s.Q.Len() == 0 || s.K.Len() == 0 {
			continue
		}
		for b := s.Q.Start / block; b <= (s.Q.End-1)/block; b++ {
			n.start[b+1]++
		}
	}
	for b := range nb {
		n.start[b+1] += n.start[b]
		n.lo[b] = -1
	}
	cross := make([]int, n.start[nb])
	fill := slices.Clone(n.start[:nb])
	for si, s := range m.Slices {
		if s.Q.Len() == 0 || s.K.Len() == 0 {
			continue
		}
		for b := s.Q.Start / block; b <= (s.Q.End-1)/block; b++ {
			cross[fill[b]] = si
			fill[b]++
		}
	}
	n.rng = make([]mask.Range, 0, len(cross))
	var pieces []mask.Slice
	one := mask.Mask{SeqQ: m.SeqQ, SeqK: m.SeqK, Slices: make([]mask.Slice, 1)}
	for b := range nb {
		from := len(n.rng)
		rows := mask.Range{Start: b * block, End: (b + 1) * block}
		for _, si := range cross[n.start[b]:n.start[b+1]] {
			s := m.Slices[si]
			one.Slices[0] = s
			pieces = one.AppendWindow(pieces[:0], rows, s.K, rows.Start, s.K.Start)
			k := mask.Range{Start: math.MaxInt, End: -1}
			for _, p := range pieces {
				if a := p.Area(); a > 0 {
					n.area[b] += a
					k.Start, k.End = min(k.Start, p.K.Start), max(k.End, p.K.End)
				}
			}
			if k.End > k.Start {
				n.rng = append(n.rng, k)
				if n.lo[b] < 0 || k.Start < n.lo[b] {
					n.lo[b] = k.Start
				}
			}
		}
		n.start[b] = from
	}
	n.start[nb] = len(n.rng)
	return n
}

// Balance computes the dispatch of mask m on ranks ranks with blocks of block tokens.
//
// The placement is longest-processing-time first under a count constraint: blocks by
// area, largest first, each to the least loaded rank that still has room for a block,
// except that a rank already holding a block of the same keys (the same document: the
// same first key) or a neighbouring block takes it while that keeps it within
// DispatchTolerance of the mean, so a document's blocks stay together and its keys need
// not travel. Swaps between the most and the least loaded rank then bring the largest
// area to within DispatchTolerance of the mean where block sizes allow.
func Balance(m mask.Mask, ranks, block int) (*Dispatch, error) {
	if ranks < 1 {
		return nil, fmt.Errorf("balanced: %d ranks: need at least 1 (--ranks)", ranks)
	}
	if block < 1 {
		return nil, fmt.Errorf("balanced: block of %d tokens (--cp-block): use a positive size, or 0 for the default", block)
	}
	seq := m.SeqQ
	if seq < 1 {
		return nil, fmt.Errorf("balanced: an empty sequence")
	}
	real := (seq + block - 1) / block
	per := (real + ranks - 1) / ranks
	nb := per * ranks
	d := &Dispatch{Seq: seq, Block: block, Ranks: ranks, PerRank: per}
	needs := needsOf(m, nb, block)
	d.assign(needs)
	d.plan(needs)
	return d, nil
}

// rankHeap orders the ranks with room by load (then rank), with positions for updates.
type rankHeap struct {
	load []int64
	rank []int32
	pos  []int32 // per rank: index in rank, -1 when full
}

func (h *rankHeap) Len() int { return len(h.rank) }
func (h *rankHeap) Less(i, j int) bool {
	a, b := h.rank[i], h.rank[j]
	return h.load[a] < h.load[b] || h.load[a] == h.load[b] && a < b
}
func (h *rankHeap) Swap(i, j int) {
	h.rank[i], h.rank[j] = h.rank[j], h.rank[i]
	h.pos[h.rank[i]], h.pos[h.rank[j]] = int32(i), int32(j)
}
func (h *rankHeap) Push(x any) {
	r := x.(int32)
	h.pos[r] = int32(len(h.rank))
	h.rank = append(h.rank, r)
}
func (h *rankHeap) Pop() any {
	r := h.rank[len(h.rank)-1]
	h.rank = h.rank[:len(h.rank)-1]
	h.pos[r] = -1
	return r
}

// localityCandidates bounds the ranks remembered per document (first key): enough to
// find one with room, few enough that a full mask (one document) stays linear.
const localityCandidates = 8

func (d *Dispatch) assign(needs blockNeeds) {
	n, nb, per := d.Ranks, len(needs.area), d.PerRank
	d.Owner = make([]int32, nb)
	for i := range d.Owner {
		d.Owner[i] = -1
	}
	var total int64
	order := make([]int32, nb)
	for b := range order {
		order[b] = int32(b)
		total += needs.area[b]
	}
	slices.SortStableFunc(order, func(a, b int32) int { return cmp.Compare(needs.area[b], needs.area[a]) })
	limit := int64(float64(total) / float64(n) * (1 + DispatchTolerance))
	h := &rankHeap{load: make([]int64, n), rank: make([]int32, n), pos: make([]int32, n)}
	count := make([]int, n)
	for r := range n {
		h.rank[r], h.pos[r] = int32(r), int32(r)
	}
	byDoc := map[int][]int32{}
	give := func(b, r int32) {
		d.Owner[b] = r
		h.load[r] += needs.area[b]
		count[r]++
		if count[r] == per {
			heap.Remove(h, int(h.pos[r]))
		} else {
			heap.Fix(h, int(h.pos[r]))
		}
		if lo := needs.lo[b]; lo >= 0 {
			rs := byDoc[lo]
			if !slices.Contains(rs, r) {
				if len(rs) == localityCandidates {
					rs = rs[1:]
				}
				byDoc[lo] = append(rs, r)
			}
		}
	}
	for _, b := range order {
		a := needs.area[b]
		best := int32(-1)
		if a > 0 {
			try := func(r int32) {
				if r < 0 || h.pos[r] < 0 || h.load[r]+a > limit {
					return
				}
				if best < 0 || h.load[r] < h.load[best] {
					best = r
				}
			}
			for _, r := range byDoc[needs.lo[b]] {
				try(r)
			}
			if b > 0 {
				try(d.Owner[b-1])
			}
			if int(b) < nb-1 {
				try(d.Owner[b+1])
			}
		}
		if best < 0 {
			best = h.rank[0]
		}
		give(b, best)
	}
	d.Area = h.load
	d.refine(needs.area, total)
	// Each rank's blocks in sequence order.
	d.Blocks = make([][]int32, n)
	for b, r := range d.Owner {
		d.Blocks[r] = append(d.Blocks[r], int32(b))
	}
	d.Slot = make([]int32, nb)
	for _, bs := range d.Blocks {
		for i, b := range bs {
			d.Slot[b] = int32(i)
		}
	}
}

// refine swaps a block of the most loaded rank with one of the least loaded (counts stay
// equal) while that lowers the maximum: the swap whose area difference is closest to half
// the gap. It stops once the maximum is within DispatchTolerance of the mean.
func (d *Dispatch) refine(area []int64, total int64) {
	n := d.Ranks
	if n < 2 {
		return
	}
	held := make([][]int32, n)
	for b, r := range d.Owner {
		held[r] = append(held[r], int32(b))
	}
	target := int64(float64(total) / float64(n) * (1 + DispatchTolerance))
	for iter := 0; iter < 4*n; iter++ {
		hi, lo := 0, 0
		for r := range n {
			if d.Area[r] > d.Area[hi] {
				hi = r
			}
			if d.Area[r] < d.Area[lo] {
				lo = r
			}
		}
		gap := d.Area[hi] - d.Area[lo]
		if d.Area[hi] <= target || gap <= 0 {
			return
		}
		bx, by, bestScore := -1, -1, int64(-1)
		for x, bx0 := range held[hi] {
			for y, by0 := range held[lo] {
				diff := area[bx0] - area[by0]
				if diff <= 0 || diff >= gap {
					continue
				}
				if score := min(diff, gap-diff); score > bestScore {
					bx, by, bestScore = x, y, score
				}
			}
		}
		if bx < 0 {
			return
		}
		a, b := held[hi][bx], held[lo][by]
		held[hi][bx], held[lo][by] = b, a
		d.Owner[a], d.Owner[b] = int32(lo), int32(hi)
		diff := area[a] - area[b]
		d.Area[hi] -= diff
		d.Area[lo] += diff
	}
}

// stageCaps are the cumulative sizes (in blocks) of the stages of a fetch of total blocks:
// in units of one rank's blocks, doubling from 1 up to maxStageUnits over the first half
// and halving back to 1 over the second, so the first transfer (overlapping the local
// blocks' compute) and the backward's last gradient return (overlapping nothing) are one
// unit, and the stages between are few and large.
func stageCaps(total, unit int) []int {
	units := (total + unit - 1) / unit
	var front, back []int
	left := units
	for step := 1; left > 0; step = min(step*2, maxStageUnits) {
		for _, side := range []*[]int{&front, &back} {
			if left == 0 {
				break
			}
			take := min(step, left)
			*side = append(*side, take)
			left -= take
		}
	}
	slices.Reverse(back)
	var caps []int
	sum := 0
	for _, u := range append(front, back...) {
		sum += u
		caps = append(caps, min(sum*unit, total))
	}
	return caps
}

// plan computes what every rank fetches, its stages and every rank's sends.
func (d *Dispatch) plan(needs blockNeeds) {
	n, per := d.Ranks, d.PerRank
	d.Stages = make([][]Stage, n)
	d.Fetched = make([]int, n)
	// Per rank, per owner, the owner's slots it needs (ascending: keys are visited in
	// sequence order and an owner's slots follow it).
	want := make([][]int32, n)
	var touched []int32
	var ranges []mask.Range
	for r := range n {
		ranges = ranges[:0]
		for _, b := range d.Blocks[r] {
			ranges = append(ranges, needs.rng[needs.start[b]:needs.start[b+1]]...)
		}
		slices.SortFunc(ranges, func(a, b mask.Range) int { return cmp.Compare(a.Start, b.Start) })
		touched = touched[:0]
		last := -1
		for i := 0; i < len(ranges); {
			cur := ranges[i]
			for i++; i < len(ranges) && ranges[i].Start <= cur.End; i++ {
				cur.End = max(cur.End, ranges[i].End)
			}
			for kb := max(cur.Start/d.Block, last+1); kb <= (cur.End-1)/d.Block; kb++ {
				last = kb
				p := d.Owner[kb]
				if int(p) == r {
					continue
				}
				if len(want[p]) == 0 {
					touched = append(touched, p)
				}
				want[p] = append(want[p], d.Slot[kb])
			}
		}
		// Runs of consecutive slots, owners by ring distance.
		slices.SortFunc(touched, func(a, b int32) int {
			return cmp.Compare((int(a)-r+n)%n, (int(b)-r+n)%n)
		})
		var runs []Xfer
		total := 0
		for _, p := range touched {
			ws := want[p]
			for i := 0; i < len(ws); {
				j := i + 1
				for j < len(ws) && ws[j] == ws[j-1]+1 {
					j++
				}
				runs = append(runs, Xfer{Peer: p, Slot: ws[i], N: int32(j - i)})
				total += j - i
				i = j
			}
			want[p] = ws[:0]
		}
		d.Fetched[r] = total
		if total == 0 {
			continue
		}
		caps := stageCaps(total, per)
		var st Stage
		got := 0
		for _, x := range runs {
			x.At = int32(st.Slots)
			st.Recv = append(st.Recv, x)
			st.Slots += int(x.N)
			got += int(x.N)
			if got >= caps[len(d.Stages[r])] {
				d.Stages[r] = append(d.Stages[r], st)
				st = Stage{}
			}
		}
		if len(st.Recv) > 0 {
			d.Stages[r] = append(d.Stages[r], st)
		}
		d.nStage = max(d.nStage, len(d.Stages[r]))
	}
	d.sends = make([][][]Xfer, n)
	for r := range n {
		d.sends[r] = make([][]Xfer, d.nStage)
	}
	for r, sts := range d.Stages {
		for s, st := range sts {
			for _, x := range st.Recv {
				d.sends[x.Peer][s] = append(d.sends[x.Peer][s], Xfer{Peer: int32(r), Slot: x.Slot, N: x.N, At: x.At})
			}
		}
	}
}
