package main

import (
	"slices"
	"strings"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/session"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:  "run",
		Usage: "run the standard kernel suite that fits this machine; write rows, merged file, report and plots",
		Description: "Suites: gpu (kernels.New(\"cuda\") works): the 12 kernel masks at 8K, 16K, 32K and 48K, heads\n" +
			"64:8, head dim 128, bf16, fwd and bwd, -w 3 -n 10, the cuda kernel and every peer available here\n" +
			"(cudnn when libcudnn opens; torch:flash, torch:cudnn, torch:efficient, torch:flex, torch:varlen\n" +
			"through --python; on one H200 about 8.5 minutes for its 672 cases, measured without --settle;\n" +
			"on an H100 574 s with --settle's 250ms default against 457 s without; --masks takes part of it);\n" +
			"cpu (no GPU): the ref kernel on\n" +
			"6 masks at 512, 1K, 2K, heads 8:2, head dim 64, fwd and bwd (about a minute on 2 idle cores);\n" +
			"smoke: a seconds-long subset of cpu for tests. OUT gets <run>.rank-0-of-1.arrow, and named by\n" +
			"the run id (runs sharing OUT keep their own): <run>.merged.arrow, <run>.report.txt (TFLOP/s per\n" +
			"kernel and each kernel's ratio to the fastest) and <run>.plots/*.png; the table is printed.\n" +
			"Ctrl-C stops the sweep (a case it cuts short is dropped, not written as an error) and still writes all of these.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "results folder (default out/run-<time>)"},
			&cli.StringFlag{Name: "suite", Value: "auto", Usage: "auto (gpu when a GPU is found, else cpu), gpu, cpu or smoke"},
			&cli.IntFlag{Name: "warmup", Aliases: []string{"w"}, Value: -1, DefaultText: "the suite's", Usage: "override the suite's warm-ups"},
			&cli.IntFlag{Name: "iters", Aliases: []string{"n"}, Value: -1, DefaultText: "the suite's", Usage: "override the suite's timed repetitions"},
			&cli.BoolFlag{Name: "no-check", Usage: "time without checking"},
			&cli.StringFlag{Name: "run-id", EnvVars: []string{"LONGCA_RUN_ID"}, Usage: "run id (default: the folder's name)"},
			&cli.BoolFlag{Name: "parquet", Usage: "also write the merge as Parquet (<run>.merged.parquet beside <run>.merged.arrow)"},
			&cli.BoolFlag{Name: "no-peers", Usage: "gpu suite: time the cuda kernel only, not cudnn or the torch:* peers"},
			&cli.StringFlag{Name: "masks", Usage: "comma-separated (or all): only these of the suite's masks, in the suite's order (to split the suite over jobs of a bounded length; runs sharing --out with their own --run-id merge into one file with longca merge); default: all of them"},
		}, append(kernelFlags(), gpuStateFlag(), settleFlag())...),
		Action: runAction,
	})
}

func runAction(c *cli.Context) error {
	w, err := oneProcess("run")
	if err != nil {
		return err
	}
	ko, err := kernelOptions(c, w)
	if err != nil {
		return err
	}
	name := c.String("suite")
	if name == "auto" {
		name = "cpu"
		if session.DefaultKernel(ko) == "cuda" {
			name = "gpu"
		}
	} else if name == "gpu" { // (without one it wrote 96 unsupported rows, exit 0)
		if _, err := session.NewKernel("cuda", ko); err != nil {
			return usageError("--suite gpu: no GPU here (%v): use --suite cpu, or auto", err)
		}
	}
	st, err := harness.StandardSuite(name)
	if err != nil {
		return usageError("--suite %q: use auto, gpu, cpu or smoke", name)
	}
	if c.IsSet("masks") {
		if st.Sweep.Masks, err = suiteMasks(st, c.String("masks")); err != nil {
			return err
		}
	}
	if name != "gpu" && c.Bool("no-peers") { // said, as an idle --variant is
		log.Warn().Str("suite", name).Msg("--no-peers: only the gpu suite times peers; it changes nothing here")
	}
	if name == "gpu" && !c.Bool("no-peers") {
		st.Sweep.Kernels = append(st.Sweep.Kernels, newSession(c, "kernel", "", "", w).AvailablePeers(c.Context, ko)...)
	}
	if err := checkVariant(ko, false, st.Sweep.Kernels...); err != nil { // the suite's kernels: the machine's choice
		return err
	}
	stop, err := stopOnCrash(c)
	if err != nil {
		return err
	}
	settle, err := settleFromFlags(c)
	if err != nil {
		return err
	}
	if c.IsSet("warmup") {
		if st.Warmup = c.Int("warmup"); st.Warmup < 0 || st.Warmup > harness.MaxReps {
			return usageError("-w %d: warm-ups must be 0 to %d", st.Warmup, harness.MaxReps)
		}
	}
	if c.IsSet("iters") {
		if st.Iters = c.Int("iters"); st.Iters < 1 || st.Iters > harness.MaxReps {
			return usageError("-n %d: iterations must be 1 to %d", st.Iters, harness.MaxReps)
		}
	}
	out := c.String("out")
	if out == "" {
		var err error
		if out, err = session.DefaultOutDir("run", 1); err != nil {
			return err
		}
	}
	runID, err := resultsTarget(out, c.String("run-id"), flagFrom(c, "run-id"), 1, false)
	if err != nil {
		return err
	}
	k := session.KernelSweep{Sweep: st.Sweep, Build: st.Build, Warmup: st.Warmup, Iters: st.Iters, Check: !c.Bool("no-check"),
		CheckBudget: st.CheckBudget, KernelOptions: ko, StopOnCrash: stop, Culprit: sweepCulprit(c), GPUState: c.Bool("gpu-state"), Settle: settle}
	return newSession(c, "kernel", out, runID, w).Suite(c.Context, st.Name, k, c.Bool("parquet"))
}

// suiteMasks is --masks of run: the suite's masks that the list names, in the suite's order
// (all: every one); a name outside the suite, or an empty list, is a usage error naming the
// suite's masks.
func suiteMasks(st harness.Suite, list string) ([]string, error) {
	if strings.TrimSpace(list) == "all" {
		return st.Sweep.Masks, nil
	}
	want := map[string]bool{}
	for _, m := range splitList(list) {
		if !slices.Contains(st.Sweep.Masks, m) {
			return nil, usageError("--masks %q: %q is not a mask of the %s suite; use some of %s", list, m, st.Name, strings.Join(st.Sweep.Masks, ","))
		}
		if want[m] { // as kernel --masks refuses it
			return nil, usageError("--masks %q: %s given twice: give each once", list, m)
		}
		want[m] = true
	}
	if len(want) == 0 {
		return nil, usageError("--masks %q: name at least one of the %s suite's masks: %s", list, st.Name, strings.Join(st.Sweep.Masks, ","))
	}
	var out []string
	for _, m := range st.Sweep.Masks {
		if want[m] {
			out = append(out, m)
		}
	}
	return out, nil
}
