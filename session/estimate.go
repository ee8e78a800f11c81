package session

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/sim"
	"github.com/longca/longca/spmd/cp"
)

// Machine is what the memory and time estimates are held against; tests replace it.
var Machine = harness.ThisMachine

// SlowSweep is how long a sweep may take before longca says how long it will be.
const SlowSweep = 10 * time.Minute

// KernelPlace says where a kernel runs: on a GPU (with its memory), and whether it is
// the CPU reference. A kernel that cannot be made is left to the sweep (its rows say
// unsupported).
func KernelPlace(name string, ko kernels.Options) (k kernels.Kernel, onDevice, isRef bool, devBytes float64, ok bool) {
	k, err := NewKernel(name, ko)
	if err != nil {
		return nil, false, false, 0, false
	}
	dev := k.Device()
	if dev.Name() == "cpu" {
		return k, false, name == "ref", 0, true
	}
	if mi, has := dev.(interface {
		MemInfo() (free, total int64, err error)
	}); has {
		if _, total, err := mi.MemInfo(); err == nil {
			devBytes = float64(total)
		}
	}
	return k, true, false, devBytes, true
}

type place struct {
	k                   kernels.Kernel
	onDevice, isRef, ok bool
	devBytes            float64
}

// footprint is harness.KernelFootprint of cs, and on a device the fp32 partials of a kernel
// whose backward splits a KV head's query heads over blocks, as many parts as it says it may
// (cuda's BackwardPartials).
func footprint(cs harness.Case, k KernelSweep, pl place) harness.Footprint {
	return footprintAt(cs, k, pl, k.Check, nil)
}

// footprintAt is footprint with the check (when check) at the size the mask's own area
// (area; nil: a full or causal mask's, harness.KernelFootprintAt) gives it.
func footprintAt(cs harness.Case, k KernelSweep, pl place, check bool, area harness.CheckArea) harness.Footprint {
	f := harness.KernelFootprintAt(cs, check, k.CheckBudget, pl.onDevice, pl.isRef, area)
	if sp, ok := pl.k.(interface{ BackwardPartials(group, d int) int }); ok && pl.onDevice {
		f.Device += harness.PartialsBytes(cs, sp.BackwardPartials(cs.Heads.Q/max(cs.Heads.KV, 1), cs.HeadDim))
	}
	return f
}

// FitKernels refuses, before anything is allocated, a sweep with a case that cannot fit
// in the host's (or the GPU's) memory: one line naming the flags that make it too big
// (k.Culprit), or --check-budget where its check is what does not fit (checkRefusal). It
// returns the sweep's time estimate, the one its ETA then follows; a sweep that runs long
// says, once, about how long. A checked case's mask other than full and causal is laid
// out here (once the case fits without its check), for the size its check runs at; the
// estimate keeps it.
func (s *Session) FitKernels(ctx context.Context, k KernelSweep) (*harness.Estimate, error) {
	est, _, err := s.fitKernels(ctx, k, false)
	return est, err
}

// FitKernelsDry is FitKernels for a dry run (`kernel --dry-run`, `sparse --dry-run`): the
// same refusals of what does not fit, and the time at the assumed rates, with nothing
// started or timed: the CPU reference is not calibrated, and a kernel served by a worker
// process (exec:, torch:) is not asked where it runs (its worker would start), so its cases
// are counted as on a GPU of unknown memory: the host memory longca holds for them whatever
// the worker's device (a worker on the CPU holds more), their kernels named in unasked. (Left
// out of the fit, a worker's 1M-token case "fit" a 16 GiB host where the run was refused for
// 88 GiB.) A dry run had said nothing of either: the README's sparse example passed its dry
// run and was then refused for memory.
func (s *Session) FitKernelsDry(k KernelSweep) (est *harness.Estimate, unasked []string, err error) {
	return s.fitKernels(context.Background(), k, true)
}

func (s *Session) fitKernels(ctx context.Context, k KernelSweep, dry bool) (*harness.Estimate, []string, error) {
	m := Machine()
	places := map[string]place{}
	plans := planCache{}
	cases := k.Sweep.Cases()
	var unasked []string
	for _, cs := range cases {
		pl, seen := places[cs.Kernel]
		if !seen {
			if dry && ServedByWorker(cs.Kernel, k.KernelOptions) {
				unasked = append(unasked, cs.Kernel)
				pl.onDevice, pl.ok = true, true // the least it holds on the host: no kernel asked (pl.k nil)
			} else {
				pl.k, pl.onDevice, pl.isRef, pl.devBytes, pl.ok = KernelPlace(cs.Kernel, k.KernelOptions)
			}
			places[cs.Kernel] = pl
		}
		if !pl.ok {
			continue
		}
		f, area := fitFootprint(cs, k, pl, m, plans)
		if err := m.Fits(f, pl.devBytes, "case "+cs.String()); err != nil {
			if area != nil && k.CheckBudget > 0 { // the case fits unchecked: its check does not
				return nil, unasked, checkRefusal(cs, k, pl, m, area, err)
			}
			fits := func(x harness.Case) bool {
				fx, _ := fitFootprint(x, k, pl, m, plans)
				return m.Fits(fx, pl.devBytes, "") == nil
			}
			culprit := cs.String()
			if k.Culprit != nil {
				culprit = k.Culprit(cs, fits)
			}
			return nil, unasked, Usagef("%s: %v: give smaller sizes", culprit, err)
		}
	}
	est := s.newEstimateFrom(k, cases, places, m, plans)
	if dry {
		return est, unasked, nil
	}
	if est.Total() > SlowSweep/10 {
		// Long by the assumed rates: measure the CPU reference here, which runs the
		// checks (and the ref kernel), before saying so.
		if r := CalibrateRef(ctx); r > 0 {
			m.RefFLOPs = r
			est = s.newEstimateFrom(k, cases, places, m, plans)
		}
	}
	if total := est.Total().Seconds(); total > SlowSweep.Seconds() {
		lc, longest := est.Longest()
		s.log().Warn().Str("estimate", harness.FormatDuration(total)).Str("longest_case", lc.Kernel+" "+lc.String()).
			Str("longest", harness.FormatDuration(longest)).
			Msgf("this sweep will take about %s (the CPU reference at %.1f GFLOP/s here, GPU kernels at %.0f TFLOP/s assumed); Ctrl-C stops it, keeping the rows written",
				harness.FormatDuration(total), m.RefFLOPs/1e9, m.DeviceFLOPs/1e12)
	}
	return est, unasked, nil
}

// ServedByWorker says whether kernel name is one a worker process serves (kernels/external:
// exec:, torch:), whose device only its started worker can say (KernelPlace starts it); made,
// not started. A dry run counts such a kernel as on a GPU (FitKernelsDry), and cp's dry run
// leaves its memory uncounted.
func ServedByWorker(name string, o kernels.Options) bool {
	k, err := NewKernel(name, o)
	if err != nil {
		return false
	}
	_, ok := k.(crashCounter)
	return ok
}

// fitFootprint is case cs's footprint as FitKernels holds it against m, and the area its
// check was sized by (nil: the bound). A full or causal mask's check, or any unchecked
// case, is counted at the bound's size (harness.CheckSizeBounded: exact there); another
// mask's at the size its own area gives it (a mask of 1-token documents is checked at
// its full length), laid out through plans once the case fits without its check (its
// mask's own memory counted: nothing too big is built here). A case that does not fit
// even so keeps the bound, and is refused as before; so does a mask that cannot be laid
// out at its length (its row says so, unchecked).
func fitFootprint(cs harness.Case, k KernelSweep, pl place, m harness.Machine, plans planCache) (harness.Footprint, harness.CheckArea) {
	if !k.Check || harness.CheckSizeBounded(cs) || m.Fits(footprintAt(cs, k, pl, false, nil), pl.devBytes, "") != nil ||
		!plans.get(cs, k.Build).ok {
		return footprint(cs, k, pl), nil
	}
	area := plans.checkArea(cs, k.Build)
	return footprintAt(cs, k, pl, true, area), area
}

// checkRefusal is the refusal (err) of case cs whose check does not fit where the case
// itself does: its mask's area (area) is within the check budget at a length whose check
// is too big (1-token documents at 256K are checked at 256K). It names --check-budget
// and a budget under which the check runs smaller and fits, or --no-check.
func checkRefusal(cs harness.Case, k KernelSweep, pl place, m harness.Machine, area harness.CheckArea, err error) error {
	budget := k.CheckBudget
	if budget <= 0 {
		budget = harness.DefaultCheckBudget
	}
	n, h := harness.KernelCheckSize(cs, budget, area)
	a, _ := area(n, h)
	madds := float64(a) * float64(h.Q) * float64(cs.HeadDim)
	fix := "--no-check"
	for b, i := niceBelow(madds), 0; b > 0 && i < 40; b, i = niceBelow(b), i+1 {
		kb := k
		kb.CheckBudget = b
		if m.Fits(footprintAt(cs, kb, pl, true, area), pl.devBytes, "") == nil {
			sn, sh := harness.KernelCheckSize(cs, b, area)
			fix = fmt.Sprintf("--check-budget %g or less (checks it at %s, heads %s), or --no-check", b, harness.FormatSize(sn), sh)
			break
		}
	}
	return Usagef("--check-budget %g: %v: its check runs at %s, heads %s (the mask's area there, %d pairs, x %d query heads x head dim %d is %.3g multiply-adds, within the budget): give %s",
		budget, err, harness.FormatSize(n), h, a, h.Q, cs.HeadDim, madds, fix)
}

// niceBelow is the largest of 1, 2 and 5 times a power of ten below x (0 for x <= 0).
func niceBelow(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 0) {
		return 0
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, f := range []float64{5, 2, 1, 0.5} {
		if v := f * p; v < x*(1-1e-12) {
			return v
		}
	}
	return 0.5 * p
}

// estimate is the time estimate of a sweep that did not go through FitKernels.
func (s *Session) estimate(_ context.Context, k KernelSweep, cases []harness.Case) *harness.Estimate {
	places := map[string]place{}
	for _, cs := range cases {
		if _, seen := places[cs.Kernel]; !seen {
			var pl place
			pl.k, pl.onDevice, pl.isRef, pl.devBytes, pl.ok = KernelPlace(cs.Kernel, k.KernelOptions)
			places[cs.Kernel] = pl
		}
	}
	return s.newEstimate(k, cases, places, Machine())
}

// planProblem is harness.PlanProblem; tests wrap it to see which masks are built.
var planProblem = harness.PlanProblem

// planned is what newEstimate keeps of a case's problem: the mask's area, and the
// problem itself only for a mask that is not block-sparse (Supports needs it; such a
// mask is a few slices). A block-sparse mask is not built at all (harness.PlanArea: its
// area from its blocks): 1-token blocks over 16K tokens are most of a GiB and seconds
// of work, which the case builds anyway when it runs.
type planned struct {
	ok    bool
	area  float64
	p     *kernels.Problem
	shape *harness.RefShape // the CPU reference's walk of the mask, once it is asked for
}

// refShapeFor is the CPU reference's walk of the planned mask (harness.NewRefShape) where
// it is needed, made on first use; nil for a block-sparse mask, which is not built here.
func (pn *planned) refShapeFor(needed bool) *harness.RefShape {
	if needed && pn.shape == nil && pn.p != nil {
		rs := harness.NewRefShape(pn.p.Mask)
		pn.shape = &rs
	}
	return pn.shape
}

// planKey is what a case's planned problem depends on: its mask (label), length and heads.
type planKey struct {
	label  string
	seqlen int
	heads  harness.Heads
}

// planCache holds the problems a sweep's fit and estimate lay out (plan), by planKey:
// FitKernels's check sizes and newEstimate's FLOPs share them, so each mask is laid out
// once.
type planCache map[planKey]*planned

// get is plan(cs, build), laid out on first use.
func (pc planCache) get(cs harness.Case, build harness.MaskBuilder) *planned {
	key := planKey{cs.Label(), cs.SeqLen, cs.Heads}
	pn, seen := pc[key]
	if !seen {
		p := plan(cs, build)
		pn = &p
		pc[key] = pn
	}
	return pn
}

// checkArea is case cs's mask's area at a length, as the runner's check asks it (the
// heads are the case's; a length below the case's builds a mask of at most 4K tokens):
// the size its check runs at (harness.KernelCheckSize) from the masks pc lays out.
func (pc planCache) checkArea(cs harness.Case, build harness.MaskBuilder) harness.CheckArea {
	return func(n int, _ harness.Heads) (int64, bool) {
		c := cs
		c.SeqLen = n
		pn := pc.get(c, build)
		return int64(math.Round(pn.area)), pn.ok
	}
}

// plan lays out case cs's problem: its area, and the problem unless it is block-sparse.
func plan(cs harness.Case, build harness.MaskBuilder) planned {
	if cs.Sparse.IsSparse() {
		area, err := harness.PlanArea(cs, build)
		return planned{ok: err == nil, area: area}
	}
	p, err := planProblem(cs, build)
	if err != nil {
		return planned{}
	}
	return planned{ok: true, area: p.Area(), p: &p}
}

// newEstimate lays out each case's problem (its FLOPs) and asks its kernel whether it
// runs it (Supports: a peer that takes only some masks costs nothing on the others).
func (s *Session) newEstimate(k KernelSweep, cases []harness.Case, places map[string]place, m harness.Machine) *harness.Estimate {
	return s.newEstimateFrom(k, cases, places, m, planCache{})
}

// newEstimateFrom is newEstimate with the problems laid out through plans (those FitKernels
// laid out already are not laid out again).
func (s *Session) newEstimateFrom(k KernelSweep, cases []harness.Case, places map[string]place, m harness.Machine, plans planCache) *harness.Estimate {
	ecs := make([]harness.EstimateCase, len(cases))
	for i, cs := range cases {
		pl := places[cs.Kernel]
		ec := harness.EstimateCase{Case: cs, OnDevice: pl.onDevice, Refused: !pl.ok}
		if pl.onDevice && k.Settle > 0 { // --settle idles before each case timed on a GPU
			ec.Overhead = harness.DefaultPerCase + k.Settle.Seconds()
		}
		pn := plans.get(cs, k.Build)
		switch {
		case !pn.ok:
			ec.Refused = true // the mask cannot be laid out: its rows say so at once
		default:
			ec.FLOPs = kernels.AreaFLOPs(pn.area, cs.Heads.Q, cs.HeadDim, cs.Pass)
			// the CPU reference's rows, elements and tile visits: the time of a mask of
			// short documents on it (the kernel's, and the check's references')
			if rs := pn.refShapeFor(pl.isRef || k.Check); rs != nil {
				cores := runtime.GOMAXPROCS(0)
				if pl.isRef {
					ec.Work = rs.WorkAt(cs.Heads.Q, cs.Heads.KV, cs.HeadDim, cs.Pass, m.RefFLOPs, cores)
				}
				if k.Check {
					checked := kernels.Fwd
					if cs.Pass != kernels.Fwd {
						checked = kernels.FwdBwd
					}
					ec.CheckWork = rs.WorkAt(cs.Heads.Q, cs.Heads.KV, cs.HeadDim, checked, m.RefFLOPs, cores)
				}
			}
			if pl.ok && pl.k != nil && pn.p != nil { // a dry run's worker kernel is not asked
				q := *pn.p
				q.HeadDim, q.DType = cs.HeadDim, cs.DType
				if pl.k.Supports(q) != nil {
					ec.Refused = true
				}
			}
		}
		ecs[i] = ec
	}
	if k.Check {
		harness.SetCheckCosts(ecs, k.CheckBudget, m.RefFLOPs, true) // NewKernelCheck shares the references
	}
	return harness.NewEstimate(ecs, harness.EstimatePrior{DeviceFLOPs: m.DeviceFLOPs, RefFLOPs: m.RefFLOPs,
		PerCase: harness.DefaultPerCase, Reps: k.Warmup + k.Iters})
}

// EstimateCP is the time estimate of a CP run (harness.CPEstimate), the one its ETA then
// follows (CPRun.Estimate); a run estimated past SlowSweep says so, once. Long by the
// assumed rates, with checks or the CPU reference as the kernel, it first measures the
// reference here before saying so. Nil when the kernel cannot be made (the run says why).
func (s *Session) EstimateCP(ctx context.Context, r CPRun) *harness.CPEstimate {
	m := Machine()
	_, onDevice, isRef, _, ok := KernelPlace(r.Sweep.Kernel, r.KernelOptions)
	if !ok {
		return nil
	}
	setup := harness.CPEstimateSetup{Ranks: r.Ranks, InProcess: r.InProcess, OnDevice: onDevice, IsRef: isRef, Warmup: r.Warmup, Iters: r.Iters,
		Overlap: r.Overlap, Check: r.Check, CheckBudget: r.CheckBudget, Baseline: r.Baseline != nil && r.Baseline.File == "",
		DeviceFLOPs: m.DeviceFLOPs, RefFLOPs: m.RefFLOPs, Settle: r.Settle}
	if r.Links != nil {
		setup.LinkBytes = linkBytes(*r.Links, r.Ranks)
	}
	est := harness.NewCPEstimate(r.Sweep, r.Cases, setup)
	if est.Total() > SlowSweep/10 && (!onDevice || r.Check) {
		if ref := CalibrateRef(ctx); ref > 0 {
			setup.RefFLOPs = ref
			est = harness.NewCPEstimate(r.Sweep, r.Cases, setup)
		}
	}
	if total := est.Total().Seconds(); total > SlowSweep.Seconds() {
		lc, longest := est.Longest()
		s.log().Warn().Str("estimate", harness.FormatDuration(total)).Int("cases", len(r.Cases)).Int("samples", r.Sweep.Samples).
			Str("longest_case", lc.Kernel+" "+lc.Mask+" "+lc.Pass.String()).Str("longest", harness.FormatDuration(longest)).
			Msgf("this CP sweep will take about %s (%s at %.0f TFLOP/s on a GPU, the CPU reference at %.1f GFLOP/s here, transfers at %.0f GB/s assumed until rows are timed); Ctrl-C stops it, keeping the rows written",
				harness.FormatDuration(total), r.Sweep.Kernel, setup.DeviceFLOPs/1e12, setup.RefFLOPs/1e9, setup.LinkPrior()/1e9)
	}
	return est
}

// linkBytes is the slowest link an emulated machine gives ranks ranks: the intra-node
// link, or the inter-node one when they span nodes.
func linkBytes(m sim.Machine, ranks int) float64 {
	bw := m.Intra.BandwidthGBs
	if per := m.GPUsPerNode * max(m.RanksPerGPU, 1); per > 0 && ranks > per && m.Inter.BandwidthGBs > 0 {
		bw = min(bw, m.Inter.BandwidthGBs)
	}
	return bw * 1e9
}

// FitPlanMasks refuses, in a dry run or before --mask-json builds its masks, a case
// whose mask alone cannot fit in this host's memory (harness.MaskBytes: a block-sparse
// mask of 1-token blocks over 64K tokens is tens of GiB), as the run would refuse it,
// naming the flags that change that mask's size (maskFix): sparse's and kernel's differ.
// (A dry run reads a block-sparse mask's area without building it: harness.PlanArea.)
func FitPlanMasks(cases []harness.Case) error {
	m := Machine()
	for _, cs := range cases {
		if err := m.Fits(harness.Footprint{Host: harness.MaskBytes(cs)}, 0, "the mask of case "+cs.String()); err != nil {
			return Usagef("%v: %s", err, maskFix(cs))
		}
	}
	return nil
}

// maskFix says what makes case cs's mask smaller, by the flags of the command that runs
// it: a block-sparse mask (sparse) holds a slice per kept block of each KV head, so larger
// blocks (--block for the uniform layout, --avg-block for the variable one), a lower
// --ratios, fewer KV heads or a shorter sequence; a mask of documents (kernel) is counted
// at up to a document a token, the most a sequence can hold, whatever the documents'
// lengths (--counts, --max-doc), so a shorter sequence; another mask is a few slices.
func maskFix(cs harness.Case) string {
	switch {
	case cs.Sparse.IsSparse():
		block := "--block"
		if cs.Sparse.Block <= 0 {
			block = "--avg-block"
		}
		return fmt.Sprintf("give larger blocks (%s), a lower --ratios, fewer KV heads (--heads) or a shorter sequence (--seqlens)", block)
	case mask.DrawsDocuments(cs.Mask):
		return "its documents are counted at up to one a token, the most a sequence holds, whatever --counts or --max-doc give them: give a shorter --seqlens"
	}
	return "give a shorter --seqlens"
}

// blockSliceBytes is what block_causal_document holds a block (its slice, and its share of
// a document of 1-8 blocks): 2.9 GB for 2^24 one-token blocks, masks --block-size 1
// --seqlen 16M (the twelfth pass; about 180 bytes a block, taken as 200).
const blockSliceBytes = 200

// FitMask refuses, before it is built, a mask that cannot fit in this host's memory
// (harness.MaskBytes: a document mask of 2^24 one-token documents holds 3.5 GB; a mask
// with blocks, one slice a block of blockSize tokens, 0 for the mask's default).
func FitMask(name string, seqlen, blockSize int) error {
	c := harness.Case{Mask: name, SeqLen: seqlen}
	need := harness.MaskBytes(c)
	fix := "give fewer tokens, or a larger --max-doc"
	if blockSize > 0 && mask.ReadsOf(name)&mask.ReadsBlockSize != 0 {
		need = max(need, blockSliceBytes*math.Ceil(float64(seqlen)/float64(blockSize)))
		fix = "give fewer tokens, or a larger --block-size"
	}
	if err := Machine().Fits(harness.Footprint{Host: need}, 0, "the mask "+name+" at "+harness.FormatSize(seqlen)); err != nil {
		return Usagef("--seqlen %s: %v: %s", harness.FormatSize(seqlen), err, fix)
	}
	return nil
}

// maxPlanSeconds bounds a dry run's planning (harness.CPPlanSeconds), as simulate's
// NCCL table is bounded.
const maxPlanSeconds = 600

// FitCPPlan refuses, before any mask is built or planned, a dry run of a CP sweep on n
// ranks whose plans cannot fit in this host's memory (harness.CPPlanBytes) or would
// take more than maxPlanSeconds (harness.CPPlanSeconds): a dry run plans every rank, so
// a world of 100000 ranks is itself the allocation to refuse, and the planning grows as
// ranks x tokens (8192 ranks took 40 s, 16384 about 2.5 minutes). sizeFlags names the
// flags as the user gave them.
func FitCPPlan(s harness.CPSweep, n int, sizeFlags string) error {
	docs := s.DocsFit(n) // a mask of documents and its plan, one at a time
	need := harness.CPPlanBytes(n, s.SeqLen) + docs.PlanBytes
	what := fmt.Sprintf("planning %d ranks of a %s-token sequence", n, harness.FormatSize(s.SeqLen))
	if err := Machine().Fits(harness.Footprint{Host: need}, 0, what); err != nil {
		if d := docsRefusal(s, n, err, sizeFlags, func(sw harness.CPSweep) bool {
			return Machine().Fits(harness.Footprint{Host: harness.CPPlanBytes(n, sw.SeqLen) + sw.DocsFit(n).PlanBytes}, 0, "") == nil
		}); d != nil {
			return d
		}
		return Usagef("%s: %v: use fewer ranks or tokens, or longca simulate --gpus %d (it plans a sample of the ranks)", sizeFlags, err, n)
	}
	// balanced's dispatch at a --cp-block given: a few words and a placement a block
	var dispatchSeconds float64
	if slices.Contains(s.Methods, "balanced") && s.Mesh.Block > 0 {
		b, t := harness.CPDispatchWork(s.SeqLen, s.Mesh.Block)
		dispatchSeconds = t
		if err := Machine().Fits(harness.Footprint{Host: need + b}, 0, what); err != nil || t > maxPlanSeconds {
			return Usagef("--cp-block %d: balanced's dispatch of %s tokens in %.0f blocks would take about %s of memory and %s a case to plan: give a larger --cp-block, or 0 for the default",
				s.Mesh.Block, harness.FormatSize(s.SeqLen), math.Ceil(float64(s.SeqLen)/float64(s.Mesh.Block)), harness.FormatBytes(need+b), harness.FormatDuration(t))
		}
	}
	cases, err := s.Configs(n)
	if err != nil {
		return nil // the sweep itself says why
	}
	planned := 0
	for _, c := range cases {
		if c.Skip == nil {
			planned++
		}
	}
	// each case's mask of documents, built and planned twice (its case, its table)
	docSeconds := float64(planned) * harness.CPPlanDocFactor * docs.MaskSeconds
	if t := harness.CPPlanSeconds(n, s.SeqLen, planned) + float64(planned)*dispatchSeconds + docSeconds; t > maxPlanSeconds {
		if t-docSeconds <= maxPlanSeconds { // long documents would plan in time
			return Usagef("%s: %s for %d cases would take about %s (the limit is %d minutes), %s of it building and planning %.0f documents a mask: give longer documents (%s) or a shorter sequence",
				lengthFlag(sizeFlags), what, planned, harness.FormatDuration(t), maxPlanSeconds/60, harness.FormatDuration(docSeconds), docs.Docs, docsFlags(s))
		}
		return Usagef("%s: %s for %d cases would take about %s (the limit is %d minutes; the time grows as ranks x tokens): use fewer ranks, tokens, methods or masks, or longca simulate --gpus %d (it plans a sample of the ranks)",
			sizeFlags, what, planned, harness.FormatDuration(t), maxPlanSeconds/60, n)
	}
	return nil
}

// FitCP refuses, before any mask is built, a CP sweep on n ranks whose ranks cannot fit
// in memory: n in-process ranks share this host; under a launcher the ranks of this node
// (onNode) do. A rank holds its tokens with the padding its sharding adds to each document
// (zigzag: to a multiple of 2n tokens), its own mask of documents and their plan
// (harness.CPSweep.DocsFit), and, with check, the case's check (at its full length for a
// mask of short documents, whose area is small: harness.CPSweep.CPCheckFootprint),
// whichever is more; all from the documents' source, before any is drawn. The line names
// --ranks when one rank would fit; the documents (and --sharding contiguous where that
// fits) when they are what does not fit; else sizeFlags (the size flags as the user gave
// them, the length's first).
func FitCP(s harness.CPSweep, n, onNode int, inProcess bool, ko kernels.Options, check bool, checkBudget float64, sizeFlags string) error {
	k, onDevice, isRef, devBytes, ok := KernelPlace(s.Kernel, ko)
	if !ok {
		return nil // the kernel cannot be made: the run says why
	}
	base := (s.SeqLen + n - 1) / n
	if b := s.Mesh.Block; b > 0 { // balanced pads a rank up to whole dispatch blocks
		base = (base + b - 1) / b * b
	}
	base += base / 8 // zigzag's padding of a sequence of long documents
	m := Machine()
	// balanced's THD layout copies keys: forced, or auto on a kernel that counts its calls.
	_, counts := k.(kernels.CallCounter)
	thd := s.Mesh.KVLayout == cp.KVDocs || s.Mesh.KVLayout == cp.KVAuto && counts
	// kernels/ref lists each row's key ranges: one a dispatch block on balanced's sub-masks.
	// Counted for a --cp-block given: the default's blocks are at least 1/512 of the
	// sequence (16 MB of spans a rank at 8 ranks of 8K), and where they are many the
	// reference's own time refuses the sweep.
	ranges := 0.0
	if isRef && s.Mesh.Block > 0 && slices.Contains(s.Methods, "balanced") {
		ranges = harness.RefRangesPerRow(s.SeqLen, s.Mesh.Block)
	}
	footprint := func(tokens int, ranges float64) (need harness.Footprint) {
		for _, h := range s.Heads {
			// The methods' own buffers where they can exceed the generic estimate (balanced).
			mb := cp.MethodBufferBound(s.Methods, tokens, n, h.Q, h.KV, s.HeadDim, s.DType, s.Passes, s.Mesh.Stages, thd)
			f := harness.CPFootprintWith(tokens, h.Q, h.KV, s.HeadDim, s.DType, s.Passes, onDevice, isRef, mb, ranges)
			if f.Host > need.Host || f.Device > need.Device {
				need = f
			}
		}
		return need
	}
	// held is what here ranks of this host (and one GPU) hold of sweep sw with ref ranges:
	// a rank's tokens and mask, or the check, whichever is more; and the tokens a rank holds.
	held := func(sw harness.CPSweep, ranges float64, here int) (harness.Footprint, int) {
		docs := sw.DocsFit(n)
		tokens := max(base, int(docs.Tokens))
		need := footprint(tokens, ranges)
		need.Host += docs.MaskBytes
		f := harness.Footprint{Host: need.Host * float64(here), Device: need.Device}
		if check {
			c, _ := sw.CPCheckFootprint(n, here, checkBudget, onDevice, isRef)
			f.Host, f.Device = max(f.Host, c.Host), max(f.Device, c.Device)
		}
		if inProcess && onDevice && here > 1 {
			f.Device *= float64(n) // in-process ranks share one GPU
		}
		return f, tokens
	}
	all := func(sw harness.CPSweep, ranges float64) (harness.Footprint, int) { return held(sw, ranges, onNode) }
	need, tokens := all(s, ranges)
	what := fmt.Sprintf("%d rank(s) of %d tokens", onNode, tokens)
	err := m.Fits(need, devBytes, what)
	if err == nil {
		return nil
	}
	if s.Mesh.Block > 0 && ranges > 4 {
		// the reference's spans of balanced's blocks are what does not fit: name --cp-block
		if few, _ := all(s, 0); m.Fits(few, devBytes, "") == nil {
			fix := "or 0 for the default"
			for b := s.Mesh.Block * 2; b <= s.SeqLen; b *= 2 {
				if f, _ := all(s, harness.RefRangesPerRow(s.SeqLen, b)); m.Fits(f, devBytes, "") == nil {
					fix = fmt.Sprintf("give --cp-block %d or more, or 0 for the default", b)
					break
				}
			}
			return Usagef("--cp-block %d with --kernel %s: %v: the reference may list a key range a query row for each of balanced's %.0f blocks; %s", s.Mesh.Block, s.Kernel, err, ranges, fix)
		}
	}
	if err := docsRefusal(s, n, err, sizeFlags, func(sw harness.CPSweep) bool {
		f, _ := all(sw, ranges)
		return m.Fits(f, devBytes, "") == nil
	}); err != nil {
		return err
	}
	// one rank alone, or of fewer ranks (whose sharding pads each document less), would fit
	one, _ := held(s, ranges, 1)
	fewer, _ := held(longDocs(s), ranges, 1)
	if inProcess && (m.Fits(one, devBytes, "") == nil || m.Fits(fewer, devBytes, "") == nil) {
		return Usagef("--ranks %d: %v: in-process ranks share this host; use fewer, or one process per GPU (mpirun, srun)", n, err)
	}
	return Usagef("%s: %v (kernel %s): give smaller sizes", sizeFlags, err, s.Kernel)
}

// longDocs is sw with one document a sequence: what its masks would cost were their
// documents long.
func longDocs(sw harness.CPSweep) harness.CPSweep {
	sw.Docs = harness.Docs{Source: &dataset.Empirical{Name: "long", Counts: []int{max(sw.SeqLen, 1)}}}
	return sw
}

// lengthFlag is the sequence's length flag among sizeFlags (comma-separated flags as the
// user gave them): --tokens-per-rank or --seqlen, else the first.
func lengthFlag(sizeFlags string) string {
	items := strings.Split(sizeFlags, ",")
	for _, f := range items {
		if f = strings.TrimSpace(f); strings.HasPrefix(f, "--tokens-per-rank") || strings.HasPrefix(f, "--seqlen") {
			return f
		}
	}
	return strings.TrimSpace(items[0])
}

// docsRefusal is the refusal of a CP sweep on n ranks whose masks' documents are what does
// not fit (err; fits says whether a sweep fits): the sweep would fit were its documents
// long. It names the documents (their source, count and length, and what zigzag sharding
// pads them to), the flags that lengthen them or shorten the sequence, and --sharding
// contiguous where that fits. Nil where the documents are not the cause.
func docsRefusal(s harness.CPSweep, n int, err error, sizeFlags string, fits func(harness.CPSweep) bool) error {
	docs := s.DocsFit(n)
	if docs.Docs <= 1 || !fits(longDocs(s)) {
		return nil
	}
	piece := fmt.Sprintf("%.3g tokens", docs.Piece)
	if piece == "1 tokens" {
		piece = "1 token"
	}
	detail := fmt.Sprintf("%s gives documents of %s on average, about %.0f a sequence", docsSource(s), piece, float64(s.SeqLen)/docs.Piece)
	if docs.PaddedBy != "" && docs.Tokens > math.Ceil(float64(s.SeqLen)/float64(n))*9/8 {
		detail += fmt.Sprintf(", which zigzag sharding pads to %.0f tokens a rank (%s)", docs.Tokens, docs.PaddedBy)
	}
	length := lengthFlag(sizeFlags)
	fix := fmt.Sprintf("give longer documents (%s) or a shorter sequence (%s)", docsFlags(s), length)
	contiguous := s
	contiguous.Mesh.Sharding = cp.Contiguous
	if docs.PaddedBy != "" && s.SeqLen%n == 0 && fits(contiguous) {
		fix += ", or --sharding contiguous, which fits"
	}
	return Usagef("%s: %v: %s: %s", length, err, detail, fix)
}

// docsSource names where a sweep's documents come from: the file or distribution given,
// else the one MASKS.md assigns to its length.
func docsSource(s harness.CPSweep) string {
	if s.Docs.Source != nil {
		return dataset.SourceID(s.Docs.Source)
	}
	return dataset.ForCP(s.SeqLen) + " (MASKS.md's distribution at this length)"
}

// docsFlags are the flags that lengthen a sweep's documents: the source's (--counts,
// --dist, either where none is given), and a larger --max-doc where one caps them.
func docsFlags(s harness.CPSweep) string {
	flags := "--dist or --counts"
	switch s.Docs.Source.(type) {
	case *dataset.Empirical:
		flags = "--counts"
	case *dataset.Dist:
		flags = "--dist"
	}
	if !s.Docs.MaxDoc.IsZero() {
		flags += ", a larger --max-doc"
	}
	return flags
}
