package main

import (
	"fmt"
	"github.com/longca/longca/present"
	"math"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	_ "github.com/longca/longca/kernels/cuda"     // registers "cuda" (errors without a GPU)
	_ "github.com/longca/longca/kernels/cudnn"    // registers "cudnn" (errors without cuDNN or a GPU)
	_ "github.com/longca/longca/kernels/external" // registers torch:* and exec:PROGRAM[:KERNEL]
	"github.com/longca/longca/mask"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/tensor"
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

// sweepFlags are the flags of `longca kernel`, in nccl-tests' vocabulary.
func sweepFlags() []cli.Flag {
	return append(append(commonSweepFlags(),
		&cli.StringFlag{Name: "masks", Usage: "comma-separated masks, or all (default: the 12 kernel masks)"},
		&cli.StringFlag{Name: "mask-json", Usage: "write each case's mask as JSON (MASKS.md form) into this folder"},
	), docsFlags()...)
}

// commonSweepFlags are the flags `longca kernel` and `longca sparse` share.
func commonSweepFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "begin", Aliases: []string{"b"}, Usage: "first sequence length (K, M suffixes)"},
		&cli.StringFlag{Name: "end", Aliases: []string{"e"}, Usage: "last sequence length"},
		&cli.IntFlag{Name: "factor", Aliases: []string{"f"}, Value: 2, Usage: "multiply the length by this from -b to -e"},
		&cli.StringFlag{Name: "step", Usage: "add this to the length from -b to -e instead (8K)"},
		&cli.StringFlag{Name: "seqlens", Usage: "comma-separated lengths (kernel default 1K,2K,4K,8K,16K,24K,32K,40K,48K; sparse 32K,64K,128K)"},
		&cli.StringFlag{Name: "heads", Value: "64:8,64:64", Usage: "query:KV head settings"},
		&cli.IntFlag{Name: "head-dim", Value: 128, Usage: "head dimension"},
		&cli.StringFlag{Name: "dtype", Value: "bf16", Usage: "bf16, fp16, fp32 or fp64"},
		&cli.StringFlag{Name: "passes", Value: "fwd,bwd", Usage: "comma-separated: fwd, bwd, fwd+bwd"},
		&cli.IntFlag{Name: "warmup", Aliases: []string{"w"}, Value: 5, Usage: "untimed warm-up repetitions"},
		&cli.IntFlag{Name: "iters", Aliases: []string{"n"}, Value: 20, Usage: "timed repetitions (the median is reported)"},
		&cli.StringFlag{Name: "kernels", Usage: "comma-separated kernels (default: cuda when a GPU is found, else ref)"},
		&cli.Uint64Flag{Name: "seed", Value: 42, Usage: "seed of the masks and inputs"},
		&cli.StringFlag{Name: "out", Usage: "results folder (default out/<command>-<time>)"},
		&cli.StringFlag{Name: "run-id", EnvVars: []string{"LONGCA_RUN_ID"}, Usage: "run id in file names and rows (default: the folder's name)"},
		&cli.BoolFlag{Name: "check", Value: true, Usage: "check each case against the reference before timing it"},
		&cli.BoolFlag{Name: "no-check", Usage: "time without checking (same as --check=false)"},
		&cli.Float64Flag{Name: "check-budget", Value: harness.DefaultCheckBudget, Usage: "largest checked case in multiply-adds (area x heads x dim); larger cases are checked smaller"},
		&cli.BoolFlag{Name: "dry-run", Usage: "print the cases and their FLOPs; run nothing"},
	}, kernelFlags()...)
}

// kernelFlags are the flags that configure how kernels are made (kernels.Options): every
// one that can change a result is recorded in the rows.
func kernelFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "device", Value: -1, DefaultText: "the local rank's GPU under a launcher, else 0", Usage: "GPU index; recorded as device_index"},
		&cli.StringFlag{Name: "variant", Usage: "kernel variant (longca list names them; default: the best for the device); recorded as kernel_variant"},
		&cli.BoolFlag{Name: "deterministic", Usage: "backward passes bitwise reproducible (dQ added in a fixed order); kernels without such a backward give unsupported rows; recorded in kernel_variant"},
		&cli.StringFlag{Name: "python", EnvVars: []string{"LONGCA_PYTHON"}, Usage: "Python interpreter of the torch:* workers (default python3 on the PATH)"},
		&cli.DurationFlag{Name: "worker-timeout", Usage: "bound on every request to an external worker (torch:*, exec:); default: 10m plus the case's repetitions at 20 TFLOP/s"},
		&cli.StringFlag{Name: "on-worker-crash", Value: "restart", Usage: "after an external worker crashes, hangs past its timeout or answers nonsense: restart (a new worker for the next case) or stop (end the sweep, keeping its rows)"},
	}
}

// stopOnCrash reads --on-worker-crash.
func stopOnCrash(c *cli.Context) (bool, error) {
	switch v := c.String("on-worker-crash"); v {
	case "restart":
		return false, nil
	case "stop":
		return true, nil
	default:
		return false, usageError("--on-worker-crash %q: use restart or stop", v)
	}
}

// kernelOptions reads the kernel flags; under a launcher the device defaults to the local
// rank's GPU (spmd.DeviceIndex).
func kernelOptions(c *cli.Context, w spmd.World) (kernels.Options, error) {
	o := kernels.Options{Variant: c.String("variant"), Python: c.String("python"), Timeout: c.Duration("worker-timeout"), Deterministic: c.Bool("deterministic")}
	if o.Timeout < 0 {
		return o, usageError("--worker-timeout %s: give a positive duration such as 15m", o.Timeout)
	}
	switch d := c.Int("device"); {
	case c.IsSet("device") && d < 0:
		return o, usageError("--device %d: give a GPU index, 0 or more", d)
	case c.IsSet("device"):
		o.Device = d
	case w.Size > 1:
		idx, err := spmd.DeviceIndex(w, os.Getenv)
		if err != nil {
			return o, usageError("%v", err)
		}
		o.Device = idx
	}
	return o, nil
}

type madeKey struct {
	name string
	o    kernels.Options
}

var (
	madeMu sync.Mutex
	made   = map[madeKey]kernels.Kernel{}
)

// newKernel makes a kernel once per process and options: finding out whether cuda works
// compiles and loads it, and the sweep then uses that same instance.
func newKernel(name string, o kernels.Options) (kernels.Kernel, error) {
	madeMu.Lock()
	defer madeMu.Unlock()
	key := madeKey{name, o}
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

// defaultKernel is cuda when a GPU answers, else the CPU reference.
func defaultKernel(o kernels.Options) string {
	if slices.Contains(kernels.Names(), "cuda") {
		if _, err := newKernel("cuda", o); err == nil {
			return "cuda"
		}
	}
	return "ref"
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseSeqLens reads --seqlens or -b/-e/-f/--step.
func parseSeqLens(c *cli.Context, defaults []int) ([]int, error) {
	ranged := c.IsSet("begin") || c.IsSet("end") || c.IsSet("step")
	if c.IsSet("seqlens") {
		if ranged {
			return nil, usageError("--seqlens and -b/-e/--step both given: use one way to give the lengths")
		}
		l, err := harness.ParseSizeList(c.String("seqlens"))
		if err != nil {
			return nil, usageError("--seqlens: %v", err)
		}
		return l, nil
	}
	if !ranged {
		return defaults, nil
	}
	if !c.IsSet("begin") {
		return nil, usageError("-e/--step given without -b: give the first length, e.g. -b 1K")
	}
	b, err := dataset.ParseSize(c.String("begin"))
	if err != nil {
		return nil, usageError("-b: %v", err)
	}
	e := b
	if c.IsSet("end") {
		if e, err = dataset.ParseSize(c.String("end")); err != nil {
			return nil, usageError("-e: %v", err)
		}
	}
	step := 0
	if c.IsSet("step") {
		if step, err = dataset.ParseSize(c.String("step")); err != nil || step == 0 {
			return nil, usageError("--step %q: give a positive size, e.g. --step 8K", c.String("step"))
		}
	}
	l, err := harness.SizeRange(b, e, c.Int("factor"), step)
	if err != nil {
		return nil, usageError("-b/-e/-f/--step: %v", err)
	}
	return l, nil
}

// parseMasks reads --masks against the mask registry.
func parseMasks(s string) ([]string, error) {
	switch s {
	case "":
		return mask.KernelMasks(), nil
	case "all":
		return mask.Names(), nil
	}
	known := mask.Names()
	var out []string
	for _, m := range splitList(s) {
		if !slices.Contains(known, m) {
			return nil, usageError("--masks: unknown mask %q: use all or some of %s", m, strings.Join(known, ", "))
		}
		out = append(out, m)
	}
	if len(out) == 0 {
		return nil, usageError("--masks is empty: name masks (causal,full) or all")
	}
	return out, nil
}

// sweepFromFlags turns the flags into a sweep; defaultLens are the lengths when none are
// given, ko the options the default kernel is probed with.
func sweepFromFlags(c *cli.Context, defaultLens []int, ko kernels.Options) (harness.Sweep, error) {
	var s harness.Sweep
	var err error
	if s.SeqLens, err = parseSeqLens(c, defaultLens); err != nil {
		return s, err
	}
	if s.Masks, err = parseMasks(c.String("masks")); err != nil {
		return s, err
	}
	if s.Heads, err = harness.ParseHeads(c.String("heads")); err != nil {
		return s, usageError("--heads: %v", err)
	}
	if s.HeadDim = c.Int("head-dim"); s.HeadDim <= 0 {
		return s, usageError("--head-dim %d: must be positive (e.g. 128)", s.HeadDim)
	}
	if s.DType, err = tensor.ParseDType(c.String("dtype")); err != nil {
		return s, usageError("--dtype: %v", err)
	}
	for _, p := range splitList(c.String("passes")) {
		pass, err := kernels.ParsePass(p)
		if err != nil {
			return s, usageError("--passes: %v", err)
		}
		s.Passes = append(s.Passes, pass)
	}
	if len(s.Passes) == 0 {
		return s, usageError("--passes is empty: use fwd, bwd or fwd+bwd")
	}
	s.Kernels = splitList(c.String("kernels"))
	if len(s.Kernels) == 0 {
		s.Kernels = []string{defaultKernel(ko)}
	}
	for _, k := range s.Kernels {
		if !kernels.Known(k) {
			return s, usageError("--kernels: unknown kernel %q: registered are %s", k, strings.Join(kernels.Names(), ", "))
		}
		if strings.HasPrefix(k, "exec:") { // a program that is not there is bad input, not a row
			if _, err := newKernel(k, ko); err != nil {
				return s, usageError("--kernels: %v", err)
			}
		}
	}
	s.Seed = c.Uint64("seed")
	return s, nil
}

func kernelAction(c *cli.Context) (err error) {
	defer func() { err = usageOnRankZero(err) }()
	if c.NArg() > 0 {
		return usageError("kernel takes no arguments (got %q): give lengths with --seqlens or -b/-e", c.Args().First())
	}
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
	docs, err := docsFromFlags(c)
	if err != nil {
		return err
	}
	if dir := c.String("mask-json"); dir != "" {
		if err := writeMaskJSON(dir, s, docs.KernelBuilder()); err != nil {
			return err
		}
	}
	return sweepAction(c, s, "kernel", w, ko)
}

// sweepAction runs (or with --dry-run lists) a sweep from the shared flags and prints
// its table.
func sweepAction(c *cli.Context, s harness.Sweep, bench string, w spmd.World, ko kernels.Options) error {
	if w, n := c.Int("warmup"), c.Int("iters"); w < 0 || n < 1 {
		return usageError("-w %d -n %d: warm-ups must be >= 0 and iterations >= 1", w, n)
	}
	if c.IsSet("check") && c.Bool("check") && c.Bool("no-check") {
		return usageError("--check and --no-check both given: use one")
	}
	if b := c.Float64("check-budget"); !(b > 0) || math.IsInf(b, 0) {
		return usageError("--check-budget %g: give a positive number of multiply-adds (default %g)", b, harness.DefaultCheckBudget)
	}
	docs, err := docsFromFlags(c) // none for sparse, which has no document masks
	if err != nil {
		return err
	}
	build := harness.BuildMask
	if !docs.IsDefault() {
		build = docs.KernelBuilder()
	}
	if c.Bool("dry-run") {
		return present.WritePlan(c.App.Writer, s.Cases(), build)
	}
	stop, err := stopOnCrash(c)
	if err != nil {
		return err
	}
	o := sweepOptions{
		stopOnCrash: stop,
		sweep:       s,
		warmup:      c.Int("warmup"),
		iters:       c.Int("iters"),
		check:       c.Bool("check") && !c.Bool("no-check"),
		checkBudget: c.Float64("check-budget"),
		out:         c.String("out"),
		runID:       c.String("run-id"),
		bench:       bench,
		world:       w,
		kernelOpts:  ko,
		build:       build,
	}
	if o.out == "" {
		o.out = defaultOutDir(bench)
	}
	if o.runID, err = resultsTarget(o.out, o.runID); err != nil {
		return err
	}
	if err := fitSweep(c, o); err != nil {
		return err
	}
	res, err := runSweep(c.Context, o)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.ErrWriter, "# results: %s\n", res.file)
	if w.Rank != 0 {
		return nil // rank 0 prints the table of its own rows; merge joins every rank's
	}
	return writeReportText(c.App.Writer, res.rows, "", "longca "+bench+" "+res.runID)
}

// writeMaskJSON writes one JSON file per (mask, length) of the sweep into dir.
func writeMaskJSON(dir string, s harness.Sweep, build harness.MaskBuilder) error {
	if err := writableDir(dir); err != nil {
		return usageError("--mask-json %s: %v", dir, err)
	}
	for _, m := range s.Masks {
		for _, n := range s.SeqLens {
			spec, err := build(m, n, s.Seed)
			if err != nil {
				log.Warn().Str("mask", m).Int("seqlen", n).Err(err).Msg("mask not written")
				continue
			}
			if err := writeJSONFile(fmt.Sprintf("%s/%s_%d_seed%d.json", dir, m, n, s.Seed), spec); err != nil {
				return fmt.Errorf("--mask-json: %w", err)
			}
		}
	}
	return nil
}
