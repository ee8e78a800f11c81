package harness

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// CPEstimateSetup is how a CP sweep runs, as its time estimate sees it.
type CPEstimateSetup struct {
	// Ranks is the world's size; InProcess: they are goroutines of this process sharing
	// its host and (with a device kernel) one GPU; else one process per rank, each on
	// its own device.
	Ranks     int
	InProcess bool
	// OnDevice: the kernel runs on a GPU, else on the host (the CPU reference's rate).
	OnDevice bool
	// Warmup and Iters are each pass's repetitions; Overlap times Iters more without the
	// transfers.
	Warmup, Iters int
	Overlap       bool
	// Check checks each case once (its first sample) at CheckBudget's size (0: the
	// default); Baseline measures the kernel alone once per mask, heads and pass.
	Check       bool
	CheckBudget float64
	Baseline    bool
	// DeviceFLOPs and RefFLOPs are the prior rates of a GPU kernel and of the CPU
	// reference (Machine); LinkBytes is the rate of each rank's own link in bytes/s (an
	// emulated link, --links; 0: by placement, LinkPrior); Cores are the host's (0:
	// runtime.NumCPU).
	DeviceFLOPs, RefFLOPs float64
	LinkBytes             float64
	Cores                 int
	// Settle is the idle before each pass timed on a device and each baseline (--settle).
	Settle time.Duration
	// IsRef says the kernel is the CPU reference: its work besides FLOPs (each row and
	// element of every call, the tiles it walks: RefShape) is counted, which is most of
	// a mask of short documents.
	IsRef bool
	// HostPrep is what one core prepares per second of a case's host tensors, counted as
	// HostPrepBytes is (0: HostPrepRate, this host's).
	HostPrep float64
}

// The priors of the CP estimate's transfers and host work, before a case is timed.
const (
	// DeviceCopyBytes: in-process ranks on one GPU move their bytes as device-to-device
	// copies on it (the device mover), one after another.
	DeviceCopyBytes = 1e12
	// HostCopyBytes: in-process ranks on the host copy through memory (comm/local).
	HostCopyBytes = 10e9
	// DefaultLinkBytes: launched ranks over NCCL, MPI or TCP (a GPU's NVLink share).
	DefaultLinkBytes = 50e9
	// HostPrepBytes is what one core prepares per second of a case's host tensors
	// (allocated, inputs drawn, uploaded), counted as the bytes of a rank's nine tensors of
	// a pass (hostPrepBytes): on the H200 host, 8 in-process ranks at 8K tokens, 64:8
	// heads, head dim 128 spent 6-11 s (median 8) per case of two passes besides their
	// repetitions, their checks included (cmd/longca/testdata/h200/cp-ranks8-cuda-8k.arrow).
	// A slower host prepares at its own rate (HostPrepRate).
	HostPrepBytes = 390e6
)

// NaiveRefCost is what the check's naive reference (kernels/check: the CPU reference
// with the dtype's rounding emulated) costs in exact references: about 5 on the H200
// host (its checks at 64 heads against those at 16, in the rows HostPrepBytes names),
// about 9 on the 2-core build machine (a method whose references were cached by the one
// before checks in a ninth of the time).
const NaiveRefCost = 6

// LinkPrior is the transfer rate a CP case is estimated at before one is timed: a GPU's
// copies for in-process ranks sharing it, the host's memory for in-process host ranks,
// else DefaultLinkBytes (per rank).
func (e CPEstimateSetup) LinkPrior() float64 {
	switch {
	case e.LinkBytes > 0:
		return e.LinkBytes
	case e.InProcess && e.OnDevice:
		return DeviceCopyBytes
	case e.InProcess:
		return HostCopyBytes
	}
	return DefaultLinkBytes
}

// CPEstimate is the one time estimate of a CP sweep (Estimate): up front it says how long
// the sweep takes, and rank 0's progress follows it as the ETA. A row of the sweep is
// one case, sample and pass; each is expected to cost its repetitions of the kernel's
// FLOPs on its share of the devices plus the bytes the plan sends at the link's rate,
// then its share of the case's host work (inputs for every rank, the kernel baseline)
// and its check (the CPU references at the checked size, once per mask and size). The
// rates are learned per method and pass from the rows as they come, falling back to
// what the sweep's other methods ran at.
type CPEstimate struct {
	*Estimate
	passes []kernels.Pass
	first  []int // per case: the index of its first row
	last   time.Time
	share  []float64 // the running sample's rows' shares of its wall time
}

// NewCPEstimate lays out every case of s on e's world: each case's first sample is
// planned for its FLOPs and bytes, and its check shape found as the run finds it.
func NewCPEstimate(s CPSweep, cases []CPCase, e CPEstimateSetup) *CPEstimate {
	if e.DeviceFLOPs <= 0 {
		e.DeviceFLOPs = DefaultDeviceFLOPs
	}
	if e.RefFLOPs <= 0 {
		e.RefFLOPs = DefaultRefFLOPs
	}
	if e.Cores <= 0 {
		e.Cores = runtime.NumCPU()
	}
	if e.HostPrep <= 0 {
		e.HostPrep = HostPrepRate()
	}
	e.Ranks = max(e.Ranks, 1)
	rate := e.DeviceFLOPs // what the ranks' kernels run at together
	switch {
	case !e.OnDevice && !e.InProcess:
		rate = e.RefFLOPs * float64(e.Ranks) // one process per rank, each on its own cores (at best)
	case !e.OnDevice:
		rate = e.RefFLOPs // in-process ranks share the host's cores
	case !e.InProcess:
		rate = e.DeviceFLOPs * float64(e.Ranks) // a GPU each
	}
	est := &CPEstimate{passes: s.Passes}
	var ecs []EstimateCase
	var checked []cpCheckKey // the references rank 0 keeps (refCache)
	based := map[BaselineKey]bool{}
	for _, cs := range cases {
		est.first = append(est.first, len(ecs))
		samples := s.Samples
		if cs.Skip != nil {
			samples = 1
		}
		var pl *cp.Plan
		if cs.Skip == nil {
			if _, p, _, err := s.PlanSample(cs, 0); err == nil {
				pl = p
			}
		}
		// the reference's work besides its FLOPs in every rank's calls, a pass of the
		// planned sample: the same for the others
		refWork := make([]float64, len(s.Passes))
		var planSeconds, fwdWork float64 // fwdWork: a forward's reference work, which a bwd row runs once more
		if pl != nil {
			if e.IsRef && !e.OnDevice {
				for pi, pass := range s.Passes {
					refWork[pi] = RefWorkScale(e.RefFLOPs, e.Cores) * cpRefWork(cs.Method, pl, s.HeadDim, pass)
					if pass == kernels.Fwd {
						fwdWork = refWork[pi]
					}
				}
				if !slices.Contains(s.Passes, kernels.Fwd) && slices.Contains(s.Passes, kernels.Bwd) {
					fwdWork = RefWorkScale(e.RefFLOPs, e.Cores) * cpRefWork(cs.Method, pl, s.HeadDim, kernels.Fwd)
				}
			}
			// every rank builds each sample's mask and plans it (a mask of many documents
			// is seconds of it), the time shared by the sample's passes
			planSeconds = cpPlanSeconds(s, cs.Mask, s.SeqLen, pl, e) / float64(len(s.Passes))
		}
		for sample := range samples {
			for pi, pass := range s.Passes {
				ec := EstimateCase{Case: Case{Mask: cs.Mask, SeqLen: s.SeqLen, Heads: cs.Heads, HeadDim: s.HeadDim, DType: s.DType,
					Kernel: cs.Method + " " + cs.Config.Mesh(), Pass: pass, Seed: s.Seed + uint64(sample)},
					Family: s.Kernel, OnDevice: e.OnDevice, Refused: pl == nil}
				if pl != nil {
					ec.FLOPs, ec.Overhead = passCost(s, cs, pl, pass, e, rate, based)
					ec.FLOPs += refWork[pi]
					ec.Overhead += planSeconds
					if pass == kernels.Bwd { // the saved forward the backward uses (CPRunner.timePass), once a row
						ec.Overhead += (pl.Problem.FLOPs(kernels.Fwd) + fwdWork) / rate
					}
					if e.Check && sample == 0 && pi == 0 {
						ec.CheckSeconds = s.checkSeconds(cs, pl, e, &checked)
					}
				}
				ecs = append(ecs, ec)
			}
		}
	}
	reps := e.Warmup + e.Iters
	if e.Overlap {
		reps += e.Iters
	}
	// The cases' FLOPs are at rate: it is the prior of their place (a host case runs at
	// the reference's).
	prior := EstimatePrior{DeviceFLOPs: rate, RefFLOPs: rate, PerCase: DefaultPerCase, Reps: reps}
	est.Estimate = NewEstimate(ecs, prior)
	return est
}

// passCost is one repetition of a pass of case cs as FLOPs at rate (the kernel's share
// of the work, and the plan's transfers at the link's rate, in FLOPs of the same time),
// and the host work of the row besides (the inputs of every rank; the kernel baseline
// the first time its key comes, based).
func passCost(s CPSweep, cs CPCase, pl *cp.Plan, pass kernels.Pass, e CPEstimateSetup, rate float64,
	based map[BaselineKey]bool) (flops, overhead float64) {
	n := e.Ranks
	// The transfers that take the time: every rank's where in-process ranks share one
	// copy engine (no LinkBytes given), else the busiest rank's on its own link.
	shared := e.InProcess && e.LinkBytes <= 0
	var bytes float64
	for r := range n {
		b := float64(cp.RankCommBytesOf(pl, r, pass))
		if shared {
			bytes += b
		} else {
			bytes = max(bytes, b)
		}
	}
	flops = pl.Problem.FLOPs(pass) + bytes/e.LinkPrior()*rate
	// Host tensors per rank and pass (CPRunner.timePass): q, dout, out, dq and k, v, dk,
	// dv of its tokens and every head, the lse.
	es := float64(s.DType.Size())
	perRank := hostPrepBytes(float64(pl.Tokens), pl.Problem.HeadsQ, pl.Problem.HeadsKV, s.HeadDim, s.DType)
	overhead = DefaultPerCase/float64(len(s.Passes)) + e.prepSeconds(perRank)
	settle := 0.0 // --settle, before each pass timed on a device (the ranks idle together)
	if e.OnDevice {
		settle = e.Settle.Seconds()
	}
	overhead += settle
	if e.Baseline {
		k := BaselineKey{Kernel: s.Kernel, Mask: cs.Mask, SeqLen: s.SeqLen / n, HeadsQ: cs.Heads.Q, HeadsKV: cs.Heads.KV, Pass: pass.String()}
		if !based[k] {
			based[k] = true
			// Rank 0 alone: one rank's inputs, and the kernel's repetitions at a rank's work.
			one := float64(s.SeqLen/n) * float64(s.HeadDim) * es * (4*float64(cs.Heads.Q) + 4*float64(cs.Heads.KV))
			kernelRate := e.DeviceFLOPs
			if !e.OnDevice {
				kernelRate = e.RefFLOPs
			}
			overhead += one/e.HostPrep + float64(e.Warmup+e.Iters)*pl.Problem.FLOPs(pass)/float64(n)/kernelRate + settle
		}
	}
	return flops, overhead
}

// cpCheckKey is what makes two cases' checks share their references (refCache): rank 0
// keeps the references of a mask at a size, heads and passes for every method after.
type cpCheckKey struct {
	mask     string
	seqlen   int
	heads    Heads
	backward bool
}

// checkSeconds is the prior cost of case cs's check: rank 0's two CPU references (exact,
// and naive: the dtype's rounding emulated, NaiveRefCost times the exact one; forward,
// and for a backward pass its backward) at the checked size unless rank 0 still keeps
// them from an earlier case (refCache keeps the last refCacheSize), and the method
// itself at that size on the host when its kernel runs there.
func (s CPSweep) checkSeconds(cs CPCase, pl0 *cp.Plan, e CPEstimateSetup, checked *[]cpCheckKey) float64 {
	seqlen, h := s.checkShape(cs, pl0, e.Ranks, e.CheckBudget)
	_, pl, spec, err := s.plan(cs, seqlen, h, s.Seed)
	if err != nil {
		return 0
	}
	backward := false
	for _, p := range s.Passes {
		backward = backward || p != kernels.Fwd
	}
	passes := kernels.Fwd.FLOPsFactor()
	pass := kernels.Fwd
	if backward {
		passes += kernels.Bwd.FLOPsFactor()
		pass = kernels.FwdBwd
	}
	one := 4 * float64(spec.Mask.Area()) * float64(h.Q) * float64(s.HeadDim) * passes / e.RefFLOPs
	// each reference's work besides its FLOPs (rows, elements, tiles): most of a check of
	// short documents, which is at their full length; one call, its elements converted on
	// one core (RefShape.WorkAt)
	work := NewRefShape(spec.Mask).WorkAt(h.Q, h.KV, s.HeadDim, pass, e.RefFLOPs, e.Cores) / e.RefFLOPs
	// the ranks' calls run at once, their conversions too: spread over the cores
	scale := RefWorkScale(e.RefFLOPs, e.Cores) / e.RefFLOPs
	var sec float64
	if k := (cpCheckKey{cs.Mask, seqlen, h, backward}); !slices.Contains(*checked, k) {
		// Computed and kept, the oldest kept forgotten, as refCache does.
		if len(*checked) == refCacheSize {
			*checked = (*checked)[1:]
		}
		*checked = append(*checked, k)
		sec += (1+NaiveRefCost)*one + 2*work
	}
	if !e.OnDevice {
		sec += one
		if e.IsRef {
			sec += scale * cpRefWork(cs.Method, pl, s.HeadDim, pass)
		}
	}
	// every rank draws the global inputs, plans the check's mask, and gathers every rank's
	// outputs and the joined ones (host work, the ranks of this process at once)
	host := checkHostBytes(seqlen, float64(pl.Tokens), e.Ranks, h, s.HeadDim, s.DType, backward)
	sec += e.prepSeconds(host) + cpPlanSeconds(s, cs.Mask, seqlen, pl, e)
	return sec
}

// checkHostBytes is a rank's host work in a CP check at seqlen global tokens (tc a rank's,
// padded) on n ranks, in hostPrepBytes' measure: the global inputs, drawn as a rank's are
// for a pass (q, k, v and dout of every token; they were counted at half a pass's bytes
// a token, where a drawn element costs the same, the draw being most of it), and every
// rank's outputs gathered and the joined global ones.
func checkHostBytes(seqlen int, tc float64, n int, h Heads, d int, dt tensor.DType, backward bool) float64 {
	es, S := float64(dt.Size()), float64(seqlen)
	q, kv, dd := float64(h.Q), float64(h.KV), float64(d)
	outs := dd*es*q + 4*q
	if backward {
		outs += dd * es * (q + 2*kv)
	}
	return hostPrepBytes(S, h.Q, h.KV, d, dt) + (float64(n)*tc+S)*outs
}

// prepSeconds is the time this process takes to prepare bytes (hostPrepBytes' measure) on
// each rank it runs, at e's rate, its ranks on their share of the cores.
func (e CPEstimateSetup) prepSeconds(bytes float64) float64 {
	ranks, par := inProcessRanks(e)
	return ranks * bytes / (par * e.HostPrep)
}

// hostPrepBytes are the bytes of a rank's host tensors of a pass at tokens tokens
// (hostPassTensors: q, dout, out, dq of hq heads, k, v, dk, dv of hkv, and the lse), the
// measure HostPrepBytes and HostPrepRate count a rank's preparation in.
func hostPrepBytes(tokens float64, hq, hkv, d int, dt tensor.DType) float64 {
	es := float64(dt.Size())
	return tokens * (4*float64(hq)*float64(d)*es + 4*float64(hkv)*float64(d)*es + 4*float64(hq))
}

// hostPrep is HostPrepRate's measure, taken once.
var hostPrep struct {
	once sync.Once
	rate float64
}

// HostPrepRate is HostPrepBytes on this host: what one core prepares per second of a
// pass's host tensors (hostPassTensors, the runner's own: nine allocated, four drawn from
// a normal), in bf16 at 4K tokens, 4:1 heads, head dim 64 (10 MB), the median of three
// tries by the clock (so that a loaded host counts its load, as the sweep will), measured
// once a process (0.1-0.25 s in all on the 2-core build machine). It is never above HostPrepBytes,
// which the H200 host's cases were fitted to with what else they did on the host
// (uploads, the ranks' setup): a host that draws faster is estimated as before. The build
// machine, shared with other jobs, measured 1.2-2.4e8 (an element drawn in 16-33 ns; 14-21
// ns of CPU time), where its cp estimates of short documents, whose checks draw the full
// length's inputs on every rank, had been 1.5x low at HostPrepBytes
// (TestCPEstimateCountsHostPrepHere).
func HostPrepRate() float64 {
	hostPrep.once.Do(func() {
		const tokens, hq, hkv, d = 4096, 4, 1, 64
		bytes := hostPrepBytes(tokens, hq, hkv, d, tensor.BF16)
		var rates []float64
		for i := range 3 {
			rng := rand.New(rand.NewPCG(uint64(i), 0))
			start := time.Now()
			ts := hostPassTensors(rng, tensor.BF16, tokens, hq, hkv, d)
			sec := time.Since(start).Seconds()
			runtime.KeepAlive(ts)
			rates = append(rates, bytes/max(sec, 1e-9))
		}
		hostPrep.rate = min(Median(rates), HostPrepBytes)
	})
	return hostPrep.rate
}

// inProcessRanks are the ranks whose host work this process does, and how many of them
// at once: every rank over the cores for in-process ranks, else its own.
func inProcessRanks(e CPEstimateSetup) (ranks, par float64) {
	if e.InProcess {
		return float64(e.Ranks), float64(min(e.Ranks, e.Cores))
	}
	return 1, 1
}

// cpPlanSeconds is the time the ranks of this process take to build a sample's mask at
// seqlen and plan it as pl (MaskDocs.RankSeconds): seconds of a mask of many documents.
func cpPlanSeconds(s CPSweep, name string, seqlen int, pl *cp.Plan, e CPEstimateSetup) float64 {
	ranks, par := inProcessRanks(e)
	return ranks * s.MaskDocs(name, seqlen).RankSeconds(pl.Layout.Ring, pl.Config.Sharding == cp.Zigzag) / par
}

// Start marks when the first case begins.
func (est *CPEstimate) Start(t time.Time) { est.last = t }

// Row records a row of case ci at now. A sample's rows arrive together when the sample
// is done: the first carries the sample's wall time since the one before, and each row
// is given the share of it that the estimate expected of it.
func (est *CPEstimate) Row(ci int, row results.Row, now time.Time) {
	if ci < 0 || ci >= len(est.first) {
		return
	}
	pi := 0
	for i, p := range est.passes {
		if p.String() == row.Pass {
			pi = i
		}
	}
	np := len(est.passes)
	base := est.first[ci] + int(row.Sample)*np
	if base+np > est.Len() || (ci+1 < len(est.first) && base+np > est.first[ci+1]) {
		return
	}
	if pi == 0 || est.share == nil {
		wall := now.Sub(est.last).Seconds()
		est.last = now
		est.share = make([]float64, np)
		var sum float64
		for i := range np {
			est.share[i] = est.Seconds(base + i)
			sum += est.share[i]
		}
		for i := range np {
			if sum > 0 {
				est.share[i] *= wall / sum
			} else {
				est.share[i] = wall / float64(np)
			}
		}
	}
	est.Done(base+pi, row, time.Duration(est.share[pi]*float64(time.Second)))
}
