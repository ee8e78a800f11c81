package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	_ "github.com/longca/longca/kernels/cuda"     // registers "cuda" (errors without a GPU)
	_ "github.com/longca/longca/kernels/cudnn"    // registers "cudnn" (errors without cuDNN or a GPU)
	_ "github.com/longca/longca/kernels/external" // registers torch:* and exec:PROGRAM[:KERNEL]
	"github.com/longca/longca/present"
	"github.com/longca/longca/session"
	"github.com/longca/longca/spmd"
	"github.com/urfave/cli/v2"
)

// publishedSeqLens are MASKS.md's kernel lengths: {1,2,4,8,16,24,32,40,48}K.
var publishedSeqLens = []int{1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10, 24 << 10, 32 << 10, 40 << 10, 48 << 10}

func init() {
	register(&cli.Command{
		Name:  "kernel",
		Usage: "sweep attention kernels over masks, lengths, heads and passes: check each case, then time it",
		Description: "Cases are masks x lengths x heads x kernels x passes. Each case is checked against the CPU\n" +
			"reference first (a smaller case of the same mask and seed when it is too big for the CPU), then\n" +
			"timed: -w warm-ups, -n timed repetitions with the device's clock, cache flushed between them.\n" +
			"One Arrow row per case goes to OUT/<run>.rank-<r>-of-<n>.arrow as soon as it finishes (rank 0\n" +
			"of 1 alone; under mpirun or srun every rank sweeps on its own GPU); a wrong kernel is never\n" +
			"timed. Lengths: --seqlens 1K,2K or -b 1K -e 48K -f 2 (or --step 8K).",
		Flags:  sweepFlags(),
		Action: kernelAction,
	})
}

func kernelAction(c *cli.Context) (err error) {
	defer func() { err = usageOnRankZero(err) }()
	w, err := kernelWorld(c)
	if err != nil {
		return err
	}
	ko, err := kernelOptions(c, w)
	if err != nil {
		return err
	}
	s, err := sweepFromFlags(c, publishedSeqLens, ko)
	if err != nil {
		return err
	}
	return sweepAction(c, s, "kernel", w, ko)
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

// oneProcess refuses a command that runs as one process (run, simulate) under a launcher of
// several ranks: each rank ran the whole of it on its own, as rank 0 of 1 into a folder of its
// own (a review found `mpirun -np 2 longca run` writing two runs so). Else it returns the
// process's world as the launcher's environment says it, so that the command's rows record
// the launcher as kernel's do (slurm under srun, single with none; run's said "" and
// simulate's "none", values docs/results-format.md does not have).
func oneProcess(name string) (spmd.World, error) {
	w, err := spmd.Discover(os.Getenv)
	if err != nil {
		return w, usageError("%v", err)
	}
	if w.Size > 1 {
		return w, usageError("longca %s runs as one process and %s started %d ranks: start it without the launcher (kernel, sparse and cp take ranks)", name, w.Launcher, w.Size)
	}
	return w, nil
}

// newSession is a command's run session: rows to out under runID (resultsTarget's), as rank w.
func newSession(c *cli.Context, bench, out, runID string, w spmd.World) *session.Session {
	return session.New(bench, out, runID, w, Version, &log, c.App.Writer, c.App.ErrWriter)
}

// sweepAction runs (or with --dry-run lists) a sweep: the flags become a session.KernelSweep.
func sweepAction(c *cli.Context, s harness.Sweep, bench string, w spmd.World, ko kernels.Options) error {
	warmup, iters, err := repsFromFlags(c)
	if err != nil {
		return err
	}
	check, budget, err := checkFromFlags(c)
	if err != nil {
		return err
	}
	docs, err := docsFromFlags(c) // none for sparse, which has no document masks
	if err != nil {
		return err
	}
	if err := checkMaskOptions(c, s.Masks, true); err != nil {
		return err
	}
	build := harness.BuildMask
	if !docs.IsDefault() {
		build = docs.KernelBuilder()
	}
	settle, err := settleFromFlags(c)
	if err != nil {
		return err
	}
	stop, err := stopOnCrash(c) // checked before a dry run too: it accepts what the run would
	if err != nil {
		return err
	}
	// Said once every flag is accepted, so that bad input is one line (the sparse sweep's
	// dropped ratios were warned before -w was read).
	for _, d := range s.Dropped() {
		log.Warn().Str("case", d).Msg("sparse: a ratio that keeps the same blocks as an earlier one is left out")
	}
	// --mask-json and a dry run build every static mask (of a sparse one, only its area):
	// estimated first, and written once every flag is accepted (--mask-json wrote 2.5 GB of
	// JSON from 13.7 GB of memory before the estimate ran)
	maskJSON := c.String("mask-json")
	writeJSON := maskJSON != "" && bench == "kernel"
	if writeJSON || c.Bool("dry-run") {
		if err := session.FitPlanMasks(s.Cases()); err != nil {
			return err
		}
	}
	if writeJSON {
		if err := writeMaskJSON(c, maskJSON, s, docs.KernelBuilder()); err != nil {
			return err
		}
	}
	k := session.KernelSweep{Sweep: s, Build: build, Warmup: warmup, Iters: iters, Check: check, CheckBudget: budget,
		KernelOptions: ko, StopOnCrash: stop, Culprit: sweepCulprit(c), GPUState: c.Bool("gpu-state"), Settle: settle}
	if c.Bool("dry-run") {
		if err := present.WritePlan(c.App.Writer, s.Cases(), build); err != nil {
			return err
		}
		return dryFit(c, bench, w, k)
	}
	out := c.String("out")
	if out == "" {
		var err error
		if out, err = session.DefaultOutDir(bench, w.Size); err != nil {
			return err
		}
	}
	runID, err := resultsTarget(out, c.String("run-id"), flagFrom(c, "run-id"), w.Size, false)
	if err != nil {
		return err
	}
	ss := newSession(c, bench, out, runID, w)
	est, err := ss.FitKernels(c.Context, k)
	if err != nil {
		return err
	}
	res, err := ss.RunKernels(c.Context, k, est)
	interrupted := errors.Is(err, context.Canceled) && res.File != ""
	if err != nil && !interrupted {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "# results: %s\n", res.File)
	if w.Rank == 0 { // rank 0 prints the table of its own rows; merge joins every rank's
		if err := present.WriteReport(c.App.Writer, res.Rows, "", "longca "+bench+" "+runID); err != nil {
			return err
		}
	}
	if interrupted { // Ctrl-C or SIGTERM: the rows measured so far are shown and kept
		return &session.ExitError{Code: 130, Msg: fmt.Sprintf("longca %s: interrupted after %d of %d cases; their rows are in %s", bench, len(res.Rows), len(k.Sweep.Cases()), res.File)}
	}
	return nil
}

// dryFit says after a dry run's plan whether the run fits this machine's memory (where it
// does not, the run's own refusal, as a line of the plan: a dry run may list a GPU sweep on
// a smaller machine, so its exit status stays 0) and about how long it takes at the assumed
// rates, with nothing started or timed (session.FitKernelsDry).
func dryFit(c *cli.Context, bench string, w spmd.World, k session.KernelSweep) error {
	est, unasked, err := session.New(bench, "", "", w, Version, &log, c.App.Writer, c.App.ErrWriter).FitKernelsDry(k)
	if line, ok := dryRefusal(err); ok {
		_, err = fmt.Fprintln(c.App.Writer, line)
		return err
	}
	if err != nil {
		return err
	}
	m := session.Machine()
	left := ""
	if len(unasked) > 0 {
		left = fmt.Sprintf("; %s counted as on a GPU: the host memory longca holds for a worker's kernel, whose worker (which says where it runs) a dry run does not start", strings.Join(unasked, ", "))
	}
	_, err = fmt.Fprintf(c.App.Writer, "# fits this machine's memory; about %s at the assumed rates (the CPU reference at %.1f GFLOP/s, GPU kernels at %.0f TFLOP/s; the run measures the reference first when that is long)%s\n",
		harness.FormatDuration(est.Total().Seconds()), m.RefFLOPs/1e9, m.DeviceFLOPs/1e12, left)
	return err
}

// dryRefusal is a dry run's line for the refusal err that the run would meet (a usage
// error, exit status 2: what does not fit or cannot run on this machine); ok is false for
// any other error, or none.
func dryRefusal(err error) (line string, ok bool) {
	var ue cli.ExitCoder
	if !errors.As(err, &ue) || ue.ExitCode() != 2 {
		return "", false
	}
	return "# the run would be refused on this machine: " + strings.TrimPrefix(err.Error(), "longca: "), true
}

// writeMaskJSON writes one JSON file per (mask, length) of the sweep into dir (--mask-json).
func writeMaskJSON(c *cli.Context, dir string, s harness.Sweep, build harness.MaskBuilder) error {
	if err := writableDir(dir); err != nil {
		return usageError("--mask-json %s: %v", dir, err)
	}
	return session.New("kernel", dir, "", spmd.World{Size: 1}, Version, &log, c.App.Writer, c.App.ErrWriter).WriteMaskJSON(dir, s, build)
}
