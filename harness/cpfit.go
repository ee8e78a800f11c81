package harness

import (
	"math"
	"sync"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// What a CP sweep's document masks cost before any is built. A CP rank builds its own
// mask and plan every sample (and again for the check), and zigzag sharding pads every
// document to a multiple of 2 x ranks tokens: 1-token documents make each rank hold 16
// times its tokens on 8 ranks (cp --counts of ones, --tokens-per-rank 4K: 65,536 tokens a
// rank, 8 GB, where the estimate had counted 4,608 tokens). These estimates come from
// the documents' source (their expected count, dataset.MeanPiece), not from a mask.

// MaskDocs is what a mask's documents are expected to be at a length: how many, and
// their mean length (tokens).
type MaskDocs struct {
	Docs, Mean float64
	// Piece is the source's mean document length (dataset.MeanPiece; Mean is the
	// sequence over Docs, whose margin makes it shorter).
	Piece float64
	// counts is the source's counts when it is a counts file (their padding is then
	// counted exactly), cap its cap in tokens (0: none).
	counts *dataset.Empirical
	cap    int
}

// pieceCache keeps what a counts file of up to 2^24 counts gives a cap (and a padding):
// the estimates ask it for every case, mask and check length.
var pieceCache sync.Map

type pieceKey struct {
	src      dataset.Source
	cap, pad int // pad 0: the mean piece
}

// meanPiece is dataset.MeanPiece, kept per source and cap.
func meanPiece(src dataset.Source, cap int) float64 {
	k := pieceKey{src, cap, 0}
	if v, ok := pieceCache.Load(k); ok {
		return v.(float64)
	}
	m := dataset.MeanPiece(src, cap)
	pieceCache.Store(k, m)
	return m
}

// docsMargin is the margin on a pack's expected document count (a pack of many documents
// holds their expected count within a fraction of a percent; one of few, a few more).
const docsMargin = 1.1

// MaskDocs estimates the documents of mask name at seqlen tokens under the sweep's
// documents (Docs; the CP rule of MASKS.md when none are given): one document, the whole
// sequence, for a mask that draws none.
func (s CPSweep) MaskDocs(name string, seqlen int) MaskDocs {
	return maskDocs(s.Docs, mask.PurposeCP, name, seqlen)
}

func maskDocs(d Docs, purpose mask.Purpose, name string, seqlen int) MaskDocs {
	S := float64(max(seqlen, 1))
	if !mask.DrawsDocuments(name) {
		return MaskDocs{Docs: 1, Mean: S, Piece: S}
	}
	src := d.Source
	if src == nil {
		n := dataset.ForKernel(seqlen)
		if purpose == mask.PurposeCP {
			n = dataset.ForCP(seqlen)
		}
		if b, err := dataset.Builtin(n); err == nil {
			src = b
		}
	}
	c := d.MaxDoc
	if c.IsZero() && src != nil {
		c = dataset.DefaultCap(src)
	}
	md := MaskDocs{cap: c.Resolve(seqlen)}
	mean := math.NaN()
	if src != nil {
		mean = meanPiece(src, md.cap)
	}
	if !(mean >= 1) {
		mean = 1 // a source it cannot read: a document a token, the most there can be
	}
	if e, ok := src.(*dataset.Empirical); ok && len(e.Counts) > 0 {
		md.counts = e
	}
	md.Docs = min(S, docsMargin*S/mean+16)
	md.Mean, md.Piece = S/md.Docs, min(mean, S)
	return md
}

// Padded bounds the tokens zigzag sharding makes of the documents on n ranks: each is
// padded to a multiple of 2n. A counts file's documents are padded as its counts (cut at
// the cap) are on average; another source's by up to 2n - 1 tokens each; and the last
// document, clipped to the sequence, by up to 2n - 1.
func (md MaskDocs) Padded(seqlen, n int) float64 {
	each := 2*float64(n) - 1
	if md.counts != nil {
		each = min(each, meanPadding(md.counts, md.cap, 2*n))
	}
	return float64(seqlen) + md.Docs*each + 2*float64(n) - 1
}

// meanPadding is the mean padding to a multiple of pad of the pieces a counts file's
// documents make under cap (0: none), kept per file, cap and padding.
func meanPadding(e *dataset.Empirical, cap, pad int) float64 {
	k := pieceKey{e, cap, pad}
	if v, ok := pieceCache.Load(k); ok {
		return v.(float64)
	}
	var pieces, padding float64
	for _, c := range e.Counts {
		c = max(c, 1)
		if cap > 0 && c > cap {
			k := c / cap
			padding += float64(k) * padOf(cap, pad)
			pieces += float64(k)
			c %= cap
		}
		if c > 0 {
			padding += padOf(c, pad)
			pieces++
		}
	}
	m := padding / max(pieces, 1)
	pieceCache.Store(k, m)
	return m
}

// padOf is the padding of a document of n tokens to a multiple of m.
func padOf(n, m int) float64 { return float64((m - n%m) % m) }

// The memory and time a CP rank's mask of documents costs, a document at a time, on a
// ring of r ranks with documents of mean length L. Every rank builds the mask and its
// documents (60-66 bytes a document live, about 220 at the peak of building them: the
// slices and ranges grown by append, the lengths' text split) and plans the whole layout;
// zigzag sharding cuts each document into up to 2r pieces of it (24 bytes each), and a
// rank's step sub-masks hold a slice or more for each piece pair it sees (80 bytes a
// document and step it spans, up to r steps). Measured on the build machine (the live heap
// after the mask, its plan and every rank's sub-masks of ring-p2p, 1- to 1024-token
// documents on 8 to 64 ranks): 124-4,400 bytes a document and rank under zigzag; peaks of
// about 180 bytes a document and rank in a contiguous run of 1-token documents (8 ranks of
// 64K), and 220 in a dry run (16M 1-token documents: 3.7 GB). Taken as 240 + 40 x min(2r,
// L) + 80 x min(r, L/2) under zigzag, 240 + 80 / r contiguous. The time, on one core,
// build and plan (1 + 0.65 x min(2r, L) us measured), taken as 2 + 1 x min(2r, L) us
// under zigzag and 2 contiguous.
const (
	cpDocBytes     = 240
	cpPieceBytes   = 40
	cpStepBytes    = 80
	cpDocSeconds   = 2e-6
	cpPieceSeconds = 1e-6
)

// CPPlanDocFactor is how many times a dry run builds and plans a case's mask: for its
// cases and for its table.
const CPPlanDocFactor = 2

// RankBytes bounds what one rank holds of md's mask on a ring of ring ranks: the mask,
// its plan, and its step sub-masks; zigzag: the documents are cut into pieces.
func (md MaskDocs) RankBytes(ring int, zigzag bool) float64 {
	r := float64(max(ring, 1))
	if !zigzag {
		return md.Docs * (cpDocBytes + cpStepBytes/r)
	}
	return md.Docs * (cpDocBytes + cpPieceBytes*min(2*r, md.Mean) + cpStepBytes*min(r, md.Mean/2))
}

// PlanBytes bounds what a dry run holds of md's mask at a time on a ring of ring ranks:
// the mask and its plan, no sub-mask.
func (md MaskDocs) PlanBytes(ring int, zigzag bool) float64 {
	if !zigzag {
		return md.Docs * cpDocBytes
	}
	return md.Docs * (cpDocBytes + cpPieceBytes*min(2*float64(max(ring, 1)), md.Mean))
}

// RankSeconds is the time, on one core, one rank takes to build md's mask and plan it
// on a ring of ring ranks (its step sub-masks included).
func (md MaskDocs) RankSeconds(ring int, zigzag bool) float64 {
	if !zigzag {
		return md.Docs * cpDocSeconds
	}
	return md.Docs * (cpDocSeconds + cpPieceSeconds*min(2*float64(max(ring, 1)), md.Mean))
}

// zigzags says whether case c shards zigzag (and so pads every document) on n ranks:
// unless the sharding is contiguous, or the method shards its own way (balanced's
// blocks; ulysses, contiguous unless zigzag is asked for).
func zigzags(c CPCase, sh cp.Sharding) bool {
	switch c.Method {
	case "balanced":
		return false
	case "ulysses":
		return sh == cp.Zigzag
	}
	return sh != cp.Contiguous
}

// ringOf is the ring a case's ranks form on n ranks (its steps): the mesh's ring, all
// n for a method that chooses its own (ring-p2p, ring-allgather), 1 for ulysses.
func ringOf(c CPCase, n int) int {
	switch {
	case c.Method == "ulysses":
		return 1
	case c.Config.Ring > 0:
		return c.Config.Ring
	case c.Config.Ulysses > 0:
		return max(n/c.Config.Ulysses, 1)
	}
	return n
}

// CPDocsFit is what a CP sweep's masks of documents add to a rank, estimated before any
// mask is built: the most tokens a rank holds (padding included), and the most memory
// and time a rank's mask and plan take, over the sweep's methods, meshes and masks.
type CPDocsFit struct {
	// Tokens is the most tokens one rank holds, padding included (ceil(S/n) at least).
	Tokens float64
	// Padded says which case pads most (its method and mask), "" where none pads.
	PaddedBy string
	// MaskBytes and MaskSeconds are one rank's mask, documents and plan at its worst
	// (bytes; seconds on one core, a sample); PlanBytes a dry run's.
	MaskBytes, MaskSeconds, PlanBytes float64
	// Docs is the most documents a mask is expected to hold (with a margin), and Piece
	// their source's mean length.
	Docs, Piece float64
}

// DocsFit estimates the sweep's documents on n ranks (CPDocsFit) from its cases' meshes
// (Configs): nothing is built.
func (s CPSweep) DocsFit(n int) CPDocsFit {
	f := CPDocsFit{Tokens: math.Ceil(float64(s.SeqLen) / float64(max(n, 1)))}
	cases, err := s.Configs(n)
	if err != nil {
		return f
	}
	docs := map[string]MaskDocs{}
	for _, c := range cases {
		md, ok := docs[c.Mask]
		if !ok {
			md = s.MaskDocs(c.Mask, s.SeqLen)
			docs[c.Mask] = md
		}
		if md.Docs > f.Docs {
			f.Docs, f.Piece = md.Docs, md.Piece
		}
		zz := zigzags(c, s.Mesh.Sharding)
		if zz {
			if t := math.Ceil(md.Padded(s.SeqLen, n) / float64(n)); t > f.Tokens {
				f.Tokens, f.PaddedBy = t, c.Method+" "+c.Mask
			}
		}
		ring := ringOf(c, n)
		f.MaskBytes = max(f.MaskBytes, md.RankBytes(ring, zz))
		f.PlanBytes = max(f.PlanBytes, md.PlanBytes(ring, zz))
		f.MaskSeconds = max(f.MaskSeconds, md.RankSeconds(ring, zz))
	}
	return f
}

// CPCheckFootprint bounds the memory of a CP sweep's checks on n ranks (the host's of
// onNode of them in this process or on this node, the device's of one), estimated before
// any mask of documents is built, and the length of the worst: a check runs at the case's
// own length when its area is within the budget (a mask of short documents has little
// area: 1-token documents are checked at their full length), else at most at the longest
// of the check lengths. Every rank draws the global inputs, runs the method on its share,
// and gathers every rank's outputs (padded) and the joined global ones; rank 0 computes
// the two references. The area of a mask of documents is bounded below by its documents
// (mean length L: at least S (L+1)/2 pairs); another mask is built, a few slices.
func (s CPSweep) CPCheckFootprint(n, onNode int, budget float64, onDevice, isRef bool) (Footprint, int) {
	if budget <= 0 {
		budget = DefaultCheckBudget
	}
	backward := false
	for _, p := range s.Passes {
		backward = backward || p != kernels.Fwd
	}
	zigzag := false // a case pads its documents
	if cases, err := s.Configs(n); err == nil {
		for _, c := range cases {
			zigzag = zigzag || zigzags(c, s.Mesh.Sharding)
		}
	}
	var worst Footprint
	worstLen := 0
	for _, name := range s.Masks {
		area := func(seqlen int, _ Heads) (int64, bool) {
			if mask.DrawsDocuments(name) {
				md := s.MaskDocs(name, seqlen)
				return int64(float64(seqlen) * (md.Mean + 1) / 2), true
			}
			b := s.Build
			if b == nil {
				b = BuildCPMask
			}
			spec, err := b(name, seqlen, s.Seed)
			if err != nil {
				return 0, false
			}
			return spec.Mask.Area(), true
		}
		for _, h := range s.Heads {
			sc, hc := CheckSize(Case{SeqLen: s.SeqLen, Heads: h, HeadDim: s.HeadDim}, cpCheckLengths(n), area, budget)
			md := s.MaskDocs(name, sc)
			tc := math.Ceil(float64(sc) / float64(max(n, 1)))
			if zigzag {
				tc = math.Ceil(md.Padded(sc, n) / float64(max(n, 1)))
			}
			f := checkFootprint(sc, tc, n, onNode, hc, s.HeadDim, s.DType, backward, onDevice, isRef)
			f.Host += float64(onNode) * md.RankBytes(n, zigzag)
			if f.Host > worst.Host {
				worst, worstLen = f, sc
			}
		}
	}
	return worst, worstLen
}

// checkFootprint is the memory of a CP check at sc global tokens (tc a rank, padded)
// with heads h: on each of onNode ranks the global inputs, its shard's run (CPFootprint
// at tc), and the gathered outputs (every rank's padded ones and the joined global ones);
// on rank 0 the exact and naive references at sc. Device is one rank's.
func checkFootprint(sc int, tc float64, n, onNode int, h Heads, d int, dt tensor.DType, backward, onDevice, isRef bool) Footprint {
	S, q, kv, dd := float64(sc), float64(h.Q), float64(h.KV), float64(d)
	es := float64(dt.Size())
	passes := []kernels.Pass{kernels.Fwd}
	outs := dd * es * q // out
	if backward {
		passes = []kernels.Pass{kernels.FwdBwd}
		outs = dd * es * (2*q + 2*kv) // out, dq, dk, dv
	}
	inputs := S * dd * es * (2*q + 2*kv)
	run := CPFootprint(int(tc), h.Q, h.KV, d, dt, passes, onDevice, isRef)
	gathered := (float64(n)*tc + S) * (outs + 4*q)
	perRank := inputs + run.Host + gathered
	// the exact reference's float64 outputs and the naive one's float32 ones, and each
	// one's working set (kernels/check.References)
	outs64 := 8 * S * (q*dd + q)
	if backward {
		outs64 += 8 * S * dd * (q + 2*kv)
	}
	refs := 1.5*outs64 + 2*refBytes(S, S, q, kv, dd, 4, passes[0])
	return Footprint{Host: float64(onNode)*perRank + refs, Device: run.Device}
}

// maxRefWorkRing bounds the ring whose step sub-masks cpRefWork builds to count the
// reference's work (a ring of r ranks has r^2 of them); past it each rank is counted as
// r calls of its rows.
const maxRefWorkRing = 64

// cpRefWork is the CPU reference's work besides its FLOPs (RefShape.Work, in FLOPs at
// DefaultRefFLOPs) in one pass of plan pl, summed over the ranks' kernel calls: each ring
// rank's steps that have keys (StepMask: the ring methods, and ulysses on its ring of
// one), its gathered keys (ring-allgather), or its own blocks and a call of its rows for
// what it fetches (balanced); the Ulysses ranks of a ring rank make the same calls, each
// with its heads. Each ring rank's sub-masks are let go once counted.
func cpRefWork(method string, pl *cp.Plan, d int, pass kernels.Pass) float64 {
	c := pl.Config
	ring, u := max(pl.Layout.Ring, 1), max(c.Ulysses, 1)
	if c.Ranks > 0 {
		u = max(min(u, c.Ranks/ring), 1) // balanced's dispatch ring may be every rank
	}
	rows := func(calls float64) float64 { // calls of a rank's rows, one tile a block
		rs := RefShape{Rows: float64(pl.Layout.Local), Cols: float64(pl.Layout.Local), RowVisits: float64(pl.Layout.Local), ColVisits: float64(pl.Layout.Local)}
		return calls * rs.Work(pl.HeadsQ, pl.HeadsKV, d, pass)
	}
	var w float64
	for rr := range ring {
		switch {
		case method == "ring-allgather":
			w += RefWork(pl.GatherMask(rr), pl.HeadsQ, pl.HeadsKV, d, pass)
		case method == "balanced":
			w += RefWork(pl.StepMask(rr, rr), pl.HeadsQ, pl.HeadsKV, d, pass) + rows(1)
		case ring > maxRefWorkRing:
			w += rows(float64(ring))
		default:
			for k := range ring {
				if m := pl.StepMask(rr, k); len(m.Slices) > 0 {
					w += RefWork(m, pl.HeadsQ, pl.HeadsKV, d, pass)
				}
			}
		}
		pl.ForgetSteps(rr)
	}
	return w * float64(u)
}
