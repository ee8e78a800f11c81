package main

import (
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/external"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/session"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/tensor"
	"github.com/urfave/cli/v2"
)

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
		&cli.BoolFlag{Name: "dry-run", Usage: "print the cases and their FLOPs; run nothing"},
	}, append(append(checkFlags(), kernelFlags()...), gpuStateFlag(), settleFlag())...)
}

// DefaultSettle is --settle's default: the shortest idle after which the two timing orders
// of a case agreed within 1% on a power-capped H100 (call 94: full 16K bwd, cuda / cuDNN
// 1.008-1.017 in both orders from 250 ms on, 1.008 against 0.951 at none). In cp it made the
// efficiency reproducible: the kernel-alone baseline read 595-697 TFLOP/s unsettled, 697-698
// settled, and eff repeated within 0.03 (call 97).
const DefaultSettle = 250 * time.Millisecond

// settleFlag is --settle, for the commands that time cases on a GPU one after another
// (kernel, sparse, run, cp).
func settleFlag() cli.Flag {
	return &cli.DurationFlag{Name: "settle", Value: DefaultSettle, Usage: "leave the GPU idle this long before each case timed on it (cp: every rank, before each pass and each kernel-alone baseline), so that every kernel starts from a rested card: on a power-capped GPU the kernel timed right after another runs at a lower clock; recorded as settle_ms; 0: none (docs/perf.md, calls 94 and 97)"}
}

// settleFromFlags reads --settle: 0 to harness.MaxSettle.
func settleFromFlags(c *cli.Context) (time.Duration, error) {
	d := c.Duration("settle")
	if d < 0 || d > harness.MaxSettle {
		return 0, usageError("--settle %s: give an idle time from 0 (none) to %s, such as 1s", d, harness.MaxSettle)
	}
	return d, nil
}

// gpuStateFlag is --gpu-state, for the commands that time cases on a GPU (kernel, sparse,
// run, cp).
func gpuStateFlag() cli.Flag {
	return &cli.BoolFlag{Name: "gpu-state", Value: true, Usage: "read the GPU's SM clock, power and temperature through NVML every 5 ms while each case is timed (columns sm_clock_mhz, power_w, temp_c, clock_events ...); --gpu-state=false reads nothing (the columns stay null; the command line is recorded in the rows)"}
}

// checkFlags are the flags of the check before timing, one definition for the commands
// that check cases (kernel, sparse, cp; checkFromFlags reads them).
func checkFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "check", Value: true, Usage: "check each case against the reference before timing it"},
		&cli.BoolFlag{Name: "no-check", Usage: "time without checking (same as --check=false)"},
		&cli.Float64Flag{Name: "check-budget", Value: harness.DefaultCheckBudget, Usage: "largest checked case in multiply-adds (area x heads x dim); larger cases are checked smaller (4K, 2K, 1K, 512 tokens in all; KV heads halved)"},
	}
}

// checkFromFlags reads checkFlags: whether to check, and the budget.
func checkFromFlags(c *cli.Context) (check bool, budget float64, err error) {
	if c.IsSet("check") && c.Bool("check") && c.Bool("no-check") {
		return false, 0, usageError("--check and --no-check both given: use one")
	}
	if budget = c.Float64("check-budget"); !(budget > 0) || math.IsInf(budget, 0) {
		return false, 0, usageError("--check-budget %g: give a positive number of multiply-adds (default %g)", budget, harness.DefaultCheckBudget)
	}
	return c.Bool("check") && !c.Bool("no-check"), budget, nil
}

// repsFromFlags reads -w/--warmup and -n/--iters.
func repsFromFlags(c *cli.Context) (warmup, iters int, err error) {
	if warmup, iters = c.Int("warmup"), c.Int("iters"); warmup < 0 || iters < 1 || warmup > harness.MaxReps || iters > harness.MaxReps {
		return 0, 0, usageError("-w %d -n %d: warm-ups must be 0 to %d and iterations 1 to %d", warmup, iters, harness.MaxReps, harness.MaxReps)
	}
	return warmup, iters, nil
}

// kernelFlags are the flags that configure how kernels are made (kernels.Options): every
// one that can change a result is recorded in the rows.
func kernelFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "device", Value: -1, DefaultText: "the local rank's GPU under a launcher, else 0", Usage: "GPU index; recorded as device_index"},
		&cli.StringFlag{Name: "variant", Usage: "kernel variant, for every kernel (sm90) or per kernel (cuda=sm90,cudnn=composite; a plain item among them is the others'); longca list names them; default: the best for the device; recorded as kernel_variant"},
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

// checkVariant refuses, as bad input, a --variant that a kernel of the run does not have
// (kernels.CheckVariant), before anything is measured: the kernel would otherwise refuse
// it case by case as unsupported rows.
func checkVariant(ko kernels.Options, listed bool, names ...string) error {
	if err := kernels.CheckVariant(ko.Variant, names, listed); err != nil {
		return usageError("--variant: %v", err)
	}
	if kernels.VariantUnused(ko.Variant, names) {
		log.Warn().Str("variant", ko.Variant).Strs("kernels", names).Msg("--variant: its plain item applies to no kernel of this run (none without an item of its own has variants); it changes nothing here (longca list names each kernel's)")
	}
	return nil
}

// kernelOptions reads the kernel flags; under a launcher the device defaults to the local
// rank's GPU (spmd.DeviceIndex).
func kernelOptions(c *cli.Context, w spmd.World) (kernels.Options, error) {
	o := kernels.Options{Variant: c.String("variant"), Python: c.String("python"), Timeout: c.Duration("worker-timeout"), Deterministic: c.Bool("deterministic")}
	if _, err := kernels.ParseVariants(o.Variant); err != nil {
		return o, usageError("--variant: %v", err)
	}
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

// listFlags are the comma-separated flags whose items checkLists holds to be given once
// each, none empty.
var listFlags = []string{"kernels", "masks", "seqlens", "heads", "passes", "methods", "gpus", "ratios", "block", "avg-block", "cp-ulysses",
	"calibrate-seqlens"}

// checkLists refuses, naming the flag, a list flag given with an empty item ("--masks ,",
// "--seqlens 1K,,2K", an empty --kernels) or an item twice ("--masks causal,causal": its cases
// ran twice and wrote the same rows twice), by value: 1K and 1024, forward and fwd are one
// item (listItem); flags the command does not have are skipped.
func checkLists(c *cli.Context) error {
	for _, name := range listFlags {
		if !c.IsSet(name) {
			continue
		}
		v := c.String(name)
		seen := map[string]string{}
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimSpace(item)
			key := listItem(name, item)
			switch first, twice := seen[key]; {
			case item == "":
				return usageError("--%s %q: an empty item: give comma-separated items, each once", name, v)
			case twice && first == item:
				return usageError("--%s %q: %s given twice: give each once", name, v, item)
			case twice:
				return usageError("--%s %q: %s and %s are the same %s: give each once", name, v, first, item, key)
			}
			seen[key] = item
		}
	}
	return nil
}

// listItem is item of list flag name as its value reads (1K and 1024 are 1024; forward
// is fwd; 64:08 is 64:8; 0.50 is 0.5), or the item as written where it does not parse
// (the flag's own parser then says why).
func listItem(name, item string) string {
	switch name {
	case "seqlens", "block", "avg-block", "calibrate-seqlens", "gpus", "cp-ulysses":
		if n, err := dataset.ParseSize(item); err == nil {
			return strconv.Itoa(n)
		}
	case "heads":
		if h, err := harness.ParseHeads(item); err == nil && len(h) == 1 {
			return h[0].String()
		}
	case "passes":
		if p, err := kernels.ParsePass(item); err == nil {
			return p.String()
		}
	case "ratios":
		if r, err := strconv.ParseFloat(item, 64); err == nil {
			return strconv.FormatFloat(r, 'g', -1, 64)
		}
	}
	return item
}

// parseSeqLens reads --seqlens or -b/-e/-f/--step.
func parseSeqLens(c *cli.Context, defaults []int) ([]int, error) {
	ranged := c.IsSet("begin") || c.IsSet("end") || c.IsSet("step")
	if c.IsSet("factor") && c.IsSet("step") {
		return nil, usageError("-f %d and --step %s both given: the lengths grow by one of them (-f multiplies, --step adds)", c.Int("factor"), c.String("step"))
	}
	if c.IsSet("factor") && !c.IsSet("begin") { // (-f with --seqlens, or alone, was ignored)
		return nil, usageError("-f %d without -b: the factor grows the lengths from -b to -e (e.g. -b 1K -e 48K -f 2)", c.Int("factor"))
	}
	if c.IsSet("seqlens") {
		if ranged {
			return nil, usageError("--seqlens and -b/-e/--step both given: use one way to give the lengths")
		}
		l, err := harness.ParseSizeList(c.String("seqlens"))
		if err != nil {
			return nil, usageError("--seqlens: %v", err)
		}
		return l, seqLensBounded("--seqlens", l)
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
		if step, err = dataset.ParseSize(c.String("step")); err != nil {
			return nil, usageError("--step: %v", err)
		}
		if step == 0 {
			return nil, usageError("--step %q: give a positive size, e.g. --step 8K", c.String("step"))
		}
	}
	l, err := harness.SizeRange(b, e, c.Int("factor"), step)
	if err != nil {
		return nil, usageError("-b/-e/-f/--step: %v", err)
	}
	return l, seqLensBounded("-b/-e", l)
}

// seqLensBounded refuses lengths over mask.MaxSeqLen (2G tokens, where an area leaves
// int64) before any case is made: a dry run listed each such case with its error, exit 0.
func seqLensBounded(flag string, l []int) error {
	for _, n := range l {
		if n > mask.MaxSeqLen {
			return usageError("%s: %s is over the %s tokens a mask may have: give lengths up to 2G", flag, harness.FormatSize(n), harness.FormatSize(mask.MaxSeqLen))
		}
	}
	return nil
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
	if err := checkLists(c); err != nil {
		return s, err
	}
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
	s.HeadDim = c.Int("head-dim")
	if err = harness.CheckHeadDim(s.HeadDim); err != nil {
		return s, usageError("--head-dim %v", err)
	}
	if s.DType, err = tensor.ParseDType(c.String("dtype")); err != nil {
		return s, usageError("--dtype: %v", err)
	}
	if s.Passes, err = passesFlag(c); err != nil {
		return s, err
	}
	s.Kernels = splitList(c.String("kernels"))
	if len(s.Kernels) == 0 {
		s.Kernels = []string{session.DefaultKernel(ko)}
	}
	for _, k := range s.Kernels {
		if !kernels.Known(k) {
			return s, usageError("--kernels: unknown kernel %q: registered are %s", k, strings.Join(kernels.Names(), ", "))
		}
	}
	if err := checkVariant(ko, c.IsSet("kernels"), s.Kernels...); err != nil {
		return s, err
	}
	for _, k := range s.Kernels {
		if err := external.CheckTempDir(k); err != nil { // nor is a TMPDIR where its worker cannot have a folder
			return s, usageError("--kernels %s: %v", k, err)
		}
		if strings.HasPrefix(k, "exec:") { // a program that is not there is bad input, not a row
			if _, err := session.NewKernel(k, ko); err != nil {
				return s, usageError("--kernels: %v", err)
			}
		}
	}
	s.Seed = c.Uint64("seed")
	return s, nil
}

// passesFlag reads --passes: fwd, bwd and fwd+bwd, at least one.
func passesFlag(c *cli.Context) ([]kernels.Pass, error) {
	var out []kernels.Pass
	for _, p := range splitList(c.String("passes")) {
		pass, err := kernels.ParsePass(p)
		if err != nil {
			return nil, usageError("--passes: %v", err)
		}
		out = append(out, pass)
	}
	if len(out) == 0 {
		return nil, usageError("--passes is empty: use fwd, bwd or fwd+bwd")
	}
	return out, nil
}
