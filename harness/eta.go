package harness

import (
	"math"
	"slices"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
)

// EstimateCase is one case of a sweep as the time estimate sees it.
type EstimateCase struct {
	Case
	// FLOPs is one repetition of the case's pass (kernels.Problem.FLOPs).
	FLOPs float64
	// Work is the rest of a repetition's work, in FLOPs at the same rate: the CPU
	// reference's rows, elements and tile visits (RefShape.Work), which masks of short
	// documents are made of. The rate is learned on FLOPs + Work.
	Work float64
	// CheckWork is the references' work besides their FLOPs in a check at the case's own
	// size (a forward, and for a backward pass a forward and backward: RefShape.Work), in
	// FLOPs at the reference's rate: SetCheckCosts adds it to each reference it charges,
	// scaled to the size the check runs at.
	CheckWork float64
	// OnDevice: the kernel runs on a GPU (the device rate), else on the host.
	OnDevice bool
	// Refused: the kernel said up front that it does not run this case (Supports); it
	// costs nothing but its row.
	Refused bool
	// CheckSeconds is what the case's check costs before anything is learned: the CPU
	// reference's share at the checked size (0 without a check, or when an earlier case
	// of the sweep already checked the same mask, pass and size).
	CheckSeconds float64
	// Family is whose rate the case takes before its own Kernel has a timed row: a CP
	// case's Kernel is its method and mesh, its Family the attention kernel every method
	// of the sweep runs ("" for none: the prior rate).
	Family string
	// Overhead is the prior of the case's own cost besides its repetitions and check, in
	// seconds (0: EstimatePrior.PerCase): a CP case's inputs and its kernel baseline.
	Overhead float64
}

// EstimatePrior holds what the estimate assumes before any case of the run is timed.
type EstimatePrior struct {
	// DeviceFLOPs and RefFLOPs are the rates of a GPU kernel and of the host's CPU
	// reference (Machine).
	DeviceFLOPs, RefFLOPs float64
	// PerCase is a case's own cost besides its repetitions and check (setup, compile,
	// inputs, bookkeeping), in seconds.
	PerCase float64
	// Reps is warm-ups plus timed repetitions.
	Reps int
}

// DefaultPerCase is EstimatePrior.PerCase: a case's inputs, outputs and bookkeeping,
// besides its check and repetitions (on one H200, 0.01 s for cuda; a peer that compiles
// per mask, as FlexAttention does, learns its own).
const DefaultPerCase = 0.1

// Estimate is the one time estimate of a kernel sweep: the same numbers say, before any
// work, how long the sweep will take (and make a long one say so), and give the ETA while
// it runs. A case costs its kernel's per-case overhead, its check where it is the first
// of its mask, pass and checked size (later ones reuse it), and its repetitions at its
// kernel's rate. All three are learned from the cases already timed in the run: a
// kernel's rate per pass from its ok rows (median time against FLOPs; a kernel not yet
// timed runs at the prior rate), its per-case overhead as the median of what its
// unchecked cases spent besides their repetitions, and its checks as what its checked
// cases spent besides that, against what the prior said of them (the CPU reference's
// rate). A kernel that refused a mask refuses it at every length.
type Estimate struct {
	cases   []EstimateCase
	prior   EstimatePrior
	done    []bool
	elapsed float64 // wall seconds of the finished cases

	rates   map[rateKey]*rateSum
	family  map[rateKey]*rateSum    // the same by Family
	plain   map[[2]string][]float64 // per kernel and mask: seconds besides repetitions of cases without a check
	checked map[string][]checkSpent
	refused map[[2]string]bool
}

type rateKey struct {
	kernel string
	pass   kernels.Pass
}

type rateSum struct{ work, sec float64 }

// checkSpent is a finished case with a check: what it spent besides its repetitions, and
// what the prior said its check would cost.
type checkSpent struct {
	spent, prior float64
	label        string
	overhead     float64 // the case's Overhead
	anyMask      bool    // a CP case (perCase)
}

// NewEstimate is the estimate of cases (in the order they run) under prior.
func NewEstimate(cases []EstimateCase, prior EstimatePrior) *Estimate {
	if prior.DeviceFLOPs <= 0 {
		prior.DeviceFLOPs = DefaultDeviceFLOPs
	}
	if prior.RefFLOPs <= 0 {
		prior.RefFLOPs = DefaultRefFLOPs
	}
	return &Estimate{cases: cases, prior: prior, done: make([]bool, len(cases)), rates: map[rateKey]*rateSum{}, family: map[rateKey]*rateSum{},
		plain: map[[2]string][]float64{}, checked: map[string][]checkSpent{}, refused: map[[2]string]bool{}}
}

// Len is the number of cases.
func (e *Estimate) Len() int { return len(e.cases) }

// reps is the repetitions a case runs of its pass, in units of that pass: warm-ups and
// timed ones (harness.Loop); a backward first runs a forward (0.4 of its FLOPs).
func (e *Estimate) reps(c EstimateCase) float64 {
	r := float64(e.prior.Reps)
	if c.Pass == kernels.Bwd {
		r += kernels.Fwd.FLOPsFactor() / kernels.Bwd.FLOPsFactor()
	}
	return r
}

// rate is the FLOP/s the case's repetitions are expected to run at: its kernel's on its
// pass, else on another pass, else its family's likewise, else the prior.
func (e *Estimate) rate(c EstimateCase) float64 {
	learned := func(rates map[rateKey]*rateSum, kernel string) float64 {
		for _, p := range []kernels.Pass{c.Pass, kernels.Fwd, kernels.Bwd, kernels.FwdBwd} { // its pass first
			if s := rates[rateKey{kernel, p}]; s != nil && s.sec > 0 {
				return s.work / s.sec
			}
		}
		return 0
	}
	if r := learned(e.rates, c.Kernel); r > 0 {
		return r
	}
	if c.Family != "" {
		if r := learned(e.family, c.Family); r > 0 {
			return r
		}
	}
	r := e.prior.DeviceFLOPs
	if !c.OnDevice {
		r = e.prior.RefFLOPs
	}
	return r
}

// perCase is the expected overhead of a case of kernel on mask (its label) without a
// check: the median of the latest such cases of that kernel and mask, else the median of
// every finished unchecked case, else prior (the case's Overhead, else the prior's
// PerCase); a CP case (anyMask: one with a Family), whose own cost is its inputs' and
// not its mask's, takes its kernel's cases on the other masks before every case. Per mask, because a peer may compile per
// mask and length (FlexAttention does for the dense ones); the median, because one-off
// costs make single cases far off.
func (e *Estimate) perCase(kernel, label string, prior float64, anyMask bool) float64 {
	if r := e.plain[[2]string{kernel, label}]; len(r) > 0 {
		return Median(latest(r))
	}
	if anyMask {
		var mine []float64
		for k, r := range e.plain {
			if k[0] == kernel {
				mine = append(mine, r...)
			}
		}
		if len(mine) > 0 {
			return Median(mine)
		}
	}
	var all []float64
	for _, r := range e.plain {
		all = append(all, r...)
	}
	if len(all) >= learnMin {
		return Median(all)
	}
	if prior > 0 {
		return prior
	}
	return e.prior.PerCase
}

// checkScale is how a kernel's checks turned out against the prior: the median ratio of
// its latest checks, held toward every kernel's median (else 1) by checkPseudo checks'
// worth of it, since a kernel's first checks also pay its one-off start (a peer
// compiling).
func (e *Estimate) checkScale(kernel string) float64 {
	ratios := func(k string) []float64 {
		var out []float64
		cs := e.checked[k]
		for _, c := range cs[max(len(cs)-checkWindow, 0):] {
			out = append(out, max(c.spent-e.perCase(k, c.label, c.overhead, c.anyMask), 0)/c.prior)
		}
		return out
	}
	var all []float64
	for k := range e.checked {
		all = append(all, ratios(k)...)
	}
	global := 1.0
	if len(all) > 0 {
		global = Median(all)
	}
	r := ratios(kernel)
	if len(r) == 0 {
		return global
	}
	n := float64(len(r))
	return (n*Median(r) + checkPseudo*global) / (n + checkPseudo)
}

// checkPseudo is how many checks' worth the every-kernel scale weighs in a kernel's.
const checkPseudo = 4

// latest are the last learnWindow of xs.
func latest[T any](xs []T) []T { return xs[max(len(xs)-learnWindow, 0):] }

// checkWindow is how many of a kernel's latest checks its check scale follows.
const checkWindow = 8

// learnWindow is how many of a kernel's latest cases the learned overheads follow.
const learnWindow = 4

// learnMin is how many finished cases a learned per-case overhead needs.
const learnMin = 3

// Median is the median of xs (the mean of the middle two for an even count; xs is not
// reordered).
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Seconds is case i's expected time.
func (e *Estimate) Seconds(i int) float64 {
	c := e.cases[i]
	if c.Refused || e.refused[[2]string{c.Kernel, c.Label()}] {
		return 0
	}
	sec := e.perCase(c.Kernel, c.Label(), c.Overhead, c.Family != "") + e.reps(c)*(c.FLOPs+c.Work)/e.rate(c)
	if c.CheckSeconds > 0 {
		sec += c.CheckSeconds * e.checkScale(c.Kernel)
	}
	return sec
}

// Done records case i's row and the wall time it took.
func (e *Estimate) Done(i int, row results.Row, wall time.Duration) {
	if e.done[i] {
		return
	}
	e.done[i] = true
	c := e.cases[i]
	sec := wall.Seconds()
	e.elapsed += sec
	if c.Refused {
		return
	}
	if row.Status == results.StatusUnsupported {
		e.refused[[2]string{c.Kernel, c.Label()}] = true
		return
	}
	spent := sec // a case that failed spent its time on overhead
	if work := c.FLOPs + c.Work; row.Status == results.StatusOK && row.MedianMs != nil && *row.MedianMs > 0 && work > 0 {
		med := *row.MedianMs / 1e3
		k := rateKey{c.Kernel, c.Pass}
		if e.rates[k] == nil {
			e.rates[k] = &rateSum{}
		}
		e.rates[k].work += work
		e.rates[k].sec += med
		if c.Family != "" {
			f := rateKey{c.Family, c.Pass}
			if e.family[f] == nil {
				e.family[f] = &rateSum{}
			}
			e.family[f].work += work
			e.family[f].sec += med
		}
		spent = max(sec-e.reps(c)*med, 0)
	}
	if c.CheckSeconds > 0 {
		e.checked[c.Kernel] = append(e.checked[c.Kernel], checkSpent{spent, c.CheckSeconds, c.Label(), c.Overhead, c.Family != ""})
	} else {
		k := [2]string{c.Kernel, c.Label()}
		e.plain[k] = append(e.plain[k], spent)
	}
}

// Remaining is the expected time of the cases not yet done.
func (e *Estimate) Remaining() time.Duration {
	var s float64
	for i := range e.cases {
		if !e.done[i] {
			s += e.Seconds(i)
		}
	}
	return seconds(s)
}

// Total is the time done plus the time expected: before any case, the sweep's estimate.
func (e *Estimate) Total() time.Duration {
	return seconds(e.elapsed + e.Remaining().Seconds())
}

// seconds is s seconds as a Duration, the longest one for more than it holds (a sweep of
// centuries): never a negative wrap.
func seconds(s float64) time.Duration {
	if s >= float64(math.MaxInt64)/float64(time.Second) {
		return math.MaxInt64
	}
	return time.Duration(s * float64(time.Second))
}

// Elapsed is the wall time of the finished cases.
func (e *Estimate) Elapsed() time.Duration { return seconds(e.elapsed) }

// Longest is the case expected to take longest, and its seconds.
func (e *Estimate) Longest() (Case, float64) {
	var lc Case
	var ls float64
	for i := range e.cases {
		if s := e.Seconds(i); s > ls {
			lc, ls = e.cases[i].Case, s
		}
	}
	return lc, ls
}

// SetCheckCosts fills each case's CheckSeconds for a sweep checked at budget
// multiply-adds with the CPU reference at refFLOPs: the first case of a kernel, mask,
// head setting and pass at its checked size pays the check (the reference, the naive
// reference and the kernel, forward and for a backward its backward too, and the check's
// own drawing of inputs and comparing of outputs: CheckElementSeconds); the later ones
// reuse it, as Runner does (a case over budget is checked at a smaller length, the same
// for every longer one). With sharedRefs (the sweep checks through one check.Cache,
// harness.NewKernelCheck) the two references and the inputs are paid once for all the
// kernels of a mask, head setting and pass, and the other kernels pay only their own run
// and comparison.
func SetCheckCosts(cases []EstimateCase, budget, refFLOPs float64, sharedRefs bool) {
	if budget <= 0 {
		budget = DefaultCheckBudget
	}
	if refFLOPs <= 0 {
		refFLOPs = DefaultRefFLOPs
	}
	type key struct {
		kernel, label string
		heads         Heads
		dim           int
		pass          kernels.Pass
		seqlen        int // 0: checked at the budget's size
	}
	seen := map[key]bool{}
	refs := map[key]bool{} // with sharedRefs: the references' key, the kernel left out
	for i := range cases {
		c := &cases[i]
		c.CheckSeconds = 0
		madds := c.FLOPs / c.Pass.FLOPsFactor() / 4 // area x query heads x head dim
		k := key{c.Kernel, c.Label(), c.Heads, c.HeadDim, c.Pass, c.SeqLen}
		work := c.CheckWork
		draw, compare := CheckElementSeconds(c.Case)
		if madds > budget {
			// checked shorter: the area shrinks to the budget, and the references' other
			// work (rows, elements) with the length, at least as much where the area grows
			// as the length (documents), the masks it matters for. The check's own (its
			// inputs and outputs, elements) shrinks with the length, which is the square
			// root of the area's shrink where the area grows as the square (full, causal):
			// taken so, the most it can be (by the area's, a dense mask's was low)
			work *= budget / madds
			draw *= math.Sqrt(budget / madds)
			compare *= math.Sqrt(budget / madds)
			madds, k.seqlen = budget, 0
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		passes := 1.0
		if c.Pass != kernels.Fwd {
			passes = kernels.Fwd.FLOPsFactor() + kernels.Bwd.FLOPsFactor()
		}
		unit := (4*madds*passes + work) / refFLOPs
		c.CheckSeconds = 3*unit + draw + compare
		if sharedRefs {
			rk := k
			rk.kernel = ""
			if refs[rk] {
				c.CheckSeconds = unit + compare // the kernel's own run; the inputs and references are cached
			}
			refs[rk] = true
		}
	}
}
