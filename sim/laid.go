package sim

import (
	"math"
	"sort"

	"github.com/longca/longca/mask"
)

// Laid is what simulate's estimates count of one case's layout of a mask's documents
// over its ring (spmd/cp newPlan), the most of any rank of the ring:
//   - Lay, its memory (MemoryBytesIn), with RankSlots and AllSlots where they are
//     counted (zigzag: MemLayout), the slots one rank's sub-masks hold over its steps and
//     every ring rank's together;
//   - Pieces, the query pieces a rank holds: each of its steps' sub-masks walks them
//     (spmd/cp SubMask) beside the mask's own slices;
//   - RankSlices, the slices its sub-masks hold over all its steps, each made, and
//     counted into tiles by the kernel model in every traced pass; AllSlices, every ring
//     rank's together (1-token documents on a ring of 64: rank 0's are all of them);
//   - Cuts, what laying the documents out loops over (zigzag: 2 x ring chunks of every
//     document, most of them empty for a short one);
//   - Dispatched, balanced's documents times the meshes its plan dispatches them on;
//   - Copies, the ranks that hold each ring position (n/ring: usp's and loongtrain's
//     Ulysses groups), each making its position's sub-masks where they are traced at once;
//   - CrossSlices, the slices across documents among RankSlices (AllCrossSlices: among
//     AllSlices), which grow ring-allgather's one sub-mask past its room (MemLayout).
//
// The time (LaidSeconds) was charged every document on every GPU whatever the layout:
// balanced on 256 GPUs of 1-token documents, 3.3 s measured, was refused as an hour and a
// half.
type Laid struct {
	Lay                   DocLayout
	RankSlots, AllSlots   float64
	Pieces                float64
	RankSlices, AllSlices float64
	Cuts                  float64
	Dispatched            float64
	Copies                float64
	CrossSlices           float64
	AllCrossSlices        float64
}

// MemLayout is l's memory (MemoryBytesIn) for parallel ranks' sub-masks alive at once,
// those of one sub-mask a rank against every rank's keys where gather (ring-allgather):
// where its slots are counted, the ranks together hold no more than every ring rank's
// (every rank traced, the ranks share their ring position's sub-masks; sampled, each
// traced rank forgets its own before the next is traced). 8 GPUs of 1-token documents
// hold rank 0's alone. The ranks of one ring position (Copies: usp's U) walk a step at
// once: they had each made its sub-masks (usp 2x2 of 1M 1-token documents peaked at 774
// MB for share_question and 332 MB for causal_document, estimated at 340 and 273 MB as
// one copy), and since spmd/cp's Plan.cached makes each once (the forty-third session)
// still peak above one copy (531 and 310 MB: the walks' arrays and the room of the ranks
// at the same step), so up to Copies times every ring rank's are counted (1145 and 474
// MB).
func (l Laid) MemLayout(parallel int, gather bool) DocLayout {
	lay := l.Lay
	if l.RankSlots <= 0 {
		return lay
	}
	slots, all, shared := l.RankSlots, l.AllSlots, 0.0
	if gather {
		// One sub-mask: a slot for each query piece once (and its walk's arrays), and every
		// slice; and once, the copy of every rank's keys the plan makes, their order and
		// what building them leaves (about two slots a piece: 64 GPUs of 1-token documents
		// peaked at 149-184 MB, 0.5M pieces). Its room is a slot a query piece: the slices
		// across documents grow it by append, growSlots each as a step's (1M 1-token
		// documents, counted without them: share_question on 2 GPUs 474 MB for a 533 MB
		// peak, causal_blockwise on 8 475 MB for 566).
		slots = 2*l.Pieces + l.RankSlices + growSlots*l.CrossSlices
		all = 2*lay.Pieces + l.AllSlices + growSlots*l.AllCrossSlices
		shared = 2 * lay.Pieces
	}
	per := max(float64(parallel), 1)
	all *= min(max(l.Copies, 1), per)
	lay.RankDocs = (min(per*slots, all) + shared) / (4 * per * max(lay.Steps, 1)) // (4 slices a document and step)
	return lay
}

// ZigzagLaid is spmd/cp's zigzag layout (ZigzagLayout) of the documents docs of mask m on a
// ring of ring ranks of a world of n, counted from their lengths. A document of L tokens
// is padded to a multiple of 2n and cut into 2 x ring chunks of c = ceil(L/2n) x n/ring
// tokens; k = min(2 ring, ceil(L/c)) of them hold a token, on h = min(k, ring) ranks of
// the ring, two on one rank only where k > ring (ZigzagChunks). A short document is on few
// ranks: 1-token documents are on rank 0 alone, one piece each. ZigzagDocs counts every
// document as long (2 x ring pieces, each rank's every step meeting every document): 64
// GPUs of 1-token documents were estimated at 19 GiB a case (17 of them the sub-masks, 3
// the pieces) where the case's heap peaks at 2.3 GB.
//
// A step's sub-mask holds room for its slices alone, at most twice them (spmd/cp subMask;
// it held a slot for each query piece of its rank at every step, rank 0's ring x d slots
// for 1-token documents where one step's holds a slice, 70% of the heap). A slice of a
// document windowed to a pair of its pieces gives at most one slice (the pieces are whole
// chunks of it), so over its steps a rank that holds p pieces of a document meets the
// document's k pieces p x k times (RankSlices; every ring rank's together, AllSlices); a
// slice across documents (share_question, causal_blockwise) meets every piece of its
// keys' documents for each piece of its queries'; a step's sub-mask is given room for a
// slice a query piece, so the slices across documents (past it) grow it by append, which
// allocates about 5 times what it grows by (1.25x each time: a step of 1M 1-token
// share_question documents grew from 1M to 2.4M slots over four arrays): growSlots
// slots each of one step's (for each query piece, the keys' pieces on one rank), beside
// the cap below. Each step's walk leaves about a slot a
// query piece of garbage (its arrays, and the room a sparse step's slices are cut from),
// of which the collector lets about walkSteps steps' pile up: a rank's slots are its
// slices and walkSteps x P (P its pieces). That is never above the count of when every
// step held a slot for each piece: ring x P and each piece's slices past one a step, sum
// p (m k - h) over the documents (m the document's slices) and the slices across
// documents, or where those were fewer the walk's arrays in their place; long documents
// (k = 2 ring, p = 2), whose steps fill every piece's slot, give that count, 4 ring slots
// a document, ZigzagDocs' figure. Every ring rank's together likewise, with the layout's
// pieces. TestZigzagLaidBoundsMeasured holds the count to the heap.
func ZigzagLaid(n, ring int, docs []mask.Range, m mask.Mask) Laid {
	R := max(ring, 1)
	if len(docs) == 0 {
		docs = []mask.Range{{Start: 0, End: max(m.SeqQ, 1)}}
	}
	chunks := func(i int) (k, p float64) { return ZigzagChunks(n, R, docs[i].Len()) }
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
	var l Laid
	extra, allExtra := 0.0, 0.0 // slots past one a query piece and step: a rank's, every rank's
	for i := range docs {
		k, p := chunks(i)
		md := float64(perDoc[i])
		past := max(md*k-min(k, float64(R)), 0)
		l.Lay.Pieces += k
		l.Pieces += p
		l.RankSlices += p * md * k
		l.AllSlices += md * k * k
		extra += p * past
		allExtra += k * past
	}
	grow, allGrow := 0.0, 0.0 // slices across documents at one step: the room a sub-mask grows by
	if len(cross) > 0 {       // prefix sums of the pieces a rank holds of documents, and of all of their pieces
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
			l.RankSlices += x * k
			l.AllSlices += xs * k
			l.CrossSlices += x * k
			l.AllCrossSlices += xs * k
			kr := span(s.K, held) // (the keys' pieces on one rank: its one step's)
			grow += x * kr
			allGrow += xs * kr
		}
		extra, allExtra = extra+l.CrossSlices, allExtra+l.AllCrossSlices // (each a slot past its piece's)
	}
	l.Cuts = 2 * float64(R) * float64(len(docs))
	l.Lay.Steps = float64(R)
	l.RankSlots = zigzagSlots(R, l.Pieces, l.RankSlices, extra) + growSlots*grow
	l.AllSlots = zigzagSlots(R, l.Lay.Pieces, l.AllSlices, allExtra) + growSlots*allGrow
	l.Copies = float64(max(n/R, 1))
	l.Lay.RankDocs = l.RankSlots / (4 * float64(R)) // (one rank's; MemLayout: the ranks alive at once)
	return l
}

// walkSteps is the steps' walks whose garbage a zigzag rank's heap holds at once (about a
// slot a query piece each; ZigzagLaid), measured: 1-token documents on rings of 8 to 64
// ranks peaked at up to 3.4 slots a piece beside their slices and the case's fixed costs
// (64 ranks: 202-212 MB for 524,288 pieces; TestZigzagLaidBoundsMeasured's cases). Rounded
// up, their estimates are 1.2-2.5 times their peaks. Since spmd/cp keeps a walk's arrays
// for the next walk (slicesCrossing's, 5.7 MB a step of 65,536 1-token pieces before), a
// prediction of 64 ranks of 1-token documents allocates 0.2 GB where it allocated 7.2 GB,
// and peaks at 129-164 MB (177-185 before): 4 walks would still bound every case measured
// (at 1.2-2.6 times), left at 6 for the peaks' spread.
const walkSteps = 6

// growSlots is what a slice across documents costs its step's sub-mask beside its own
// slot (ZigzagLaid): the arrays append leaves as the room grows past a slice a query
// piece, which the collector lets pile up with the walks'. share_question of 1-token
// documents on a ring of 2 ranks peaked at 529 MB where its slices and walks were counted
// at 340 MB (1M pieces, each with a slice of its own and one across to the question):
// about 3 slots each more; rounded up.
const growSlots = 4

// zigzagSlots is the slots of ring steps' sub-masks over pieces query pieces that hold
// slices slices, extra of them past one a piece and step (ZigzagLaid): the slices and
// walkSteps walks' garbage, never above the slot a piece and step the sub-masks held
// before their room followed their slices, with the slices past it.
func zigzagSlots(ring int, pieces, slices, extra float64) float64 {
	held := float64(ring) * pieces
	return min(slices+float64(min(ring, walkSteps))*pieces, held+max(held, extra))
}

// ZigzagChunks are the chunks k of a document of L tokens that hold a token when zigzag
// lays it on a ring of R ranks of a world of n (ZigzagLaid), and its pieces p on one rank
// of them (two only where the chunks are more than the ranks).
func ZigzagChunks(n, R, L int) (k, p float64) {
	c := (L + 2*n - 1) / (2 * n) * max(n/R, 1)
	k = float64(min(2*R, (L+c-1)/max(c, 1)))
	if k > float64(R) {
		return k, 2
	}
	return k, 1
}

// ZigzagLaidExpected is ZigzagLaid before the documents are drawn: docs of them (an
// expected count) over seqlen tokens, each as long as their mean, one slice each. The
// chunks of a document grow more slowly than its length, so documents of the mean length
// hold about as many as the drawn ones; an estimate made before a mask is built, counted
// again from the mask once built.
func ZigzagLaidExpected(n, ring int, docs float64, seqlen int) Laid {
	R, d := max(ring, 1), max(docs, 1)
	k, p := ZigzagChunks(n, R, max(int(math.Ceil(float64(max(seqlen, 1))/d)), 1))
	past := max(k-min(k, float64(R)), 0)
	l := Laid{Pieces: d * p, RankSlices: d * p * k, AllSlices: d * k * k, Cuts: 2 * float64(R) * d, Copies: float64(max(n/R, 1))}
	l.RankSlots = zigzagSlots(R, l.Pieces, l.RankSlices, d*p*past)
	l.AllSlots = zigzagSlots(R, d*k, l.AllSlices, d*k*past)
	l.Lay = DocLayout{Pieces: d * k, Steps: float64(R), RankDocs: l.RankSlots / (4 * float64(R))}
	return l
}

// ContiguousLaid is the contiguous layout (spmd/cp ContiguousLayout: ring rank r holds
// the r-th of ring equal chunks of the sequence, one piece) of the documents docs of mask
// m: its memory is ContiguousDocs'; its sub-masks, counted from m's slices, hold a
// slice for each chunk of a slice's keys, in each chunk of its queries (a rank of 1-token
// documents meets its own chunk's documents at its own step alone: a slice each).
func ContiguousLaid(ring int, docs []mask.Range, m mask.Mask) Laid {
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
	return Laid{Lay: ContiguousDocs(ring, docs, m.SeqQ), Pieces: 1, RankSlices: most, AllSlices: all}
}

// ContiguousLaidExpected is ContiguousLaid before the documents are drawn (docs of them,
// an expected count): a rank's chunk meets ContiguousDocsExpected's documents, each in one
// step but the two at its ends, which may reach every other chunk.
func ContiguousLaidExpected(ring int, docs float64, seqlen int) Laid {
	l := Laid{Lay: ContiguousDocsExpected(ring, docs, seqlen), Pieces: 1}
	l.RankSlices = min(l.Lay.RankDocs*l.Lay.Steps, l.Lay.RankDocs+2*l.Lay.Steps)
	l.AllSlices = l.RankSlices * l.Lay.Steps
	return l
}

// BalancedLaid is balanced's layout of docs documents (BalancedDocs): its dispatch holds
// each about once over its ranks, whatever the ranks traced; meshes is how many meshes its
// plan dispatches the mask on to choose one (spmd/cp BalancedMeshChoice: every split of
// up to 8 ranks, unless --cp-ulysses names one).
func BalancedLaid(docs, meshes int) Laid {
	return Laid{Lay: BalancedDocs(docs), Pieces: 1, RankSlices: 1, AllSlices: 1, Dispatched: float64(max(docs, 1)) * float64(max(meshes, 1))}
}

// What a case's prediction takes per unit of the work LaidSeconds counts, measured (CPU
// seconds of the prediction of one case, Predict and its rows, on the 2-core build
// machine, fwd and bwd or fwd alone: ring-p2p, ring-allgather, ulysses, usp, loongtrain and
// balanced on 8 to 1024 GPUs of causal_document of 1-token and 1- to 64-token documents,
// zigzag and contiguous, share_question, causal_blockwise, prefix_lm_document and the
// default masks' documents): 9-17 ns a traced step walks per slice of the mask (17
// contiguous, where a step's one piece meets every slice before its end; less a query
// piece); 0.13-0.18 us a slice of a traced rank's sub-masks to make it and in each pass to
// count its tiles (0.03 where the sub-masks are small, of long documents); 0.15 us a slice
// of the mask each time its area is taken (the case's FLOPs in every pass, its rows);
// balanced 0.7 us a document and mesh its plan dispatches it on, and as much again for its
// traced ranks and rows. Rounded up about twice: the cases of session's
// TestLaidSecondsBoundMeasured are estimated at 2.6-3.6 times their time, and every case
// above at 1.2-10 times (up to 80 where it is a few milliseconds: Seconds' world and
// steps); every document on every GPU was 2-1000 times.
const (
	scanSeconds         = 40e-9  // a traced step's sub-mask: per slice of the mask it walks
	pieceWalkSeconds    = 10e-9  // and per query piece of its rank
	subMaskSliceSeconds = 0.3e-6 // a slice of a sub-mask, made once
	tileSliceSeconds    = 0.4e-6 // a slice of a traced rank's sub-masks, counted into tiles in each pass
	maskSliceSeconds    = 0.2e-6 // a slice of the mask, each time its area is taken
	cutSeconds          = 8e-9   // the zigzag layout: per chunk of a document
	dispatchDocSeconds  = 2e-6   // balanced: a document of the mask, per mesh dispatched and once more
)

// LaidSeconds bounds the CPU time of one case of n GPUs whose layout of the mask (of
// slices slices, on a sequence of seqlen tokens) is l, predicted in passes passes with
// exact and sampled (Options.ExactRanks, Options.SampledRanks; 0 for their defaults):
// Seconds' world, traced steps and sequence, and the documents as the case lays them:
// each traced rank makes walks sub-masks (its ring's steps; ring-allgather one, against
// every rank's keys), each walking the mask's slices and the rank's pieces, together
// holding l.RankSlices slices (made once a ring position where every rank is traced: they
// share them), counted into tiles in every pass; the case's area and FLOPs walk the mask's
// slices; the zigzag layout cuts every document; balanced dispatches each. Every rank is
// traced up to exact GPUs, else the sample of its ring's positions (TracedSteps on a ring
// of the layout's length).
func LaidSeconds(n int, l Laid, walks int, slices float64, seqlen, passes, exact, sampled int) float64 {
	if exact <= 0 {
		exact = DefaultExactRanks
	}
	// Traced ranks; the slices their sub-masks make (once a ring position where every rank
	// is traced: they share them) and count into tiles: the most of a rank each, and no more
	// than every ring position's (each traced once, or n/ring times).
	ring := max(int(l.Lay.Steps), 1)
	traced := float64(n)
	made, tiled := min(float64(ring)*l.RankSlices, l.AllSlices), min(traced*l.RankSlices, float64(max(n/ring, 1))*l.AllSlices)
	if n > exact {
		traced = TracedSteps(ring, exact, sampled) / float64(ring)
		made = min(traced*l.RankSlices, l.AllSlices)
		tiled = made
	}
	tiles := float64(max(passes, 1))
	slices = max(slices, 1)
	t := Seconds(n, 1, seqlen, passes, TracedSteps(n, exact, sampled))
	t += traced * float64(max(walks, 1)) * (scanSeconds*slices + pieceWalkSeconds*l.Pieces)
	t += subMaskSliceSeconds*made + tileSliceSeconds*tiled*tiles
	t += maskSliceSeconds * slices * (2*tiles + 1)
	return t + cutSeconds*l.Cuts + dispatchDocSeconds*l.Dispatched
}
