package main

import (
	"fmt"
	"strings"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/session"
	"github.com/longca/longca/spmd"
	"github.com/urfave/cli/v2"
)

// sweepCulprit names the flags that make a case too big: each one whose default (or a
// modest length) alone would make it fit, else all of them with their values.
func sweepCulprit(c *cli.Context) func(harness.Case, func(harness.Case) bool) string {
	return func(cs harness.Case, fits func(harness.Case) bool) string {
		lenFlag := "--seqlens"
		if !c.IsSet("seqlens") && (c.IsSet("begin") || c.IsSet("end")) {
			lenFlag = "-b/-e"
		}
		if c.Command.Name == "run" {
			return "--suite " + c.String("suite")
		}
		shrink := []struct {
			flag, value string
			apply       func(x *harness.Case)
		}{
			{lenFlag, harness.FormatSize(cs.SeqLen), func(x *harness.Case) { x.SeqLen = min(x.SeqLen, 4096) }},
			{"--heads", cs.Heads.String(), func(x *harness.Case) { x.Heads = harness.Heads{Q: min(x.Heads.Q, 64), KV: min(x.Heads.KV, 8)} }},
			{"--head-dim", fmt.Sprint(cs.HeadDim), func(x *harness.Case) { x.HeadDim = min(x.HeadDim, 128) }},
		}
		var all, alone []string
		for _, s := range shrink {
			x := cs
			s.apply(&x)
			if x != cs && fits(x) {
				alone = append(alone, s.flag+" "+s.value)
			}
			all = append(all, s.flag+" "+s.value)
		}
		if len(alone) > 0 {
			// each of these alone would make it fit (--head-dim 1000 with the default
			// heads named only --heads 64:64 before)
			return strings.Join(alone, " or ")
		}
		return strings.Join(all, ", ")
	}
}

// fitCP is session.FitCP naming the size flags as given.
func fitCP(c *cli.Context, o cpOptions, n, onNode int, inProcess bool) error {
	flags := fmt.Sprintf("--tokens-per-rank %s, --heads %s, --head-dim %d", c.String("tokens-per-rank"), c.String("heads"), o.headDim)
	if o.seqlen > 0 {
		flags = fmt.Sprintf("--seqlen %s, --heads %s, --head-dim %d", c.String("seqlen"), c.String("heads"), o.headDim)
	}
	return session.FitCP(o.sweep(n), n, onNode, inProcess, o.kernelOpts, o.check, o.checkBudget, flags)
}

// dryFitCP says after a CP dry run's plan whether the run fits this machine: its memory,
// then the kernel and the backend (backend, the one the run opens) where they cannot run
// here (the run's own refusal as the plan's last line where it does not fit; exit status 0,
// as kernel's dry run), starting no worker: a worker's kernel (exec:, torch:) is not
// counted. (The memory fit alone said "fits" for --kernel cuda or --backend nccl on a
// machine without CUDA, where the run exits 2.)
func dryFitCP(c *cli.Context, o cpOptions, n int, w spmd.World, backend string) error {
	line := "# fits this machine's memory (the run says its time when it starts)"
	var err error
	if session.ServedByWorker(o.kernel, o.kernelOpts) {
		line = fmt.Sprintf("# memory not counted: --kernel %s is a worker's kernel, whose worker a dry run does not start", o.kernel)
	} else if err = fitCP(c, o, n, max(w.LocalSize, n/w.Size), w.Size == 1); err == nil {
		_, err = cpKernelProbe(o)
	}
	if err == nil && backend == "nccl" {
		if e := spmd.NCCLUnavailable(); e != nil {
			err = usageError("%v", e)
		}
	}
	if err != nil {
		var ok bool
		if line, ok = dryRefusal(err); !ok {
			return err
		}
	}
	_, err = fmt.Fprintln(c.App.Writer, line)
	return err
}

// fitCPPlan is session.FitCPPlan naming the world's and the length's flags as given.
func fitCPPlan(c *cli.Context, o cpOptions, n int) error {
	flags := fmt.Sprintf("--ranks %d, --tokens-per-rank %s", n, c.String("tokens-per-rank"))
	if o.seqlen > 0 {
		flags = fmt.Sprintf("--ranks %d, --seqlen %s", n, c.String("seqlen"))
	}
	return session.FitCPPlan(o.sweep(n), n, flags)
}

// estimateCP is the CP run's time estimate (session.EstimateCP): a long run says so.
func estimateCP(c *cli.Context, r session.CPRun) *harness.CPEstimate {
	return newSession(c, "cp", "", "", spmd.World{Size: 1}).EstimateCP(c.Context, r)
}
