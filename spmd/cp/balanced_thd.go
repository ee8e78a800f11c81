package cp

import (
	"cmp"
	"context"
	"fmt"
	"slices"
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
	// Runs are where every THD row comes from in the one-stage buffer, in THD order; none
	// crosses the end of the rank's own rows. The backward sums the gradients along them.
	Runs []rowRun
	// Fill are the copies that fill the THD buffer, in order: a key range an earlier
	// entry holds too (a causal document's prefix) is copied from that entry's rows in
	// one piece (Docs), the rest from the one-stage buffer, so the copies are about the
	// pieces of the one-stage buffer, not the pieces times the entries.
	Fill []rowRun
	// Entries is the number of batch entries (documents) of the layout.
	Entries int
}

// rowRun is N rows copied from row Src of the one-stage buffer (of the THD buffer itself
// when Docs) to THD row Dst.
type rowRun struct {
	Dst, Src, N int
	Docs        bool
}

// thdLayout lays out the keys of the query pieces qs (lq local rows) of mask m as packed
// documents, filled from a one-stage buffer whose rows hold the key pieces keys, the
// first own of them the rank's own rows (the copies never cross row own).
func thdLayout(m mask.Mask, qs []Piece, lq int, keys []Piece, own int) (*docLayout, error) {
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
	for i, e := range ents {
		at := dl.Rows
		var err error
		if dl.Runs, err = addRuns(dl.Runs, e.K, at, keys, order, own); err != nil {
			return nil, err
		}
		// The earlier entry sharing the most keys, whose rows hold them in order.
		var ov mask.Range
		from := 0
		for j := range i {
			if x := ents[j].K.Intersect(e.K); x.Len() > ov.Len() {
				ov, from = x, dl.Mask.Slices[j].K.Start+x.Start-ents[j].K.Start
			}
		}
		if ov.Len() == 0 {
			dl.Fill, _ = addRuns(dl.Fill, e.K, at, keys, order, own)
		} else {
			dl.Fill, _ = addRuns(dl.Fill, mask.Range{Start: e.K.Start, End: ov.Start}, at, keys, order, own)
			dl.Fill = append(dl.Fill, rowRun{Dst: at + ov.Start - e.K.Start, Src: from, N: ov.Len(), Docs: true})
			dl.Fill, _ = addRuns(dl.Fill, mask.Range{Start: ov.End, End: e.K.End}, at+ov.End-e.K.Start, keys, order, own)
		}
		dl.Rows += e.K.Len()
		dl.Mask.Slices = append(dl.Mask.Slices, mask.Slice{Q: e.Q, K: mask.Range{Start: at, End: dl.Rows}, Kind: e.Kind})
	}
	dl.Mask.SeqK = dl.Rows
	return dl, nil
}

// addRuns appends to runs the copies of global keys k to THD rows from at: from the
// pieces of keys that hold them (order: keys by source), merged where both sides run on.
func addRuns(runs []rowRun, k mask.Range, at int, keys []Piece, order []int, own int) ([]rowRun, error) {
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
		src := p.At + next - p.Src.Start
		for n := end - next; n > 0; { // never across the end of the own rows
			take := n
			if src < own && src+take > own {
				take = own - src
			}
			runs = addRun(runs, rowRun{Dst: at + next - k.Start, Src: src, N: take}, own)
			next, src, n = next+take, src+take, n-take
		}
	}
	if next < k.End {
		return runs, fmt.Errorf("balanced: key %d is neither this rank's nor fetched (thd layout)", next)
	}
	return runs, nil
}

func addRun(runs []rowRun, r rowRun, own int) []rowRun {
	if n := len(runs); n > 0 {
		last := &runs[n-1]
		if !last.Docs && last.Dst+last.N == r.Dst && last.Src+last.N == r.Src && (last.Src >= own) == (r.Src >= own) {
			last.N += r.N
			return runs
		}
	}
	return append(runs, r)
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
		dl, err := thdLayout(pl.Problem.Mask, pl.Layout.Shards[r], lr, pl.oneKeys(r), lr)
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
	for _, run := range dl.Fill {
		for _, t := range [][2]tensor.Tensor{{out.k, kv.k}, {out.v, kv.v}} {
			dst, err := rowsOf(t[0], run.Dst, run.Dst+run.N)
			if err != nil {
				return out, err
			}
			from := t[1]
			if run.Docs {
				from = t[0]
			}
			src, err := rowsOf(from, run.Src, run.Src+run.N)
			if err != nil {
				return out, err
			}
			if err := b.r.ops.convert(dst, src); err != nil {
				return out, fmt.Errorf("balanced: thd copy: %w", err)
			}
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
	for _, run := range dl.Runs {
		for _, t := range [][2]tensor.Tensor{{out.k, g.k}, {out.v, g.v}} {
			dst, err := rowsOf(t[0], run.Src, run.Src+run.N)
			if err != nil {
				return out, err
			}
			src, err := rowsOf(t[1], run.Dst, run.Dst+run.N)
			if err != nil {
				return out, err
			}
			if err := b.r.ops.accumulate(dst, src); err != nil {
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
	g, err := newKV(a, r.ops.partDType(pl.Problem.DType), append([]int{dl.Rows}, kv.k.Shape()[1:]...))
	if err != nil {
		return kvPair{}, err
	}
	if err := r.Kernel.Backward(ctx, pl.stepProblem(dl.Mask), q, thd.k, thd.v, out, lse, dout, dq, g.k, g.v); err != nil {
		return kvPair{}, fmt.Errorf("balanced: %w", err)
	}
	return b.foldGrads(a, g, dl, rows)
}
