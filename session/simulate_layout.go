package session

import (
	"math"
	"sort"

	"github.com/longca/longca/mask"
	"github.com/longca/longca/sim"
)

// laid is what simulate's estimates count of one case's layout of a mask's documents
// over its ring (spmd/cp newPlan), the most of any rank of the ring:
//   - lay, its memory (sim.MemoryBytesIn), with rankSlots and allSlots where they are
//     counted (zigzag: memLayout), the slots one rank's sub-masks hold over its steps and
//     every ring rank's together;
//   - pieces, the query pieces a rank holds: each of its steps' sub-masks walks them
//     (spmd/cp SubMask) beside the mask's own slices;
//   - rankSlices, the slices its sub-masks hold over all its steps, each made, and
//     counted into tiles by the kernel model in every traced pass; allSlices, every ring
//     rank's together (1-token documents on a ring of 64: rank 0's are all of them);
//   - cuts, what laying the documents out loops over (zigzag: 2 x ring chunks of every
//     document, most of them empty for a short one);
//   - dispatched, balanced's documents times the meshes its plan dispatches them on.
//
// The time (laidSeconds) was charged every document on every GPU whatever the layout:
// balanced on 256 GPUs of 1-token documents, 3.3 s measured, was refused as an hour and a
// half.
type laid struct {
	lay                   sim.DocLayout
	rankSlots, allSlots   float64
	pieces                float64
	rankSlices, allSlices float64
	cuts                  float64
	dispatched            float64
}

// memLayout is l's memory (sim.MemoryBytesIn) for parallel ranks' sub-masks alive at once,
// those of one sub-mask a rank against every rank's keys where gather (ring-allgather):
// where its slots are counted, the ranks together hold no more than every ring rank's
// (every rank traced, the ranks share their ring position's sub-masks; sampled, each
// traced rank forgets its own before the next is traced). 8 GPUs of 1-token documents
// hold rank 0's alone.
func (l laid) memLayout(parallel int, gather bool) sim.DocLayout {
	lay := l.lay
	if l.rankSlots <= 0 {
		return lay
	}
	slots, all, shared := l.rankSlots, l.allSlots, 0.0
	if gather {
		// One sub-mask: a slot for each query piece once (and its walk's arrays), and every
		// slice; and once, the copy of every rank's keys the plan makes, their order and
		// what building them leaves (about two slots a piece: 64 GPUs of 1-token documents
		// peaked at 149-184 MB, 0.5M pieces).
		slots, all, shared = 2*l.pieces+l.rankSlices, 2*lay.Pieces+l.allSlices, 2*lay.Pieces
	}
	per := max(float64(parallel), 1)
	lay.RankDocs = (min(per*slots, all) + shared) / (4 * per * max(lay.Steps, 1)) // (4 slices a document and step)
	return lay
}

// zigzagLaid is spmd/cp's zigzag layout (ZigzagLayout) of the documents docs of mask m on a
// ring of ring ranks of a world of n, counted from their lengths. A document of L tokens
// is padded to a multiple of 2n and cut into 2 x ring chunks of c = ceil(L/2n) x n/ring
// tokens; k = min(2 ring, ceil(L/c)) of them hold a token, on h = min(k, ring) ranks of
// the ring, two on one rank only where k > ring. A short document is on few ranks: 1-token
// documents are on rank 0 alone, one piece each. sim.ZigzagDocs counts every document as
// long (2 x ring pieces, each rank's every step meeting every document): 64 GPUs of
// 1-token documents were estimated at 19 GiB a case (17 of them the sub-masks, 3 the
// pieces) where the case's heap peaks at 2.3 GB.
//
// A step's sub-mask holds room for its slices alone, at most twice them (spmd/cp subMask;
// it held a slot for each query piece of its rank at every step, rank 0's ring x d slots
// for 1-token documents where one step's holds a slice, 70% of the heap). A slice of a
// document windowed to a pair of its pieces gives at most one slice (the pieces are whole
// chunks of it), so over its steps a rank that holds p pieces of a document meets the
// document's k pieces p x k times (rankSlices; every ring rank's together, allSlices); a
// slice across documents (share_question, causal_blockwise) meets every piece of its
// keys' documents for each piece of its queries'. Each step's walk leaves about a slot a
// query piece of garbage (its arrays, and the room a sparse step's slices are cut from),
// of which the collector lets about walkSteps steps' pile up: a rank's slots are its
// slices and walkSteps x P (P its pieces). That is never above the count of when every
// step held a slot for each piece: ring x P and each piece's slices past one a step, sum
// p (m k - h) over the documents (m the document's slices) and the slices across
// documents, or where those were fewer the walk's arrays in their place; long documents
// (k = 2 ring, p = 2), whose steps fill every piece's slot, give that count, 4 ring slots
// a document, sim.ZigzagDocs' figure. Every ring rank's together likewise, with the
// layout's pieces. TestZigzagLaidBoundsMeasured holds the count to the heap.
func zigzagLaid(n, ring int, docs []mask.Range, m mask.Mask) laid {
	R := max(ring, 1)
	if len(docs) == 0 {
		docs = []mask.Range{{Start: 0, End: max(m.SeqQ, 1)}}
	}
	chunks := func(i int) (k, p float64) { return zigzagChunks(n, R, docs[i].Len()) }
	docOf := func(pos int) int { return sort.Search(len(docs), func(i int) bool { return docs[i].End > pos }) }
	// Each document's slices; those across documents are counted apart. (The slices come
	// in document order: the next slice's document is this one's or the next.)
	perDoc := make([]int32, len(docs))
	var cross []mask.Slice
	i := 0
	for _, s := range m.Slices {
		switch p := s.Q.Start; {
		case i < len(docs) && docs[i].Start <= p && p < docs[i].End:
		case i+1 < len(docs) && docs[i+1].Start <= p && p < docs[i+1].End:
			i++
		default:
			i = docOf(p)
		}
		if i < len(docs) && s.Q.End <= docs[i].End && s.K.Start >= docs[i].Start && s.K.End <= docs[i].End {
			perDoc[i]++
			continue
		}
		cross = append(cross, s)
	}
	var l laid
	extra, allExtra := 0.0, 0.0 // slots past one a query piece and step: a rank's, every rank's
	for i := range docs {
		k, p := chunks(i)
		md := float64(perDoc[i])
		past := max(md*k-min(k, float64(R)), 0)
		l.lay.Pieces += k
		l.pieces += p
		l.rankSlices += p * md * k
		l.allSlices += md * k * k
		extra += p * past
		allExtra += k * past
	}
	if len(cross) > 0 { // prefix sums of the pieces a rank holds of documents, and of all of their pieces
		held, all := make([]float64, len(docs)+1), make([]float64, len(docs)+1)
		for i := range docs {
			k, p := chunks(i)
			held[i+1], all[i+1] = held[i]+p, all[i]+k
		}
		span := func(r mask.Range, sum []float64) float64 {
			if r.Len() <= 0 {
				return 0
			}
			a, b := docOf(r.Start), min(docOf(r.End-1), len(docs)-1)
			return sum[b+1] - sum[min(a, b)]
		}
		for _, s := range cross {
			x, xs, k := span(s.Q, held), span(s.Q, all), span(s.K, all)
			l.rankSlices += x * k
			l.allSlices += xs * k
			extra += x * k
			allExtra += xs * k
		}
	}
	l.cuts = 2 * float64(R) * float64(len(docs))
	l.lay.Steps = float64(R)
	l.rankSlots = zigzagSlots(R, l.pieces, l.rankSlices, extra)
	l.allSlots = zigzagSlots(R, l.lay.Pieces, l.allSlices, allExtra)
	l.lay.RankDocs = l.rankSlots / (4 * float64(R)) // (one rank's; memLayout: the ranks alive at once)
	return l
}

// walkSteps is the steps' walks whose garbage a zigzag rank's heap holds at once (about a
// slot a query piece each; zigzagLaid), measured: 1-token documents on rings of 8 to 64
// ranks peaked at up to 3.4 slots a piece beside their slices and the case's fixed costs
// (64 ranks: 202-212 MB for 524,288 pieces; TestZigzagLaidBoundsMeasured's cases). Rounded
// up, their estimates are 1.2-2.5 times their peaks.
const walkSteps = 6

// zigzagSlots is the slots of ring steps' sub-masks over pieces query pieces that hold
// slices slices, extra of them past one a piece and step (zigzagLaid): the slices and
// walkSteps walks' garbage, never above the slot a piece and step the sub-masks held
// before their room followed their slices, with the slices past it.
func zigzagSlots(ring int, pieces, slices, extra float64) float64 {
	held := float64(ring) * pieces
	return min(slices+float64(min(ring, walkSteps))*pieces, held+max(held, extra))
}

// zigzagChunks are the chunks of a document of L tokens that hold a token when zigzag
// lays it on a ring of R ranks of a world of n (zigzagLaid), and its pieces on one rank
// of them (two only where the chunks are more than the ranks).
func zigzagChunks(n, R, L int) (k, p float64) {
	c := (L + 2*n - 1) / (2 * n) * max(n/R, 1)
	k = float64(min(2*R, (L+c-1)/max(c, 1)))
	if k > float64(R) {
		return k, 2
	}
	return k, 1
}

// zigzagExpected is zigzagLaid before the documents are drawn: docs of them (an expected
// count) over seqlen tokens, each as long as their mean, one slice each. The chunks of a
// document grow more slowly than its length, so documents of the mean length hold about
// as many as the drawn ones; an estimate made before a mask is built, counted again from
// the mask once built.
func zigzagExpected(n, ring int, docs float64, seqlen int) laid {
	R, d := max(ring, 1), max(docs, 1)
	k, p := zigzagChunks(n, R, max(int(math.Ceil(float64(max(seqlen, 1))/d)), 1))
	past := max(k-min(k, float64(R)), 0)
	l := laid{pieces: d * p, rankSlices: d * p * k, allSlices: d * k * k, cuts: 2 * float64(R) * d}
	l.rankSlots = zigzagSlots(R, l.pieces, l.rankSlices, d*p*past)
	l.allSlots = zigzagSlots(R, d*k, l.allSlices, d*k*past)
	l.lay = sim.DocLayout{Pieces: d * k, Steps: float64(R), RankDocs: l.rankSlots / (4 * float64(R))}
	return l
}

// contiguousLaid is the contiguous layout (spmd/cp ContiguousLayout: ring rank r holds
// the r-th of ring equal chunks of the sequence, one piece) of the documents docs of mask
// m: its memory is sim.ContiguousDocs'; its sub-masks, counted from m's slices, hold a
// slice for each chunk of a slice's keys, in each chunk of its queries (a rank of 1-token
// documents meets its own chunk's documents at its own step alone: a slice each).
func contiguousLaid(ring int, docs []mask.Range, m mask.Mask) laid {
	R := max(ring, 1)
	chunk := max(m.SeqQ/R, 1)
	at := func(pos int) int { return min(max(pos, 0)/chunk, R-1) }
	diff := make([]float64, R+1)
	for _, s := range m.Slices {
		if s.Q.Len() <= 0 || s.K.Len() <= 0 {
			continue
		}
		qa, qb := at(s.Q.Start), at(s.Q.End-1)
		x := float64(at(s.K.End-1) - at(s.K.Start) + 1)
		diff[qa] += x
		diff[qb+1] -= x
	}
	most, all, run := 0.0, 0.0, 0.0
	for _, x := range diff[:R] {
		run += x
		most, all = max(most, run), all+run
	}
	return laid{lay: sim.ContiguousDocs(ring, docs, m.SeqQ), pieces: 1, rankSlices: most, allSlices: all}
}

// contiguousExpected is contiguousLaid before the documents are drawn (docs of them, an
// expected count): a rank's chunk meets sim.ContiguousDocsExpected's documents, each in one
// step but the two at its ends, which may reach every other chunk.
func contiguousExpected(ring int, docs float64, seqlen int) laid {
	l := laid{lay: sim.ContiguousDocsExpected(ring, docs, seqlen), pieces: 1}
	l.rankSlices = min(l.lay.RankDocs*l.lay.Steps, l.lay.RankDocs+2*l.lay.Steps)
	l.allSlices = l.rankSlices * l.lay.Steps
	return l
}

// balancedLaid is balanced's layout of docs documents (sim.BalancedDocs): its dispatch holds
// each about once over its ranks, whatever the ranks traced; meshes is how many meshes its
// plan dispatches the mask on to choose one (spmd/cp BalancedMeshChoice: every split of
// up to 8 ranks, unless --cp-ulysses names one).
func balancedLaid(docs, meshes int) laid {
	return laid{lay: sim.BalancedDocs(docs), pieces: 1, rankSlices: 1, allSlices: 1, dispatched: float64(max(docs, 1)) * float64(max(meshes, 1))}
}

// What a case's prediction takes per unit of the work laidSeconds counts, measured (CPU
// seconds of the prediction of one case, sim.Predict and its rows, on the 2-core build
// machine, fwd and bwd or fwd alone: ring-p2p, ring-allgather, ulysses, usp, loongtrain and
// balanced on 8 to 1024 GPUs of causal_document of 1-token and 1- to 64-token documents,
// zigzag and contiguous, share_question, causal_blockwise, prefix_lm_document and the
// default masks' documents): 9-17 ns a traced step walks per slice of the mask (17
// contiguous, where a step's one piece meets every slice before its end; less a query
// piece); 0.13-0.18 us a slice of a traced rank's sub-masks to make it and in each pass to
// count its tiles (0.03 where the sub-masks are small, of long documents); 0.15 us a slice
// of the mask each time its area is taken (the case's FLOPs in every pass, its rows);
// balanced 0.7 us a document and mesh its plan dispatches it on, and as much again for its
// traced ranks and rows. Rounded up about twice: the cases of TestLaidSecondsBoundMeasured
// are estimated at 2.6-3.6 times their time, and every case above at 1.2-10 times (up to 80
// where it is a few milliseconds: sim.Seconds' world and steps); every document on every
// GPU was 2-1000 times.
const (
	scanSeconds         = 40e-9  // a traced step's sub-mask: per slice of the mask it walks
	pieceWalkSeconds    = 10e-9  // and per query piece of its rank
	subMaskSliceSeconds = 0.3e-6 // a slice of a sub-mask, made once
	tileSliceSeconds    = 0.4e-6 // a slice of a traced rank's sub-masks, counted into tiles in each pass
	maskSliceSeconds    = 0.2e-6 // a slice of the mask, each time its area is taken
	cutSeconds          = 8e-9   // the zigzag layout: per chunk of a document
	dispatchDocSeconds  = 2e-6   // balanced: a document of the mask, per mesh dispatched and once more
)

// laidSeconds bounds the CPU time of one case of n GPUs whose layout of the mask (of
// slices slices) is l: sim.Seconds' world, traced steps and sequence, and the documents as
// the case lays them: each traced rank makes walks sub-masks (its ring's steps; ring-allgather
// one, against every rank's keys), each walking the mask's slices and the rank's pieces,
// together holding l.rankSlices slices (made once a ring position where every rank is
// traced: they share them), counted into tiles in every pass; the case's area and FLOPs
// walk the mask's slices; the zigzag layout cuts every document; balanced dispatches each.
// Every rank is traced up to --exact-ranks GPUs, else the sample of its ring's positions
// (sim.TracedSteps on a ring of the layout's length).
func (o *Simulation) laidSeconds(n int, l laid, walks int, slices float64, seqlen int) float64 {
	exact := o.Exact
	if exact <= 0 {
		exact = sim.DefaultExactRanks
	}
	// Traced ranks; the slices their sub-masks make (once a ring position where every rank
	// is traced: they share them) and count into tiles: the most of a rank each, and no more
	// than every ring position's (each traced once, or n/ring times).
	ring := max(int(l.lay.Steps), 1)
	traced := float64(n)
	made, tiled := min(float64(ring)*l.rankSlices, l.allSlices), min(traced*l.rankSlices, float64(max(n/ring, 1))*l.allSlices)
	if n > exact {
		traced = sim.TracedSteps(ring, exact, o.Sampled) / float64(ring)
		made = min(traced*l.rankSlices, l.allSlices)
		tiled = made
	}
	passes := float64(max(len(o.Sweep.Passes), 1))
	slices = max(slices, 1)
	t := sim.Seconds(n, 1, seqlen, len(o.Sweep.Passes), sim.TracedSteps(n, exact, o.Sampled))
	t += traced * float64(max(walks, 1)) * (scanSeconds*slices + pieceWalkSeconds*l.pieces)
	t += subMaskSliceSeconds*made + tileSliceSeconds*tiled*passes
	t += maskSliceSeconds * slices * (2*passes + 1)
	return t + cutSeconds*l.cuts + dispatchDocSeconds*l.dispatched
}
