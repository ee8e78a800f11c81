package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/comm/local/cudamover"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
	"github.com/urfave/cli/v2"
)

func cpAction(c *cli.Context) (err error) {
	defer func() { err = usageOnRankZero(err) }()
	o, err := parseCPFlags(c)
	if err != nil {
		return err
	}
	w, so, err := discoverWorld(c)
	if err != nil {
		return err
	}
	if o.kernelOpts, err = kernelOptions(c, w); err != nil {
		return err
	}
	n := w.Size
	if w.Size > 1 && c.IsSet("ranks") && o.ranks != w.Size {
		return usageError("--ranks %d under a launcher of %d processes: leave --ranks out (each process is one rank)", o.ranks, w.Size)
	}
	if w.Size == 1 && o.ranks > 1 && so.Backend != "auto" && so.Backend != "local" && so.Backend != "" {
		return usageError("--ranks %d with --backend %s: in-process ranks talk through comm/local; start one process per GPU (mpirun -np %d longca cp --backend %s) or leave --backend out", o.ranks, so.Backend, o.ranks, so.Backend)
	}
	if w.Size == 1 && o.ranks > 0 {
		n = o.ranks
	}
	if o.links != nil && (w.Size > 1 || so.Backend != "auto" && so.Backend != "local") {
		return usageError("--links emulates links between in-process ranks (--ranks N, backend local): leave it out under a launcher or with --backend %s", so.Backend)
	}
	if !o.dryRun {
		if err := fitCP(c, o, n, max(w.LocalSize, n/w.Size), w.Size == 1); err != nil {
			return err
		}
	}
	cases, skipped, err := cpCases(o, n)
	if err != nil {
		return err
	}
	if w.Rank == 0 {
		for _, s := range skipped {
			log.Warn().Str("reason", s).Msg("case skipped")
		}
		if !o.dryRun {
			warnCPTime(c, o, cases, n, w.Size == 1)
		}
	}
	if o.dryRun {
		if w.Rank == 0 {
			return printCPPlan(c.App.Writer, o, cases, n)
		}
		return nil
	}
	if o.out == "" {
		o.out = defaultOutDir("cp")
	}
	if o.runID, err = resultsTarget(o.out, o.runID); err != nil {
		return err
	}
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	var rows []results.Row
	var failed int
	if w.Size > 1 && (so.Backend == "" || so.Backend == "auto") && o.kernel == "cuda" {
		// GPU ranks started by a launcher talk through NCCL, device buffer to device buffer.
		so.Backend = "nccl"
	}
	if w.Size > 1 || so.Backend != "auto" && so.Backend != "local" {
		// One process per rank: the launcher's world.
		withRank(w.Rank, w.Size)
		cm, err := spmd.Open(ctx, w, so)
		if err != nil {
			return err
		}
		rr := cpRank{o: o, cases: cases, c: cm, world: w, backend: spmd.Choose(w, so)}
		if rows, failed, err = rr.run(ctx); err != nil {
			return err // no collective close: the other ranks may be gone
		}
		// Every rank finished: close the world together (MPI_Finalize, ncclCommDestroy),
		// which launchers check for.
		if err := cm.Close(); err != nil {
			return fmt.Errorf("closing the %s communicator: %w", rr.backend, err)
		}
		if w.Rank == 0 {
			fmt.Fprintf(c.App.ErrWriter, "# rank files in %s: join them with longca merge %s\n", o.out, o.out)
		}
	} else {
		opts := []local.Option{local.WithTimeout(so.Timeout)}
		if o.links != nil {
			opts = append(opts, local.WithLinks(linksOf(*o.links)))
		}
		mover, err := cpDeviceMover(o.kernel, o.kernelOpts, n)
		if err != nil {
			return err
		}
		if mover != nil {
			defer mover.Close()
			opts = append(opts, local.WithMover(mover))
		}
		var mu sync.Mutex
		err = local.Run(n, func(cm comm.Comm) error {
			wr := w
			wr.Rank, wr.Size, wr.LocalRank, wr.LocalSize = cm.Rank(), n, cm.Rank(), n
			rr := cpRank{o: o, cases: cases, c: cm, world: wr, backend: "local", oneGPU: mover != nil && n > 1}
			got, bad, err := rr.run(ctx)
			if cm.Rank() == 0 {
				mu.Lock()
				rows, failed = got, bad
				mu.Unlock()
			}
			return err
		}, opts...)
		if err != nil {
			return err
		}
		res, err := results.Merge(o.out, results.MergeOptions{Runs: []string{o.runID}})
		if err != nil {
			return fmt.Errorf("merging the rank files: %w", err)
		}
		fmt.Fprintf(c.App.ErrWriter, "# results: %s (%d rows from %d ranks)\n", res.Files[0], res.Rows, n)
	}
	if w.Rank == 0 {
		if err := printCPTable(c.App.Writer, rows); err != nil {
			return err
		}
	}
	if failed > 0 {
		return cli.Exit(fmt.Sprintf("longca cp: %d case(s) failed the check against the reference (status wrong)", failed), 1)
	}
	return nil
}

// cpRank is one rank's run of the sweep.
type cpRank struct {
	o       cpOptions
	cases   []cpCase
	c       comm.Comm
	world   spmd.World
	backend string
	device  string // the kernel's device, set by run
	staged  bool   // a device kernel behind cp.Staged: times include host<->device copies
	oneGPU  bool   // in-process ranks sharing one GPU through the device mover
}

// run checks and times every case, writing each row to this rank's file at once.
// It returns rank 0's rows and the number of cases that failed the check.
func (rr *cpRank) run(ctx context.Context) ([]results.Row, int, error) {
	o, n, rank := rr.o, rr.c.Size(), rr.c.Rank()
	kern, err := newKernel(o.kernel, o.kernelOpts)
	if err != nil {
		return nil, 0, err
	}
	rr.device = kern.Device().Name()
	if rr.device != "cpu" && !cp.DeviceResident(kern) {
		// The methods run on the device only with an internal/cuda kernel; another device
		// kernel is staged (the methods rearrange and merge on the host).
		kern, rr.staged = cp.Staged(kern), true
	}
	wr, err := results.Create(o.out, o.runID, rank, n)
	if err != nil {
		return nil, 0, fmt.Errorf("--out %s: %w", o.out, err)
	}
	defer wr.Close()
	var rows []results.Row
	failed := 0
	s := o.seqlenFor(n)
	for ci, cs := range rr.cases {
		m, _ := cp.New(cs.method)
		var report *cpCheck
		for sample := range o.samples {
			seed := o.seed + uint64(sample)
			spec, docs, err := buildCPMask(cs.mask, s, seed)
			if err != nil {
				return rows, failed, err
			}
			cfg := cs.cfg
			cfg.Docs = docs
			p := o.problemFor(cs.heads, spec.Mask)
			pl, err := m.Plan(cfg, p)
			if err != nil {
				return rows, failed, err
			}
			if o.check && sample == 0 {
				if report, err = rr.check(ctx, m, kern, cs, seed); err != nil {
					return rows, failed, err
				}
				if !report.pass {
					failed++
				}
			}
			run, err := cp.NewRun(pl, kern, rr.c)
			if err != nil {
				return rows, failed, err
			}
			for _, pass := range o.passes {
				row := rr.row(cs, pl, spec, sample, pass)
				if report != nil {
					row.SetCheck(report.fig)
				}
				if report != nil && !report.pass {
					row.Status, row.Reason = results.StatusWrong, report.line
				} else if err := rr.timeCase(ctx, m, run, pass, seed, &row); err != nil {
					return rows, failed, err
				}
				if err := wr.Write(row); err != nil {
					return rows, failed, err
				}
				rows = append(rows, row)
				if rank == 0 {
					ev := log.Info().Int("case", ci+1).Int("of", len(rr.cases)).Int("sample", sample).Str("method", cs.method).
						Str("mesh", pl.Config.Mesh()).Str("mask", cs.mask).Str("heads", cs.heads.String()).Str("pass", pass.String()).
						Str("status", string(row.Status))
					if row.MedianMs != nil {
						ev = ev.Float64("median_ms", *row.MedianMs).Float64("tflops_per_gpu", *row.TFLOPs)
					}
					if row.PeakMemBytes != nil {
						ev = ev.Int64("peak_mem_bytes", *row.PeakMemBytes)
					}
					ev.Msg("cp")
				}
			}
			if err := run.Close(); err != nil {
				return rows, failed, err
			}
		}
	}
	return rows, failed, wr.Close()
}

// cpCheck is a case's check verdict as its rows record it.
type cpCheck struct {
	pass bool
	fig  results.CheckFigure
	line string
}

// check runs cp.CheckRank on the case's first sample, halving the length while the
// reference would exceed --check-budget (keeping a length the ranks split).
func (rr *cpRank) check(ctx context.Context, m cp.Method, kern kernels.Kernel, cs cpCase, seed uint64) (*cpCheck, error) {
	o, n := rr.o, rr.c.Size()
	s := o.seqlenFor(n)
	spec, docs, err := buildCPMask(cs.mask, s, seed)
	if err != nil {
		return nil, err
	}
	for float64(spec.Mask.Area())*float64(cs.heads.Q*o.headDim) > o.checkBudget && (s/2)%n == 0 && s/2 >= n {
		sp, d, err := buildCPMask(cs.mask, s/2, seed)
		if err != nil {
			break // the mask needs this length (block sizes): check at the last one built
		}
		s, spec, docs = s/2, sp, d
	}
	cfg := cs.cfg
	cfg.Docs = docs
	pl, err := m.Plan(cfg, o.problemFor(cs.heads, spec.Mask))
	if err != nil {
		return nil, fmt.Errorf("check at seqlen %d: %w", s, err)
	}
	run, err := cp.NewRun(pl, kern, rr.c)
	if err != nil {
		return nil, err
	}
	defer run.Close()
	backward := false
	for _, p := range o.passes {
		backward = backward || p != kernels.Fwd
	}
	rep, err := cp.CheckRank(ctx, m, run, seed, backward)
	if err != nil {
		return nil, fmt.Errorf("check of %s: %w", cs, err)
	}
	f := rep.Worst
	return &cpCheck{pass: rep.Pass, line: rep.String(), fig: results.CheckFigure{Name: f.Name, Err: f.Err, NaiveErr: f.NaiveErr,
		Tol: f.Tol, Pass: rep.Pass, SeqLen: s, HQ: cs.heads.Q, HKV: cs.heads.KV}}, nil
}

// row fills the columns a case's row shares.
func (rr *cpRank) row(cs cpCase, pl *cp.Plan, spec mask.Spec, sample int, pass kernels.Pass) results.Row {
	o, w := rr.o, rr.world
	params, _ := json.Marshal(spec.Params)
	inner := "ring"
	if pl.Config.HeadFirst && pl.Config.Ulysses > 1 {
		inner = "ulysses"
	}
	row := results.Row{
		RunID: o.runID, Time: time.Now().UTC(), Host: w.Host, Rank: int64(rr.c.Rank()), WorldSize: int64(rr.c.Size()),
		LocalRank: int64(w.LocalRank), Launcher: launcher(), Device: rr.device, Backend: rr.backend,
		Bench: "cp", Kernel: o.kernel, Method: cs.method,
		Ulysses: results.Ptr(int64(pl.Config.Ulysses)), Ring: results.Ptr(int64(pl.Config.Ring)),
		Windows: results.Ptr(int64(pl.Config.Windows)), InnerDim: inner,
		Mask: cs.mask, MaskParams: string(params), Seed: spec.Seed, Sample: int64(sample),
		SeqLen: int64(spec.Mask.SeqQ), SeqLenPerRank: int64(pl.Tokens), Batch: 1,
		HeadsQ: int64(cs.heads.Q), HeadsKV: int64(cs.heads.KV), HeadDim: int64(o.headDim), DType: o.dtype.String(),
		Pass: pass.String(), MaskArea: spec.Mask.Area(), FLOPs: pl.Problem.FLOPs(pass),
		PadTokens: results.Ptr(int64(pl.Padding())), Warmups: int64(o.warmup), Iters: int64(o.iters),
		CommBytes: results.Ptr(cp.CommBytesOf(pl, pass)), Version: Version, Command: strings.Join(os.Args, " "),
	}
	if rr.staged {
		row.Reason = "staged: each step copies between host and device (cp.Staged); times include the copies"
	}
	if rr.oneGPU {
		row.Reason = fmt.Sprintf("%d ranks simulated on one GPU (comm/local, device mover): transfers are device copies, the ranks share the GPU", rr.c.Size())
	}
	if o.links != nil {
		row.Backend = "local+links"
		row.ModelParams = fmt.Sprintf(`{"links":%s}`, o.links.JSON())
	}
	return row
}

// timeCase times one pass on this rank's random shard: -w warm-ups, then -n iterations,
// each the slowest rank's time (AllReduce max), summarised by the median.
func (rr *cpRank) timeCase(ctx context.Context, m cp.Method, run *cp.Run, pass kernels.Pass, seed uint64, row *results.Row) error {
	pl := run.Plan
	dt := pl.Problem.DType
	rng := rand.New(rand.NewPCG(seed, uint64(rr.c.Rank())))
	shape := func(h int) []int { return []int{pl.Tokens, h, pl.Problem.HeadDim} }
	hq, hkv := pl.Problem.HeadsQ, pl.Problem.HeadsKV
	hostTs := []*tensor.Host{tensor.NewHost(dt, shape(hq)...), tensor.NewHost(dt, shape(hkv)...), tensor.NewHost(dt, shape(hkv)...),
		tensor.NewHost(dt, shape(hq)...), tensor.NewHost(dt, shape(hq)...), tensor.NewHost(tensor.FP32, hq, pl.Tokens),
		tensor.NewHost(dt, shape(hq)...), tensor.NewHost(dt, shape(hkv)...), tensor.NewHost(dt, shape(hkv)...)}
	for _, t := range hostTs[:4] {
		t.FillNormal(rng, 1)
	}
	dev := run.Device()
	run.ReleaseCache()
	dev.ResetPeak()
	// q, k, v, dout, out, lse, dq, dk, dv on the run's device (the host tensors
	// themselves on the CPU).
	ts := make([]tensor.Tensor, len(hostTs))
	defer func() { run.Free(ts...) }()
	for i, h := range hostTs {
		t, err := run.Upload(h)
		if err != nil {
			return fmt.Errorf("%s: inputs on %s: %w", pl.Method, dev.Name(), err)
		}
		ts[i] = t
	}
	q, k, v, dout, out, lse, dq, dk, dv := ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6], ts[7], ts[8]
	fwd := func() error { return m.Forward(ctx, run, q, k, v, out, lse) }
	bwd := func() error { return m.Backward(ctx, run, q, k, v, out, lse, dout, dq, dk, dv) }
	body := fwd
	switch pass {
	case kernels.Bwd:
		if err := fwd(); err != nil { // the saved forward the backward uses
			return err
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
	for range rr.o.warmup {
		if err := rr.c.Barrier(); err != nil {
			return err
		}
		if err := body(); err != nil {
			return err
		}
	}
	samples := make([]time.Duration, 0, rr.o.iters)
	slowest := tensor.NewHost(tensor.FP64, 1)
	for range rr.o.iters {
		if err := rr.c.Barrier(); err != nil {
			return err
		}
		before := run.Counters().BytesSent
		d, err := dev.Time(body)
		if err != nil {
			return err
		}
		if sent := run.Counters().BytesSent - before; sent != *row.CommBytes && !strings.HasPrefix(row.Reason, "rank ") {
			// A backend that counts differently (or a method that moves what it does not
			// claim): keep the row, say so.
			row.Reason = strings.TrimSpace(fmt.Sprintf("rank %d counted %d bytes sent per iteration; CommBytes says %d. %s", rr.c.Rank(), sent, *row.CommBytes, row.Reason))
			log.Warn().Str("method", pl.Method).Str("pass", pass.String()).Msg(row.Reason)
		}
		slowest.Set(0, d.Seconds())
		if err := rr.c.AllReduce(slowest, comm.Max); err != nil {
			return err
		}
		samples = append(samples, time.Duration(slowest.At(0)*1e9))
	}
	st := harness.NewStats(samples)
	if dev.Name() != "cpu" {
		row.PeakMemBytes = results.Ptr(dev.PeakMemory())
	}
	row.Status = results.StatusOK
	row.SetTimes(st.Median, st.Min, st.Max, st.Mean)
	// Per-GPU TFLOP/s (MASKS.md): the global mask's FLOPs over world size x time.
	row.TFLOPs = results.Ptr(row.FLOPs / float64(rr.c.Size()) / st.Median.Seconds() / 1e12)
	return nil
}

// printCPPlan prints the cases of a dry run.
func printCPPlan(w io.Writer, o cpOptions, cases []cpCase, n int) error {
	s := o.seqlenFor(n)
	fmt.Fprintf(w, "# longca cp: %d ranks, seqlen %d, %d case(s) x %d sample(s) x %d pass(es)\n", n, s, len(cases), o.samples, len(o.passes))
	fmt.Fprintf(w, "# %-15s %-22s %-22s %-6s %8s %8s %12s %14s\n", "method", "mesh", "mask", "heads", "tok/rank", "padding", "fwd_GFLOP", "fwd_bytes/rank")
	for _, cs := range cases {
		m, _ := cp.New(cs.method)
		spec, docs, err := buildCPMask(cs.mask, s, o.seed)
		if err != nil {
			return err
		}
		cfg := cs.cfg
		cfg.Docs = docs
		pl, err := m.Plan(cfg, o.problemFor(cs.heads, spec.Mask))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  %-15s %-22s %-22s %-6s %8d %8d %12.2f %14d\n", cs.method, pl.Config.Mesh(), cs.mask, cs.heads,
			pl.Tokens, pl.Padding(), pl.Problem.FLOPs(kernels.Fwd)/1e9, m.CommBytes(pl, kernels.Fwd))
	}
	return nil
}

// printCPTable prints rank 0's rows, averaged over samples, in nccl-tests style: every
// non-data line starts with #.
func printCPTable(w io.Writer, rows []results.Row) error {
	type key struct{ method, mesh, mask, heads, pass string }
	type agg struct {
		n, ok              int
		ms, tflops, gbs    float64
		peak               int64
		status, checkWorst string
		checkPass          *bool
	}
	var order []key
	sums := map[key]*agg{}
	for _, r := range rows {
		mesh := fmt.Sprintf("%dx%d", *r.Ulysses, *r.Ring)
		if *r.Windows > 1 {
			mesh += fmt.Sprintf("w%d", *r.Windows)
		}
		k := key{r.Method, mesh, r.Mask, fmt.Sprintf("%d:%d", r.HeadsQ, r.HeadsKV), r.Pass}
		a := sums[k]
		if a == nil {
			a = &agg{status: string(r.Status)}
			sums[k] = a
			order = append(order, k)
		}
		a.n++
		if r.CheckPass != nil {
			a.checkPass, a.checkWorst = r.CheckPass, r.CheckWorst
		}
		if r.Status == results.StatusOK && r.MedianMs != nil {
			a.ok++
			a.ms += *r.MedianMs
			a.tflops += *r.TFLOPs
			if r.BandwidthGBs != nil {
				a.gbs += *r.BandwidthGBs
			}
			if r.PeakMemBytes != nil {
				a.peak = max(a.peak, *r.PeakMemBytes)
			}
		} else {
			a.status = string(r.Status)
		}
	}
	fmt.Fprintf(w, "# %-15s %-8s %-22s %-6s %-7s %7s %10s %12s %9s %-6s %9s\n", "method", "mesh", "mask", "heads", "pass", "samples", "time_ms", "TFLOPs/GPU", "GB/s", "check", "peak_GiB")
	for _, k := range order {
		a := sums[k]
		chk := "-"
		if a.checkPass != nil {
			chk = "OK"
			if !*a.checkPass {
				chk = "WRONG"
			}
		}
		if a.ok == 0 {
			fmt.Fprintf(w, "  %-15s %-8s %-22s %-6s %-7s %7d %10s %12s %9s %-6s\n", k.method, k.mesh, k.mask, k.heads, k.pass, a.n, a.status, "-", "-", chk)
			continue
		}
		f := float64(a.ok)
		peak := "-"
		if a.peak > 0 {
			peak = fmt.Sprintf("%.2f", float64(a.peak)/(1<<30))
		}
		fmt.Fprintf(w, "  %-15s %-8s %-22s %-6s %-7s %7d %10.3f %12.4f %9.3f %-6s %9s\n", k.method, k.mesh, k.mask, k.heads, k.pass, a.n, a.ms/f, a.tflops/f, a.gbs/f, chk, peak)
	}
	return nil
}

// cpDeviceMover is the device mover for n in-process ranks when the kernel runs on an
// internal/cuda GPU (nil for a CPU or staged kernel): the ranks' transfers become
// device-to-device copies on the kernel's GPU.
func cpDeviceMover(kernel string, ko kernels.Options, n int) (*cudamover.Mover, error) {
	k, err := newKernel(kernel, ko)
	if err != nil {
		return nil, err
	}
	if !cp.DeviceResident(k) {
		return nil, nil
	}
	idx := 0
	if ck, ok := k.(interface{ CUDADevice() *cuda.Device }); ok {
		idx = ck.CUDADevice().Index
	}
	g, err := cuda.Open(idx)
	if err != nil {
		return nil, err
	}
	m, err := cudamover.New(g, 2*n)
	if err != nil {
		return nil, fmt.Errorf("longca cp: device mover for %d ranks: %w", n, err)
	}
	return m, nil
}
