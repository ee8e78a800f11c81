package session

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/internal/dl"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/schollz/progressbar/v3"
)

// KernelSweep is what `longca kernel`, `longca sparse` and `longca run` describe: the
// cases and how each is checked and timed.
type KernelSweep struct {
	Sweep         harness.Sweep
	Build         harness.MaskBuilder // nil: harness.BuildMask
	Warmup, Iters int
	Check         bool
	CheckBudget   float64
	KernelOptions kernels.Options
	// StopOnCrash ends the sweep after an external worker fails (--on-worker-crash stop).
	StopOnCrash bool
	// GPUState reads the GPU's state while each case is timed (--gpu-state; gpuSampler).
	GPUState bool
	// Settle leaves the GPU idle this long before each case timed on it (--settle).
	Settle time.Duration
	// Culprit names the flags that make a case too big for this machine, for the usage
	// error; fits says whether a changed case would fit.
	Culprit func(cs harness.Case, fits func(harness.Case) bool) string
}

// KernelResult is what a kernel sweep wrote: this rank's file and its rows.
type KernelResult struct {
	File string
	Rows []results.Row
}

type madeKey struct {
	name string
	o    kernels.Options
}

var (
	madeMu sync.Mutex
	made   = map[madeKey]kernels.Kernel{}
)

// NewKernel makes a kernel once per process and options: finding out whether cuda works
// compiles and loads it, and the sweep then uses that same instance.
func NewKernel(name string, o kernels.Options) (kernels.Kernel, error) {
	madeMu.Lock()
	defer madeMu.Unlock()
	key := madeKey{name, o.For(name)} // the variant this kernel takes, not the whole --variant
	if k, ok := made[key]; ok {
		return k, nil
	}
	k, err := kernels.New(name, o)
	if err != nil {
		return nil, err
	}
	made[key] = k
	return k, nil
}

// DefaultKernel is cuda when a GPU answers, else the CPU reference.
func DefaultKernel(o kernels.Options) string {
	if slices.Contains(kernels.Names(), "cuda") {
		if _, err := NewKernel("cuda", o); err == nil {
			return "cuda"
		}
	}
	return "ref"
}

// crashCounter is a kernel behind a worker process that can fail (kernels/external).
type crashCounter interface{ Crashes() int }

// RunKernels checks and times every case of k, writing each row to this rank's file as
// soon as it is finished; a progress bar on a terminal (rank 0), one log line a case
// otherwise, both with the ETA of est (Fit's; nil: a fresh one). Ctrl-C stops after the
// current case, keeping the rows written.
func (s *Session) RunKernels(ctx context.Context, k KernelSweep, est *harness.Estimate) (KernelResult, error) {
	ctx, stop := Interruptible(ctx)
	defer stop()
	res := KernelResult{}
	cases := k.Sweep.Cases()
	// A row a case: the file records them all as planned, so that a sweep stopped before
	// its end (Ctrl-C, SIGTERM, --on-worker-crash stop) reads as such.
	w, err := s.RankFile(s.RunID, s.World.Rank, s.World.Size, len(cases))
	if err != nil {
		return res, err
	}
	res.File = w.Path()
	var workers []crashCounter
	crashes := func() int {
		n := 0
		for _, w := range workers {
			n += w.Crashes()
		}
		return n
	}
	r := &harness.Runner{
		Build: k.Build, Warmup: k.Warmup, Iters: k.Iters, CheckBudget: k.CheckBudget, Settle: k.Settle,
		Base:          s.BaseRow(s.World),
		KernelOptions: k.KernelOptions,
		NewKernel: func(name string) (kernels.Kernel, error) {
			kn, err := NewKernel(name, k.KernelOptions)
			if cc, ok := kn.(crashCounter); ok && err == nil {
				workers = append(workers, cc)
			}
			return kn, err
		},
	}
	if k.Check {
		r.Check = harness.NewKernelCheck()
	}
	var closeGPU func()
	r.GPU, closeGPU = gpuSampler(k.GPUState, k.KernelOptions.Device, s.log())
	r.DeviceUUID = deviceUUID(k.KernelOptions.Device, s.log())
	defer closeGPU()
	defer r.Close()
	if est == nil || est.Len() != len(cases) {
		est = s.estimate(ctx, k, cases)
	}
	log := s.log()
	progress := s.kernelProgress(est, cases)
	ev := log.Info().Str("run", s.RunID).Int("cases", len(cases)).Str("file", res.File).
		Str("estimate", harness.FormatDuration(est.Total().Seconds())) // as the warnings say it (it was bare ms)
	if r.Settle > 0 {
		ev = ev.Str("settle", r.Settle.String()) // the runner's idle before each case timed on a GPU
	}
	ev.Msg("sweep")
	var stopErr error
	seenCrashes := 0
	start := time.Now()
	err = r.RunAll(ctx, cases, func(i int, row results.Row) error {
		if err := w.Write(row); err != nil {
			return s.NoRoom(err, keptIn(len(res.Rows), res.File))
		}
		dl.SignalsOnStack() // a library may have installed a careless handler during the case
		res.Rows = append(res.Rows, row)
		est.Done(i, row, time.Since(start))
		start = time.Now()
		now := crashes()
		stopping := k.StopOnCrash && now > seenCrashes
		seenCrashes = now
		if stopping {
			// Counted in rows (one per kernel and case), as the table's "Rows:" counts them.
			stopErr = fmt.Errorf("stopped after %d of %d rows: an external worker failed (--on-worker-crash stop): %s", i+1, len(cases), row.Reason)
			log.Error().Int("done", i+1).Int("cases", len(cases)).Str("reason", row.Reason).Msg("worker failed: stopping the sweep; rows so far are in the file")
		}
		progress.row(i, row)
		if stopping {
			return errStopped
		}
		return nil
	})
	progress.finish()
	if ctx.Err() != nil && err == ctx.Err() {
		log.Warn().Int("done", len(res.Rows)).Int("cases", len(cases)).Msg("interrupted: rows so far are in the file")
	}
	if cerr := w.Close(); cerr != nil && (err == nil || err == errStopped || err == ctx.Err()) {
		return res, s.NoRoom(cerr, keptIn(len(res.Rows), res.File))
	}
	switch {
	case err == errStopped:
		return res, stopErr
	case err != nil:
		return res, err
	}
	return res, nil
}

// progress is a kernel sweep's progress with its estimate's ETA: a bar on rank 0's
// terminal, else a log line a case.
type progress struct {
	log   *zerolog.Logger
	bar   *progressbar.ProgressBar
	est   *harness.Estimate
	cases []harness.Case
}

func (s *Session) kernelProgress(est *harness.Estimate, cases []harness.Case) *progress {
	p := &progress{log: s.log(), est: est, cases: cases}
	if s.World.Rank == 0 && isatty.IsTerminal(os.Stderr.Fd()) { // progress on rank 0 only
		// The bar counts estimated work (ms), not cases: a 48K backward weighs far more
		// than an 8K sliding window, and the ETA follows.
		p.bar = progressbar.NewOptions64(est.Total().Milliseconds(), progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetPredictTime(true), progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))
	}
	return p
}

// row shows case i done (the estimate has heard of it).
func (p *progress) row(i int, row results.Row) {
	if p.bar != nil {
		p.bar.ChangeMax64(p.est.Total().Milliseconds())
		_ = p.bar.Set64(p.est.Elapsed().Milliseconds()) // drawing errors are not the sweep's
		if i+1 < len(p.cases) {
			n := p.cases[i+1]
			p.bar.Describe(fmt.Sprintf("%s %s %s %s", n.Mask, harness.FormatSize(n.SeqLen), n.Heads, n.Pass))
		}
		return
	}
	c := p.cases[i]
	ev := p.log.Info().Int("case", i+1).Int("of", len(p.cases)).Str("kernel", c.Kernel).Str("mask", c.Mask).
		Int("seqlen", c.SeqLen).Str("heads", c.Heads.String()).Str("pass", c.Pass.String()).Str("status", string(row.Status)).
		Str("eta", p.est.Remaining().Round(time.Second).String())
	if row.TFLOPs != nil {
		ev = ev.Float64("median_ms", *row.MedianMs).Float64("tflops", *row.TFLOPs)
	}
	if row.Reason != "" {
		ev = ev.Str("reason", row.Reason)
	}
	ev.Msg("case")
}

func (p *progress) finish() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// errStopped ends RunAll after a worker failure under --on-worker-crash stop.
var errStopped = fmt.Errorf("stopped")

// WriteMaskJSON writes one JSON file per (mask, length) of the sweep into dir (a folder
// the caller checked), MASKS.md's form, each whole or not at all (smallfile.WriteWhole).
func (s *Session) WriteMaskJSON(dir string, sw harness.Sweep, build harness.MaskBuilder) error {
	if build == nil {
		build = harness.BuildMask
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--mask-json: %w", err)
	}
	for _, m := range sw.Masks {
		for _, n := range sw.SeqLens {
			spec, err := build(m, n, sw.Seed)
			if err != nil {
				s.log().Warn().Str("mask", m).Int("seqlen", n).Err(err).Msg("mask not written")
				continue
			}
			// whole or not at all: a disk that filled left a 0-byte JSON under its name
			err = writeWhole(fmt.Sprintf("%s/%s_%d_seed%d.json", dir, m, n, sw.Seed), func(w io.Writer) error {
				return spec.WriteJSON(w, true)
			})
			if err != nil {
				return fmt.Errorf("--mask-json: %w", err)
			}
		}
	}
	return nil
}

// CalibrateRef measures the CPU reference's forward rate on this host (FLOP/s), for the
// time estimate; 0 when it cannot. The problem has a head for every worker the reference
// may start (GOMAXPROCS, 2 to 64), so that it runs on as many cores as the checks of a
// sweep do, and the faster of two runs counts (the first pays the workers' start and
// cold caches). Measured with 2 heads, an H200 host's 16 cores read 12.8 GFLOP/s where
// the run's checks went at about 50, and its estimate said 616 s for 471 (docs/perf.md,
// calls 33-36).
func CalibrateRef(ctx context.Context) float64 {
	k, err := NewKernel("ref", kernels.Options{})
	if err != nil {
		return 0
	}
	const n, d = 512, 64
	h := min(max(runtime.GOMAXPROCS(0), 2), 64)
	spec, err := mask.Build("full", n, mask.Options{})
	if err != nil {
		return 0
	}
	p := kernels.Problem{HeadsQ: h, HeadsKV: h, HeadDim: d, DType: tensor.BF16, Mask: spec.Mask}
	dev := k.Device()
	qs, kvs, ls := p.Shapes()
	var ts []tensor.Tensor
	for _, sh := range [][]int{qs, kvs, kvs, qs} {
		t, err := dev.Alloc(tensor.BF16, sh...)
		if err != nil {
			return 0
		}
		ts = append(ts, t)
	}
	lse, err := dev.Alloc(tensor.FP32, ls...)
	if err != nil {
		return 0
	}
	best := 0.0
	for range 2 {
		start := time.Now()
		if err := k.Forward(ctx, p, ts[0], ts[1], ts[2], ts[3], lse); err != nil {
			return 0
		}
		best = max(best, p.FLOPs(kernels.Fwd)/max(time.Since(start).Seconds(), 1e-6))
	}
	return best
}

// ForgetKernels drops every kernel NewKernel made, so that the next call makes a new one
// (after external workers were closed, or their environment changed).
func ForgetKernels() {
	madeMu.Lock()
	defer madeMu.Unlock()
	made = map[madeKey]kernels.Kernel{}
}
