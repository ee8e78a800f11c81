package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
)

// MaskBuilder lays out the named mask at a length from a seed.
type MaskBuilder func(name string, seqlen int, seed uint64) (mask.Spec, error)

// BuildMask is the default MaskBuilder: mask.Build with the default options and the seed.
func BuildMask(name string, seqlen int, seed uint64) (mask.Spec, error) {
	return mask.Build(name, seqlen, mask.Options{Seed: seed})
}

// CheckOutcome is the result of checking a kernel on one problem.
type CheckOutcome struct {
	Pass bool
	// Worst is the figure closest to (or furthest past) its tolerance.
	Worst results.CheckFigure
}

// CheckFunc checks kernel k against the reference on problem p: out and lse for Fwd,
// dq, dk and dv for Bwd, all five for FwdBwd, with inputs drawn from seed.
type CheckFunc func(ctx context.Context, k kernels.Kernel, p kernels.Problem, pass kernels.Pass, seed uint64) (CheckOutcome, error)

// DefaultCheckBudget is the largest check, in multiply-adds (area x query heads x head
// dim), run on the CPU reference; larger cases are checked at a smaller size.
const DefaultCheckBudget = 2e9

// MaxReps bounds a case's warm-ups and timed iterations (-w, -n, --calibrate-iters): a
// timed iteration keeps its sample (8 bytes), and 100,000 of a 10 ms kernel are already
// 17 minutes a case, so a larger count is a typo, refused before anything runs.
const MaxReps = 100000

// MaxSettle bounds --settle: a minute of idle before every case is already more than a
// power or thermal limit needs to let go, so a larger value is a typo.
const MaxSettle = time.Minute

// Runner runs cases one at a time: build the mask, ask the kernel whether it supports
// the problem, check it (or a smaller case of the same mask), then time it. A case that
// fails the check is never timed.
type Runner struct {
	// Build lays out masks; nil means BuildMask.
	Build MaskBuilder
	// Check is the correctness check; nil runs no check (--no-check).
	Check CheckFunc
	// CheckBudget bounds the checked size; 0 means DefaultCheckBudget.
	CheckBudget float64
	// Warmup and Iters are the untimed and timed repetitions.
	Warmup, Iters int
	// Base holds the columns every row shares (run id, host, rank, version, command...).
	Base results.Row
	// KernelOptions are passed to kernels.New (device index, variant, interpreter).
	KernelOptions kernels.Options
	// NewKernel makes a kernel by name; nil means kernels.New with KernelOptions.
	NewKernel func(name string) (kernels.Kernel, error)
	// GPU reads the state of the GPU cases are timed on (SM clock, power, temperature),
	// recorded in every row timed there (summariseGPU); nil records none.
	GPU GPUSampler
	// DeviceUUID names the physical GPU of KernelOptions.Device (its UUID, as nvidia-smi
	// prints it; "" when unknown), recorded in every row timed on a GPU; nil records none.
	DeviceUUID func() string
	// Settle is how long the GPU is left idle before each case timed on it (--settle; 0:
	// not at all), recorded in the row's settle_ms.
	Settle time.Duration

	made   map[string]madeKernel
	checks map[checkKey]checkEntry
	bufs   *buffers
	sparse *builtSparse // the last block-sparse problem built (caseProblem)
}

type madeKernel struct {
	k   kernels.Kernel
	err error
}

type checkKey struct {
	c        Case
	seqlen   int
	hq, hkv  int
	checkFor kernels.Pass
}

type checkEntry struct {
	out CheckOutcome
	err error
}

func (r *Runner) build(name string, seqlen int, seed uint64) (mask.Spec, error) {
	if r.Build != nil {
		return r.Build(name, seqlen, seed)
	}
	return BuildMask(name, seqlen, seed)
}

func (r *Runner) kernel(name string) (kernels.Kernel, error) {
	if r.made == nil {
		r.made = map[string]madeKernel{}
	}
	if m, ok := r.made[name]; ok {
		return m.k, m.err
	}
	newk := r.NewKernel
	if newk == nil {
		newk = func(name string) (kernels.Kernel, error) { return kernels.New(name, r.KernelOptions) }
	}
	k, err := newk(name)
	r.made[name] = madeKernel{k, err}
	return k, err
}

// problem is the kernel problem of a case on a mask.
func problem(c Case, m mask.Mask) kernels.Problem {
	return kernels.Problem{HeadsQ: c.Heads.Q, HeadsKV: c.Heads.KV, HeadDim: c.HeadDim, DType: c.DType, Mask: m}
}

// Row fills the case's own columns into a copy of Base.
func (r *Runner) row(c Case) results.Row {
	row := r.Base
	row.Time = time.Now().UTC()
	if row.Bench == "" {
		row.Bench = "kernel"
	}
	row.Kernel, row.Mask, row.Seed = c.Kernel, c.Mask, c.Seed
	row.SeqLen, row.SeqLenPerRank, row.Batch = int64(c.SeqLen), int64(c.SeqLen), 1
	row.HeadsQ, row.HeadsKV, row.HeadDim = int64(c.Heads.Q), int64(c.Heads.KV), int64(c.HeadDim)
	row.DType, row.Pass = c.DType.String(), c.Pass.String()
	row.Warmups, row.Iters = int64(r.Warmup), int64(r.Iters)
	return row
}

// Run measures one case and returns its row; the row's status says what became of it
// (ok, unsupported, oom, wrong, error), and only an ok row has times.
func (r *Runner) Run(ctx context.Context, c Case) results.Row {
	row, _ := r.runRow(ctx, c)
	return row
}

// runRow is Run with the error the row was classified from.
func (r *Runner) runRow(ctx context.Context, c Case) (results.Row, error) {
	row := r.row(c)
	err := r.run(ctx, c, &row)
	row.Status, row.Reason = Classify(err)
	if row.Status != results.StatusOK {
		row.MedianMs, row.MinMs, row.MaxMs, row.MeanMs, row.TFLOPs, row.BandwidthGBs = nil, nil, nil, nil, nil, nil
	}
	return row, err
}

// Interrupted says whether err is the sweep being stopped through ctx (Ctrl-C, SIGTERM)
// rather than a failure of its own: a case it cut short measured nothing, and its row is
// not written (it would read as the kernel's error).
func Interrupted(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

func (r *Runner) run(ctx context.Context, c Case, row *results.Row) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cp, err := r.caseProblem(c)
	if err != nil {
		if mask.IsInputError(err) {
			return Unsupported(fmt.Errorf("mask %s at S=%d: %w", c.Label(), c.SeqLen, err))
		}
		return fmt.Errorf("mask %s at S=%d: %w", c.Label(), c.SeqLen, err)
	}
	row.MaskParams = "{}"
	if len(cp.params) > 0 {
		b, err := json.Marshal(cp.params)
		if err != nil {
			return fmt.Errorf("mask %s parameters: %w", c.Mask, err)
		}
		row.MaskParams = string(b)
	}
	SetDocColumns(row, cp.params)
	p := cp.p
	row.MaskArea = int64(math.Round(p.Area()))
	row.FLOPs = p.FLOPs(c.Pass)
	if c.Sparse.IsSparse() {
		row.BlockSize = results.Ptr(int64(c.Sparse.BlockSize()))
		row.KeptRatio = results.Ptr(cp.kept) // as built; mask_params.ratio is the ratio asked for
		if row.Bench == "kernel" {
			row.Bench = "sparse"
		}
	}
	if err := p.Validate(); err != nil {
		return Unsupported(err)
	}
	k, err := r.kernel(c.Kernel)
	if err != nil {
		return Unsupported(fmt.Errorf("kernel %s: %w", c.Kernel, err))
	}
	if cs, ok := k.(kernels.CaseScoped); ok {
		cs.BeginCase()
	}
	dev := k.Device()
	row.Device = dev.Name()
	if row.Backend == "" {
		row.Backend = backendOf(dev.Name())
	}
	setGPUColumns(row, r.KernelOptions.Device, r.DeviceUUID)
	describe(k, p, c.Pass, row, nil)
	if err := k.Supports(p); err != nil {
		return Unsupported(err)
	}
	if r.KernelOptions.Deterministic && c.Pass != kernels.Fwd {
		if d, ok := k.(kernels.DeterministicBackward); !ok || !d.DeterministicBackward() {
			return Unsupported(fmt.Errorf("kernel %s has no deterministic backward (--deterministic)", c.Kernel))
		}
	}
	if r.Check != nil {
		if err := r.check(ctx, k, c, p, row); err != nil {
			return err
		}
	}
	return r.time(ctx, k, c, p, row)
}

// describe records the kernel's variant and library versions for the problem, with the
// versions of what else the row's time depends on (also: a CP row's communicator's).
func describe(k kernels.Kernel, p kernels.Problem, pass kernels.Pass, row *results.Row, also map[string]string) {
	versions := map[string]string{}
	if d, ok := k.(kernels.Describer); ok {
		info := d.Describe(p, pass)
		row.KernelVariant = info.Variant
		maps.Copy(versions, info.Versions)
	}
	maps.Copy(versions, also)
	row.KernelVersions = "{}"
	if len(versions) > 0 {
		if b, err := json.Marshal(versions); err == nil { // a map of strings always marshals
			row.KernelVersions = string(b)
		}
	}
}

// setGPUColumns fills the index and UUID of a row's device where it is a GPU (row.Device set;
// a CPU row's stay null and empty); uuid nil records none.
func setGPUColumns(row *results.Row, index int, uuid func() string) {
	if row.Device == "cpu" {
		return
	}
	row.DeviceIndex = results.Ptr(int64(index))
	if uuid != nil {
		row.DeviceUUID = uuid()
	}
}

// backendOf names the backend of a device: "cpu" for the host, "cuda" otherwise.
func backendOf(device string) string {
	if device == "cpu" {
		return "cpu"
	}
	return "cuda"
}

// DefaultCheckLengths are the shorter lengths a kernel case too large for the CPU
// reference is checked at (the same mask and seed).
var DefaultCheckLengths = []int{4096, 2048, 1024, 512}

// CheckSize is the one rule for the size at which a case (a kernel's or a CP method's)
// is checked: the case itself when its multiply-adds (area x query heads x head dim) are
// within budget; otherwise the longest of lengths below the case's length, with the
// query:KV head ratio kept and the KV heads halved as needed to fit. fits says whether
// the case can be laid out at a length with heads (the mask builds, a CP plan accepts
// it) and gives its area. When nothing fits the budget, the cheapest candidate tried;
// when nothing smaller can be laid out, the case itself.
func CheckSize(c Case, lengths []int, fits func(seqlen int, h Heads) (int64, bool), budget float64) (seqlen int, h Heads) {
	cost := func(a int64, h Heads) float64 { return float64(a) * float64(h.Q) * float64(c.HeadDim) }
	if a, ok := fits(c.SeqLen, c.Heads); ok && cost(a, c.Heads) <= budget {
		return c.SeqLen, c.Heads
	}
	ratio := c.Heads.Q / c.Heads.KV
	var last Heads
	var lastLen int
	for _, n := range lengths {
		if n >= c.SeqLen {
			continue
		}
		for kv := c.Heads.KV; kv >= 1; kv /= 2 {
			h := Heads{ratio * kv, kv}
			a, ok := fits(n, h)
			if ok {
				if cost(a, h) <= budget {
					return n, h
				}
				last, lastLen = h, n
			}
			if kv == 1 {
				break
			}
		}
	}
	if lastLen == 0 { // nothing smaller can be laid out: check the case itself
		return c.SeqLen, c.Heads
	}
	return lastLen, last // the smallest candidate, over budget: still the cheapest check
}

func (r *Runner) check(ctx context.Context, k kernels.Kernel, c Case, p kernels.Problem, row *results.Row) error {
	budget := r.CheckBudget
	if budget == 0 {
		budget = DefaultCheckBudget
	}
	probs := map[int]caseProblem{}
	area := func(n int, _ Heads) (int64, bool) {
		if n == c.SeqLen {
			return int64(math.Round(p.Area())), true // the case's own problem, built already
		}
		if cp, ok := probs[n]; ok {
			return int64(math.Round(cp.p.Area())), true
		}
		cp, err := r.problemAt(c, n, c.Heads)
		if err != nil {
			return 0, false
		}
		probs[n] = cp
		return int64(math.Round(cp.p.Area())), true
	}
	n, h := CheckSize(c, DefaultCheckLengths, area, budget)
	key := checkKey{c: c, seqlen: n, hq: h.Q, hkv: h.KV, checkFor: c.Pass}
	key.c.SeqLen, key.c.Heads = 0, Heads{}
	if r.checks == nil {
		r.checks = map[checkKey]checkEntry{}
	}
	e, ok := r.checks[key]
	if !ok {
		cp := p
		if n != c.SeqLen || h != c.Heads {
			small, have := probs[n]
			if !have || c.Sparse.IsSparse() { // sparse masks depend on the KV heads
				var err error
				if small, err = r.problemAt(c, n, h); err != nil {
					return fmt.Errorf("check: mask %s at S=%d heads %s: %w", c.Label(), n, h, err)
				}
			}
			cp = small.p
			cp.HeadsQ, cp.HeadsKV = h.Q, h.KV
		}
		e.out, e.err = r.Check(ctx, k, cp, c.Pass, c.Seed)
		e.out.Worst.SeqLen, e.out.Worst.HQ, e.out.Worst.HKV = n, h.Q, h.KV
		if e.err == nil || !errors.Is(e.err, context.Canceled) {
			r.checks[key] = e
		}
	}
	if e.err != nil {
		var pe *kernels.PhaseError
		if errors.As(e.err, &pe) {
			return e.err // the kernel failed before the check's pass: it says where
		}
		return fmt.Errorf("check at S=%d heads %s: %w", n, h, e.err)
	}
	row.SetCheck(e.out.Worst)
	if !e.out.Pass {
		w := e.out.Worst
		return fmt.Errorf("%w at S=%d heads %s: %s", ErrWrong, n, h, wrongWhy(w))
	}
	return nil
}
