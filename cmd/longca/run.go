package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/longca/longca/present"
	"os"
	"path/filepath"
	"strings"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/external"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/tensor"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:  "run",
		Usage: "run the standard kernel suite that fits this machine; write rows, merged file, report and plots",
		Description: "Suites: gpu (kernels.New(\"cuda\") works): the 12 kernel masks at 8K, 16K, 32K and 48K, heads\n" +
			"64:8, head dim 128, bf16, fwd and bwd, -w 3 -n 10, the cuda kernel and every peer available here\n" +
			"(torch:flash, torch:cudnn, torch:efficient, torch:flex, torch:varlen through --python; about 15 minutes on one\n" +
			"H200 with all of them, 4 with cuda alone); cpu (no GPU): the ref kernel on\n" +
			"6 masks at 512, 1K, 2K, heads 8:2, head dim 64, fwd and bwd (about a minute on 2 idle cores);\n" +
			"smoke: a seconds-long subset of cpu for tests. OUT gets <run>.rank-0-of-1.arrow, and named by\n" +
			"the run id (runs sharing OUT keep their own): <run>.merged.arrow, <run>.report.txt (TFLOP/s per\n" +
			"kernel and each kernel's ratio to the fastest) and <run>.plots/*.png; the table is printed.\n" +
			"Ctrl-C stops after the current case and still writes all of these.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "out", Usage: "results folder (default out/run-<time>)"},
			&cli.StringFlag{Name: "suite", Value: "auto", Usage: "auto (gpu when a GPU is found, else cpu), gpu, cpu or smoke"},
			&cli.IntFlag{Name: "warmup", Aliases: []string{"w"}, Value: -1, Usage: "override the suite's warm-ups"},
			&cli.IntFlag{Name: "iters", Aliases: []string{"n"}, Value: -1, Usage: "override the suite's timed repetitions"},
			&cli.BoolFlag{Name: "no-check", Usage: "time without checking"},
			&cli.StringFlag{Name: "run-id", EnvVars: []string{"LONGCA_RUN_ID"}, Usage: "run id (default: the folder's name)"},
			&cli.BoolFlag{Name: "parquet", Usage: "also write merged.parquet"},
			&cli.BoolFlag{Name: "no-peers", Usage: "gpu suite: time the cuda kernel only, not the torch:* peers"},
		}, kernelFlags()...),
		Action: runAction,
	})
}

// suite is a standard sweep with its repetitions and mask options.
type suite struct {
	name          string
	sweep         harness.Sweep
	warmup, iters int
	checkBudget   float64
	build         harness.MaskBuilder
}

// cpuBlock is block_causal_document's block in the CPU suites, so that 512 is a multiple.
const cpuBlock = 512

// smallBlocks builds masks with block_causal_document's block at blk tokens.
func smallBlocks(blk int) harness.MaskBuilder {
	return func(name string, seqlen int, seed uint64) (mask.Spec, error) {
		o := mask.Options{Seed: seed}
		if name == "block_causal_document" {
			o.BlockSize = blk
		}
		return mask.Build(name, seqlen, o)
	}
}

// suites returns the named standard suite.
func suiteNamed(name string) (suite, error) {
	both := []kernels.Pass{kernels.Fwd, kernels.Bwd}
	switch name {
	case "gpu":
		// 96 cases a kernel. Estimated on one H200 (the rates of docs/perf.md, a repetition
		// of every case costs cuda ~12 s, flex ~6 s, the SDPA backends 1-3 s on full and
		// causal, the others refusing at once): 14 repetitions (one untimed, 3 warm-ups, 10
		// timed) ~5 min, FlexAttention's compilations ~5 min, checks and setup ~4 min.
		return suite{name: "gpu", warmup: 3, iters: 10, checkBudget: harness.DefaultCheckBudget, build: harness.BuildMask,
			sweep: harness.Sweep{Masks: mask.KernelMasks(), SeqLens: []int{8 << 10, 16 << 10, 32 << 10, 48 << 10},
				Heads: []harness.Heads{{Q: 64, KV: 8}}, HeadDim: 128, DType: tensor.BF16,
				Kernels: []string{"cuda"}, Passes: both, Seed: 42}}, nil
	case "cpu":
		return suite{name: "cpu", warmup: 0, iters: 2, checkBudget: 1e8, build: smallBlocks(cpuBlock),
			sweep: harness.Sweep{Masks: []string{"full", "causal", "causal_document", "sliding_window_causal", "share_question", "block_causal_document"},
				SeqLens: []int{512, 1 << 10, 2 << 10}, Heads: []harness.Heads{{Q: 8, KV: 2}}, HeadDim: 64, DType: tensor.BF16,
				Kernels: []string{"ref"}, Passes: both, Seed: 42}}, nil
	case "smoke":
		return suite{name: "smoke", warmup: 0, iters: 1, checkBudget: 1e7, build: smallBlocks(128),
			sweep: harness.Sweep{Masks: []string{"causal", "causal_document", "block_causal_document"},
				SeqLens: []int{128, 256}, Heads: []harness.Heads{{Q: 4, KV: 2}}, HeadDim: 16, DType: tensor.BF16,
				Kernels: []string{"ref"}, Passes: both, Seed: 42}}, nil
	}
	return suite{}, usageError("--suite %q: use auto, gpu, cpu or smoke", name)
}

func runAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageError("run takes no arguments (got %q): give the folder with --out", c.Args().First())
	}
	ko, err := kernelOptions(c, spmd.World{Size: 1})
	if err != nil {
		return err
	}
	name := c.String("suite")
	if name == "auto" {
		name = "cpu"
		if defaultKernel(ko) == "cuda" {
			name = "gpu"
		}
	}
	st, err := suiteNamed(name)
	if err != nil {
		return err
	}
	if name == "gpu" && !c.Bool("no-peers") {
		st.sweep.Kernels = append(st.sweep.Kernels, availablePeers(c.Context, ko)...)
	}
	stop, err := stopOnCrash(c)
	if err != nil {
		return err
	}
	if c.IsSet("warmup") {
		if st.warmup = c.Int("warmup"); st.warmup < 0 {
			return usageError("-w %d: warm-ups must be >= 0", st.warmup)
		}
	}
	if c.IsSet("iters") {
		if st.iters = c.Int("iters"); st.iters < 1 {
			return usageError("-n %d: iterations must be >= 1", st.iters)
		}
	}
	out := c.String("out")
	if out == "" {
		out = defaultOutDir("run")
	}
	runID, err := resultsTarget(out, c.String("run-id"))
	if err != nil {
		return err
	}
	// Every file of this run starts with its id: runs sharing a folder keep their own.
	merged := results.MergedPath(out, runID)
	if _, err := os.Stat(merged); err == nil {
		return usageError("--out %s already holds run %s (%s): give another --run-id or folder", out, runID, filepath.Base(merged))
	}
	log.Info().Str("suite", st.name).Strs("kernels", st.sweep.Kernels).Str("out", out).Msg("longca run")
	so := sweepOptions{
		sweep: st.sweep, warmup: st.warmup, iters: st.iters, check: !c.Bool("no-check"),
		checkBudget: st.checkBudget, out: out, runID: runID, bench: "kernel", build: st.build,
		world: spmd.World{Size: 1}, kernelOpts: ko, stopOnCrash: stop,
	}
	if err := fitSweep(c, so); err != nil {
		return err
	}
	res, sweepErr := runSweep(c.Context, so)
	if sweepErr != nil && len(res.rows) == 0 {
		return sweepErr
	}
	// Interrupted (Ctrl-C) or stopped after a worker failure: what was measured is still
	// merged, reported and plotted.
	if err := writeSpecs(filepath.Join(out, "masks"), st); err != nil {
		return err
	}
	m, err := results.Merge(out, results.MergeOptions{Runs: []string{res.runID}, Out: merged, Parquet: c.Bool("parquet")})
	if err != nil {
		return err
	}
	loaded, err := results.LoadChecked(m.Files[0])
	if err != nil {
		return err
	}
	rows := loaded.Rows
	title := fmt.Sprintf("longca run: suite %s, run %s, %d rows", st.name, res.runID, len(rows))
	if sweepErr != nil {
		title += fmt.Sprintf(" (stopped early: %v)", sweepErr)
	}
	sum := present.Summarize(rows, "")
	var table strings.Builder
	if err := present.WriteTable(&table, title, sum); err != nil {
		return err
	}
	if len(sum.Kernels) > 1 {
		table.WriteString("#\n")
		if err := present.WriteRatioTable(&table, "each kernel's TFLOP/s over the fastest kernel's, per case", sum); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(out, runID+".report.txt"), []byte(table.String()), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	plotDir := filepath.Join(out, runID+".plots")
	plots, err := present.WritePlots(plotDir, sum)
	if err != nil {
		return err
	}
	bars, err := present.WriteBarCharts(plotDir, sum)
	if err != nil {
		return err
	}
	fmt.Fprint(c.App.Writer, table.String())
	fmt.Fprintf(c.App.Writer, "# wrote %s, %s, %s.report.txt and %d plots in %s\n",
		filepath.Base(res.file), filepath.Base(m.Files[0]), runID, len(plots)+len(bars), plotDir)
	if sweepErr != nil {
		if errors.Is(sweepErr, context.Canceled) {
			return cli.Exit(fmt.Sprintf("longca: interrupted after %d of %d cases; the files above hold them", len(res.rows), len(st.sweep.Cases())), 130)
		}
		return sweepErr
	}
	return nil
}

// availablePeers are the torch:* kernels whose worker runs here (a GPU, torch, the
// interpreter); the others are named in the log with the reason.
func availablePeers(ctx context.Context, o kernels.Options) []string {
	if ctx == nil {
		ctx = context.Background()
	}
	var out []string
	for _, name := range external.TorchNames() {
		k, err := newKernel(name, o)
		if err == nil {
			if a, ok := k.(interface {
				Available(context.Context) (external.Versions, error)
			}); ok {
				_, err = a.Available(ctx)
			}
		}
		if err != nil {
			log.Warn().Str("kernel", name).Str("reason", err.Error()).Msg("peer not available here: left out of the suite")
			continue
		}
		out = append(out, name)
	}
	return out
}

// writeSpecs writes the suite's masks as JSON (for peers/torch_attention.py --slices).
func writeSpecs(dir string, st suite) error {
	return writeMaskJSON(dir, st.sweep, st.build)
}
