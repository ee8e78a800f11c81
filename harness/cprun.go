package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/check"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// CPKernel is the kernel the CP methods run with k: k itself when it runs on the host or
// is a cp.DeviceKernel (every buffer on its device), else k behind cp.Staged (every step
// copied through the host) when staged allows it. A device kernel is never staged
// silently: without staged that is an error naming the flag.
func CPKernel(k kernels.Kernel, staged bool) (kernels.Kernel, error) {
	if k.Device().Name() == "cpu" || cp.DeviceResident(k) {
		return k, nil
	}
	if !staged {
		return nil, fmt.Errorf("kernel %s runs on %s but is not a cp.DeviceKernel (no CUDADevice method), so the CP methods would copy every step through the host: pass --staged to accept that (its rows say %s+staged), or use a device kernel such as cuda", k.Name(), k.Device().Name(), k.Name())
	}
	return cp.Staged(k), nil
}

// computeDevice is the device k computes on: a staged kernel's (cp.Staged: --staged) is its
// inner kernel's GPU, where its Device is the host its tensors pass through.
func computeDevice(k kernels.Kernel) tensor.Device {
	for {
		u, ok := k.(interface{ Unwrap() kernels.Kernel })
		if !ok {
			return k.Device()
		}
		k = u.Unwrap()
	}
}

// CPRunner runs CP cases on one rank. Every rank of the world runs the same cases in the
// same order, each with its own CPRunner and its own kernel (ranks never share a kernel
// instance: a kernel keeps per-call state on its device's stream).
//
// A case is checked first (on its first sample, at CheckSize's size), then each pass is
// timed by the harness's Loop: a barrier before every iteration, the slowest rank's time
// after it, the cache flushed. Every outcome becomes a row (ok, unsupported, oom, wrong,
// error), written only after the ranks agree on it: a rank that fails inside a method
// aborts the run's sub-groups so that its peers, waiting there, return, and one
// all-reduce over the world decides the status every rank records.
type CPRunner struct {
	Sweep CPSweep
	// Comm is this rank's world communicator.
	Comm comm.Comm
	// Kernel is this rank's kernel, from CPKernel.
	Kernel kernels.Kernel
	// KernelOptions made the kernel (recorded: device index).
	KernelOptions kernels.Options
	// Check runs the correctness check; CheckBudget bounds its size (0: the default).
	Check       bool
	CheckBudget float64
	// Warmup and Iters are the untimed and timed repetitions.
	Warmup, Iters int
	// Overlap times every pass a second time with the transfers skipped (no_comm_ms).
	Overlap bool
	// Baseline gives the efficiency columns; nil: none.
	Baseline *Baseline
	// Base holds the columns every row shares (run id, host, launcher, backend, ...).
	Base results.Row
	// OnBaseline, when set, hears of each baseline kernel row rank 0 measured.
	OnBaseline func(row results.Row)
	// OnNoBaseline, when set, hears once of each case a --baseline FILE gives no figure
	// for, and why: no ok kernel row of it (another length, head dim, dtype...), or rows
	// measured on another card or documents, or under several. Those rows carry no
	// kernel_tflops and no cp_efficiency.
	OnNoBaseline func(k BaselineKey, why string)
	// GPU reads the state of this rank's GPU while each pass is timed (its SM clock, power,
	// temperature: summariseGPU), the transfer-free second timing (--overlap) aside; nil
	// records none.
	GPU GPUSampler
	// DeviceUUID names this rank's physical GPU (KernelOptions.Device's UUID; "" when
	// unknown), recorded in its rows on a GPU; nil records none.
	DeviceUUID func() string
	// Settle leaves every rank's GPU idle this long before each pass is timed and before
	// each kernel-alone baseline (--settle; 0: not at all), recorded in settle_ms.
	Settle time.Duration

	ready          bool
	ranksPerDevice int
	checks         map[string]cpVerdict
	refs           refCache
	base           map[BaselineKey]float64
	kernelRunner   *Runner
	masks          map[maskKey]maskFacts
	// lastRefused is, per mask, the index in RunCP's cases of its last refused case (Skip),
	// and at the index of the case running: a sample's mask facts are kept only while a
	// refused case of that mask is still to come (nil outside RunCP: none kept). Kept for
	// every case they were a copy of each sample's parameters (the document lengths: 8.4 MB
	// for 8 samples of 262,144 1-token documents on each rank) never read.
	lastRefused map[string]int
	at          int
}

// maskKey names a sample's mask: its name, length and seed.
type maskKey struct {
	name   string
	seqlen int
	seed   uint64
}

// maskFacts are what a case's rows record of its sample's mask: its parameters (JSON, and
// as built: the document columns read them) and its area.
type maskFacts struct {
	params map[string]string
	json   string
	area   int64
}

// cpVerdict is a case's check as its rows record it.
type cpVerdict struct {
	ran bool
	fig results.CheckFigure
	err error // nil: passed; else the agreed outcome (ErrWrong when it failed the rule)
}

// prepare learns, once, how many ranks share this rank's device (an all-reduce of every
// rank's host and device: a GPU by its index too, since a torch worker's name has none).
func (r *CPRunner) prepare() error {
	if r.ready {
		return nil
	}
	n, me := r.Comm.Size(), r.Comm.Rank()
	h := fnv.New64a()
	dev := computeDevice(r.Kernel).Name()
	if dev != "cpu" {
		dev += "#" + strconv.Itoa(r.KernelOptions.Device)
	}
	fmt.Fprintf(h, "%s/%s", r.Base.Host, dev)
	id := float64(h.Sum64()&(1<<52-1) | 1) // exact in a float64, never zero
	v := tensor.NewHost(tensor.FP64, n)
	v.Set(me, id)
	if err := r.Comm.AllReduce(v, comm.Max); err != nil {
		return &FatalError{fmt.Errorf("sharing the ranks' devices: %w", err)}
	}
	for i := range n {
		if v.At(i) == id {
			r.ranksPerDevice++
		}
	}
	r.checks = map[string]cpVerdict{}
	r.base = map[BaselineKey]float64{}
	r.masks = map[maskKey]maskFacts{}
	r.ready = true
	return nil
}

// RanksPerDevice is how many ranks share this rank's device (after the first Run).
func (r *CPRunner) RanksPerDevice() int { return r.ranksPerDevice }

// agreeOn is this rank's outcome, agreed with the others (agree); a rank that failed
// first aborts the run's sub-groups, where its peers may be waiting for it. A rank whose
// ctx is done (interrupted) reports that instead (stopping), so every rank stops at this
// agreement; it aborts nothing, having left no collective halfway.
func (r *CPRunner) agreeOn(ctx context.Context, run *cp.Run, d time.Duration, err error) (time.Duration, error) {
	if err != nil && run != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, ErrInterrupted) {
		run.Abort(err)
	}
	return agree(r.Comm, d, stopping(ctx, err))
}

// uncancelled is the context the methods run under (and their kernels): ctx without its
// cancellation. A rank interrupted mid-case must not leave an exchange its peers are
// inside (they would wait there until --timeout: a scheduler's SIGTERM does not reach
// every node at the same instant, and a signal may reach one rank only); it finishes the
// step at hand and stops at the next agreement, where every rank learns of it (agreeOn).
// A second interrupt ends the process, and a peer that never comes fails at --timeout.
func uncancelled(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// row fills the columns the rows of a case share.
func (r *CPRunner) row(cs CPCase, sample int, pass kernels.Pass) results.Row {
	s := r.Sweep
	row := r.Base
	row.Time = time.Now().UTC()
	row.Rank, row.WorldSize = int64(r.Comm.Rank()), int64(r.Comm.Size())
	row.Bench, row.Kernel, row.Method = "cp", r.Kernel.Name(), cs.Method
	row.KernelVersions = "{}"
	if _, ok := r.Kernel.(kernels.Describer); ok && r.Kernel.Device().Name() == "cpu" {
		describe(r.Kernel, kernels.Problem{}, pass, &row, nil) // the reference's threads (a device kernel's are per problem)
	}
	row.Device = computeDevice(r.Kernel).Name() // a staged kernel's GPU, not the host its tensors pass through
	setGPUColumns(&row, r.KernelOptions.Device, r.DeviceUUID)
	SetMeshColumns(&row, cs.Config) // (null mesh for a case whose plan refused it unresolved)
	row.Mask, row.MaskParams, row.Seed, row.Sample = cs.Mask, "{}", s.Seed+uint64(sample), int64(sample)
	row.SeqLen, row.SeqLenPerRank, row.Batch = int64(s.SeqLen), int64(s.SeqLen/r.Comm.Size()), 1
	row.HeadsQ, row.HeadsKV, row.HeadDim = int64(cs.Heads.Q), int64(cs.Heads.KV), int64(s.HeadDim)
	row.DType, row.Pass = s.DType.String(), pass.String()
	row.Warmups, row.Iters = int64(r.Warmup), int64(r.Iters)
	row.RanksPerDevice = results.Ptr(int64(r.ranksPerDevice))
	return row
}

// Run measures one sample of a case on this rank and returns its rows, one per pass,
// with the status every rank agreed on. The error is a *FatalError (the world failed:
// the run cannot go on) or a cancelled context.
func (r *CPRunner) Run(ctx context.Context, cs CPCase, sample int) ([]results.Row, error) {
	if err := r.prepare(); err != nil {
		return nil, err
	}
	s := r.Sweep
	if cc, ok := r.Kernel.(kernels.CallCounter); ok { // balanced's auto key layout asks it
		cs.Config.Calls = cc
	}
	rows := make([]results.Row, len(s.Passes))
	for i, p := range s.Passes {
		rows[i] = r.row(cs, sample, p)
	}
	setAll := func(err error) {
		for i := range rows {
			rows[i].Status, rows[i].Reason = Classify(err)
		}
	}
	seed := s.Seed + uint64(sample)
	if cs.Skip != nil { // the same on every rank: nothing to agree on
		setAll(cs.Skip)
		// The mask's columns all the same, as the case's ok rows (and simulate's) have
		// them: Cases built this mask to plan the case, so it can be built.
		if f, err := r.maskOf(cs.Mask, seed); err == nil {
			r.setMaskColumns(rows, cs, f)
		}
		return rows, nil
	}
	m, pl, spec, err := s.plan(cs, s.SeqLen, cs.Heads, seed)
	if err != nil { // every rank plans the same
		setAll(Unsupported(err))
		if spec.Name != "" && spec.Mask.SeqQ == s.SeqLen { // the mask was built; its plan failed
			if f, err := r.keep(cs.Mask, seed, spec); err == nil {
				r.setMaskColumns(rows, cs, f)
			}
		}
		return rows, nil
	}
	f, err := r.keep(cs.Mask, seed, spec)
	if err != nil {
		return nil, err
	}
	r.planned(rows, cs, pl, f)
	// Can this rank's kernel run the steps at all (dtype, head dim, heads per rank)?
	// Asked on every rank and agreed: an unsupported case is not checked or timed.
	local := kernels.Problem{HeadsQ: pl.HeadsQ, HeadsKV: pl.HeadsKV, HeadDim: s.HeadDim, DType: s.DType, Mask: pl.Problem.Mask}
	var serr error
	if err := r.Kernel.Supports(local); err != nil {
		serr = Unsupported(fmt.Errorf("kernel %s: %w", r.Kernel.Name(), err))
	}
	if _, err := agree(r.Comm, 0, stopping(ctx, serr)); err != nil {
		if isFatal(err) {
			return nil, err
		}
		setAll(err)
		return rows, nil
	}
	var verdict cpVerdict
	if r.Check {
		if verdict, err = r.check(ctx, cs, pl); err != nil {
			return nil, err
		}
		for i := range rows {
			rows[i].SetCheck(verdict.fig)
		}
		if verdict.err != nil {
			if !verdict.ran {
				for i := range rows {
					rows[i].CheckPass = nil
				}
			}
			setAll(verdict.err)
			return rows, nil
		}
	}
	if err := r.timePasses(ctx, cs, m, pl, sample, rows); err != nil {
		return nil, err
	}
	return rows, nil
}

// planned fills the columns of a sample's rows that its plan and mask (f) give.
func (r *CPRunner) planned(rows []results.Row, cs CPCase, pl *cp.Plan, f maskFacts) {
	r.setMaskColumns(rows, cs, f)
	for i, p := range r.Sweep.Passes {
		row := &rows[i]
		SetPlanColumns(row, pl)
		// What this rank sends: every rank the same, except for a method whose ranks
		// differ (cp.RankBytes).
		row.CommBytes = results.Ptr(cp.RankCommBytesOf(pl, r.Comm.Rank(), p))
		describe(r.Kernel, pl.Problem, p, row, commVersions(r.Comm))
	}
}

// setMaskColumns fills the columns of a case's rows that its sample's mask gives, whatever
// their status: its parameters and documents, its area, and each pass's FLOPs of the
// global problem (docs/results-format.md), as simulate fills its rows of the case.
func (r *CPRunner) setMaskColumns(rows []results.Row, cs CPCase, f maskFacts) {
	for i, p := range r.Sweep.Passes {
		row := &rows[i]
		row.MaskParams = f.json
		SetDocColumns(row, f.params)
		row.MaskArea, row.FLOPs = f.area, kernels.AreaFLOPs(float64(f.area), cs.Heads.Q, r.Sweep.HeadDim, p)
	}
}

// keep is what the rows of a sample record of its built mask (maskFacts), recorded for the
// refused cases of the same mask and seed (maskOf) while one of them is still to come in
// RunCP's cases (lastRefused); the mask itself is not kept.
func (r *CPRunner) keep(name string, seed uint64, spec mask.Spec) (maskFacts, error) {
	b, err := json.Marshal(spec.Params)
	if err != nil {
		return maskFacts{}, fmt.Errorf("mask %s parameters: %w", spec.Name, err)
	}
	f := maskFacts{params: spec.Params, json: string(b), area: spec.Mask.Area()}
	if last, ok := r.lastRefused[name]; ok && last >= r.at {
		r.masks[maskKey{name, r.Sweep.SeqLen, seed}] = f
	}
	return f, nil
}

// maskOf is what the rows of a refused case record of its sample's mask: kept from a case
// of the same mask and seed that built it, else built here (once a mask and seed: a
// refused case's rows are those of its first sample, whose mask Cases built to plan it)
// and let go.
func (r *CPRunner) maskOf(name string, seed uint64) (maskFacts, error) {
	if f, ok := r.masks[maskKey{name, r.Sweep.SeqLen, seed}]; ok {
		return f, nil
	}
	spec, _, err := r.Sweep.build(name, r.Sweep.SeqLen, seed)
	if err != nil {
		return maskFacts{}, err
	}
	return r.keep(name, seed, spec)
}

// commVersions are the communicator's library and version (comm.Versioned: NCCL's, MPI's),
// which a CP row records beside its kernel's: a CP time is both theirs. nil where it names
// none.
func commVersions(c comm.Comm) map[string]string {
	if v, ok := c.(comm.Versioned); ok {
		return v.Versions()
	}
	return nil
}

// timePasses times every pass of a checked sample into its rows (their statuses as the
// ranks agreed); a pass that failed gives its row the failure and the next pass a fresh
// run. The error is a *FatalError or a cancelled context.
func (r *CPRunner) timePasses(ctx context.Context, cs CPCase, m cp.Method, pl *cp.Plan, sample int, rows []results.Row) error {
	s := r.Sweep
	run, err := r.newRun(ctx, pl)
	if err != nil {
		if isFatal(err) {
			return err
		}
		for i := range rows {
			rows[i].Status, rows[i].Reason = Classify(err)
		}
		return nil
	}
	defer func() {
		if run != nil {
			_ = run.Close()
		}
	}()
	for i, pass := range s.Passes {
		err := r.timePass(ctx, m, run, pass, s.Seed+uint64(sample), &rows[i])
		if isFatal(err) {
			return err
		}
		if errors.Is(err, ErrInterrupted) {
			// Every rank agreed to stop (a rank was interrupted): the passes left are not
			// run; RunCP drops the rows that did not finish.
			for j := i; j < len(rows); j++ {
				rows[j].Status, rows[j].Reason = Classify(err)
				clearTimes(&rows[j])
			}
			return nil
		}
		if err != nil {
			rows[i].Status, rows[i].Reason = Classify(err)
			clearTimes(&rows[i])
			// A run that failed may have aborted sub-groups: every rank starts afresh.
			run.Abort(err)
			_ = run.Close()
			if run, err = r.newRun(ctx, pl); err != nil {
				run = nil
				if isFatal(err) {
					return err
				}
				for j := i + 1; j < len(rows); j++ {
					rows[j].Status, rows[j].Reason = Classify(err)
				}
				return nil
			}
			continue
		}
		rows[i].Status = results.StatusOK
		if err := r.efficiency(ctx, cs, pass, &rows[i]); err != nil {
			return err
		}
	}
	return nil
}

// newRun makes the run's sub-groups (collective) and agrees on whether every rank could.
func (r *CPRunner) newRun(ctx context.Context, pl *cp.Plan) (*cp.Run, error) {
	run, err := cp.NewRun(pl, r.Kernel, r.Comm)
	if _, err = r.agreeOn(ctx, run, 0, err); err != nil {
		if run != nil {
			run.Abort(err)
			_ = run.Close()
		}
		return nil, err
	}
	return run, nil
}

func isFatal(err error) bool {
	var f *FatalError
	return errors.As(err, &f) || errors.Is(err, context.Canceled)
}

func clearTimes(row *results.Row) {
	row.MedianMs, row.MinMs, row.MaxMs, row.MeanMs, row.TFLOPs, row.BandwidthGBs = nil, nil, nil, nil, nil, nil
	row.PeakMemBytes, row.DeviceTFLOPs, row.NoCommMs = nil, nil, nil
	clearGPU(row)
}

// cpCheckLengths are CheckSize's candidate global lengths on n ranks: 4K, 2K, 1K and
// 512 rounded up to a multiple of n, so every rank holds a whole share.
func cpCheckLengths(n int) []int {
	var out []int
	for _, l := range DefaultCheckLengths {
		l = (l + n - 1) / n * n
		if len(out) == 0 || out[len(out)-1] != l {
			out = append(out, l)
		}
	}
	return out
}

// checkShape is the length and heads case cs (planned as pl0) is checked at on n ranks
// under budget multiply-adds (0: the default): CheckSize over cpCheckLengths, keeping
// only sizes the method plans the same way (the KV heads replicated or not, as in the
// case). The run's check and the time estimate both ask it.
func (s CPSweep) checkShape(cs CPCase, pl0 *cp.Plan, n int, budget float64) (int, Heads) {
	fits := func(seqlen int, h Heads) (int64, bool) {
		_, pl, spec, err := s.plan(cs, seqlen, h, s.Seed)
		if err != nil || pl.ReplicateKV != pl0.ReplicateKV {
			return 0, false
		}
		return spec.Mask.Area(), true
	}
	if budget == 0 {
		budget = DefaultCheckBudget
	}
	return CheckSize(Case{SeqLen: s.SeqLen, Heads: cs.Heads, HeadDim: s.HeadDim}, cpCheckLengths(n), fits, budget)
}

// check runs (once per case) the correctness check of the case's first sample, at
// CheckSize's size: the same mask and seed at a shorter length, the query:KV ratio kept,
// and only sizes the method plans the same way (the KV heads replicated or not, as in
// the case). Every rank returns the same verdict.
func (r *CPRunner) check(ctx context.Context, cs CPCase, pl0 *cp.Plan) (cpVerdict, error) {
	key := cs.String()
	if v, ok := r.checks[key]; ok {
		return v, nil
	}
	s := r.Sweep
	seqlen, h := s.checkShape(cs, pl0, r.Comm.Size(), r.CheckBudget)
	v := cpVerdict{fig: results.CheckFigure{SeqLen: seqlen, HQ: h.Q, HKV: h.KV}}
	m, pl, _, err := s.plan(cs, seqlen, h, s.Seed)
	if err != nil { // only the case itself can get here, and it planned before
		v.err = Unsupported(fmt.Errorf("check at S=%d heads %s: %w", seqlen, h, err))
		r.checks[key] = v
		return v, nil
	}
	run, err := r.newRun(ctx, pl)
	if err != nil {
		if isFatal(err) {
			return v, err
		}
		v.err = fmt.Errorf("check: %w", err)
		if !errors.Is(err, ErrInterrupted) { // a stop is no verdict on the case
			r.checks[key] = v
		}
		return v, nil
	}
	backward := false
	for _, p := range s.Passes {
		backward = backward || p != kernels.Fwd
	}
	// The method runs uncancelled (an interrupt is heeded at the agreements); rank 0's
	// references, computed alone, stop at once.
	rep, err := cp.CheckRank(uncancelled(ctx), m, run, cp.CheckOptions{Seed: s.Seed, Backward: backward,
		Agree: func(err error) error {
			_, err = r.agreeOn(ctx, run, 0, err)
			return err
		},
		References: func(_ context.Context, p kernels.Problem, q, k, val, dout *tensor.Host, bwd bool) (check.Outputs, check.Outputs, error) {
			return r.refs.get(ctx, p, q, k, val, dout, bwd)
		},
	})
	// Every rank ends the check here, whatever happened after the method ran (gathering
	// the outputs, rank 0's comparison): one more agreement.
	_, err = r.agreeOn(ctx, run, 0, err)
	_ = run.Close()
	if isFatal(err) {
		return v, err
	}
	if err != nil {
		v.err = fmt.Errorf("check at S=%d heads %s: %w", seqlen, h, err)
		if !errors.Is(err, ErrInterrupted) { // a stop is no verdict on the case
			r.checks[key] = v
		}
		return v, nil
	}
	v.ran = true
	w := Outcome(rep).Worst
	v.fig.Name, v.fig.Err, v.fig.NaiveErr, v.fig.Tol, v.fig.Pass = w.Name, w.Err, w.NaiveErr, w.Tol, rep.Pass
	if !rep.Pass {
		v.err = fmt.Errorf("%w at S=%d heads %s: %s", ErrWrong, seqlen, h, wrongWhy(w))
	}
	r.checks[key] = v
	return v, nil
}

// passTensors are a pass's q, k, v, dout, out, lse, dq, dk, dv on the run's device (the
// host tensors themselves on the CPU), q, k, v and dout drawn from seed on this rank's
// stream. What was uploaded is returned for the caller to free, also with an error.
func (r *CPRunner) passTensors(run *cp.Run, seed uint64) ([]tensor.Tensor, error) {
	pl := run.Plan
	rng := rand.New(rand.NewPCG(seed, uint64(r.Comm.Rank())))
	hostTs := hostPassTensors(rng, pl.Problem.DType, pl.Tokens, pl.Problem.HeadsQ, pl.Problem.HeadsKV, pl.Problem.HeadDim)
	ts := make([]tensor.Tensor, len(hostTs))
	for i, h := range hostTs {
		var err error
		if ts[i], err = run.Upload(h); err != nil {
			return ts, fmt.Errorf("%s: inputs on %s: %w", pl.Method, run.Device().Name(), err)
		}
	}
	return ts, nil
}

// hostPassTensors are a pass's q, k, v, dout, out, lse, dq, dk, dv on the host for tokens
// tokens of hq query and hkv KV heads, q, k, v and dout drawn from rng: what a rank
// prepares for each pass (HostPrepRate measures it).
func hostPassTensors(rng *rand.Rand, dt tensor.DType, tokens, hq, hkv, d int) []*tensor.Host {
	shape := func(h int) []int { return []int{tokens, h, d} }
	hostTs := []*tensor.Host{tensor.NewHost(dt, shape(hq)...), tensor.NewHost(dt, shape(hkv)...), tensor.NewHost(dt, shape(hkv)...),
		tensor.NewHost(dt, shape(hq)...), tensor.NewHost(dt, shape(hq)...), tensor.NewHost(tensor.FP32, hq, tokens),
		tensor.NewHost(dt, shape(hq)...), tensor.NewHost(dt, shape(hkv)...), tensor.NewHost(dt, shape(hkv)...)}
	for _, t := range hostTs[:4] {
		t.FillNormal(rng, 1)
	}
	return hostTs
}

// timePass times one pass on this rank's random shard: the inputs uploaded (agreed),
// for bwd the forward it needs (agreed), then the Loop; with Overlap, the Loop again
// with the transfers skipped. The error is the agreed outcome or a *FatalError.
func (r *CPRunner) timePass(ctx context.Context, m cp.Method, run *cp.Run, pass kernels.Pass, seed uint64, row *results.Row) error {
	dev := run.Device()
	run.ReleaseCache()
	dev.ResetPeak()
	ts, err := r.passTensors(run, seed)
	defer func() { run.Free(ts...) }()
	if _, err = r.agreeOn(ctx, run, 0, err); err != nil {
		return err
	}
	q, k, v, dout, out, lse, dq, dk, dv := ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6], ts[7], ts[8]
	// The method's exchanges run to the end of the iteration whatever this rank's ctx
	// says; the agreement after it (loop.After) is where an interrupt stops every rank.
	mctx := uncancelled(ctx)
	fwd := func() error { return m.Forward(mctx, run, q, k, v, out, lse) }
	bwd := func() error { return m.Backward(mctx, run, q, k, v, out, lse, dout, dq, dk, dv) }
	body := fwd
	switch pass {
	case kernels.Bwd:
		// The saved forward the backward uses.
		if _, err := r.agreeOn(ctx, run, 0, fwd()); err != nil {
			return fmt.Errorf("forward before backward: %w", err)
		}
		body = bwd
	case kernels.FwdBwd:
		body = func() error {
			if err := fwd(); err != nil {
				return err
			}
			return bwd()
		}
	}
	// The bytes the method sends, counted around the body alone (not the barriers and
	// agreements around it).
	var sent int64
	counted := func() error {
		before := run.Counters().BytesSent
		err := body()
		sent += run.Counters().BytesSent - before
		return err
	}
	// Before every iteration: on a device shared by ranks, this rank's cache flush has
	// finished (they would otherwise time each other's flushes); then every rank starts
	// together. A rank alone on its device does not wait for its flush, as the kernel
	// alone (the baseline) does not: a host wait there would start the timed region on
	// an idle device, so the host's launch latency would count for CP and not for the
	// kernel (docs/cp-gpu.md, "Engine overhead at one rank").
	before := func() error {
		if s, ok := dev.(interface{ Sync() error }); ok && r.ranksPerDevice > 1 {
			if err := s.Sync(); err != nil {
				return err
			}
		}
		return r.Comm.Barrier()
	}
	loop := Loop{Warmup: r.Warmup, Iters: r.Iters, Before: before,
		After: func(d time.Duration, err error) (time.Duration, error) { return r.agreeOn(ctx, run, d, err) }}
	// --settle: every rank leaves its GPU idle, then they agree (an interrupt on one is
	// every rank's) and the loop's first barrier starts them together.
	settled := r.Settle > 0 && row.DeviceIndex != nil
	if settled {
		if _, err := r.agreeOn(ctx, run, 0, idle(ctx, r.Settle)); err != nil {
			return err
		}
	}
	gw := watchGPU(r.GPU, row)
	st, err := loop.Time(dev, counted)
	gw.finish(row, err == nil)
	if err != nil {
		return err
	}
	if settled {
		row.SettleMs = settleMs(r.Settle)
	}
	if sent /= int64(r.Warmup + r.Iters); sent != *row.CommBytes {
		// A backend that counts differently (or a method that moves what it does not
		// claim): keep the row, say so.
		row.Reason = fmt.Sprintf("rank %d counted %d bytes sent per iteration; CommBytes says %d", r.Comm.Rank(), sent, *row.CommBytes)
	}
	if dev.Name() != "cpu" {
		row.PeakMemBytes = results.Ptr(dev.PeakMemory())
	}
	row.SetTimes(st.Median, st.Min, st.Max, st.Mean)
	// Per-GPU TFLOP/s (MASKS.md): the global mask's FLOPs over world size x time.
	row.TFLOPs = results.Ptr(row.FLOPs / float64(r.Comm.Size()) / st.Median.Seconds() / 1e12)
	row.DeviceTFLOPs = results.Ptr(*row.TFLOPs * float64(r.ranksPerDevice))
	if !r.Overlap {
		return nil
	}
	run.SetNoComm(true)
	// The same steps just ran warm: no warm-up.
	nc, err := Loop{Iters: r.Iters, Before: loop.Before, After: loop.After}.Time(dev, body)
	run.SetNoComm(false)
	if err != nil {
		return fmt.Errorf("timing without transfers: %w", err)
	}
	row.NoCommMs = results.Ptr(float64(nc.Median.Nanoseconds()) / 1e6)
	return nil
}

// efficiency fills the baseline columns of an ok row: the kernel alone at the same
// per-rank work (from the file, or measured once per key by rank 0), and the ratio of
// what the device did to it. Collective when measuring.
func (r *CPRunner) efficiency(ctx context.Context, cs CPCase, pass kernels.Pass, row *results.Row) error {
	b := r.Baseline
	if b == nil || row.TFLOPs == nil {
		return nil
	}
	s := r.Sweep
	k := BaselineKey{Kernel: r.Sweep.Kernel, Mask: cs.Mask, SeqLen: s.SeqLen / r.Comm.Size(), HeadsQ: cs.Heads.Q, HeadsKV: cs.Heads.KV,
		HeadDim: s.HeadDim, DType: s.DType.String(), Pass: pass.String()}
	tf, ok := r.base[k]
	if !ok {
		var err error
		if b.File != "" {
			var why string
			if tf, why, err = b.Lookup(k, r.baselineCond(cs, k, *row)); err == nil && tf <= 0 && r.OnNoBaseline != nil {
				r.OnNoBaseline(k, why)
			}
		} else {
			var kr *results.Row
			tf, kr, err = measureBaseline(ctx, r.Comm, r.kernels(), k, s.Seed)
			if kr != nil && r.OnBaseline != nil {
				r.OnBaseline(*kr)
			}
		}
		if err != nil {
			return err
		}
		r.base[k] = tf
	}
	eff := *row.DeviceTFLOPs / tf
	if tf <= 0 || math.IsInf(eff, 0) || math.IsNaN(eff) {
		return nil
	}
	row.KernelTFLOPs, row.KernelTFLOPsFrom = results.Ptr(tf), b.From()
	row.CPEfficiency = results.Ptr(eff)
	return nil
}

// baselineCond is what a --baseline FILE's rows of k must have been measured under to serve
// row: its card, and the documents the kernel alone at each rank's length draws (what
// --baseline measure would time: the mask built at k's length, whose default source follows
// that length, not the whole run's).
func (r *CPRunner) baselineCond(cs CPCase, k BaselineKey, row results.Row) BaselineCond {
	c := CondOf(row)
	build := r.Sweep.Build
	if build == nil {
		build = BuildCPMask
	}
	if spec, err := build(cs.Mask, k.SeqLen, r.Sweep.Seed); err == nil {
		c.DocSource = spec.Params["dist"]
	}
	return c
}

// kernels is the kernel harness the baseline is measured with: this rank's own kernel
// (the one the methods run), the sweep's masks, the same repetitions.
func (r *CPRunner) kernels() *Runner {
	if r.kernelRunner == nil {
		base := r.Base
		base.Bench = ""
		k := r.Kernel
		r.kernelRunner = &Runner{Build: r.Sweep.Build, Warmup: r.Warmup, Iters: r.Iters, Base: base, KernelOptions: r.KernelOptions,
			NewKernel: func(string) (kernels.Kernel, error) { return k, nil }, GPU: r.GPU, Settle: r.Settle}
		if r.kernelRunner.Build == nil {
			r.kernelRunner.Build = BuildCPMask
		}
	}
	return r.kernelRunner
}

// Close frees what the runner holds on its device (the baseline's timing buffers).
func (r *CPRunner) Close() {
	if r.kernelRunner != nil {
		r.kernelRunner.Close()
	}
}

// RunCP runs every case's samples on this rank (a skipped case once: its rows do not
// depend on the sample), handing each row to emit as soon as the ranks agreed on it
// (emit writes it to the rank's file at once). Before and after each sample the ranks
// agree on going on, so a cancelled context (Ctrl-C) stops every rank at the same
// sample: the passes it cut short are not written (they would read as the method's
// errors; those that finished are), nor are the case's other samples run into errors.
// Inside a sample an interrupt is heeded at the agreements after every iteration (the
// methods themselves run uncancelled: uncancelled), so a context cancelled on one rank
// only, or on the ranks at different moments, stops them all within an iteration.
// It returns at a *FatalError, an emit error or a stop: a stop wraps ErrInterrupted and
// context.Canceled on every rank, whichever rank's context was cancelled.
func RunCP(ctx context.Context, r *CPRunner, cases []CPCase, emit func(ci int, row results.Row) error) error {
	defer r.Close()
	r.lastRefused = map[string]int{}
	for ci, cs := range cases {
		if cs.Skip != nil {
			r.lastRefused[cs.Mask] = ci
		}
	}
	for ci, cs := range cases {
		r.at = ci
		for k := range r.masks { // no refused case of its mask left
			if r.lastRefused[k.name] < ci {
				delete(r.masks, k)
			}
		}
		samples := cpSamples(r.Sweep, cs)
		rates := map[string][]float64{} // per pass: the TFLOP/s of the samples so far
		for sample := range samples {
			if _, err := agree(r.Comm, 0, stopping(ctx, nil)); err != nil {
				if isFatal(err) {
					return err
				}
				return fmt.Errorf("stopped before case %d of %d (%s), sample %d: %w (%w)", ci+1, len(cases), cs, sample, err, context.Canceled)
			}
			rows, err := r.Run(ctx, cs, sample)
			if err != nil {
				return err
			}
			// A stop during the sample (agreed): its passes that did not finish measured
			// nothing, and are not written as the method's errors.
			var stopped error
			if _, aerr := agree(r.Comm, 0, stopping(ctx, nil)); aerr != nil {
				var f *FatalError
				if errors.As(aerr, &f) {
					return aerr
				}
				stopped = aerr
			}
			for _, row := range rows {
				if stopped != nil && row.Status != results.StatusOK {
					continue
				}
				if row.TFLOPs != nil {
					rates[row.Pass] = append(rates[row.Pass], *row.TFLOPs)
				}
				SetSpread(&row, rates[row.Pass], samples)
				if err := emit(ci, row); err != nil {
					return err
				}
			}
			if stopped != nil {
				return fmt.Errorf("stopped in case %d of %d (%s), sample %d: %w (%w)", ci+1, len(cases), cs, sample, stopped, context.Canceled)
			}
		}
	}
	return nil
}

// cpSamples is how many samples RunCP runs of case cs: the sweep's, or one of a skipped
// case (its rows say why, the same every sample).
func cpSamples(sw CPSweep, cs CPCase) int {
	if cs.Skip != nil {
		return 1
	}
	return sw.Samples
}

// CPPlannedRows is the rows RunCP emits on each rank for cases of sw when it runs them
// all: a row a pass of every sample (CPRunner.Run's). A rank file records it as its plan
// (results.MetaPlannedRows), so that a sweep stopped before its end reads as such.
func CPPlannedRows(sw CPSweep, cases []CPCase) int {
	n := 0
	for _, cs := range cases {
		n += cpSamples(sw, cs) * len(sw.Passes)
	}
	return n
}
