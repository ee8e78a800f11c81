package cp

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// The packed-documents ("THD") layout of balanced's one-stage path. In the blocks layout
// a rank's one kernel call attends its query blocks to one buffer (its own K/V, then what
// it fetched, block by block as they arrived): its sub-mask is many pieces of many
// documents, which a kernel that takes only packed documents with one diagonal bound per
// call (cuDNN: kernels/cudnn cuts any mask into such calls, up to 32, and merges what the
// calls share) runs as many calls. In the THD layout the rank's work is a batch of
// entries, in query order: each a contiguous run of its query rows (a run of its blocks
// inside one document) and its own contiguous run of key rows holding exactly the keys
// that run attends to, with the run's own bound (none, or causal bottom-right aligned).
// No two entries share query or key rows, so the rank's sub-mask is one call per bound
// (at most 2 on the CP masks). Where two entries need the same keys (two runs of one
// causal document need its prefix) the keys are copied into each entry's run, a device
// copy from the one-stage buffer; in the backward the entries' dK/dV are summed back into
// the one-stage layout (fp32) before they return to their owners. The fetch, and so
// CommBytes, are the same in both layouts.

// KVLayout is how balanced lays out a rank's keys for its kernel call (--cp-layout).
type KVLayout uint8

const (
	// KVAuto picks per rank the layout whose sub-mask the kernel runs in fewer calls
	// (kernels.CallCounter, Config.Calls): blocks on a tie, for a kernel that runs any
	// mask in one call, past one stage, or when the copies would exceed maxDocsGrowth.
	KVAuto KVLayout = iota
	// KVBlocks is the rank's own K/V followed by its fetch, one sub-mask of many pieces.
	KVBlocks
	// KVDocs is the packed-documents (THD) layout on every rank with work (one stage
	// only), within maxDocsGrowth.
	KVDocs
)

func (l KVLayout) String() string {
	switch l {
	case KVBlocks:
		return "blocks"
	case KVDocs:
		return "thd"
	}
	return "auto"
}

// ParseKVLayout reads auto, blocks or thd.
func ParseKVLayout(s string) (KVLayout, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return KVAuto, nil
	case "blocks":
		return KVBlocks, nil
	case "thd", "docs":
		return KVDocs, nil
	}
	return 0, fmt.Errorf("unknown key layout %q (--cp-layout): use auto, blocks or thd", s)
}

// maxDocsGrowth bounds the THD layout's copies: a rank takes it (auto or thd) only while
// its THD buffer holds at most this many times the rows of its one-stage buffer (its own
// K/V and its fetch), so that the memory guard's bound holds (BalancedBoundBytes); a rank
// past it keeps the blocks layout. Causal at 8 ranks copies up to 5.3 times (two runs of
// one causal document need its prefix each), the document masks 1.0-1.4 times.
const maxDocsGrowth = 6

// docLayout is one rank's keys as packed documents.
type docLayout struct {
	// Rows are the key rows of the THD buffer.
	Rows int
	// Mask is the rank's sub-mask: its local query rows against the THD key rows.
	Mask mask.Mask
	// Fill are the copies that fill the THD buffer from the one-stage buffer (To: THD
	// rows, From: one-stage rows), one batched launch per tensor (ops.copyRuns).
	Fill []rowCopy
	// Sum are the backward's sums of the THD rows' gradients into the one-stage layout
	// (To: one-stage rows, From: THD rows), in waves whose destinations do not overlap
	// (a key copied into k entries is in k waves), one batched launch per wave and tensor.
	Sum [][]rowCopy
	// Entries is the number of batch entries (documents) of the layout.
	Entries int
}

// rowCopy is N rows from row From of one tensor to row To of another.
type rowCopy struct{ To, From, N int }

// thdLayout lays out the keys of the query pieces qs (lq local rows) of mask m as packed
// documents, filled from a one-stage buffer whose rows hold the key pieces keys.
func thdLayout(m mask.Mask, qs []Piece, lq int, keys []Piece) (*docLayout, error) {
	// The rank's queries against the global keys, as canonical slices: each one a run
	// of query rows inside one slice of m (a document), with its keys and bound.
	g := SubMask(m, qs, lq, []Piece{{Src: mask.Range{Start: 0, End: m.SeqK}, At: 0}}, m.SeqK)
	es := g.Slices
	slices.SortStableFunc(es, func(a, b mask.Slice) int {
		if c := cmp.Compare(a.Q.Start, b.Q.Start); c != 0 {
			return c
		}
		return cmp.Compare(a.K.Start, b.K.Start)
	})
	// Runs of rows that see the same keys without a bound are one entry (a full
	// document's blocks on this rank are consecutive local rows).
	var ents []mask.Slice
	for _, s := range es {
		if n := len(ents); n > 0 {
			last := &ents[n-1]
			if last.Kind == mask.Full && s.Kind == mask.Full && last.K == s.K && last.Q.End == s.Q.Start {
				last.Q.End = s.Q.End
				continue
			}
		}
		ents = append(ents, s)
	}
	order, _ := bySource(keys)
	dl := &docLayout{Mask: mask.Mask{SeqQ: lq}, Entries: len(ents)}
	for _, e := range ents {
		at := dl.Rows
		var err error
		if dl.Fill, err = addRuns(dl.Fill, e.K, at, keys, order); err != nil {
			return nil, err
		}
		dl.Rows += e.K.Len()
		dl.Mask.Slices = append(dl.Mask.Slices, mask.Slice{Q: e.Q, K: mask.Range{Start: at, End: dl.Rows}, Kind: e.Kind})
	}
	dl.Sum = sumWaves(dl.Fill)
	dl.Mask.SeqK = dl.Rows
	return dl, nil
}

// addRuns appends to runs the copies of global keys k to THD rows from at: from the
// pieces of keys that hold them (order: keys by source), merged where both sides run on.
func addRuns(runs []rowCopy, k mask.Range, at int, keys []Piece, order []int) ([]rowCopy, error) {
	if k.Len() == 0 {
		return runs, nil
	}
	next := k.Start
	x := slices.IndexFunc(order, func(i int) bool { return keys[i].Src.End > k.Start })
	for ; x >= 0 && x < len(order) && next < k.End; x++ {
		p := keys[order[x]]
		if p.Src.Start > next {
			break
		}
		end := min(p.Src.End, k.End)
		r := rowCopy{To: at + next - k.Start, From: p.At + next - p.Src.Start, N: end - next}
		if n := len(runs); n > 0 && runs[n-1].To+runs[n-1].N == r.To && runs[n-1].From+runs[n-1].N == r.From {
			runs[n-1].N += r.N
		} else {
			runs = append(runs, r)
		}
		next = end
	}
	if next < k.End {
		return runs, fmt.Errorf("balanced: key %d is neither this rank's nor fetched (thd layout)", next)
	}
	return runs, nil
}

// sumWaves are the backward's sums of fill's copies, reversed (THD rows back into the
// one-stage rows), in waves: each copy goes to the first wave none of whose copies
// shares a destination row with it, so a batched launch never adds into one row twice.
func sumWaves(fill []rowCopy) [][]rowCopy {
	var waves [][]rowCopy
	var busy [][]rowCopy // per wave, its destinations by start
	for _, f := range fill {
		r := rowCopy{To: f.From, From: f.To, N: f.N}
		w := 0
		for ; w < len(waves); w++ {
			b := busy[w]
			i := sort.Search(len(b), func(i int) bool { return b[i].To+b[i].N > r.To })
			if i == len(b) || b[i].To >= r.To+r.N {
				break
			}
		}
		if w == len(waves) {
			waves, busy = append(waves, nil), append(busy, nil)
		}
		waves[w] = append(waves[w], r)
		b := busy[w]
		i := sort.Search(len(b), func(i int) bool { return b[i].To > r.To })
		busy[w] = slices.Insert(b, i, r)
	}
	return waves
}

// oneKeys are the key pieces of rank r's one-stage buffer: its own rows, then its fetch.
func (pl *Plan) oneKeys(r int) []Piece {
	lr := pl.Layout.Local
	return append(append([]Piece(nil), pl.Layout.Shards[r]...), shiftPieces(pl.Dispatch.stageKeys(r, 0), lr)...)
}

// chooseKV resolves the key layout of every dispatch rank (balanced's Plan, one stage):
// thd forced, or auto with a kernel that counts its calls (cfg.Calls) where the THD
// sub-mask takes fewer calls than the blocks one and its copies stay within
// maxDocsGrowth.
func (pl *Plan) chooseKV(cfg Config) error {
	d := pl.Dispatch
	switch {
	case cfg.KVLayout == KVBlocks, cfg.KVLayout == KVAuto && cfg.Calls == nil:
		return nil
	case d.NumStages() > 1:
		if cfg.KVLayout == KVDocs {
			return fmt.Errorf("balanced: --cp-layout thd takes one stage, not %d (--cp-stages 1)", d.NumStages())
		}
		return nil
	}
	lr := pl.Layout.Local
	docs := make([]*docLayout, d.Ranks)
	for r := range d.Ranks {
		rows, bm := pl.oneMask(r)
		if len(bm.Slices) == 0 {
			continue
		}
		dl, err := thdLayout(pl.Problem.Mask, pl.Layout.Shards[r], lr, pl.oneKeys(r))
		if err != nil {
			return err
		}
		if dl.Rows > maxDocsGrowth*rows {
			continue // the memory guard's bound (BalancedBoundBytes)
		}
		if cfg.KVLayout == KVDocs {
			docs[r] = dl
			continue
		}
		nd, err := cfg.Calls.Calls(dl.Mask)
		if err != nil {
			continue
		}
		if nb, err := cfg.Calls.Calls(bm); err != nil || nd < nb {
			docs[r] = dl
		}
	}
	pl.kvDocs = docs
	return nil
}

// docsOf is dispatch rank r's THD layout, nil for the blocks layout.
func (pl *Plan) docsOf(r int) *docLayout {
	if r < len(pl.kvDocs) {
		return pl.kvDocs[r]
	}
	return nil
}

// KVLayoutName is the key layout the plan's ranks took, for the row (cp_layout):
// "blocks", "thd", or "thd K/N" when K of the N dispatch ranks took THD.
func (pl *Plan) KVLayoutName() string {
	k := 0
	for _, dl := range pl.kvDocs {
		if dl != nil {
			k++
		}
	}
	switch {
	case k == 0:
		return "blocks"
	case k == len(pl.kvDocs):
		return "thd"
	}
	return fmt.Sprintf("thd %d/%d", k, len(pl.kvDocs))
}

// docsKV fills a THD buffer from the one-stage buffer kv (rows of the rank's keys as
// fetchOne laid them out).
func (b *balancedRun) docsKV(a *arena, kv kvPair, dl *docLayout) (kvPair, error) {
	out, err := newKVScratch(a, kv.k.DType(), append([]int{dl.Rows}, kv.k.Shape()[1:]...))
	if err != nil {
		return out, err
	}
	for _, t := range [][2]tensor.Tensor{{out.k, kv.k}, {out.v, kv.v}} {
		if err := b.r.ops.copyRuns(t[0], t[1], dl.Fill); err != nil {
			return out, fmt.Errorf("balanced: thd copy: %w", err)
		}
	}
	return out, nil
}

// foldGrads sums the THD layout's dK/dV g back into the one-stage layout (rows rows,
// fp32): a key copied into several entries gets the sum of their gradients.
func (b *balancedRun) foldGrads(a *arena, g kvPair, dl *docLayout, rows int) (kvPair, error) {
	out, err := newKV(a, tensor.FP32, append([]int{rows}, g.k.Shape()[1:]...))
	if err != nil {
		return out, err
	}
	for _, wave := range dl.Sum {
		for _, t := range [][2]tensor.Tensor{{out.k, g.k}, {out.v, g.v}} {
			if err := b.r.ops.addRuns(t[0], t[1], wave); err != nil {
				return out, fmt.Errorf("balanced: thd gradient sum: %w", err)
			}
		}
	}
	return out, nil
}

// backwardDocs is the one-stage backward's kernel call in the THD layout: the THD K/V
// from the one-stage buffer kv, the kernel's dK/dV in THD rows (dq directly), summed back
// into the one-stage layout of rows rows in fp32 (foldGrads).
func (b *balancedRun) backwardDocs(ctx context.Context, a *arena, dl *docLayout, rows int, q tensor.Tensor, kv kvPair, out, lse, dout, dq tensor.Tensor) (kvPair, error) {
	r, pl := b.r, b.r.Plan
	thd, err := b.docsKV(a, kv, dl)
	if err != nil {
		return kvPair{}, err
	}
	// Every THD key row is attended by a row of its entry (the entries' keys are tight),
	// so the kernel writes every row of g: no fill.
	g, err := newKVScratch(a, r.ops.partDType(pl.Problem.DType), append([]int{dl.Rows}, kv.k.Shape()[1:]...))
	if err != nil {
		return kvPair{}, err
	}
	if err := r.Kernel.Backward(ctx, pl.stepProblem(dl.Mask), q, thd.k, thd.v, out, lse, dout, dq, g.k, g.v); err != nil {
		return kvPair{}, fmt.Errorf("balanced: %w", err)
	}
	return b.foldGrads(a, g, dl, rows)
}
