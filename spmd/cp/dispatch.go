package cp

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"sort"

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
	// Window is how many stages' fetches are in flight at once (the same on every rank,
	// so that every rank starts its groups in the same order): every stage's, when the
	// largest fetch fits in maxFetchUnits ranks' blocks, else as many of the largest stage
	// as fit (at least 2).
	Window int
	sends  [][][]Xfer
	nStage int
	stages int // the most stages a fetch is cut into (0: the pyramid)
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

// DispatchTolerance is the stated balance of the dispatch: with 16 blocks per rank (8K
// tokens per rank, blocks of 512) no rank's area exceeds the mean by more than this
// fraction on the CP masks at 8 and 64 ranks (TestDispatchBalancesArea). The swaps aim
// at half of it; with fewer, coarser blocks (one block of a long full document can be a
// fifth of a rank's share) the balance is what the blocks allow: Imbalance says.
const DispatchTolerance = 0.02

// maxStageUnits caps a stage at this many ranks' worth of blocks (PerRank each), and
// maxFetchUnits the blocks in flight (Window): a full mask on 512 ranks holds 32 shards of
// K/V at once, not 511.
const (
	maxStageUnits = 16
	maxFetchUnits = 32
)

// DefaultBlock is the dispatch block when --cp-block is 0, for a dispatch over units
// ranks (or groups of u ranks that split the heads: the mesh u x units): the largest power
// of two of at most 512·u' tokens (u' the largest power of two up to u: 512·U for the usual
// U of 1, 2, 4, 8) that gives every unit at least 8 blocks (1 at the least).
// A block's work on each of the u ranks is that of a block u times shorter over all the
// heads, so 512·u keeps the per-rank grain of the one-rank dispatch (512 tokens at 8K
// tokens per rank); finer blocks on a head-split mesh only cut the kernel's calls into
// shorter pieces (longca simulate, 64 and 512 H100s, 8x8 and 8x64, causal: 637 -> 662
// and 648 -> 680 TFLOP/s forward; causal_document_long with MagiAttention's documents
// 382 -> 454 and 307 -> 396; docs/cp-gpu.md).
func DefaultBlock(seq, units, u int) int {
	per := (seq + units - 1) / max(units, 1)
	b := max(per/8, 1)
	b = 1 << (bits.Len(uint(b)) - 1)
	return min(b, 512<<(bits.Len(uint(max(u, 1)))-1))
}

// DefaultStages resolves --cp-stages on a world of ranks ranks: as given when positive;
// else one stage up to 8 ranks (one node: the fetch moves fast, and every further stage
// costs a log-sum-exp merge of the rank's whole output, which the fetch it would hide does
// not), the pyramid (0, stageCaps) past that, where the fetch crosses nodes and must
// overlap compute.
func DefaultStages(ranks, stages int) int {
	if stages > 0 {
		return stages
	}
	if ranks <= 8 {
		return 1
	}
	return 0
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

// Balance computes the dispatch of mask m on ranks ranks with blocks of block tokens,
// in three steps: the blocks in sequence order are cut into contiguous runs of equal
// area, one per rank (a document's blocks stay on as few ranks as its area needs); the
// ranks with more than their share of blocks give their lightest to those with fewer
// (the heaviest of them to the least loaded first), so every rank holds the same number
// of tokens; then swaps between the most loaded rank and the least loaded ones bring
// every rank within DispatchTolerance of the mean area where block sizes allow.
//
// stages bounds the stages a rank's fetch is cut into (stageCaps: 1 one piece, k > 1
// doubling pieces, 0 the pyramid).
func Balance(m mask.Mask, ranks, block, stages int) (*Dispatch, error) {
	if ranks < 1 {
		return nil, fmt.Errorf("balanced: %d ranks: need at least 1 (--ranks)", ranks)
	}
	if block < 1 {
		return nil, fmt.Errorf("balanced: block of %d tokens (--cp-block): use a positive size, or 0 for the default", block)
	}
	if m.SeqQ < 1 {
		return nil, fmt.Errorf("balanced: an empty sequence")
	}
	if stages < 0 || stages > MaxStages {
		return nil, fmt.Errorf("balanced: %d stages (--cp-stages): use 1 to %d, or 0 for the default", stages, MaxStages)
	}
	d, needs := newDispatch(m, ranks, block)
	d.stages = stages
	d.assign(needs)
	d.plan(needs)
	return d, nil
}

// newDispatch sizes the dispatch and computes the blocks' needs (Balance's first step).
func newDispatch(m mask.Mask, ranks, block int) (*Dispatch, blockNeeds) {
	seq := m.SeqQ
	real := (seq + block - 1) / block
	per := (real + ranks - 1) / ranks
	nb := per * ranks
	d := &Dispatch{Seq: seq, Block: block, Ranks: ranks, PerRank: per}
	return d, needsOf(m, nb, block)
}

func (d *Dispatch) assign(needs blockNeeds) {
	n := d.Ranks
	var total int64
	for _, a := range needs.area {
		total += a
	}
	owner, load := cutAndFill(needs.area, n, d.PerRank, total)
	d.Owner = owner
	d.Area = load
	// 3. Swaps bring the most loaded rank within the tolerance.
	d.refine(needs.area, total)
	// Each rank's blocks in sequence order.
	d.Blocks = make([][]int32, n)
	for b, r := range d.Owner {
		d.Blocks[r] = append(d.Blocks[r], int32(b))
	}
	d.Slot = make([]int32, len(d.Owner))
	for _, bs := range d.Blocks {
		for i, b := range bs {
			d.Slot[b] = int32(i)
		}
	}
}

// cutAndFill is steps 1 and 2 of Balance: contiguous runs of equal area, then equal
// counts by moving the lightest blocks of the ranks with too many to the least loaded of
// those with too few.
func cutAndFill(area []int64, n, per int, total int64) ([]int32, []int64) {
	nb := len(area)
	owner := make([]int32, nb)
	load := make([]int64, n)
	held := make([][]int32, n)
	share := float64(total) / float64(n)
	// 1. Contiguous runs of equal area: a block goes to the rank whose share its
	// middle falls in, so a document's blocks sit on as few ranks as its area needs and
	// a causal document's later blocks find their keys mostly at home.
	var prefix float64
	for b, a := range area {
		w := float64(a)
		r := n - 1
		if share > 0 {
			r = min(n-1, int((prefix+w/2)/share))
		}
		prefix += w
		owner[b] = int32(r)
		load[r] += a
		held[r] = append(held[r], int32(b))
	}
	// 2. Equal counts: the ranks with more blocks than their share give their lightest
	// (a causal document's first blocks, short documents, padding) to those with fewer,
	// the heaviest of them first to the least loaded rank still short of blocks.
	var pool []int32
	for r := range n {
		if extra := len(held[r]) - per; extra > 0 {
			hs := held[r]
			slices.SortStableFunc(hs, func(a, b int32) int { return cmp.Compare(area[a], area[b]) })
			for _, b := range hs[:extra] {
				pool = append(pool, b)
				load[r] -= area[b]
			}
			held[r] = hs[extra:]
		}
	}
	slices.SortStableFunc(pool, func(a, b int32) int { return cmp.Compare(area[b], area[a]) })
	for _, b := range pool {
		best := -1
		for r := range n {
			if len(held[r]) < per && (best < 0 || load[r] < load[best]) {
				best = r
			}
		}
		owner[b] = int32(best)
		load[best] += area[b]
		held[best] = append(held[best], b)
	}
	return owner, load
}

// refinePartners is how many of the least loaded ranks refine tries a swap with.
const refinePartners = 32

// refine swaps a block of the most loaded rank with one of another rank (counts stay
// equal) while that lowers the maximum: over the refinePartners least loaded ranks, the
// swap that leaves the pair's larger load smallest (the first such in partner, then
// held order). It stops once the maximum is within half of DispatchTolerance of the
// mean, or no swap lowers it. Each partner's blocks are searched sorted by area
// (byArea), not pair by pair: the pairs of two ranks' blocks grew as the square of the
// blocks per rank (simulate --gpus 8 --seqlen 64M spent 7 minutes here).
func (d *Dispatch) refine(area []int64, total int64) {
	n := d.Ranks
	if n < 2 {
		return
	}
	held := make([][]int32, n)
	for b, r := range d.Owner {
		held[r] = append(held[r], int32(b))
	}
	sorted := make([]areaIndex, n) // built when first a partner, rebuilt after a swap
	target := int64(float64(total) / float64(n) * (1 + DispatchTolerance/2))
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	for iter := 0; iter < 4*n; iter++ {
		hi := 0
		for r := range n {
			if d.Area[r] > d.Area[hi] {
				hi = r
			}
		}
		top := d.Area[hi]
		if top <= target {
			return
		}
		if iter%16 == 0 || n <= 128 { // the partners: the least loaded ranks, refreshed now and then
			slices.SortFunc(order, func(a, b int) int { return cmp.Compare(d.Area[a], d.Area[b]) })
		}
		best, bx, by, bestR := top, -1, -1, -1
		for _, r := range order[:min(n, refinePartners)] {
			gap := top - d.Area[r]
			if r == hi || gap <= 0 {
				continue
			}
			if sorted[r].vals == nil {
				sorted[r].build(area, held[r])
			}
			for x, xb := range held[hi] {
				if worse, y := sorted[r].bestSwap(area[xb], gap, top, d.Area[r]); y >= 0 && worse < best {
					best, bx, by, bestR = worse, x, y, r
				}
			}
		}
		if bestR < 0 {
			return
		}
		a, b := held[hi][bx], held[bestR][by]
		held[hi][bx], held[bestR][by] = b, a
		d.Owner[a], d.Owner[b] = int32(bestR), int32(hi)
		diff := area[a] - area[b]
		d.Area[hi] -= diff
		d.Area[bestR] += diff
		sorted[hi].vals, sorted[bestR].vals = nil, nil
	}
}

// areaIndex is one rank's held blocks as the distinct areas among them, ascending, each
// with the first position in the rank's held list holding a block of that area.
type areaIndex struct {
	vals  []int64
	first []int32
}

func (ix *areaIndex) build(area []int64, held []int32) {
	pos := make([]int32, len(held))
	for i := range pos {
		pos[i] = int32(i)
	}
	slices.SortFunc(pos, func(a, b int32) int {
		return cmp.Or(cmp.Compare(area[held[a]], area[held[b]]), cmp.Compare(a, b))
	})
	ix.vals, ix.first = make([]int64, 0, len(held)), ix.first[:0]
	for _, p := range pos {
		if v := area[held[p]]; len(ix.vals) == 0 || ix.vals[len(ix.vals)-1] != v {
			ix.vals = append(ix.vals, v)
			ix.first = append(ix.first, p)
		}
	}
}

// bestSwap is the swap of a block of area ax (the most loaded rank's, load top) for
// one of this rank's (load low, gap = top - low) that leaves the larger of the two loads
// smallest, and the first position holding it; -1 when no block's area lies in
// (ax - gap, ax). The larger load, max(top - diff, low + diff) for diff = ax - ay, falls
// then rises as ay rises past ax - gap/2, so the best is one of the two areas either
// side of it; equal loads from both go to the earlier position, as a pair-by-pair
// search in held order would choose.
func (ix *areaIndex) bestSwap(ax, gap, top, low int64) (int64, int) {
	lo, _ := slices.BinarySearch(ix.vals, ax-gap+1) // first area > ax - gap
	hi, _ := slices.BinarySearch(ix.vals, ax)       // first area >= ax
	if lo >= hi {
		return 0, -1
	}
	// k: the first area with 2 ay >= 2 ax - gap, within [lo, hi).
	k := lo + sort.Search(hi-lo, func(i int) bool { return 2*ix.vals[lo+i] >= 2*ax-gap })
	worse, y := int64(0), -1
	for _, c := range [2]int{k - 1, k} {
		if c < lo || c >= hi {
			continue
		}
		diff := ax - ix.vals[c]
		w, p := max(top-diff, low+diff), int(ix.first[c])
		if y < 0 || w < worse || (w == worse && p < y) {
			worse, y = w, p
		}
	}
	return worse, y
}

// MaxStages is the most stages (--cp-stages) a fetch is cut into: k stages make 2^k - 1 parts.
const MaxStages = 16

// stageCaps are the cumulative sizes (in blocks) of the stages of a fetch of total blocks,
// in at most stages stages: one (stages 1) is the whole fetch in one piece, k > 1 cut it
// in k pieces doubling in size (1, 2, 4, ... parts), and 0, the pyramid, cuts it in units
// of base x one rank's blocks (base: an eighth of the fetch, at least one rank's),
// doubling from 1 up to maxStageUnits ranks' over the first half and halving back over
// the second, so the first transfer (overlapping the local blocks' compute) and the
// backward's last gradient return (overlapping nothing) are small, and the stages between
// few and large.
func stageCaps(total, unit, stages int) []int {
	if stages == 1 {
		return []int{total}
	}
	if stages > 1 {
		parts := 1<<stages - 1
		caps := make([]int, stages)
		for i := range stages {
			caps[i] = (total*(1<<(i+1)-1) + parts - 1) / parts
		}
		caps[stages-1] = total
		return caps
	}
	base := max(1, (total+8*unit-1)/(8*unit))
	unit *= min(base, maxStageUnits)
	units := (total + unit - 1) / unit
	var front, back []int
	left := units
	for step := 1; left > 0; step = min(step*2, max(maxStageUnits/base, 1)) {
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
	var runs []Xfer
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
		// Runs of consecutive slots, owners by ring distance (a walk round the ring when
		// most owners are touched, else a sort of the few).
		if len(touched) > n/8 {
			touched = touched[:0]
			for dist := 1; dist < n; dist++ {
				if p := int32((r + dist) % n); len(want[p]) > 0 {
					touched = append(touched, p)
				}
			}
		} else {
			slices.SortFunc(touched, func(a, b int32) int {
				return cmp.Compare((int(a)-r+n)%n, (int(b)-r+n)%n)
			})
		}
		runs = runs[:0]
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
		caps := stageCaps(total, per, d.stages)
		var st Stage
		got := 0
		for _, x := range runs { // (appended by value into the stage's own slice)
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
	// The window: every stage when the largest fetch fits, else as many of the largest
	// stage as fit.
	most, biggest := 0, 0
	for r, sts := range d.Stages {
		most = max(most, d.Fetched[r])
		for _, st := range sts {
			biggest = max(biggest, st.Slots)
		}
	}
	d.Window = d.nStage
	if fit := maxFetchUnits * per; most > fit {
		d.Window = min(d.nStage, max(2, fit/max(biggest, 1)))
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
