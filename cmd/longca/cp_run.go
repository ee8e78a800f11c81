package main

import (
	"context"
	"fmt"
	"github.com/longca/longca/present"
	"io"
	"sync"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/comm/local/cudamover"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/spmd/cp"
	"github.com/urfave/cli/v2"
)

// cpAction wires `longca cp`: the world (in-process ranks, or the launcher's), each
// rank's communicator, kernel and rank file, and harness.RunCP; then rank 0's table.
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
	// The memory estimate comes before any planning: planning an impossible world (100000
	// ranks) is itself the long allocation the estimate refuses.
	if !o.dryRun {
		if err := fitCP(c, o, n, max(w.LocalSize, n/w.Size), w.Size == 1); err != nil {
			return err
		}
	}
	cases, err := cpCases(o, n)
	if err != nil {
		return err
	}
	if !o.dryRun && w.Rank == 0 {
		warnCPTime(c, o, cases, n, w.Size == 1)
	}
	if o.dryRun {
		if w.Rank == 0 {
			return printCPPlan(c.App.Writer, o, cases, n)
		}
		return nil
	}
	// The kernel, probed once: a device kernel the methods cannot keep on its device is
	// refused here unless --staged.
	probe, err := newKernel(o.kernel, o.kernelOpts)
	if err != nil {
		return fmt.Errorf("--kernel %s: %w", o.kernel, err)
	}
	if _, err := harness.CPKernel(probe, o.staged); err != nil {
		return usageError("--kernel %s: %v", o.kernel, err)
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
	var baseline *harness.Baseline
	switch o.baseline {
	case "none":
	case "measure":
		baseline = &harness.Baseline{}
	default:
		baseline = &harness.Baseline{File: o.baseline}
	}
	rr := cpRanks{o: o, cases: cases, world: w, baseline: baseline}
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
		rr.backend = spmd.Choose(w, so)
		if err := rr.run(ctx, cm, w, probe); err != nil {
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
		mover, err := cpDeviceMover(probe, n)
		if err != nil {
			return err
		}
		if mover != nil {
			defer mover.Close()
			opts = append(opts, local.WithMover(mover))
		}
		rr.backend = "local"
		err = local.Run(n, func(cm comm.Comm) error {
			wr := w
			wr.Rank, wr.Size, wr.LocalRank, wr.LocalSize = cm.Rank(), n, cm.Rank(), n
			// Every in-process rank has its own kernel (and so its own device stream).
			k, err := kernels.New(o.kernel, o.kernelOpts)
			if err != nil {
				return err
			}
			return rr.run(ctx, cm, wr, k)
		}, opts...)
		if err != nil {
			return err
		}
		res, err := results.Merge(o.out, results.MergeOptions{Runs: []string{o.runID}, Out: results.MergedPath(o.out, o.runID)})
		if err != nil {
			return fmt.Errorf("merging the rank files: %w", err)
		}
		fmt.Fprintf(c.App.ErrWriter, "# results: %s (%d rows from %d ranks)\n", res.Files[0], res.Rows, n)
	}
	if w.Rank == 0 {
		title := fmt.Sprintf("longca cp: %d ranks (%s), seqlen %d, kernel %s", n, rr.backend, o.seqlenFor(n), o.kernel)
		if err := present.WriteCPTable(c.App.Writer, title, rr.rows); err != nil {
			return err
		}
	}
	if rr.wrong > 0 {
		return cli.Exit(fmt.Sprintf("longca cp: %d row(s) failed the check against the reference (status wrong)", rr.wrong), 1)
	}
	return nil
}

// cpRanks is what the ranks of this process share: the cases, and rank 0's rows.
type cpRanks struct {
	o        cpOptions
	cases    []harness.CPCase
	world    spmd.World
	backend  string
	baseline *harness.Baseline

	mu    sync.Mutex
	rows  []results.Row // rank 0's
	wrong int           // rank 0's rows with status wrong
}

// run is one rank: its rank file, its harness.CPRunner, every row written as it is
// agreed, rank 0's progress logged.
func (rr *cpRanks) run(ctx context.Context, cm comm.Comm, w spmd.World, k kernels.Kernel) error {
	o := rr.o
	kern, err := harness.CPKernel(k, o.staged)
	if err != nil {
		return err
	}
	rank, n := cm.Rank(), cm.Size()
	wr, err := results.Create(o.out, o.runID, rank, n)
	if err != nil {
		return fmt.Errorf("--out %s: %w", o.out, err)
	}
	defer wr.Close()
	base := baseRow(o.runID, "cp", w)
	base.Backend = rr.backend
	if o.links != nil {
		base.Backend = "local+links"
		base.ModelParams = fmt.Sprintf(`{"links":%s}`, o.links.JSON())
	}
	r := &harness.CPRunner{
		Sweep: o.sweep(n), Comm: cm, Kernel: kern, KernelOptions: o.kernelOpts, Check: o.check, CheckBudget: o.checkBudget,
		Warmup: o.warmup, Iters: o.iters, Overlap: o.overlap, Baseline: rr.baseline, Base: base,
	}
	if rank == 0 {
		r.OnBaseline = func(row results.Row) {
			ev := log.Info().Str("kernel", row.Kernel).Str("mask", row.Mask).Int64("seqlen", row.SeqLen).Str("pass", row.Pass).Str("status", string(row.Status))
			if row.TFLOPs != nil {
				ev = ev.Float64("tflops", *row.TFLOPs)
			}
			ev.Str("reason", row.Reason).Msg("kernel baseline")
		}
	}
	err = harness.RunCP(ctx, r, rr.cases, func(ci int, row results.Row) error {
		if err := wr.Write(row); err != nil {
			return err
		}
		if rank == 0 {
			rr.mu.Lock()
			rr.rows = append(rr.rows, row)
			if row.Status == results.StatusWrong {
				rr.wrong++
			}
			rr.mu.Unlock()
			logCPRow(ci, len(rr.cases), row)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return wr.Close()
}

// logCPRow is rank 0's progress line of a row (scripts read its fields).
func logCPRow(ci, of int, row results.Row) {
	mesh := "-"
	if row.Ulysses != nil && row.Ring != nil {
		mesh = fmt.Sprintf("%dx%d", *row.Ulysses, *row.Ring)
	}
	ev := log.Info().Int("case", ci+1).Int("of", of).Int64("sample", row.Sample).Str("method", row.Method).
		Str("mesh", mesh).Str("mask", row.Mask).
		Str("heads", fmt.Sprintf("%d:%d", row.HeadsQ, row.HeadsKV)).Str("pass", row.Pass).Str("status", string(row.Status))
	if row.MedianMs != nil {
		ev = ev.Float64("median_ms", *row.MedianMs).Float64("tflops_per_gpu", *row.TFLOPs)
	}
	if row.RanksPerDevice != nil {
		ev = ev.Int64("ranks_per_device", *row.RanksPerDevice)
	}
	if row.DeviceTFLOPs != nil {
		ev = ev.Float64("device_tflops", *row.DeviceTFLOPs)
	}
	if row.KernelTFLOPs != nil {
		ev = ev.Float64("kernel_tflops", *row.KernelTFLOPs).Float64("cp_efficiency", *row.CPEfficiency)
	}
	if row.NoCommMs != nil {
		ev = ev.Float64("no_comm_ms", *row.NoCommMs)
	}
	if row.PeakMemBytes != nil {
		ev = ev.Int64("peak_mem_bytes", *row.PeakMemBytes)
	}
	if row.Reason != "" {
		ev = ev.Str("reason", row.Reason)
	}
	ev.Msg("cp")
}

// printCPPlan prints the cases of a dry run (a case the method cannot run here shows
// its reason).
func printCPPlan(w io.Writer, o cpOptions, cases []harness.CPCase, n int) error {
	s := o.sweep(n)
	t := present.TextTable{
		Title: []string{fmt.Sprintf("longca cp: %d ranks, seqlen %d, %d case(s) x %d sample(s) x %d pass(es) (dry run: nothing was run)", n, s.SeqLen, len(cases), o.samples, len(o.passes))},
		Columns: []present.TextColumn{{Name: "method", Left: true}, {Name: "mesh", Left: true}, {Name: "mask", Left: true},
			{Name: "heads", Unit: "q:kv"}, {Name: "tok/rank", Unit: "tokens"}, {Name: "padding", Unit: "tokens"},
			{Name: "fwd", Unit: "GFLOP"}, {Name: "fwd_bytes/rank", Unit: "bytes"}, {Name: "note", Left: true}},
	}
	skipped := 0
	for _, cs := range cases {
		if cs.Skip != nil {
			skipped++
			t.Rows = append(t.Rows, []string{cs.Method, "-", cs.Mask, cs.Heads.String(), "-", "-", "-", "-", "unsupported: " + cs.Skip.Error()})
			continue
		}
		m, err := cp.New(cs.Method)
		if err != nil {
			return err
		}
		spec, docs, err := s.MaskSpec(cs.Mask, s.SeqLen, s.Seed)
		if err != nil {
			return err
		}
		cfg := cs.Config
		cfg.Docs = docs
		pl, err := m.Plan(cfg, s.Problem(cs.Heads, spec.Mask))
		if err != nil {
			return err
		}
		t.Rows = append(t.Rows, []string{cs.Method, meshLabel(pl.Config), cs.Mask, cs.Heads.String(), fmt.Sprint(pl.Tokens),
			fmt.Sprint(pl.Padding()), fmt.Sprintf("%.2f", pl.Problem.FLOPs(kernels.Fwd)/1e9), fmt.Sprint(m.CommBytes(pl, kernels.Fwd)), ""})
	}
	t.Summary = []string{fmt.Sprintf("%d case(s) run, %d unsupported here", len(cases)-skipped, skipped)}
	return t.Write(w)
}

// meshLabel is a resolved mesh in one word: UxR, wW for windows, -hf head-first, -bB-sS
// balanced's block and stages.
func meshLabel(c cp.Config) string {
	s := fmt.Sprintf("%dx%d", c.Ulysses, c.Ring)
	if c.Windows > 1 {
		s += fmt.Sprintf("w%d", c.Windows)
	}
	if c.Ulysses > 1 && c.Ring > 1 && c.HeadFirst {
		s += "-hf"
	}
	if c.Block > 0 { // balanced: its block and stages
		s += fmt.Sprintf("-b%d-s%d", c.Block, c.Stages)
	}
	return s
}

// cpDeviceMover is the device mover for n in-process ranks when the kernel is a
// cp.DeviceKernel (nil otherwise): the ranks' transfers become device-to-device copies
// on the kernel's GPU.
func cpDeviceMover(k kernels.Kernel, n int) (*cudamover.Mover, error) {
	dk, ok := k.(cp.DeviceKernel)
	if !ok {
		return nil, nil
	}
	g, err := cuda.Open(dk.CUDADevice().Index)
	if err != nil {
		return nil, err
	}
	m, err := cudamover.New(g, 2*n)
	if err != nil {
		return nil, fmt.Errorf("longca cp: device mover for %d ranks: %w", n, err)
	}
	return m, nil
}
