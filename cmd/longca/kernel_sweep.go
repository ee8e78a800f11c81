package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/longca/longca/present"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd"
	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
)

// sweepOptions is one sweep of `longca kernel` or `longca run`.
type sweepOptions struct {
	sweep         harness.Sweep
	warmup, iters int
	check         bool
	checkBudget   float64
	out, runID    string
	bench         string
	build         harness.MaskBuilder // nil: harness.BuildMask
	// world is this process among the ranks a launcher started (rank 0 of 1 alone):
	// every rank runs the whole sweep on its own GPU and writes its own rank file.
	world spmd.World
	// kernelOpts make the kernels (device index, variant, interpreter).
	kernelOpts kernels.Options
	// stopOnCrash ends the sweep after an external worker fails (--on-worker-crash stop).
	stopOnCrash bool
}

// crashCounter is a kernel behind a worker process that can fail (kernels/external).
type crashCounter interface{ Crashes() int }

// sweepResult is what a sweep wrote.
type sweepResult struct {
	runID, file string
	rows        []results.Row
}

// defaultOutDir is out/<what>-<UTC time>.
func defaultOutDir(what string) string {
	return filepath.Join("out", what+"-"+time.Now().UTC().Format("20060102T150405Z"))
}

// baseRow holds the columns every row of this process shares.
func baseRow(runID, bench string, w spmd.World) results.Row {
	host := w.Host
	if host == "" {
		host, _ = os.Hostname()
	}
	return results.Row{
		RunID: runID, Host: host, Rank: int64(w.Rank), WorldSize: int64(max(w.Size, 1)), LocalRank: int64(w.LocalRank),
		Launcher: w.Launcher, Bench: bench, Version: Version, Command: strings.Join(os.Args, " "),
	}
}

// kernelWorld discovers the ranks a launcher started. Under several ranks each one runs
// the sweep on its own GPU (kernelOptions picks the local rank's unless --device is
// given), and the ranks must share a run id: --out or --run-id is then required.
func kernelWorld(c *cli.Context) (spmd.World, error) {
	w, err := spmd.Discover(os.Getenv)
	if err != nil {
		return w, usageError("%v", err)
	}
	if w.Size <= 1 {
		return w, nil
	}
	if !c.IsSet("out") && !c.IsSet("run-id") {
		return w, usageError("%d ranks (%s): give --out DIR (one folder, shared by the ranks) or --run-id so that the ranks' files form one run", w.Size, w.Launcher)
	}
	withRank(w.Rank, w.Size)
	return w, nil
}

// runSweep checks and times every case, writing each row to the rank file as soon as it
// is finished; a progress bar on a terminal, one log line a case otherwise. Ctrl-C stops
// after the current case, keeping the rows written.
func runSweep(ctx context.Context, o sweepOptions) (sweepResult, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	res := sweepResult{runID: o.runID}
	if res.runID == "" {
		res.runID = filepath.Base(filepath.Clean(o.out))
	}
	w, err := results.Create(o.out, res.runID, o.world.Rank, max(o.world.Size, 1))
	if err != nil {
		return res, fmt.Errorf("--out %s: %w", o.out, err)
	}
	res.file = w.Path()
	var workers []crashCounter
	crashes := func() int {
		n := 0
		for _, w := range workers {
			n += w.Crashes()
		}
		return n
	}
	r := &harness.Runner{
		Build: o.build, Warmup: o.warmup, Iters: o.iters, CheckBudget: o.checkBudget,
		Base:          baseRow(res.runID, o.bench, o.world),
		KernelOptions: o.kernelOpts,
		NewKernel: func(name string) (kernels.Kernel, error) {
			k, err := newKernel(name, o.kernelOpts)
			if cc, ok := k.(crashCounter); ok && err == nil {
				workers = append(workers, cc)
			}
			return k, err
		},
	}
	if o.check {
		r.Check = harness.KernelCheck
	}
	defer r.Close()
	cases := o.sweep.Cases()
	eta := newETA(cases, o.build, o.warmup+o.iters)
	var bar *progressbar.ProgressBar
	if o.world.Rank == 0 && isatty.IsTerminal(os.Stderr.Fd()) { // progress on rank 0 only
		// The bar counts estimated work (ms), not cases: a 48K backward weighs far more
		// than an 8K sliding window, and the ETA follows.
		bar = progressbar.NewOptions64(eta.totalMs(), progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetPredictTime(true), progressbar.OptionShowElapsedTimeOnFinish(),
			progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))
	}
	log.Info().Str("run", res.runID).Int("cases", len(cases)).Str("file", res.file).
		Dur("estimate", eta.estimate()).Msg("sweep")
	var stopErr error
	for i, c := range cases {
		if ctx.Err() != nil {
			log.Warn().Int("done", i).Int("cases", len(cases)).Msg("interrupted: rows so far are in the file")
			break
		}
		before := crashes()
		if bar != nil {
			bar.Describe(fmt.Sprintf("%s %s %s %s", c.Mask, harness.FormatSize(c.SeqLen), c.Heads, c.Pass))
		}
		row := r.Run(ctx, c)
		if err := w.Write(row); err != nil {
			w.Close()
			return res, err
		}
		res.rows = append(res.rows, row)
		eta.done(i)
		stopping := o.stopOnCrash && crashes() > before
		if stopping {
			// Counted in rows (one per kernel and case), as the table's "Rows:" counts them.
			stopErr = fmt.Errorf("stopped after %d of %d rows: an external worker failed (--on-worker-crash stop): %s", i+1, len(cases), row.Reason)
			log.Error().Int("done", i+1).Int("cases", len(cases)).Str("reason", row.Reason).Msg("worker failed: stopping the sweep; rows so far are in the file")
		}
		if bar != nil {
			_ = bar.Add64(eta.weightMs(i)) // drawing errors are not the sweep's
			if stopping {
				break
			}
			continue
		}
		ev := log.Info().Int("case", i+1).Int("of", len(cases)).Str("kernel", c.Kernel).Str("mask", c.Mask).
			Int("seqlen", c.SeqLen).Str("heads", c.Heads.String()).Str("pass", c.Pass.String()).Str("status", string(row.Status)).
			Str("eta", eta.remaining().Round(time.Second).String())
		if row.TFLOPs != nil {
			ev = ev.Float64("median_ms", *row.MedianMs).Float64("tflops", *row.TFLOPs)
		}
		if row.Reason != "" {
			ev = ev.Str("reason", row.Reason)
		}
		ev.Msg("case")
		if stopping {
			break
		}
	}
	if bar != nil {
		_ = bar.Finish()
	}
	if err := w.Close(); err != nil {
		return res, err
	}
	if stopErr != nil {
		return res, stopErr
	}
	return res, ctx.Err()
}

// writeReportText prints the nccl-tests style table of rows and, when several kernels
// ran, each one's ratio to the fastest.
func writeReportText(w io.Writer, rows []results.Row, pass, title string) error {
	sum := present.Summarize(rows, pass)
	if err := present.WriteTable(w, title, sum); err != nil {
		return err
	}
	if len(sum.Kernels) < 2 {
		return nil
	}
	if _, err := io.WriteString(w, "#\n"); err != nil {
		return err
	}
	return present.WriteRatioTable(w, "each kernel's TFLOP/s over the fastest kernel's, per case", sum)
}

// writeJSONFile writes v as indented JSON.
func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
