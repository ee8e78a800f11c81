package cuda

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// tmaKey identifies a tensor map: the tensor's address and the view's shape.
type tmaKey struct {
	ptr        uint64
	rows, cols int // rows of the sequence, heads x head dim
	heads      int
	box        int
	fp32       bool // the dQ accumulator's map (fp32 boxes of 64 rows)
	swizzled   bool // the dQ accumulator's boxes are 32 columns, 128-byte swizzled
}

// cacheMap keeps a map made by mk under key.
func (k *Kernel) cacheMap(key tmaKey, mk func() (*cuda.TensorMap, error)) (*cuda.TensorMap, error) {
	k.mu.Lock()
	m, ok := k.maps[key]
	k.mu.Unlock()
	if ok {
		return m, nil
	}
	m, err := mk()
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	if len(k.maps) > 256 { // buffers come and go across a sweep: keep the cache small
		clear(k.maps)
	}
	k.maps[key] = m
	k.mu.Unlock()
	return m, nil
}

// headMap is the tensor map of a [rows, heads, d] tensor read in boxes of boxRows rows
// of one head and 64 columns (one 128-byte swizzled chunk), cached by address and shape
// so a timed call only launches.
func (k *Kernel) headMap(b *cuda.Buffer, rows, heads, d, boxRows int) (*cuda.TensorMap, error) {
	key := tmaKey{ptr: uint64(b.DevicePtr()), rows: rows, cols: heads * d, heads: heads, box: boxRows}
	return k.cacheMap(key, func() (*cuda.TensorMap, error) {
		es := uint64(b.DType().Size())
		return k.dev.EncodeTiled(key.ptr, cuda.TileMap{
			DType:   b.DType(),
			Dims:    []uint64{uint64(d), uint64(heads), uint64(rows)},
			Strides: []uint64{uint64(d) * es, uint64(heads*d) * es},
			Box:     []uint32{64, 1, uint32(boxRows)},
			Swizzle: cuda.Swizzle128B,
		})
	})
}

// accMap is the tensor map of the fp32 dQ accumulator [rows, d] (rows = heads x padded
// length), added into in boxes of 64 rows: 64 columns unswizzled, or with swizzled 32
// columns (128 bytes) 128-byte swizzled.
func (k *Kernel) accMap(b *cuda.Buffer, rows, d int, swizzled bool) (*cuda.TensorMap, error) {
	key := tmaKey{ptr: uint64(b.DevicePtr()), rows: rows, cols: d, box: 64, fp32: true, swizzled: swizzled}
	return k.cacheMap(key, func() (*cuda.TensorMap, error) {
		box, sw := uint32(64), cuda.SwizzleNone
		if swizzled {
			box, sw = 32, cuda.Swizzle128B
		}
		return k.dev.EncodeTiled(key.ptr, cuda.TileMap{
			DType:   tensor.FP32,
			Dims:    []uint64{uint64(d), uint64(rows)},
			Strides: []uint64{uint64(d) * 4},
			Box:     []uint32{box, 64},
			Swizzle: sw,
		})
	})
}

// shortRows is the mean number of key tiles per query tile below which the forward runs
// persistent. Set from three cases at 16K (docs/perf.md, call 3: persistent +7.8% on
// sliding_window_causal, about 9 tiles a row, +2.7% on causal_document, -7% on full, 128
// tiles a row), then tested on both sides over the 12 masks at 8K-48K (call 13, 48 cases):
// persistence wins by 3-12% below 16 tiles a row, loses by 2-5% above 128, and any
// threshold from 16 to 64 costs 0.4% against the better side of every case (geomean).
// Refitted at 60 (the thirtieth session, calls 104-107 on an H100) once the persistent
// forward drew its items by the work counter (sm90dw), which removed the static walk's
// imbalance the first fit was made against: persistent ahead up to 56.6 tiles a row and level
// or behind from 64 (call 107, sm90p60 against the rule at 32, three runs a side in fresh
// processes: the six cells it moves +1.66% by the medians, causal 8K +3.7%, full_document 8K
// +3.3%, none below -0.7%; sm90pr's 72 lost prefix_lm_causal 16K, 67.5 tiles a row, by 4.6%).
// sm90-r32 keeps the rule at 32.
const shortRows = 60

// persistentForward says whether the forward of a work list runs persistent: rows short
// enough that overlapping one item's epilogue with the next item's loads pays. Rows are
// measured in keys (shortRows tiles of 128), so that sm90s's 64-key tiles decide as the
// 128-key ones do.
func persistentForward(w *WorkList) bool { return persistentBelow(w, shortRows) }

// persistentBelow is persistentForward with the threshold rows (mean 128-key tiles a query
// tile) in place of shortRows: a variant's own (archVariant.shortRows).
func persistentBelow(w *WorkList, rows int) bool {
	n := int64(w.RowTiles * w.Lists)
	return n > 0 && int64(len(w.Entries)/2)*int64(w.ColTile) < int64(rows)*128*n
}

// Orders of the backward's blocks (the kernel's sched argument): bit 0 no rotation of
// the blocks' first query tiles, bit 1 key tiles the grid's fast index (bit 3 the pairs;
// bits 4-7 the group split).
const (
	schedRotate int32 = 0  // each block starts at a query tile rotated by its key tile
	schedNoRot  int32 = 1  // every block starts at its first query tile, heaviest key tiles first over all heads
	schedKTFast int32 = 3  // no rotation, and the key tiles of one KV head run together
	schedByRule int32 = -1 // backwardOrder's choice
	// schedDocPairs, with bit 3, on the host only (cleared before the launch): the pairs
	// are endAlignedPairs's, within documents (the list's pairOrder), not pairsPay's
	schedDocPairs int32 = 1 << 16
)

// schedBalance is how evenly the backward's blocks of w (a key tile of a KV head each,
// walking its list for the group's query heads) fill `slots` block slots launched in the
// order sched gives them: the hardware starts the blocks in grid order (x fastest) and each
// slot takes the next block when its last one ends. A greedy model, each block costing its
// steps (entries times group) plus blockSteps for its loads and epilogue; the result is the
// average slot's busy time over the longest's (1: perfectly even). 1,024 equal blocks on
// 132 slots fill 7.76 of 8 waves: 0.970.
func schedBalance(w *WorkList, heads, group, slots int, sched int32) float64 {
	return splitBalance(w, heads, group, 1, slots, sched)
}

// splitBalance is schedBalance with each KV head's group of query heads split into split
// parts, a block each (the group split): heads x split blocks a key tile, the grid's head
// index kvh x split + part, each block costing its steps over group / split query heads.
func splitBalance(w *WorkList, heads, group, split, slots int, sched int32) float64 {
	total, longest := fillSlots(w, heads, group, split, slots, sched, 0)
	if longest == 0 {
		return 1
	}
	return total / float64(slots) / longest
}

// fillSlots walks splitBalance's model, each block costing extra steps more: the work of
// all blocks and the longest slot's busy time (the pass's modelled length), both 0 when
// there is nothing to place. With sched bit 3 a block walks the key tiles order[x] and
// order[rows-1-x] (the pairs), costing both tiles' steps and loads.
func fillSlots(w *WorkList, heads, group, split, slots int, sched int32, extra float64) (total, longest float64) {
	const blockSteps = 2
	if slots <= 0 || heads <= 0 || w.RowTiles == 0 || split <= 0 {
		return 0, 0
	}
	rows, perHead := w.RowTiles, headBlocks(w, sched&8 != 0)
	tile := func(l, x int) float64 {
		return float64(len(w.Row(l, int(w.Order[l*rows+x])))/2)*float64(group/split) + blockSteps + extra
	}
	cost := func(hb, x int) float64 {
		l := 0
		if w.Lists > 1 {
			l = (hb / split) % w.Lists
		}
		c := tile(l, x)
		if y := rows - 1 - x; sched&8 != 0 && y > x { // a pair: the second tile's walk and loads too
			c += tile(l, y)
		}
		return c
	}
	heads *= split
	free := make(slotHeap, slots) // when each slot is next free
	next := func(c float64) {
		free[0] += c
		free.down()
		total += c
	}
	if sched&2 != 0 { // key tiles the fast index: a head's key tiles together
		for h := 0; h < heads; h++ {
			for x := 0; x < perHead; x++ {
				next(cost(h, x))
			}
		}
	} else {
		for x := 0; x < perHead; x++ {
			for h := 0; h < heads; h++ {
				next(cost(h, x))
			}
		}
	}
	for _, t := range free {
		longest = max(longest, t)
	}
	return total, longest
}

// slotHeap is a min-heap of the slots' free times; down restores it after free[0] grew.
type slotHeap []float64

func (h slotHeap) down() {
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(h) && h[l] < h[m] {
			m = l
		}
		if r < len(h) && h[r] < h[m] {
			m = r
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// modelSlack is how much evenness the key tiles together may give up against heaviest
// first and still be chosen by backwardOrder: at 16K (call 30) they ran 4-8% faster than
// their balance said on most masks (a head's blocks share Q and dO in L2), and the
// heaviest-first order won every mask where it balanced 6% or more better.
const modelSlack = 0.02

// backwardOrder is sm90's rule for the backward's block order of w, for heads KV heads of
// group query heads each on slots block slots: the key tiles of a head together
// (schedKTFast: blocks walking the same head's query tiles share Q and dO in L2) unless
// they fill the slots more than modelSlack less evenly than heaviest first over all heads
// (schedNoRot: load balance), by schedBalance. Causal and full_document keep a head's
// blocks together from 16K on, prefix_lm_causal and block_causal_document from 32K, the
// other document masks at 48K (share_question never); full, the windows and block-sparse
// maps always, but at 8K where their last wave is uneven.
//
// Call 37 (docs/perf.md "Calls 37-42") timed it against the rule it replaced (the key
// tiles together where the coefficient of variation of their loads was at most 0.4) on
// the 36 cells of nine masks at 8K-48K where the two differ on 16: block_causal_document
// 8K +13%, full_document 48K +8%, causal_blockwise 48K +3%, the rest within 2% but
// causal_document and prefix_lm_document at 48K (-1 to -3%), which the model, balancing
// both orders within 0.5% there, cannot tell from full_document's +8%.
func backwardOrder(w *WorkList, heads, group, slots int) int32 {
	if schedBalance(w, heads, group, slots, schedKTFast) >= schedBalance(w, heads, group, slots, schedNoRot)-modelSlack {
		return schedKTFast
	}
	return schedNoRot
}

// blockSlots is how many backward blocks run at once: one per SM (their shared memory
// allows no second), 132 on the H200 and where the device is not known.
func (k *Kernel) blockSlots() int {
	if k.dev != nil && k.dev.SMs > 0 {
		return k.dev.SMs
	}
	return 132
}

// l2Bytes is the device's L2 cache size, the H200's 50 MB where the device is not known.
func (k *Kernel) l2Bytes() int {
	if k.dev != nil && k.dev.L2Bytes > 0 {
		return k.dev.L2Bytes
	}
	return 50 << 20
}

// unsplitRead is dramRead of w in order o, unsplit, computed once where first asked for (about
// a second at 48K): the base the split rule weighs every candidate's bytes against, and the
// pairs-by-bytes rule its pairs', shared by one plan's questions.
func unsplitRead(w *WorkList, heads, group, slots, l2 int, o int32) func() int64 {
	return sync.OnceValue(func() int64 { return dramRead(w, heads, group, slots, l2, o) })
}

// split128Score says whether sm90's backward at head dim 128 splits each KV head's query heads
// of w in s parts (a head's key tiles together), the blocks' order o unsplit, and what it
// weighed: the split pass's modelled length (paired within documents) or its modelled DRAM
// bytes (unpaired). Paired within documents (docPairsPay's half-size grid), where fillSlots
// models the split pass at least 1% shorter (split128Gain); unpaired on rows that vary, where
// it models it at most split128Tail longer and the L2 model (l2Traffic twice, split and
// unsplit: about a second each at 48K, once per list and head shape) says the split reads at
// most half the DRAM bytes unsplit, split128Saved or more; never on pairsPay's causal rows
// (they keep together already). Fitted at 2 parts to call 54 (sm90g2 against sm90, d128,
// 64:8, seven masks at 16K-48K; docs/perf.md "Call 54"), where it picks every cell that won
// 3-6% (share_question 48K and causal_document 32K by the tail, causal_blockwise 32K and
// prefix_lm_causal 48K by the bytes) and causal_blockwise 48K (+0.4%), and none that lost:
// share_question 16K / 32K -12 / -5% (tails +25 / +16%), causal_blockwise and
// causal_document 16K -1 to -2% (+8 / +13%), full -1 to -2% (the bytes even; at 48K a tail 2%
// shorter and -1%), causal -1 to -2% (paired), full_document 48K -3% (bytes 15 -> 13 GB). maps lets
// lists of one block-sparse map a KV head through the unpaired gate whatever their rows'
// spread (sm90 since call 67: a column's count of query tiles varies little, CV 0.06 at 64K,
// but that spread summed over the group's heads is the drift that thrashes L2). r0 is the
// unsplit pass's bytes in order o (unsplitRead).
func split128Score(w *WorkList, heads, group, slots, l2 int, o int32, s int, maps bool, r0 func() int64) (bool, float64) {
	if o&schedDocPairs != 0 {
		wp := docPaired(w)
		_, base := fillSlots(wp, heads, group, 1, slots, o&^schedDocPairs, 0)
		_, split := fillSlots(wp, heads, group, s, slots, o&^schedDocPairs, splitSteps)
		return split <= base*split128Gain, split
	}
	if o&8 != 0 || !(rowsVary(w) || maps && w.Lists > 1) || !l2Modelled(w, heads, group) {
		return false, 0
	}
	_, base := fillSlots(w, heads, group, 1, slots, o, 0)
	_, split := fillSlots(w, heads, group, s, slots, o|schedKTFast, splitSteps)
	if split > base*split128Tail {
		return false, 0
	}
	base0, r1 := r0(), dramRead(w, heads, group, slots, l2, o|schedKTFast|int32(s)<<4)
	return 2*r1 <= base0 && base0-r1 >= split128Saved, float64(r1)
}

// groupSplitParts are the parts groupSplit tries at head dim 64, split128Tries those
// split128Parts tries at 128, fewest first (Kernel.BackwardPartials bounds the plans by them).
var (
	groupSplitParts = []int{2, 4}
	split128Tries   = []int{2, 4, 8}
)

// mostParts is the largest of parts, at most most, that divides group; 1 where none does.
func mostParts(parts []int, most, group int) int {
	best := 1
	for _, p := range parts {
		if p <= most && group%p == 0 {
			best = max(best, p)
		}
	}
	return best
}

// split128Parts is how many parts the rule splits the head-dim-128 backward of w into, of
// the candidates 2, 4 and 8 up to most that divide group and keep the grid's heads within
// 65535: the fewest that split128Score takes, and then more only where those halve again
// what it weighed (the bytes, or the paired pass's length); 1 where it takes none. At most
// 2 it is the rule sm90 ran from call 56 to call 67; sm90 since call 67 goes to 8 (call 67's sm90g8 on 64K
// block-sparse maps: 157 -> 55 GB modelled at r0.2), dense rows keeping their 2 parts. r0 is
// the unsplit pass's bytes in order o (unsplitRead; asked only on unpaired rows). Its second
// result is what split128Score weighed for the parts taken: the split pass's modelled DRAM
// bytes on unpaired rows, its modelled length on paired ones; 0 where it takes none.
func split128Parts(w *WorkList, heads, group, slots, l2 int, o int32, most int, maps bool, r0 func() int64) (int, float64) {
	best, cost := 1, 0.0
	for _, s := range split128Tries {
		if s > most || group%s != 0 || heads*s > 65535 {
			continue
		}
		ok, c := split128Score(w, heads, group, slots, l2, o, s, maps, r0)
		if ok && (best == 1 || 2*c <= cost) {
			best, cost = s, c
		}
	}
	return best, cost
}

// l2Modelled says whether the plan runs the L2 model on w at heads KV heads of group
// (its steps within split128MaxSteps): each KV head walks its own list's entries (one list
// a KV head for block-sparse maps, w.Lists of them) once per query head of its group. (Until
// 2026-12-05 the count took every list's entries for every head, 8x too many at 64:8, so that
// 64K block-sparse maps, 7-17 million steps and under 1.5 s modelled, were not; no plan of
// sm90's changed with the count: the rule at 2 parts left those rows unsplit either way.)
func l2Modelled(w *WorkList, heads, group int) bool {
	return l2Steps(w, heads, group) <= split128MaxSteps
}

// l2Steps is the steps of the head-dim-128 backward of w at heads KV heads of group: the
// entries of the list each KV head walks, times its query heads.
func l2Steps(w *WorkList, heads, group int) int64 {
	return int64(len(w.Entries)/2) / int64(max(1, w.Lists)) * int64(heads*group)
}

// dramRead is the bytes the L2 model has the head-dim-128 backward of w read from DRAM in
// order sched, on an L2 of l2 bytes, the blocks' speeds spread by split128Noise.
func dramRead(w *WorkList, heads, group, slots, l2 int, sched int32) int64 {
	r, _, _ := l2Traffic(w, heads, group, slots, 128, sched, int64(l2), split128Noise)
	return r
}

// orderThrashes says whether heaviest first over all heads (schedNoRot, which
// backwardOrder picked on w for being more than modelSlack more even) should give way to the
// key tiles of a KV head together (schedKTFast) at head dim 128 (sm90's since call 61, MHA
// only: a group of one): where the L2 model (split128Noise's spread) has heaviest first read
// at least orderSaved more bytes from DRAM, and at least twice as many, while the key tiles
// together are at most orderSlack less even. Heaviest first spreads the blocks running
// together over many heads, and with a group of one every block is a head of its own, with
// its own Q, dO and dQ: at 64:64 the short uneven rows (causal, the documents,
// share_question at 8K-16K) model 5-60 GB against 0.8-5 (call 59's runs there: 0.89-0.94x
// cuDNN, where the rows the rule orders by key tile read 0.99). With GQA groups (a block
// walking its group's heads) heaviest first measured faster where the model has it read
// more (calls 43-46: causal 8K +14%), so the rule leaves them as they are. Lists past
// split128MaxSteps are not modelled.
func orderThrashes(w *WorkList, heads, group, slots, l2 int) bool {
	if !l2Modelled(w, heads, group) ||
		schedBalance(w, heads, group, slots, schedKTFast) < schedBalance(w, heads, group, slots, schedNoRot)-orderSlack {
		return false
	}
	rn, rk := dramRead(w, heads, group, slots, l2, schedNoRot), dramRead(w, heads, group, slots, l2, schedKTFast)
	return rn >= 2*rk && rn-rk >= orderSaved
}

// orderThrashes's bounds: the evenness the key tiles together may give up, and the DRAM
// bytes heaviest first must read beyond theirs.
const (
	orderSlack = 0.06
	orderSaved = 4e9
)

// split128Score's bounds: the tail's gain (paired within documents), its growth and the DRAM
// bytes saved (unpaired), and the L2 model's spread of the blocks' speeds (0.5%: ncu read
// 13.1 GB in one full 48K backward in call 54, the model 12.7 at 0.5% and 218 at 2%).
const (
	split128Gain  = 0.99
	split128Tail  = 1.025
	split128Saved = 8e9
	split128Noise = 0.005
	// split128MaxSteps bounds the lists the L2 model is run on (its steps: entries times
	// query heads; full 48K at 64 heads has 19 million, modelled in about 2 s here): the
	// rule was fitted at 16K-48K, and on longer lists the model would take many seconds per
	// plan (full-like masks past about 70K tokens at 64 heads), so they stay unsplit
	split128MaxSteps = 40_000_000
)

// splitSteps is what each block of a split backward costs in fillSlots beyond its steps:
// its fp32 partials of dK and dV written and summed again by bwd90_dkv_reduce, and its K
// and V loaded once more. Fitted to call 44's twelve split cells (sm90bg against sm90 in
// one call, head dims 64 and 128): 4 steps predicts their gains within 2.6% (rms), where
// sm90bg's flat 1% a part predicted sliding_window_causal's short rows +2 to +15% that
// measured -4 to +6%.
const splitSteps = 4

// groupSplit is how many parts (1, 2 or 4, dividing group) sm90's backward at head dim 64
// splits each KV head's query heads into on w in order sched: the split whose pass fillSlots
// models shortest, each split block charged splitSteps, taken only where it is at least 2%
// shorter than unsplit. Equal blocks that leave the last wave part-empty are where it pays:
// 192-key blocks of full at 8K and 16K (344 and 688 blocks on 132 slots, 0.87 of their
// waves; call 44: +11 and +10% split 4 ways), causal at 8K (+10% split 2 ways).
func groupSplit(w *WorkList, heads, group, slots int, sched int32) int {
	_, base := fillSlots(w, heads, group, 1, slots, sched, 0)
	best, span := 1, base
	for _, s := range groupSplitParts {
		if group%s != 0 {
			continue
		}
		if _, l := fillSlots(w, heads, group, s, slots, sched, splitSteps); l < span {
			best, span = s, l
		}
	}
	if base < span*1.02 {
		return 1
	}
	return best
}

// pairsPay says whether sm90's backward walks the key tiles of w in pairs (sched bit 3,
// LONGCA_BWD_PAIRS) at head dim d: at 128, where the rows' lengths differ (a coefficient of
// variation above 0.25) and the pairs' (the heaviest row with the lightest, as the kernel
// pairs them) are even, within 5%: causal-shaped rows, whose paired blocks are then all as
// long as one another and walk the same query tiles together, as full's rows do. Call 49
// timed the pairs on every block of five masks at 8K-48K: causal +1 to +8% (the DRAM bytes
// of one causal 32K backward 73 GB unpaired, 5.2 paired), but sliding_window_causal -28%
// and full_document -4 to -9% (even rows: half the blocks, each walking two windows),
// causal_document -8 to +4%, full level, and at head dim 64 (a KV head's Q, dO and dQ half
// as large against L2) -1 to -23% on all four masks timed.
func pairsPay(w *WorkList, d int) bool {
	if d != 128 || !rowsVary(w) {
		return false
	}
	r := w.RowTiles
	for l := 0; l < w.Lists; l++ {
		n := func(i int) float64 { return float64(len(w.Row(l, int(w.Order[l*r+i]))) / 2) }
		var pairs []float64
		for i := 0; i < r-1-i; i++ {
			pairs = append(pairs, n(i)+n(r-1-i))
		}
		if cv(pairs) > 0.05 {
			return false
		}
	}
	return true
}

// rowsVary says whether the rows of every list of w vary in length (a coefficient of
// variation above 0.25: not full, not the windows).
func rowsVary(w *WorkList) bool {
	r := w.RowTiles
	if r < 2 {
		return false
	}
	for l := 0; l < w.Lists; l++ {
		var rows []float64
		for kt := 0; kt < r; kt++ {
			rows = append(rows, float64(len(w.Row(l, kt))/2))
		}
		if cv(rows) <= 0.25 {
			return false
		}
	}
	return true
}

// endAlignedPairs is w's key-tile order for the backward's pairs (the kernel pairs order[x]
// with order[rows-1-x] and walks the first down from its last query tile, the second up):
// in each list the key tiles whose walks end at the same query tile (a document's last)
// paired heaviest with lightest, so that a pair's two walks meet at that tile's end as
// causal's do; the tiles left over (groups of odd size) paired the same way among
// themselves; the pairs heaviest first. The first of a pair never has fewer entries than
// the second. Causal's single group gives pairsPay's pairs.
func endAlignedPairs(w *WorkList) []int32 {
	r := w.RowTiles
	out := make([]int32, len(w.Order))
	for l := 0; l < w.Lists; l++ {
		ne := func(kt int) int { return len(w.Row(l, kt)) / 2 }
		heavier := func(a, b int) bool { return ne(a) > ne(b) || ne(a) == ne(b) && a < b }
		ends, groups := endGroups(w, l)
		type pair struct{ a, b, n int }
		var pairs []pair
		var left []int
		add := func(g []int) []int {
			sort.Slice(g, func(i, j int) bool { return heavier(g[i], g[j]) })
			for i := 0; i < len(g)-1-i; i++ {
				pairs = append(pairs, pair{g[i], g[len(g)-1-i], ne(g[i]) + ne(g[len(g)-1-i])})
			}
			if len(g)%2 == 1 {
				return []int{g[len(g)/2]}
			}
			return nil
		}
		for _, e := range ends {
			left = append(left, add(groups[e])...)
		}
		single := add(left)
		sort.SliceStable(pairs, func(i, j int) bool { return pairs[i].n > pairs[j].n })
		o := out[l*r : (l+1)*r]
		for x, p := range pairs {
			o[x], o[r-1-x] = int32(p.a), int32(p.b)
		}
		if len(single) == 1 {
			o[len(pairs)] = int32(single[0])
		}
	}
	return out
}

// docPairsPay says whether sm90's backward, where pairsPay does not pair, walks the key tiles
// of w in endAlignedPairs's pairs (within documents), the key tiles of a head together, at
// head dim d for heads KV heads of group query heads on slots block slots with l2 bytes of
// L2, against the unpaired order sched. At 128, where the key tiles end their walks in two
// or more documents (one document: pairsPay's causal pairs, or none), the rows vary within
// documents (docRowsVary: not full_document's even rows, whose pairs are each two equal
// walks: call 53 -1 to -8%), a KV head's Q, dO and dQ outgrow L2 (the unpaired blocks'
// drift can thrash it), and fillSlots models the paired pass at most docPairsTail longer
// than the unpaired one (half as many blocks: a longer tail at short lengths). Call 53
// (docs/perf.md "Call 53"): the pairs cut causal_document 32K's DRAM read to 8.0 GB
// (the L2 model: 28.4 unpaired, 5.3 paired) and won +6% there (modelled pass 1.068x), +12%
// at 48K (1.004x), causal_document_long and prefix_lm_document 48K +10%, share_question
// 48K +1%, and lost where the tail outweighs the bytes: share_question 16K -46% (2.07x),
// block_causal_document 16K -11% (1.20x), prefix_lm_document 16K -8% (1.15x),
// causal_document_long 16K -4% (1.11x). One miss each way: causal_document 16K +3% at
// 1.18x (not taken), block_causal_document 48K -0.6% at 1.04x (taken; its unpaired blocks
// read only 8 GB, little to save).
func docPairsPay(w *WorkList, d, heads, group, slots, l2 int, sched int32) bool {
	if d != 128 || !rowsVary(w) || w.Cols*d*8*group <= l2 || docRowsVary(w) < 0.2 {
		return false
	}
	_, base := fillSlots(w, heads, group, 1, slots, sched, 0)
	_, paired := fillSlots(docPaired(w), heads, group, 1, slots, schedKTFast|8, 0)
	return paired <= base*docPairsTail
}

// docPairsBytesPay (sm90's since call 69, experiment sm90dq's there) says whether the backward walks w's key tiles in
// endAlignedPairs's pairs where docPairsPay's tail alone would not: at head dim 128 on rows
// that vary, a KV head's Q, dO and dQ outgrowing L2, where the paired pass, split as
// split128Parts then splits it (2, 4 or 8 parts where they shorten it, at most most), models
// at most docPairsBytesTail times the unsplit unpaired pass's length in order sched and the L2
// model has it read at most half the DRAM bytes of the unpaired plan that would run instead
// (rb: split as the split rule splits it, or unsplit, r0, unsplitRead in order sched),
// docPairsBytesSaved or more. Call 71 (an H100) found the plan the bytes were weighed against
// mattered: causal_blockwise 48K, paired and split 4 (18 GB modelled) against its unsplit
// unpaired 40 GB, lost 2.1% to the unpaired plan split 2 (7 GB) that ran before. Call 67 (an
// H100, 64:8) timed the pairs split in 2 against sm90 at 8K and 16K: causal_document +6.5 /
// +23% (tails 1.105 / 1.124, 5.6 -> 0.9 and 9.9 -> 1.9 GB), prefix_lm_document -0.6 / +20%
// (1.148 / 1.124; 3.9 -> 1.1, 7.7 -> 2.2), causal_blockwise +1.9 / +22% (1.115 / 1.070;
// 6.4 -> 0.9, 10.0 -> 1.8); call 53 (the H200, the pairs unsplit) lost where the tail was
// 1.15x and more (share_question 16K -46% at 2.07x). full_document's even rows read more
// paired (1.5 -> 2.8 GB at 16K) and stay unpaired. Call 69 (an H100) timed the rule (sm90dq)
// against sm90 on six masks at 8K-32K: every cell it pairs gained (causal_document 16K +28%,
// causal_blockwise 16K +20%, prefix_lm_document 16K +19%, causal_document_long 16K / 32K
// +12 / +4%, causal_document 8K +5%, causal_blockwise 8K +2%, prefix_lm_causal 16K +1%).
// Call 71 (an H100) timed the tail bound at 1.25 (sm90dt) against 1.13: share_question 32K
// (tail 1.143x, 40 -> 6 GB) +9.9%, the seven other cells of share_question and
// causal_document_long at 8K-48K within 1%.
func docPairsBytesPay(w *WorkList, d, heads, group, slots, l2 int, sched int32, most int, r0, rb func() int64) bool {
	if d != 128 || !rowsVary(w) || w.Cols*d*8*group <= l2 || !l2Modelled(w, heads, group) {
		return false
	}
	_, base := fillSlots(w, heads, group, 1, slots, sched, 0)
	wp := docPaired(w)
	o := schedKTFast | 8
	// the parts backwardPlan's split rule then gives the paired plan (split128Parts on the
	// paired order), so that the tail and the bytes weighed are the plan's that runs
	parts, _ := split128Parts(w, heads, group, slots, l2, o|schedDocPairs, most, false, r0)
	steps := 0.0
	if parts > 1 {
		steps = splitSteps
	}
	_, paired := fillSlots(wp, heads, group, parts, slots, o, steps)
	if paired > base*docPairsBytesTail || parts == 1 && paired > base*docPairsBytesTailUnsplit {
		return false
	}
	base0, r1 := rb(), dramRead(wp, heads, group, slots, l2, o|int32(parts)<<4)
	return 2*r1 <= base0 && base0-r1 >= docPairsBytesSaved
}

// docPairsBytesTail and docPairsBytesSaved are docPairsBytesPay's bounds: the paired pass's
// modelled length against the unpaired one's, and the DRAM bytes it must save (call 67's
// six cells: every one that won by 6% or more is taken, prefix_lm_document 8K's -0.6%, at
// 1.148x and 2.8 GB saved, is not; the tail 1.13 until call 71's sm90dt won share_question
// 32K at 1.143x by 9.9%).
//
// docPairsBytesTailUnsplit bounds the tail of pairs the plan does not split (a variant that
// never splits, sm90ns, or a plan whose pairs split to no gain): 1.13, the bound before call
// 71, which timed 1.25 with the pairs split only; call 53 saw unsplit pairs lose from a tail
// of 1.15x.
const (
	docPairsBytesTail              = 1.25
	docPairsBytesTailUnsplit       = 1.13
	docPairsBytesSaved       int64 = 4e9
)

// docPaired is w with the pairs' order within documents (endAlignedPairs), as the kernel
// walks it where the plan pairs within documents (schedDocPairs).
func docPaired(w *WorkList) *WorkList {
	wp := *w
	wp.Order = endAlignedPairs(w)
	return &wp
}

// docPairsTail is how much longer than the unpaired pass docPairsPay lets fillSlots model the
// paired one: call 53's gains and losses fit the pass's time as 0.9x the modelled tail plus
// 0.4x the DRAM bytes saved at the H200's rate (from the L2 model, too slow to run per
// case: a second at 48K); the bytes the pairs save on causal rows within documents (a
// fifth of the time unpaired) pay for up to about 8% more tail.
const docPairsTail = 1.08

// docRowsVary is how much the rows of w vary within the groups of key tiles whose walks end
// at the same query tile (a document's last, the groups endAlignedPairs pairs within): the
// rows' mean absolute deviation from their group's mean over the rows' total; 0 where a
// list's tiles end in fewer than two groups (one document). About 0.5 on causal rows within
// documents, 0.4 on block_causal_document, 0.03 and below on full_document (only the tiles
// across a document's edge differ).
func docRowsVary(w *WorkList) float64 {
	var dev, total float64
	for l := 0; l < w.Lists; l++ {
		ends, groups := endGroups(w, l)
		if _, empty := groups[-1]; len(ends) < 2 || empty && len(ends) < 3 {
			return 0
		}
		for _, g := range groups {
			var m float64
			for _, kt := range g {
				m += float64(len(w.Row(l, kt)) / 2)
			}
			m /= float64(len(g))
			for _, kt := range g {
				x := float64(len(w.Row(l, kt)) / 2)
				dev += math.Abs(x - m)
				total += x
			}
		}
	}
	if total == 0 {
		return 0
	}
	return dev / total
}

// endGroups is list l of w's key tiles grouped by the query tile their walk ends at (a
// document's last; -1 for the tiles with no work), and those ends in the order their first
// tiles come.
func endGroups(w *WorkList, l int) ([]int32, map[int32][]int) {
	groups := map[int32][]int{}
	var ends []int32
	for kt := 0; kt < w.RowTiles; kt++ {
		end := int32(-1)
		if row := w.Row(l, kt); len(row) > 0 {
			end = row[len(row)-2]
		}
		if _, ok := groups[end]; !ok {
			ends = append(ends, end)
		}
		groups[end] = append(groups[end], kt)
	}
	return ends, groups
}

// cv is the coefficient of variation of xs (0 where their mean is 0).
func cv(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
	}
	m := s / float64(len(xs))
	if m == 0 {
		return 0
	}
	for _, x := range xs {
		s2 += (x - m) * (x - m)
	}
	return math.Sqrt(s2/float64(len(xs))) / m
}

// backwardPlan is the order and the group split this kernel's variant runs the backward of
// a device list with, for heads KV heads of group query heads each at head dimension d:
// the variant's own order or backwardOrder's, and groupSplit's parts where the variant
// splits (groupSplit's at head dim 64; at 128 split128 parts with a head's key tiles
// together where split128Parts says so, or always in sm90g2 and sm90g8; 1
// elsewhere, when deterministic, or where the grid's head dimension would pass 65535), with
// bit 3 set where the variant pairs key tiles and pairsPay says so, or, on causal rows
// within documents, docPairsPay (then with schedDocPairs too; never when deterministic).
// Decided once per list and head shape (the model walks every block: about 0.1 ms at 48K).
func (k *Kernel) backwardPlan(dl *deviceList, heads, group, d int) (int32, int) {
	byRule, split := k.arch.sched == schedByRule, k.arch.gsplit && d == 64 && !k.det && heads*4 <= 65535
	pairs := k.arch.pairs && !k.det
	if !byRule && !split && !pairs && k.arch.split128 <= 1 {
		return k.arch.sched, 1
	}
	key := [4]int{heads, group, k.blockSlots(), d}
	k.mu.Lock()
	o, g, known := dl.sched, dl.split, dl.planFor == key
	k.mu.Unlock()
	if o != 0 && known {
		return o, g
	}
	o, g = k.arch.sched, 1
	if byRule {
		o = backwardOrder(dl.w, heads, group, key[2])
		if k.arch.orderL2 && d == 128 && group == 1 && o == schedNoRot && orderThrashes(dl.w, heads, group, key[2], k.l2Bytes()) {
			o = schedKTFast
		}
	}
	if split {
		g = groupSplit(dl.w, heads, group, key[2], o)
	}
	// the unpaired order, and its unsplit bytes (computed once, where first asked for)
	o0, r0 := o, unsplitRead(dl.w, heads, group, key[2], k.l2Bytes(), o)
	// the head-dim-128 split the plan takes in order o (the rule's parts, or the variant's
	// fixed ones) and what the rule weighed for them (split128Parts's second result)
	split128 := func(o int32) (int, float64) {
		s := k.arch.split128
		switch {
		case s <= 1 || d != 128 || k.det:
		case k.arch.split128Rule:
			return split128Parts(dl.w, heads, group, key[2], k.l2Bytes(), o, s, k.arch.split128Maps, r0)
		case group%s == 0 && heads*s <= 65535:
			return s, 0
		}
		return 1, 0
	}
	// the unpaired plan's split, computed once, and the DRAM bytes that plan reads: what the
	// pairs by bytes weigh theirs against (on unpaired rows split128Parts weighed the split
	// plan's bytes; a fixed split's are modelled here)
	unpaired := sync.OnceValues(func() (int, float64) { return split128(o0) })
	unpairedRead := func() int64 {
		p, c := unpaired()
		switch {
		case p == 1:
			return r0()
		case c > 0:
			return int64(c)
		}
		return dramRead(dl.w, heads, group, key[2], k.l2Bytes(), o0|schedKTFast|int32(p)<<4)
	}
	switch {
	case pairs && pairsPay(dl.w, d):
		o |= 8
	case pairs && k.arch.docPairs == docPairsAlways && d == 128 && rowsVary(dl.w),
		pairs && (k.arch.docPairs == docPairsByRule || k.arch.docPairs == docPairsBytes) && docPairsPay(dl.w, d, heads, group, key[2], k.l2Bytes(), o),
		pairs && k.arch.docPairs == docPairsBytes && docPairsBytesPay(dl.w, d, heads, group, key[2], k.l2Bytes(), o, k.arch.split128, r0, unpairedRead):
		o = schedKTFast | 8 | schedDocPairs
	}
	var p int
	if o == o0 {
		p, _ = unpaired()
	} else {
		p, _ = split128(o) // the paired order's own split (unpaired's not asked for)
	}
	if p > 1 {
		o, g = o|schedKTFast, p
	}
	k.mu.Lock()
	dl.sched, dl.split, dl.planFor = o, g, key
	k.mu.Unlock()
	return o, g
}

// persistent says whether this kernel's variant runs the forward of w persistent: by the
// rule, or always or never (sm90-persist, sm90-plain).
func (k *Kernel) persistent(w *WorkList) bool {
	switch k.arch.persist {
	case 1:
		return true
	case -1:
		return false
	}
	if k.arch.shortRows > 0 {
		return persistentBelow(w, k.arch.shortRows)
	}
	return persistentForward(w)
}

// forwardPersistent says whether the forward fv runs the list w persistent: by the variant's
// rule (persistent), never where fv has no persistent entry (fwd90n: one Q tile fits beside
// its K/V ring).
func (k *Kernel) forwardPersistent(fv variant, w *WorkList) bool {
	return !fv.oneItem && k.persistent(w)
}

// dynForward says whether the forward fv runs the list w persistent by a counter (fwd90mopd,
// sm90's since the twenty-seventh session's sm90dy; not sm90-nodyn, sm90-plain): the head-dim-64 overlapped forward where the rule does not run it
// persistent; with the variant's fwdDynP (sm90's since the twenty-eighth session's sm90dw; not
// sm90-static) also the overlapped forwards where the rule runs them persistent (fwd90opd,
// fwd90mopd), in place of the static walk.
func (k *Kernel) dynForward(fv variant, w *WorkList) bool {
	return k.arch.counterWalks(fv.fn, k.forwardPersistent(fv, w))
}

// counterWalks says whether the variant's forward entry fn draws its items by the work
// counter (its "pd" entry) on a list the rule runs persistent (persistent) or a block an item:
// fwd90mo where the rule does not (fwdDyn), and with fwdDynP fwd90mo and fwd90o where it does.
func (a archVariant) counterWalks(fn string, persistent bool) bool {
	if persistent {
		return a.fwdDynP && (fn == fwdSM90MO.fn || fn == fwdSM90O.fn)
	}
	return a.fwdDyn && fn == fwdSM90MO.fn
}

// wideForward says whether p's forward at head dim 128 runs over 128 x 176 tiles (the
// variant's wide, sm90's since call 62): wherever the 128 x 128 list's forward is not
// persistent (long rows: there a turn's products grow and its fixed costs do not) and the
// wide tiles visit few more keys (widerTilesPay). A list that cannot be built keeps the
// 128-key tiles (the forward reports the error).
func (k *Kernel) wideForward(p kernels.Problem) bool {
	a, err := k.list(p, 128, 128, false)
	return err == nil && !k.persistent(a.w) && k.otherTilesPay(p, 128, 128, fwdSM90N.kTile, widerTilesPay)
}

// widerTilesPay says whether a forward list in wider tiles visits at most 3% more key
// positions than one in narrower tiles of the same rows: dense and document rows lose that
// little to the wider tiles' edges (176 keys: 1.003-1.026x on the rows they take), the causal
// window 14% (sliding_window_causal 8K-48K), block-sparse maps whose blocks the wider tiles
// straddle much more. (Call 63's 192 x 192 forward at head dim 64, with P in shared memory,
// took its tiles by this rule too; it lost 3-12% and was removed.)
func widerTilesPay(narrow, wider *WorkList) bool {
	return 100*int64(len(wider.Entries)/2)*int64(wider.ColTile) <= 103*int64(len(narrow.Entries)/2)*int64(narrow.ColTile)
}

// keyTile64Pays says whether a forward over 128 x 64 tiles visits enough fewer keys than
// one over 128 x 128 tiles to pay for its smaller products: the 128-key list visits at
// least 1.2x the key positions of the 64-key one. Calls 29-30 (docs/perf.md "Calls
// 29-32"): per key visited the 64-key tiles cost 1.09-1.30x (1.15x on full), so 64-token
// block-sparse maps at kept 0.1-0.5 (ratios 1.81-1.25) gain 11-39% and at kept 0.8 (1.04)
// lose 4%; variable 256-token blocks (1.08-1.15) lose 6-10%; dense masks (1.00-1.02)
// lose 13%.
func keyTile64Pays(w128, w64 *WorkList) bool {
	return 5*int64(len(w128.Entries)/2)*int64(w128.ColTile) >= 6*int64(len(w64.Entries)/2)*int64(w64.ColTile)
}

// otherTilesPay says whether p's forward over qt x alt tiles pays against its list in qt x kt
// tiles, by pays(that list, the qt x alt one) (keyTile64Pays, widerTilesPay), decided once per
// qt x kt list and alt: the qt x alt list is built on the host to decide and, where it pays,
// goes to device memory as built (the forward that asks next finds it there; only a softmax
// scale the lean forward cannot take leaves it unused). A list that cannot be built keeps
// the qt x kt tiles (the forward then reports the error itself).
func (k *Kernel) otherTilesPay(p kernels.Problem, qt, kt, alt int, pays func(base, other *WorkList) bool) bool {
	a, err := k.list(p, qt, kt, false)
	if err != nil {
		return false
	}
	k.mu.Lock()
	known := a.tilesPay[alt]
	k.mu.Unlock()
	if known == 0 {
		known = -1
		if b, err := BuildWorkList(masksOf(p), qt, alt, false); err == nil && pays(a.w, b) {
			known = 1
			// in device memory now, as built; if that fails, the forward's own request of the
			// list builds it again and reports the error
			_, _ = k.listBuilt(p, qt, alt, false, b)
		}
		k.mu.Lock()
		if a.tilesPay == nil {
			a.tilesPay = map[int]int8{}
		}
		a.tilesPay[alt] = known
		k.mu.Unlock()
	}
	return known > 0
}

// forwardFor is the forward entry point of p: the variant's at p's head dim (the 128 x 64
// tiles' forward where keyTile64Pays, the wide forward where wideForward), or the plain
// forward where the lean softmax cannot take p's scale (the row maxima are taken before the
// scale: a positive, normal one).
func (k *Kernel) forwardFor(p kernels.Problem) variant {
	fv := k.fwd.at(p.HeadDim)
	if k.arch.k64 && k.dev != nil && k.otherTilesPay(p, fwdSM90S.qTile, 128, fwdSM90S.kTile, keyTile64Pays) {
		fv = fwdSM90S
	}
	if k.arch.wide && p.HeadDim == 128 && fv.kTile == 128 && k.dev != nil && k.wideForward(p) {
		fv = fwdSM90N
	}
	if scaleLog2 := float32(p.SoftmaxScale() * math.Log2E); fv.lean && !(scaleLog2 >= 0x1p-126) {
		return fwdSM90
	}
	return fv
}

// forward90 launches the Hopper forward fv (forwardFor): bs are q, k, v, out, lse, dl
// the work list in fv's tiles.
func (k *Kernel) forward90(p kernels.Problem, bs []*cuda.Buffer, dl *deviceList, fv variant) error {
	d := p.HeadDim
	if p.HeadsQ > 1<<16 || dl.w.RowTiles > 65535 {
		return fmt.Errorf("cuda: grid of %d heads x %d row tiles is too large", p.HeadsQ, dl.w.RowTiles)
	}
	tq, err := k.headMap(bs[0], p.Mask.SeqQ, p.HeadsQ, d, fv.qTile)
	if err != nil {
		return err
	}
	tk, err := k.headMap(bs[1], p.Mask.SeqK, p.HeadsKV, d, fv.kTile)
	if err != nil {
		return err
	}
	tv, err := k.headMap(bs[2], p.Mask.SeqK, p.HeadsKV, d, fv.kTile)
	if err != nil {
		return err
	}
	shared := fv.shared(d)
	scaleLog2 := float32(p.SoftmaxScale() * math.Log2E)
	fn := fv.fn
	persistent, dyn := k.forwardPersistent(fv, dl.w), k.dynForward(fv, dl.w)
	if dyn {
		fn += "pd"
	} else if persistent {
		fn += "p"
	}
	f, err := k.function(fmt.Sprintf("%s_%s_d%d", fn, dtypeName(p.DType), d), shared)
	if err != nil {
		return err
	}
	args := append([]any{tq, tk, tv, bs[3], bs[4], p.Mask.SeqQ, p.Mask.SeqK, p.HeadsQ, p.HeadsKV, scaleLog2}, dl.args()...)
	var bounds any = uint64(0) // a packed list's tiles at the multiples: no bounds to read
	if dl.w.Ragged {
		bounds = dl.bounds // the tiles' bounds (read where LONGCA_FWD_RAGGED)
	}
	args = append(args, bounds)
	if dyn { // the items drawn so far, zero for this launch (fwdCounter)
		ctr, err := k.fwdCounter()
		if err != nil {
			return err
		}
		args = append(args, ctr)
	}
	grid := forwardGrid(persistent || dyn, k.dev.SMs, p.HeadsQ, dl.w.RowTiles)
	if (persistent || dyn) && k.fwdBlocks > 0 {
		grid.X = min(grid.X, k.fwdBlocks)
	}
	return k.dev.Do(func() error {
		return f.Launch(grid, cuda.Dim3{X: fv.threads}, shared, k.dev.Stream(), args...)
	})
}

// fwdCounter is the dynamic persistent forward's work counter (a word of scratch, "fwdctr"),
// zeroed on the stream by a memset before each launch.
func (k *Kernel) fwdCounter() (*cuda.Buffer, error) {
	ctr, err := k.scratchBuf("fwdctr", 1)
	if err != nil {
		return nil, err
	}
	return ctr, k.dev.Memset(ctr, 4, 0)
}

// forwardGrid is the Hopper forward's grid over heads x rowTiles work items: a block an item
// (heads the fast index), or, persistent, a block per multiprocessor of sms, at most one an
// item, walking the items.
func forwardGrid(persistent bool, sms, heads, rowTiles int) cuda.Dim3 {
	if !persistent {
		return cuda.Dim3{X: heads, Y: rowTiles}
	}
	return cuda.Dim3{X: max(1, min(sms, heads*rowTiles))}
}

// backward90 launches the Hopper backward: bs are q, k, v, out, lse, dout, dq, dk, dv.
// Dsum and lse*log2(e) go to scratch rows padded to 64, dQ accumulates in an fp32
// scratch [heads][padded length][d] by TMA reductions, then converts into dq.
func (k *Kernel) backward90(p kernels.Problem, bs []*cuda.Buffer, dl *deviceList) error {
	sq, hq, d := p.Mask.SeqQ, p.HeadsQ, p.HeadDim
	bv := k.bwd.at(d) // the entry at this head dim: its tiles, threads and shared memory
	sqPad := (sq + 63) / 64 * 64
	if dl.w.RowTiles > 65535 {
		return fmt.Errorf("cuda: %d key tiles: grid too large", dl.w.RowTiles)
	}
	dsum, err := k.scratchBuf("dsum", hq*sqPad)
	if err != nil {
		return err
	}
	lse2, err := k.scratchBuf("lse2", hq*sqPad)
	if err != nil {
		return err
	}
	dqacc, err := k.scratchBuf("dqacc", hq*sqPad*d)
	if err != nil {
		return err
	}
	var maps [5]*cuda.TensorMap
	for i, m := range []struct {
		b          *cuda.Buffer
		rows, h, n int
	}{{bs[0], sq, hq, bv.qTile}, {bs[1], p.Mask.SeqK, p.HeadsKV, bv.kTile}, {bs[2], p.Mask.SeqK, p.HeadsKV, bv.kTile}, {bs[5], sq, hq, bv.qTile}} {
		if maps[i], err = k.headMap(m.b, m.rows, m.h, d, m.n); err != nil {
			return err
		}
	}
	if maps[4], err = k.accMap(dqacc, hq*sqPad, d, bv.swizzledDQ); err != nil {
		return err
	}
	dt := dtypeName(p.DType)
	pre, err := k.function(fmt.Sprintf("bwd90_pre_%s_d%d", dt, d), 0)
	if err != nil {
		return err
	}
	sched, gs := k.backwardPlan(dl, p.HeadsKV, hq/p.HeadsKV, d)
	tp := k.tailPlan(dl, sched, gs, p.HeadsKV, hq/p.HeadsKV, d) // the last wave's parts (1: none)
	if bv.qStep > bv.qTile && sched&8 != 0 {                    // the bwd90qq kernel walks no pairs: half the blocks would be launched for nothing
		return fmt.Errorf("cuda: the %s backward takes %d queries a step and walks no pairs, but its plan is %#x", bv.fn, bv.qStep, sched)
	}
	ev := bv // the entry launched
	switch {
	case k.det: // the deterministic entry (bwd90d)
		ev = ev.withFn(ev.fn + "d")
	case gs > 1 && d == 128: // the split at head dim 128 (bwd90es)
		ev = ev.splitEntry()
	}
	if k.arch.pairsEntry && sched&8 != 0 && d == 128 { // the pairs' own entry (bwd90ep, bwd90esp; call 59)
		ev = ev.pairedEntry()
	}
	shared := ev.shared(d)
	mainFn := ev.fn
	if tp > 1 { // the tail's own unsplit entry over the whole waves (bwd90et, bwd90ept)
		mainFn += "t"
	}
	main, err := k.function(fmt.Sprintf("%s_%s_d%d", mainFn, dt, d), shared)
	if err != nil {
		return err
	}
	convFn := "dq90_convertf" // fragment order, and the scale applied here
	if bv.convC {
		convFn = "dq90_convertc" // ... through shared memory, a chunk a block
	}
	conv, err := k.function(fmt.Sprintf("%s_%s_d%d", convFn, dt, d), 0)
	if err != nil {
		return err
	}
	if err := k.dev.Memset(dqacc, 4, 0); err != nil {
		return err
	}
	// the deterministic backward's turns, one per (query head, 64-query tile): zero
	locks, err := k.scratchBuf("dqlocks", hq*sqPad/64)
	if err != nil {
		return err
	}
	if k.det {
		if err := k.dev.Memset(locks, 4, 0); err != nil {
			return err
		}
	}
	// the group split (head dim 64, and 128 by split128Parts or always in sm90g2/g8): its fp32 partials of dK and dV and their reduction
	var kpart, vpart *cuda.Buffer
	var reduce, tailMain, tailReduce *cuda.Function
	var tailShared int
	if parts := max(gs, tp); parts > 1 {
		n := parts * p.Mask.SeqK * p.HeadsKV * d
		if tp > 1 { // the tail's partials are compact: its items' key tiles only ([tp][items][tiles][RowTile][d])
			n = tp * tailElems(dl, p.HeadsKV, sched&8 != 0, k.blockSlots(), d)
		}
		if kpart, err = k.scratchBuf("dkpart", n); err != nil {
			return err
		}
		if vpart, err = k.scratchBuf("dvpart", n); err != nil {
			return err
		}
		if gs > 1 {
			if reduce, err = k.function("bwd90_dkv_reduce_"+dt, 0); err != nil {
				return err
			}
		}
	}
	if tp > 1 { // the last wave's items split in the tail's own split entry (bwd90est, bwd90espt), then their own reduction
		sv := bv.splitEntry()
		if ev.fn != bv.fn { // the pairs' entry (bwd90ep): its split one (bwd90esp)
			sv = sv.pairedEntry()
		}
		tailShared = sv.shared(d)
		if tailMain, err = k.function(fmt.Sprintf("%st_%s_d%d", sv.fn, dt, d), tailShared); err != nil {
			return err
		}
		if tailReduce, err = k.function("bwd90_dkv_reduce_tail_"+dt, 0); err != nil {
			return err
		}
	}
	scale := p.SoftmaxScale()
	return k.dev.Do(func() error {
		st := k.dev.Stream()
		rows := hq * sqPad
		if err := pre.Launch(cuda.Dim3{X: (rows + 7) / 8}, cuda.Dim3{X: 256}, 0, st, bs[3], bs[5], bs[4], dsum, lse2, sq, hq, sqPad); err != nil {
			return err
		}
		args := append([]any{maps[0], maps[1], maps[2], maps[3], maps[4], lse2, dsum, bs[7], bs[8], sq, p.Mask.SeqK, hq, p.HeadsKV, sqPad,
			float32(scale), float32(scale * math.Log2E)}, dl.pairedArgs(sched)...)
		sched &^= schedDocPairs
		if p.HeadsKV*gs > 65535 { // the key-tiles-fast grid puts the heads in grid y (at most 65535)
			sched &^= 2
		}
		sched |= int32(gs) << 4 // the group split, in bits 4-7: 1 is no split
		perHead := headBlocks(dl.w, sched&8 != 0)
		if gs > 1 { // the kernel writes fp32 partials of dK and dV, summed below
			args[7], args[8] = kpart, vpart
		}
		args = append(args, dl.ranks, locks, sched, dqacc)
		grid := cuda.Dim3{X: p.HeadsKV * gs, Y: perHead}
		if sched&2 != 0 && !k.det { // key tiles the fast index
			grid = cuda.Dim3{X: perHead, Y: p.HeadsKV * gs}
		}
		if tp > 1 {
			t := tailLaunch{parts: tp, main: main, split: tailMain, reduce: tailReduce, kpart: kpart, vpart: vpart,
				dk: bs[7], dv: bs[8], shared: shared, splitShared: tailShared, threads: bv.threads}
			if err := t.launch(k.dev, st, dl, p, sched, args, float32(scale), k.blockSlots()); err != nil {
				return err
			}
			k.tailLaunches.Add(1)
		} else if err := main.Launch(grid, cuda.Dim3{X: bv.threads}, shared, st, args...); err != nil {
			return err
		}
		if gs > 1 {
			n := p.Mask.SeqK * p.HeadsKV * d
			if err := reduce.Launch(cuda.Dim3{X: max(1, min(k.dev.SMs*8, (n/2+255)/256))}, cuda.Dim3{X: 256}, 0, st,
				kpart, vpart, bs[7], bs[8], uint64(n), gs, float32(scale)); err != nil {
				return err
			}
		}
		n := sq * hq * d
		cargs := []any{dqacc, bs[6], sq, hq, sqPad, float32(scale)}
		blocks := (n + 255) / 256
		if bv.convC { // a block a 64 x 64 chunk at a time
			blocks = hq * sqPad / 64 * d / 64
		}
		return conv.Launch(cuda.Dim3{X: max(1, min(k.dev.SMs*8, blocks))}, cuda.Dim3{X: 256}, 0, st, cargs...)
	})
}

// tailPlan is the parts sm90 splits the head-dim-128 backward's last, partial wave into (1:
// none, and always 1 for the variants that do not compile the tail: sm90nt, sm90-c75): on an
// unsplit plan over one list, unpaired where its row tiles are all of one weight (evenRows:
// full), or paired where its pairs are (evenPairs: causal), tailParts of its heads x items
// blocks.
func (k *Kernel) tailPlan(dl *deviceList, sched int32, gs, heads, group, d int) int {
	// the tail's entries are compiled with the early split backward's (LONGCA_BWD_SPLIT128) and
	// write partials of 128-key tiles (BBN9), as many as tailElems sizes by the list's tiles
	// and walk a KV head's key tiles together (the 1-D grid's items, key tiles fastest): a plan
	// of another order (sm90fn's heaviest first over all heads) keeps its order unsplit
	if !k.arch.tails() || d != 128 || k.det || gs != 1 ||
		sched&schedKTFast != schedKTFast || sched&schedDocPairs != 0 || dl.w.Lists != 1 || dl.w.RowTile != 128 {
		return 1
	}
	paired := sched&8 != 0
	switch {
	case paired && !(k.arch.compiles("LONGCA_BWD_TAIL_PAIRS") && k.arch.pairsEntry && evenPairs(dl.w)):
		return 1
	case !paired && !evenRows(dl.w):
		return 1
	}
	return tailParts(heads*headBlocks(dl.w, paired), group, k.blockSlots())
}

// headBlocks is a KV head's blocks in the backward's plan: its row tiles, or paired (two key
// tiles a block) half of them, the odd middle one alone.
func headBlocks(w *WorkList, paired bool) int {
	if paired {
		return (w.RowTiles + 1) / 2
	}
	return w.RowTiles
}

// evenPairs says whether the backward's pairs of w's one list (the heaviest row tile in
// Order with the lightest, and so on inward) all walk as many entries, the odd middle tile
// alone as many or fewer (causal's lists: 2 (rows + 1) entries a pair).
func evenPairs(w *WorkList) bool {
	rows := w.RowTiles
	if rows < 2 || w.Lists != 1 {
		return false
	}
	ne := func(x int) int32 { r := w.Order[x]; return w.Start[r+1] - w.Start[r] }
	want := ne(0) + ne(rows-1)
	for x := range headBlocks(w, true) {
		got := ne(x)
		if y := rows - 1 - x; y > x {
			got += ne(y)
		}
		if got > want || got < want && rows-1-x > x {
			return false
		}
	}
	return true
}

// evenRows says whether every row tile of w's lists has as many entries as the first, all
// of them full tiles (full's backward lists; a partial tile weighs less).
func evenRows(w *WorkList) bool {
	if w.PartialTiles != 0 || w.RowTiles == 0 {
		return false
	}
	for l := 0; l < w.Lists; l++ {
		st := w.Start[l*(w.RowTiles+1):]
		for r := 0; r < w.RowTiles; r++ {
			if st[r+1]-st[r] != st[1]-st[0] {
				return false
			}
		}
	}
	return true
}

// tailParts is how many parts sm90 splits each item of the last, partial wave into, over a
// group of query heads, where blocks unsplit blocks run on slots SMs (one block an SM): the whole
// waves' blocks run unsplit, the last wave's r items as r x P blocks of 1/P of the work,
// which take ceil(r P / slots) / P of a wave instead of one; the P of 2, 4 and 8 dividing
// group that takes the least (the fewest on a tie), where that shortens the pass by tailGain
// or more (full d128 at 64:8 on 132 SMs: 16K 1,024 blocks, 7 waves and 100 items, 8 parts,
// 7/8 of a wave, 1.6%; 32K 8 parts 2.3%; 48K 8 parts 2.6%; 8K's 116 items no part count helps).
func tailParts(blocks, group, slots int) int {
	if slots <= 0 || blocks <= 0 {
		return 1
	}
	w, r := blocks/slots, blocks%slots
	if w < 1 || r == 0 || w*slots >= tailMaxFirst {
		return 1
	}
	best, waves := 1, 1.0
	for _, p := range []int{2, 4, 8} {
		if group%p != 0 {
			continue
		}
		if x := float64((r*p+slots-1)/slots) / float64(p); x < waves-1e-9 {
			best, waves = p, x
		}
	}
	if (1-waves)/float64(w+1) < tailGain {
		return 1
	}
	return best
}

const (
	// tailGain is the least modelled gain tailParts takes
	tailGain = 0.01
	// tailMaxFirst bounds the tail's first item (bits 12-30 of the kernel's sched)
	tailMaxFirst = 1 << 19
	// schedTail (bit 9 of sched): the backward's blocks over tailLaunch's 1-D grids
	schedTail int32 = 1 << 9
)

// tailItems is the tail's split items of a plan of heads KV heads on slots SMs: the backward's
// items (a key tile, or a pair of them) first .. items-1, those after the whole waves.
func tailItems(dl *deviceList, heads int, paired bool, slots int) (first, items int) {
	items = heads * headBlocks(dl.w, paired)
	return items / slots * slots, items
}

// tailElems is the elements of a part of the tail's compact fp32 partials (dK's, and as many
// dV's): each split item's key tiles (two where paired) of RowTile keys x d.
func tailElems(dl *deviceList, heads int, paired bool, slots, d int) int {
	first, items := tailItems(dl, heads, paired, slots)
	return (items - first) * itemTiles(paired) * dl.w.RowTile * d
}

// itemTiles is the key tiles of a backward item: two where the plan pairs them.
func itemTiles(paired bool) int {
	if paired {
		return 2
	}
	return 1
}

// tailLaunch is the backward's launch with its last wave split: the whole waves' items in the unsplit entry (main)
// over a 1-D grid, the last wave's items in the split entry (split) in parts blocks each, their
// fp32 partials of dK and dV summed into dk and dv by reduce.
type tailLaunch struct {
	parts                        int
	main, split, reduce          *cuda.Function
	kpart, vpart, dk, dv         *cuda.Buffer
	shared, splitShared, threads int
}

// launch runs the three on st: args are the backward's (dk and dv at 7 and 8, sched second
// from last), sched its unsplit plan, slots the SMs.
func (t tailLaunch) launch(dev *cuda.Device, st cuda.Stream, dl *deviceList, p kernels.Problem, sched int32, args []any, scale float32, slots int) error {
	paired := sched&8 != 0
	first, items := tailItems(dl, p.HeadsKV, paired, slots)
	at := len(args) - 2
	// the plan's sched with parts in bits 4-7, the tail's bit and its first item
	tailSched := func(parts int) int32 { return sched&^(0xf<<4) | int32(parts)<<4 | schedTail | int32(first)<<12 }
	a := slices.Clone(args)
	a[at] = tailSched(1)
	if err := t.main.Launch(cuda.Dim3{X: first}, cuda.Dim3{X: t.threads}, t.shared, st, a...); err != nil {
		return err
	}
	b := slices.Clone(args)
	b[7], b[8] = t.kpart, t.vpart
	b[at] = tailSched(t.parts)
	if err := t.split.Launch(cuda.Dim3{X: (items - first) * t.parts}, cuda.Dim3{X: t.threads}, t.splitShared, st, b...); err != nil {
		return err
	}
	n := tailElems(dl, p.HeadsKV, paired, slots, p.HeadDim) / 2 // the reduction's threads: a pair of elements each
	return t.reduce.Launch(cuda.Dim3{X: max(1, min(dev.SMs*8, (n+255)/256))}, cuda.Dim3{X: 256}, 0, st,
		t.kpart, t.vpart, t.dk, t.dv, dl.order, dl.w.RowTiles, first, items-first, p.HeadsKV, p.Mask.SeqK, t.parts, scale, itemTiles(paired)-1)
}
