package sim

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// DefaultExactRanks is the largest world simulated rank by rank; above it a sample of
// ranks is simulated with mirrored peers (Options.ExactRanks).
const DefaultExactRanks = 16

// sampledRanks is how many ranks a sampled simulation traces when Options.SampledRanks
// is 0: a rank's trace costs its ring length times the documents (every step's
// sub-mask), so long rings get fewer: 1024/ring, between 4 and 16. With zigzag sharding
// the ranks are alike: at 64 GPUs 4 to 16 sampled ranks and all 64 agree within 1.3%
// (docs/simulate.md).
func sampledRanks(ring int) int {
	return min(max(1024/max(ring, 1), 4), 16)
}

// Options are a prediction's model.
type Options struct {
	Machine Machine
	Kernel  KernelModel
	// ExactRanks: worlds up to this size are simulated rank by rank (every rank traced,
	// every message matched); larger ones from SampledRanks traced ranks (ring positions
	// spread over the ring, the ranks at node boundaries among them), each simulated with
	// mirrored peers, the slowest taken. 0 means DefaultExactRanks.
	ExactRanks int
	// SampledRanks bounds the ranks traced in a sampled simulation (0: 16, fewer on long
	// rings; see sampledRanks).
	SampledRanks int
	// PartialDType is the dtype of the kernel's per-step outputs (0: the problem's).
	PartialDType tensor.DType
	// Tiles remembers sub-masks' tiles across predictions (nil: one cache per Predict).
	Tiles *TileCache
}

// Prediction is one pass of one method on one problem.
type Prediction struct {
	Pass kernels.Pass
	// Seconds is the slowest rank's time; TFLOPsPerRank the mask's FLOPs over (ranks x
	// Seconds), MASKS.md's per-GPU figure.
	Seconds       float64
	TFLOPsPerRank float64
	// Slowest is the slowest simulated rank.
	Slowest RankResult
	// ExposedShare is the slowest rank's time waiting on communication over Seconds.
	ExposedShare float64
	// Bottleneck is "compute" when less than 5% of the time waits on communication, else
	// the link class that limited most of the waiting ("inter", "intra", "local").
	Bottleneck string
	// CommBytes is what each rank sends (the method's CommBytes: the most, for a method
	// whose ranks send different amounts); CountedBytes what the traced communicators
	// counted: the first traced rank's count that differs from its own claim
	// (cp.RankCommBytesOf; CommBytes is then that claim), else CommBytes (they agree
	// unless the method moves what it does not claim).
	CommBytes, CountedBytes int64
	// Traced is how many ranks were traced; Sampled says they were a sample simulated with
	// mirrored peers.
	Traced  int
	Sampled bool
}

// Predict traces method on the configuration and problem (the method's own Plan,
// Forward and Backward, run against placeholder tensors and a recording communicator)
// and simulates each pass on o's machine and kernel model.
func Predict(ctx context.Context, method cp.Method, cfg cp.Config, p kernels.Problem, passes []kernels.Pass, o Options) (*cp.Plan, []Prediction, error) {
	if err := o.Machine.Validate(); err != nil {
		return nil, nil, fmt.Errorf("machine %s: %w", o.Machine.Name, err)
	}
	if err := o.Machine.CheckRanges(); err != nil {
		return nil, nil, fmt.Errorf("machine %s: %w", o.Machine.Name, err)
	}
	pl, err := method.Plan(cfg, p)
	if err != nil {
		return nil, nil, err
	}
	// The trace counts bytes in int64 (a tensor's, a collective's times its ranks, a rank's
	// sum over steps): a tensor of the whole sequence in fp32 (the largest any method
	// makes) stays 128 times inside it. longca's flags hold heads and head dim to 1024 and
	// masks to 2G tokens: 2^53 bytes.
	if b := 4 * float64(p.Mask.SeqQ) * float64(max(p.HeadsQ, p.HeadsKV)) * float64(p.HeadDim); !(b <= maxTensorBytes) {
		return pl, nil, results.Usagef("%d tokens x %d:%d heads x head dim %d: a tensor of %.3g bytes, past the %.3g the simulation counts in int64: give fewer tokens, heads or a smaller head dim",
			p.Mask.SeqQ, p.HeadsQ, p.HeadsKV, p.HeadDim, b, float64(maxTensorBytes))
	}
	n := pl.Config.Ranks
	exact := o.ExactRanks
	if exact <= 0 {
		exact = DefaultExactRanks
	}
	traced := sampleRanks(pl, o.Machine, n <= exact, o.SampledRanks)
	traces, counted, err := record(ctx, method, pl, traced, passes, o)
	if err != nil {
		return pl, nil, err
	}
	w := traces.world
	nw := newNetwork(o.Machine, w)
	var out []Prediction
	for pi, pass := range passes {
		ts := traces.byPass[pi]
		var res []RankResult
		if n <= exact {
			if res, err = newSimulator(o.Machine, nw, ts, false).run(); err != nil {
				return pl, nil, fmt.Errorf("%s %s: %w", pl.Method, pass, err)
			}
		} else {
			for _, t := range ts {
				r, err := newSimulator(o.Machine, nw, []rankTrace{t}, true).run()
				if err != nil {
					return pl, nil, fmt.Errorf("%s %s: %w", pl.Method, pass, err)
				}
				res = append(res, r...)
			}
		}
		slow := res[0]
		for _, r := range res[1:] {
			if r.Seconds > slow.Seconds {
				slow = r
			}
		}
		if !(slow.Seconds <= MaxPredictedSeconds) { // (NaN too)
			return pl, nil, results.Usagef("%s %s: predicted to take %.3g s, past a year, the longest a row records: the machine (--machine, the link flags) or the kernel rates (--kernel-rows, --calibrate) are too slow for this case",
				pl.Method, pass, slow.Seconds)
		}
		if slow.Seconds > 0 && slow.Seconds < 1e-9 { // a row's time.Duration of 0, an infinite rate
			return pl, nil, results.Usagef("%s %s: predicted to take %.3g s, under the nanosecond a row records: the machine (--machine, the link flags) or the kernel rates (--kernel-rows, --calibrate) are too fast for this case",
				pl.Method, pass, slow.Seconds)
		}
		pr := Prediction{Pass: pass, Seconds: slow.Seconds, Slowest: slow, Traced: len(traced), Sampled: n > exact,
			CommBytes: cp.CommBytesOf(pl, pass)}
		pr.CountedBytes = pr.CommBytes
		for ti, b := range counted[pi] {
			if want := cp.RankCommBytesOf(pl, traced[ti], pass); b != want {
				pr.CommBytes, pr.CountedBytes = want, b
				break
			}
		}
		if slow.Seconds > 0 {
			pr.TFLOPsPerRank = p.FLOPs(pass) / float64(n) / slow.Seconds / 1e12
			pr.ExposedShare = slow.Exposed / slow.Seconds
		}
		pr.Bottleneck = bottleneck(slow, pr.ExposedShare)
		out = append(out, pr)
	}
	return pl, out, nil
}

// maxTensorBytes bounds a problem's largest tensor (Predict): 2^56 bytes.
const maxTensorBytes = 1 << 56

// MaxPredictedSeconds is the longest predicted time a row records: a year, far inside
// time.Duration's 292 (a time past that wrapped to a row of -9.2e12 ms, exit 0).
const MaxPredictedSeconds = 365.25 * 24 * 3600

// bottleneck names what limits a rank: compute, or the link class behind most of its
// waiting.
func bottleneck(r RankResult, share float64) string {
	if share < 0.05 {
		return "compute"
	}
	best := ClassSelf
	for c := ClassLocal; c < numClasses; c++ {
		if r.ExposedBy[c] > r.ExposedBy[best] {
			best = c
		}
	}
	if best == ClassSelf {
		return "compute"
	}
	return best.String()
}

// rankOf is the world rank at mesh place (u, r) (the inverse of Plan.Coords).
func rankOf(pl *cp.Plan, u, r int) int {
	c := pl.Config
	if c.HeadFirst {
		return r*c.Ulysses + u
	}
	return u*c.Ring + r
}

// sampleRanks lists the ranks to trace: all of them, or ring positions spread over the
// ring (its ends and middle, the first node boundary on each side, then evenly spaced)
// on the first Ulysses rank. The other Ulysses ranks of a ring position walk the same
// sub-masks over links of the same classes (a Ulysses group sits inside a node, or
// spans whole nodes), so they are not traced.
func sampleRanks(pl *cp.Plan, m Machine, all bool, limit int) []int {
	n := pl.Config.Ranks
	if all {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	if limit <= 0 {
		limit = sampledRanks(pl.Config.Ring)
	}
	ring := pl.Config.Ring
	pos := []int{0, ring - 1, ring / 2}
	for r := 1; r < ring; r++ {
		if m.Node(rankOf(pl, 0, r)) != m.Node(rankOf(pl, 0, r-1)) {
			pos = append(pos, r-1, r)
			break
		}
	}
	for step := max(ring/limit, 1); len(pos) < limit; {
		added := false
		for r := step / 2; r < ring && len(pos) < limit; r += step {
			if !slices.Contains(pos, r) {
				pos = append(pos, r)
				added = true
			}
		}
		if !added {
			break
		}
		step = max(step/2, 1)
	}
	set := map[int]bool{}
	for _, r := range pos {
		set[rankOf(pl, 0, r)] = true
	}
	// balanced's ranks differ in what they fetch (their work is equal): trace the ones
	// that fetch the most.
	if d := pl.Dispatch; d != nil {
		byFetch := make([]int, d.Ranks) // ring ranks
		for i := range byFetch {
			byFetch[i] = i
		}
		sort.SliceStable(byFetch, func(a, b int) bool { return d.Fetched[byFetch[a]] > d.Fetched[byFetch[b]] })
		for _, r := range byFetch[:min(len(byFetch), max(limit/4, 2))] {
			set[rankOf(pl, 0, r)] = true
		}
	}
	out := make([]int, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sort.Ints(out)
	return out
}

// recorded are the traces of a run: per pass, the traced ranks' traces.
type recorded struct {
	world  *traceWorld
	byPass [][]rankTrace
}

// record runs the method's code on every rank of the plan's world (the splits need all
// of them) and traces the given ranks' passes. It returns, per pass and traced rank, the
// bytes its communicators counted.
func record(ctx context.Context, method cp.Method, pl *cp.Plan, traced []int, passes []kernels.Pass, o Options) (recorded, [][]int64, error) {
	n := pl.Config.Ranks
	all := len(traced) == n // every rank: the sub-masks are shared, keep them
	w := newTraceWorld(n)
	tiles := o.Tiles
	if tiles == nil {
		tiles = &TileCache{}
	}
	c := modelCosts{km: o.Kernel, m: o.Machine, tiles: tiles}
	recs := make([]*recorder, n)
	isTraced := map[int]bool{}
	for _, r := range traced {
		recs[r] = newRecorder(r, c, o.PartialDType)
		isTraced[r] = true
	}
	comms := w.comms(recs)
	out := recorded{world: w, byPass: make([][]rankTrace, len(passes))}
	for i := range out.byPass {
		out.byPass[i] = make([]rankTrace, len(traced))
	}
	counted := make([][]int64, len(passes))
	for i := range counted {
		counted[i] = make([]int64, len(traced))
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	// Traced ranks walk their steps a few at a time, each forgetting its sub-masks after:
	// at 512 ranks one rank's document sub-masks take tens of megabytes.
	busy := make(chan struct{}, max(runtime.GOMAXPROCS(0), 1))
	for rank := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := recs[rank]
			k := rec
			if k == nil {
				k = newRecorder(rank, c, o.PartialDType) // takes part in the splits only
			}
			run, err := cp.NewRun(pl, k, comms[rank])
			if err != nil {
				errs[rank] = err
				return
			}
			defer run.Close()
			if rec == nil {
				return
			}
			ti := slices.Index(traced, rank)
			busy <- struct{}{}
			ts, bytes, err := tracePasses(ctx, method, run, rec, passes)
			rec.last = lastTiles{} // let the rank's large sub-mask go
			if !all {
				pl.ForgetSteps(run.R)
			}
			<-busy
			if err != nil {
				errs[rank] = fmt.Errorf("rank %d: %w", rank, err)
				return
			}
			for pi := range passes {
				out.byPass[pi][ti] = ts[pi]
				counted[pi][ti] = bytes[pi]
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return out, nil, err
		}
	}
	return out, counted, nil
}

// tracePasses records each pass on one rank: fwd alone; bwd after an untraced forward
// (as longca cp times it); fwd+bwd both.
func tracePasses(ctx context.Context, method cp.Method, run *cp.Run, rec *recorder, passes []kernels.Pass) ([]rankTrace, []int64, error) {
	pl := run.Plan
	shape := func(h int) []int { return []int{pl.Tokens, h, pl.Problem.HeadDim} }
	dt := pl.Problem.DType
	hq, hkv := pl.Problem.HeadsQ, pl.Problem.HeadsKV
	var ts []tensor.Tensor
	for _, s := range [][]int{shape(hq), shape(hkv), shape(hkv), shape(hq), shape(hq), {hq, pl.Tokens}, shape(hq), shape(hkv), shape(hkv)} {
		d := dt
		if len(s) == 2 {
			d = tensor.FP32
		}
		t, _ := rec.Alloc(d, s...)
		ts = append(ts, t)
	}
	q, k, v, dout, out, lse, dq, dk, dv := ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6], ts[7], ts[8]
	fwd := func() error { return method.Forward(ctx, run, q, k, v, out, lse) }
	bwd := func() error { return method.Backward(ctx, run, q, k, v, out, lse, dout, dq, dk, dv) }
	traces := make([]rankTrace, len(passes))
	bytes := make([]int64, len(passes))
	for i, pass := range passes {
		var body func() error
		switch pass {
		case kernels.Fwd:
			body = fwd
		case kernels.Bwd:
			rec.reset()
			if err := fwd(); err != nil { // the saved forward the backward uses
				return nil, nil, err
			}
			body = bwd
		default:
			body = func() error {
				if err := fwd(); err != nil {
					return err
				}
				return bwd()
			}
		}
		rec.reset()
		before := run.Counters().BytesSent
		if err := body(); err != nil {
			return nil, nil, err
		}
		bytes[i] = run.Counters().BytesSent - before
		traces[i] = rec.take()
	}
	return traces, bytes, nil
}

// modelCosts prices compute with the kernel model and the machine's helper costs.
type modelCosts struct {
	km    KernelModel
	m     Machine
	tiles *TileCache
}

func (c modelCosts) kernelTime(pass kernels.Pass, p kernels.Problem, last *lastTiles) (float64, float64) {
	t := last.of(c.tiles, p.Mask, c.km.TileQ, c.km.TileK)
	flops := 4 * float64(t.Area) * float64(p.HeadsQ) * float64(p.HeadDim) * pass.FLOPsFactor()
	host := (c.m.StepUs + c.m.StepSliceUs*float64(len(p.Mask.Slices))) * 1e-6
	return c.km.TimeOn(pass, t, p.HeadsQ, p.HeadDim)*c.m.computeScale() + host, flops
}

func (c modelCosts) helperTime(launches int, bytes int64) float64 {
	h := c.m.Helpers
	return (float64(launches)*h.LaunchUs*1e-6 + float64(bytes)/(h.BandwidthGBs*1e9)) * c.m.computeScale()
}

// TracedSteps bounds the (traced rank, ring step) pairs one case of n ranks holds in its
// traces: every rank through up to n steps when n <= exact (Options.ExactRanks);
// otherwise, on a ring of any length R <= n, the sampled ranks (sampled, or
// sampledRanks(R); at least the ring's 5 fixed positions) and balanced's most-fetching
// ones, R steps each. Each pair holds a step's events (kernel, transfer, helpers) in every
// traced pass, and, simulated, their event states: MemoryBytes and Seconds count it.
func TracedSteps(n, exact, sampled int) float64 {
	if n < 1 {
		return 0
	}
	if exact <= 0 {
		exact = DefaultExactRanks
	}
	if n <= exact {
		return float64(n) * float64(n)
	}
	held := func(r int) float64 {
		lim := sampled
		if lim <= 0 {
			lim = sampledRanks(r)
		}
		return float64(min(r, max(lim, 5)+max(lim/4, 2)))
	}
	// held(R)*R grows with R while sampledRanks(R) stays put: the most is at n or at the
	// top of a band of sampledRanks (1024/k for k = 4..16).
	best := held(n) * float64(n)
	for k := 4; k <= 16; k++ {
		if r := 1024 / k; r < n {
			best = max(best, held(r)*float64(r))
		}
	}
	return best
}

// MemoryBytes bounds the host memory (resident, with the collector's headroom) that the
// simulation of one case takes, for a world of n ranks, a mask of docs documents (1
// without), steps traced (rank, step) pairs (TracedSteps) and passes traced passes
// (PassWeight), of which parallel ranks' sub-masks are alive at once (every rank's when
// all are traced: they are shared then):
//   - the zigzag layout (2 pieces of every document per ring rank) and the all-gather's
//     copy of it;
//   - the sub-masks: a step's holds a few slices per document, a rank walks up to n steps;
//   - the traces: a step's events in each pass, and their states in the event simulation
//     (every traced rank at once when all are: 1024 exact ranks of ring-p2p, fwd and bwd,
//     took 4.8 GB, 4.6 KB per rank and step; the estimate had no such term and let 4096
//     exact ranks run out of memory);
//   - the world itself: every rank runs the method's code in its own goroutine with its
//     own communicator and plan view, which grows as n per rank.
//
// Fitted to peak resident memory (longca simulate --exact-ranks N --samples 1, the
// default sizes; docs/simulate.md): 1.4x-1.8x above it at 128 to 1024 ranks on full and
// causal, 1.4x-2x on the document masks; the sampled world measured ring-p2p on full at
// 0.53 GB on 8192 GPUs and 2.1 GB on 16384.
//
// It is the worst layout, zigzag on a ring of all n ranks (MemoryBytesIn with
// ZigzagDocs(n, docs)).
func MemoryBytes(n, docs int, steps float64, passes, parallel int) float64 {
	return MemoryBytesIn(n, ZigzagDocs(n, docs), steps, passes, parallel)
}

// DocLayout is how one case lays its mask's documents over its ring, what MemoryBytesIn
// counts of them: the pieces the layout cuts the documents into, and, for one rank, the
// ring steps it walks and the documents each step's sub-mask may hold.
type DocLayout struct {
	Pieces   float64 // the layout's pieces of documents
	Steps    float64 // ring steps a rank walks, each with a sub-mask
	RankDocs float64 // the documents one step's sub-mask may hold
	// Dispatched are the documents that every rank's sub-masks hold together, about once
	// each, whatever the ranks traced (balanced's dispatch, BalancedDocs); 0 for a ring's
	// layout.
	Dispatched float64
}

// ZigzagDocs is the zigzag layout of docs documents on a ring of ring ranks: every
// document cut into 2 x ring pieces, every rank holding two of each, so every one of its
// ring steps' sub-masks meets every document.
func ZigzagDocs(ring, docs int) DocLayout {
	d, r := float64(max(docs, 1)), float64(max(ring, 1))
	return DocLayout{Pieces: 2 * d * r, Steps: r, RankDocs: d}
}

// ContiguousDocs is the contiguous layout of docs (their ranges, on a sequence of seqlen
// tokens) on a ring of ring ranks: a document is cut only where a rank's chunk ends, and
// a rank's step meets at most the documents of one chunk (chunkDocs, the most of any). A
// rank of short documents holds a few hundred where zigzag gives it every document of the
// sequence: 256 GPUs of documents of 1 to 64 tokens peaked at 70 MB, and were refused as
// needing 18.5 GiB.
func ContiguousDocs(ring int, docs []mask.Range, seqlen int) DocLayout {
	r := max(ring, 1)
	return DocLayout{Pieces: float64(max(len(docs), 1) + r), Steps: float64(r), RankDocs: float64(ChunkDocs(docs, seqlen, r))}
}

// ContiguousDocsExpected is ContiguousDocs before the documents are drawn: docs of them
// (an expected count, harness.MaskDocs) over seqlen tokens, a chunk meeting its share of
// them and one more at each end. A chunk of the sequence's shortest documents may meet
// more: an estimate made before a mask is built, counted again from the mask once built.
func ContiguousDocsExpected(ring int, docs float64, seqlen int) DocLayout {
	r, d := max(ring, 1), max(docs, 1)
	chunk := math.Ceil(float64(max(seqlen, 1)) / float64(r))
	return DocLayout{Pieces: d + float64(r), Steps: float64(r), RankDocs: min(d, math.Ceil(chunk*d/float64(max(seqlen, 1)))+2)}
}

// BalancedDocs is balanced's layout of docs documents (spmd/cp Balance): its blocks are
// cut from the sequence, not from the documents, and each dispatch rank's sub-masks hold
// the documents of its own rows, so all of them together hold each document about once;
// the plan builds every rank's, whatever the ranks traced, and Predict holds them with
// the traced ranks' stage sub-masks (Dispatched, dispatchDocBytes a document). A document
// that spans blocks adds a slice for each pair of its blocks: BlockWork counts those. It
// had been counted as zigzag on every rank: 18.8 GiB for 256 GPUs of 1- to 64-token
// documents (64,509 of them), where the case's heap peaks at 15 MB.
func BalancedDocs(docs int) DocLayout {
	return DocLayout{Steps: 1, RankDocs: 1, Dispatched: float64(max(docs, 1))}
}

// ChunkDocs is the most documents (ranges, in order) that meet one of ring equal chunks of
// seqlen tokens; 1 without documents.
func ChunkDocs(docs []mask.Range, seqlen, ring int) int {
	if len(docs) == 0 || ring <= 1 || seqlen < ring {
		return max(len(docs), 1)
	}
	chunk := (seqlen + ring - 1) / ring
	most, i := 1, 0
	for c := 0; c*chunk < seqlen; c++ {
		lo, hi := c*chunk, min((c+1)*chunk, seqlen)
		for i < len(docs) && docs[i].End <= lo { // documents that end before this chunk
			i++
		}
		n := 0
		for j := i; j < len(docs) && docs[j].Start < hi; j++ {
			n++
		}
		most = max(most, n)
	}
	return most
}

// MemoryBytesIn is MemoryBytes with the case's own layout of the documents, lay.
func MemoryBytesIn(n int, lay DocLayout, steps float64, passes, parallel int) float64 {
	r := float64(max(n, 0))
	layout := 2 * lay.Pieces * pieceBytes                                                             // the layout and the all-gather's keys
	subMasks := float64(max(parallel, 1)) * 4 * max(lay.RankDocs, 1) * max(lay.Steps, 1) * sliceBytes // each live rank's step sub-masks
	traces := max(steps, 0) * float64(max(passes, 1)) * stepPassBytes                                 // each traced step's events, per pass
	world := worldBytesPerRank2*r*r + rankBytes*r                                                     // the ranks' goroutines, communicators and plan views
	dispatched := max(lay.Dispatched, 0) * dispatchDocBytes                                           // every dispatch rank's documents (balanced)
	return caseBytes + layout + subMasks + traces + world + dispatched
}

// PassWeight is how many passes' traces a prediction of passes holds: fwd+bwd is a
// forward's and a backward's.
func PassWeight(passes []kernels.Pass) int {
	w := 0
	for _, p := range passes {
		w++
		if p == kernels.FwdBwd {
			w++
		}
	}
	return max(w, 1)
}

// The traces' and sub-masks' costs, measured (peak resident memory of longca simulate
// --exact-ranks N --samples 1, fwd and bwd, on the 2-core build machine, less the 50 MB
// of a process that simulates nothing): ring-p2p on full and causal 5.8 KB per rank and
// step at 128 ranks, 4.9 at 256 and 512, 4.5 at 1024 (two passes; usp, loongtrain,
// balanced and ring-allgather less); ring-p2p on full_document_long 185 bytes per rank,
// step and document at 128 ranks (169 documents) and 126 at 256 (708), the other
// methods and causal_document_long less; in-process peak heap (TestMemoryBytesBoundsExactRanks)
// 240 bytes per rank, step and document at 64 ranks, 290 at 16, where a case's fixed
// cost (caseBytes) covers it. Rounded up.
const (
	caseBytes     = 16 << 20 // a case's fixed cost: its plan, mask, recorder maps
	pieceBytes    = 24
	sliceBytes    = 64      // 4 slices a document in a step's sub-mask, with its tiles
	stepPassBytes = 4 << 10 // a traced rank's step in one pass
)

// dispatchDocBytes is what balanced's case holds per document of its mask (BalancedDocs),
// measured (peak heap of Predict, fwd and bwd, 8K to 256K tokens a GPU, 1-token and 1- to
// 64-token documents, 1 to 64 GPUs, --cp-ulysses 1, 2, n or the plan's, blocks or thd keys;
// TestBalancedDocsBoundMeasured): 120-480 bytes a document where the documents are most of
// the heap, the most where one dispatch rank holds every document (--cp-ulysses n); up to
// 1,300 where a few thousand documents share the case's fixed costs (caseBytes covers
// those). Rounded up.
const dispatchDocBytes = 768

// SequenceBytes is what one case's simulation holds per token of the sequence, beside
// MemoryBytes: the kernel model's tile rows of each step's sub-mask (Ulysses' span the
// whole sequence) and the document mask itself. Measured on causal_document_long, 8
// GPUs, every method: 64M tokens 0.30 GB, 256M tokens 1.57 GB (6 bytes a token with two
// cases at once); 1G tokens ran out of memory under an estimate that had no such term.
func SequenceBytes(seqlen int) float64 { return 4 * float64(max(seqlen, 0)) }

// The world's cost, measured (ring-p2p, full mask, fwd, on the 2-core build machine:
// 4096 GPUs 4.6 s; 8192 GPUs 12.6 s and 0.53 GB; 16384 GPUs 46.7 s and 2.1 GB): both grow
// as the square of the GPU count. The constants are those measurements rounded up.
const (
	worldBytesPerRank2   = 10       // bytes per n^2
	rankBytes            = 64 << 10 // a goroutine's stack, recorder and communicator
	worldSecondsPerRank2 = 2.5e-7   // CPU seconds per n^2
	// rankDocSeconds is the traced ranks' CPU time per GPU and document of the mask (a
	// 1024-GPU document sweep, 852 documents: 8.8 s).
	rankDocSeconds = 1e-5
	// tokenSeconds is a case's CPU time per token of the sequence and pass
	// (BenchmarkPredictPerToken: 8 GPUs, every method and pass, 16M and 64M tokens, one
	// core: at most 21 ns, ring-p2p's backward on full_document_long, a little more at
	// the longer length; balanced 6 ns on causal, a mask without documents; longca
	// simulate of that backward alone at 1G tokens, its mask built too: 37 ns), rounded
	// up. It counts the sequence for masks without documents too: balanced's dispatch,
	// the tile rows of each step's sub-mask.
	tokenSeconds = 40e-9
	// stepPassSeconds and stepDocSeconds are a traced (rank, step)'s time per pass and per
	// document (longca simulate --exact-ranks N --samples 1, fwd and bwd, 2 cores:
	// ring-p2p on full and causal, 128 to 512 ranks, 20-24 us of CPU per rank, step and
	// pass; 1024 ranks 31-38 us of CPU and 54 us of wall time; on full_document_long
	// 0.6-0.8 us more per rank, step and document at 128 and 256 exact ranks, 0.12 with
	// 128 sampled ranks of 1024), rounded up. The default sample's documents are
	// rankDocSeconds' (Seconds takes the larger).
	stepPassSeconds = 60e-6
	stepDocSeconds  = 1e-6
)

// Seconds estimates the CPU time of one case of n ranks on a mask of docs documents and
// seqlen tokens, predicted for passes passes with steps traced (rank, step) pairs
// (TracedSteps): the world (every rank's goroutine and splits), the traced steps (their
// events recorded and simulated, and every step's sub-mask a few slices per document)
// and the sequence itself (SequenceSeconds). An estimate, to refuse a sweep that cannot
// end in reasonable time before it starts.
func Seconds(n, docs, seqlen, passes int, steps float64) float64 {
	d, r := float64(max(docs, 1)), float64(n)
	steps = max(steps, 0)
	docTime := d * max(rankDocSeconds*r, stepDocSeconds*steps) // a sample's steps, or every rank's
	return worldSecondsPerRank2*r*r + docTime + stepPassSeconds*steps*float64(max(passes, 1)) + SequenceSeconds(seqlen, passes)
}

// SequenceSeconds is the part of Seconds that grows with the sequence's length alone,
// for passes passes (--gpus 8 --seqlen 1G was estimated as if it were 8K tokens).
func SequenceSeconds(seqlen, passes int) float64 {
	return tokenSeconds * float64(max(seqlen, 0)) * float64(max(passes, 1))
}

// BlockWork bounds what balanced's dispatch at a given --cp-block adds to one case of n
// ranks and seqlen tokens (ulysses: --cp-ulysses, 0 when the plan chooses; exact and
// sampled: the traced ranks, as TracedSteps): its host memory in bytes and its CPU
// seconds. MemoryBytes and Seconds count a rank's sub-masks by documents, not by blocks:
// a rank's query blocks each meet every key block it fetches (a sub-mask slice for each
// pair the mask allows), so a traced rank's sub-masks grow as its blocks times all the
// blocks, the square of seqlen/block (--cp-block 1 on 64 GPUs of 8K tokens passed the
// estimates at 1 s and grew past 11 GB; on 128K tokens, 23 GB). The dispatch itself
// (Balance, each candidate mesh's up to 8 ranks) is a few words per block.
func BlockWork(n, seqlen, block, ulysses, exact, sampled int) (bytes, seconds float64) {
	if n < 1 || block < 1 || seqlen < 1 {
		return 0, 0
	}
	// Dispatch units: n/U. Chosen by the plan, U is at most 8 (a node's GPUs), and up to
	// 8 ranks any split: the fewest units, 2, fetch the most (1 fetches nothing).
	units := max(float64(n)/8, float64(min(n, 2)))
	if ulysses > 0 {
		units = max(float64(n)/float64(ulysses), 1)
	}
	candidates := 1.0
	if n <= 8 && ulysses <= 0 {
		candidates = 4 // balancedSplits: U of 1, 2, 4, 8 (or n's divisors)
	}
	blocks := math.Ceil(float64(seqlen) / float64(block))
	// The plan builds every rank's sub-masks (64 GPUs of 512K tokens, the default block:
	// 1.9 GB with --exact-ranks 16, 2.2 GB with 64), and the trace walks the traced ranks'.
	rankPairs := math.Ceil(blocks/units) * blocks
	return float64(n)*rankPairs*blockPairBytes + candidates*blocks*dispatchBlockBytes,
		tracedRanks(n, exact, sampled)*rankPairs*blockPairSeconds + candidates*blocks*dispatchBlockSeconds
}

// tracedRanks bounds the ranks a case of n ranks traces (Predict's sampleRanks): every
// rank up to exact, else the sample (sampled, or at most 16) and the fixed positions.
func tracedRanks(n, exact, sampled int) float64 {
	if exact <= 0 {
		exact = DefaultExactRanks
	}
	if n <= exact {
		return float64(n)
	}
	lim := sampled
	if lim <= 0 {
		lim = sampledRanks(1) // the most of any ring
	}
	return float64(min(n, max(lim, 5)+max(lim/4, 2)))
}

// BlockWork's costs, measured (balanced, 8K tokens a rank, the 2-core build machine; the
// worst of the masks, causal, where the dispatch scatters every rank's blocks): at 64
// GPUs and blocks of 64, 32 and 16 tokens, 1.24-1.39 bytes of peak heap and 22-27 ns per
// (traced rank, query block of the rank, block) fwd and bwd; the other masks up to 0.4
// bytes and 6 ns. Balance: 8M blocks (cp --dry-run, 64 ranks of 128K at --cp-block 1)
// took 1.1 GB and 10 s. At the default blocks of long sequences (64 GPUs of 512K and 1M
// tokens, causal, fwd: U 8, blocks of 4096) the process peaked at 3.3-3.6 bytes a pair
// of every rank and took 20 and 59 s, 120 and 110 ns a traced pair. Rounded up.
const (
	blockPairBytes       = 4
	blockPairSeconds     = 150e-9
	dispatchBlockBytes   = 256
	dispatchBlockSeconds = 2.5e-6
)
