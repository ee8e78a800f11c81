package main

import (
	"slices"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/present"
	"github.com/longca/longca/session"
	"github.com/longca/longca/spmd"
	"github.com/urfave/cli/v2"
)

// cpAction wires `longca cp`: the flags and the world's shape become a session.CPRun.
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
	// rank 0 idles before each kernel-alone baseline while the others wait for it in a
	// collective that --timeout bounds
	if o.settle > 0 && o.settle*2 > so.Timeout {
		return usageError("--settle %s with --timeout %s: the other ranks wait out rank 0's idle before each baseline; give a --timeout of at least twice the settle, or a shorter --settle", o.settle, so.Timeout)
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
	if err := o.checkBlock(n); err != nil {
		return err
	}
	if err := o.checkRanksHoldTokens(n); err != nil {
		return err
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
	} else if err := fitCPPlan(c, o, n); err != nil {
		return err
	}
	cases, err := cpCases(o, n)
	if err != nil {
		return err
	}
	// a --variant the kernel does not take is bad input, dry run or not
	if err := checkVariant(o.kernelOpts, c.IsSet("kernel"), o.kernel); err != nil {
		return err
	}
	if o.dryRun {
		if w.Rank == 0 {
			if err := present.WriteCPPlan(c.App.Writer, o.sweep(n), cases, n); err != nil {
				return err
			}
			return dryFitCP(c, o, n, w, cpBackend(o, w, so))
		}
		return nil
	}
	probe, err := cpKernelProbe(o)
	if err != nil {
		return err
	}
	// a worker's backward may recompute its own forward (the protocol allows it, the torch
	// worker does), where a CP method's step passes the whole row's out and lse with part of
	// the keys: with the fake worker, ring-p2p's, usp's and loongtrain's gradients failed the
	// check. Only a worker that says its backward uses them runs the backward here.
	if g, ok := probe.(kernels.GivenForward); ok && slices.ContainsFunc(o.passes, func(p kernels.Pass) bool { return p != kernels.Fwd }) {
		uses, err := g.BackwardUsesGiven(c.Context)
		if err != nil {
			return usageError("--kernel %s cannot run here: %v", o.kernel, err)
		}
		if !uses {
			return usageError("--kernel %s: its backward may come from a forward of its own, which the CP methods' steps cannot use (they pass the whole row's out and lse); give --passes fwd, or a worker whose hello says \"backward_uses_given\": true (docs/external-kernels.md)", o.kernel)
		}
	}
	// a kernel sweep gives such a kernel's backward rows unsupported; cp has one kernel, and
	// its backward rows would otherwise time the ordinary backward under --deterministic
	if o.kernelOpts.Deterministic && slices.ContainsFunc(o.passes, func(p kernels.Pass) bool { return p != kernels.Fwd }) {
		if d, ok := probe.(kernels.DeterministicBackward); !ok || !d.DeterministicBackward() {
			return usageError("--deterministic: kernel %s has no deterministic backward here; leave --deterministic out, or time --passes fwd", o.kernel)
		}
	}
	if o.out == "" {
		if o.out, err = session.DefaultOutDir("cp", w.Size); err != nil {
			return err
		}
	}
	so.Backend = cpBackend(o, w, so)
	inProcess := !(w.Size > 1 || so.Backend != "auto" && so.Backend != "local")
	if o.runID, err = resultsTarget(o.out, o.runID, flagFrom(c, "run-id"), n, inProcess); err != nil {
		return err
	}
	run := session.CPRun{
		Sweep: o.sweep(n), Cases: cases, Ranks: n, InProcess: inProcess, Options: so,
		Kernel: probe, KernelOptions: o.kernelOpts, Staged: o.staged, Check: o.check, CheckBudget: o.checkBudget,
		Warmup: o.warmup, Iters: o.iters, Overlap: o.overlap, Baseline: o.base, Links: o.links,
		GPUState: c.Bool("gpu-state"), Settle: o.settle,
	}
	if w.Rank == 0 {
		run.Estimate = estimateCP(c, run)
	}
	return newSession(c, "cp", o.out, o.runID, w).CP(c.Context, run)
}

// cpKernelProbe is the run's kernel, made once, with its refusals: a kernel that cannot be
// made here, a device kernel the methods cannot keep on its
// device (refused unless --staged). The dry run says them too, for a kernel not served by a
// worker (whose Device starts it).
func cpKernelProbe(o cpOptions) (kernels.Kernel, error) {
	// A kernel that cannot be made here (no GPU, no libcudnn) is what a kernel sweep
	// reports as unsupported rows; cp has one kernel, so it is bad input (it exited 1).
	probe, err := session.NewKernel(o.kernel, o.kernelOpts)
	if err != nil {
		return nil, usageError("--kernel %s cannot run here: %v: use --kernel ref, or run where longca env finds it", o.kernel, err)
	}
	if _, err := harness.CPKernel(probe, o.staged); err != nil {
		return nil, usageError("--kernel %s: %v", o.kernel, err)
	}
	return probe, nil
}

// cpBackend is the backend the run opens: GPU ranks started by a launcher talk through NCCL,
// device buffer to device buffer, unless --backend names another.
func cpBackend(o cpOptions, w spmd.World, so spmd.Options) string {
	if w.Size > 1 && (so.Backend == "" || so.Backend == "auto") && o.kernel == "cuda" {
		return "nccl"
	}
	return so.Backend
}

// baselineOf is --baseline's yardstick (parseCPFlags checked it): none, measured in the
// run, or read from a results file.
func baselineOf(v string) *harness.Baseline {
	switch v {
	case "none":
		return nil
	case "measure":
		return &harness.Baseline{}
	}
	return &harness.Baseline{File: v}
}
