package main

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
	"github.com/urfave/cli/v2"
)

// The CP sweep's flags have one owner: cpSweepFlags defines them and parseCPSweep reads
// them, for `longca cp` (which measures the sweep) and `longca simulate` (which predicts
// it) alike, so a fix to a flag's text, default or check reaches both commands.

// cpSweepDefaults is what differs between the commands that share the CP sweep's flags:
// the command's name (its default results folder) and what it does with --samples.
type cpSweepDefaults struct {
	command      string
	samples      int
	samplesUsage string
}

// cpDefaults and simulateDefaults are the two commands' sweep defaults: cp averages 30
// measured masks per case; simulate draws 5 masks per document case (the rest once) and
// prints their median and range.
var (
	cpDefaults       = cpSweepDefaults{command: "cp", samples: 30, samplesUsage: "masks per case (seeds seed..seed+samples-1), averaged in reports"}
	simulateDefaults = cpSweepDefaults{command: "simulate", samples: 5, samplesUsage: "masks per document case (seeds seed..seed+samples-1): the table shows the median and the min-max; masks without documents are drawn once"}
)

// cpSweepFlags are the flags of the CP sweep: methods, masks, lengths, heads, mesh,
// sharding, balanced's dispatch, samples, passes, documents, and where the rows go.
func cpSweepFlags(d cpSweepDefaults) []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "methods", Usage: "comma-separated CP methods, or all (default: all of " + strings.Join(cp.Names(), ", ") + ")"},
		&cli.StringFlag{Name: "masks", Usage: "comma-separated masks, or all (default: " + strings.Join(mask.CPMasks(), ",") + ")"},
		&cli.StringFlag{Name: "tokens-per-rank", Value: "8K", Usage: "tokens per rank (weak scaling: seqlen = ranks x this)"},
		&cli.StringFlag{Name: "seqlen", Usage: "global sequence length instead of --tokens-per-rank"},
		&cli.StringFlag{Name: "heads", Value: "64:8", Usage: "query:KV head settings, comma-separated"},
		&cli.IntFlag{Name: "head-dim", Value: 128, Usage: "head dimension"},
		&cli.StringFlag{Name: "dtype", Value: "bf16", Usage: "bf16, fp16, fp32 or fp64"},
		&cli.IntFlag{Name: "ulysses", Usage: "Ulysses degree U of usp/loongtrain (default: every mesh U x R = ranks with U, R >= 2)"},
		&cli.IntFlag{Name: "ring", Usage: "ring degree R of usp/loongtrain"},
		&cli.IntFlag{Name: "windows", Usage: "loongtrain: windows the ring is cut into (default: windows of at most 8 GPUs)"},
		&cli.BoolFlag{Name: "head-first", Value: true, Usage: "a Ulysses group is consecutive ranks (inside a node); --head-first=false puts the ring there"},
		&cli.StringFlag{Name: "sharding", Value: "default", Usage: "contiguous, zigzag (per document, padded) or default (zigzag; contiguous for ulysses and on a ring of one rank, where zigzag would only pad)"},
		&cli.StringFlag{Name: "cp-block", Usage: "balanced: dispatch block in tokens, suffixes K, M (0: the largest power of two <= 512·U giving each dispatch unit, U ranks that split the heads, >= 8 blocks); recorded as cp_block"},
		&cli.StringFlag{Name: "cp-ulysses", Value: "0", Usage: "balanced: head-parallel degrees U of its U x (ranks/U) mesh, comma-separated, one mesh each (e.g. 1,2,8; 1: the dispatch alone; ranks: Ulysses on a contiguous layout; 0: chosen per mask by the plan's model, spmd/cp.BalancedMeshChoice); recorded as cp_ulysses and cp_ring"},
		&cli.IntFlag{Name: "cp-stages", Usage: "balanced: most stages a rank's fetch is cut into, each overlapping the one before's attention (0: one up to 8 ranks, else a pyramid of small-large-small stages); recorded as cp_stages"},
		&cli.StringFlag{Name: "cp-layout", Value: "auto", Usage: "balanced: how a rank's keys are laid out for its kernel call: blocks (its own, then its fetch: one sub-mask of many pieces), thd (packed documents, one contiguous run of keys per run of query rows, keys copied where runs share them: one call of a kernel that takes only documents, e.g. cudnn; one stage only), or auto (per rank, the one the kernel runs in fewer calls); recorded as cp_layout"},
		&cli.IntFlag{Name: "samples", Value: d.samples, Usage: d.samplesUsage},
		&cli.Uint64Flag{Name: "seed", Value: 42, Usage: "first mask seed"},
		&cli.StringFlag{Name: "passes", Value: "fwd,bwd", Usage: "comma-separated: fwd, bwd, fwd+bwd"},
		&cli.StringFlag{Name: "out", Usage: fmt.Sprintf("results folder (default out/%s-<time>)", d.command)},
		&cli.StringFlag{Name: "run-id", EnvVars: []string{"LONGCA_RUN_ID"}, Usage: "run id in file names and rows (default: the folder's name)"},
	}, docsFlags()...)
}

// cpSweepOptions are the validated flags of the CP sweep (cpSweepFlags).
type cpSweepOptions struct {
	methods         []string
	methodsExplicit bool
	masks           []string
	tokensPerRank   int
	seqlen          int // 0: ranks x tokensPerRank
	heads           []harness.Heads
	headDim         int
	dtype           tensor.DType
	ulysses, ring   int
	windows         int
	headFirst       bool
	sharding        cp.Sharding
	samples         int
	seed            uint64
	passes          []kernels.Pass
	out, runID      string
	block, stages   int          // balanced's dispatch block and stages (--cp-block, --cp-stages); 0: the defaults
	splits          []int        // balanced's head-parallel degrees (--cp-ulysses); 0: chosen per mask
	kvLayout        cp.KVLayout  // balanced's key layout (--cp-layout)
	docs            harness.Docs // where document masks' lengths come from (--dist, --counts, --max-doc)
}

// parseCPSweep reads the flags of cpSweepFlags (its caller warns of the mesh flags its
// methods do not read, warnMethodFlags, once every flag is accepted); bad input is one line naming the flag,
// exit status 2.
func parseCPSweep(c *cli.Context) (cpSweepOptions, error) {
	if err := checkLists(c); err != nil {
		return cpSweepOptions{}, err
	}
	o := cpSweepOptions{headDim: c.Int("head-dim"), ulysses: c.Int("ulysses"), ring: c.Int("ring"), windows: c.Int("windows"),
		stages: c.Int("cp-stages"), headFirst: c.Bool("head-first"), samples: c.Int("samples"), seed: c.Uint64("seed"),
		out: c.String("out"), runID: c.String("run-id")}
	o.methods, o.methodsExplicit = splitList(c.String("methods")), c.IsSet("methods")
	if len(o.methods) == 1 && o.methods[0] == "all" { // every method, as the default
		o.methods, o.methodsExplicit = nil, false
	}
	if len(o.methods) == 0 {
		if o.methodsExplicit {
			return o, usageError("--methods is empty: name methods (%s)", strings.Join(cp.Names(), ","))
		}
		o.methods = cp.Names()
	}
	for _, m := range o.methods {
		if !slices.Contains(cp.Names(), m) {
			return o, usageError("--methods: unknown method %q: use some of %s", m, strings.Join(cp.Names(), ", "))
		}
	}
	var err error
	if o.block, err = tokensFlag(c, "cp-block", 0); err != nil {
		return o, err
	}
	if o.masks = mask.CPMasks(); c.String("masks") != "" {
		if o.masks, err = parseMasks(c.String("masks")); err != nil {
			return o, err
		}
	}
	if o.tokensPerRank, err = dataset.ParseSize(c.String("tokens-per-rank")); err != nil || o.tokensPerRank < 1 {
		return o, usageError("--tokens-per-rank %q: give a positive size such as 8K", c.String("tokens-per-rank"))
	}
	if c.IsSet("seqlen") {
		if c.IsSet("tokens-per-rank") {
			return o, usageError("--seqlen and --tokens-per-rank both given: use one")
		}
		if o.seqlen, err = dataset.ParseSize(c.String("seqlen")); err != nil || o.seqlen < 1 {
			return o, usageError("--seqlen %q: give a positive size such as 64K", c.String("seqlen"))
		}
	}
	if o.heads, err = harness.ParseHeads(c.String("heads")); err != nil {
		return o, usageError("--heads: %v", err)
	}
	if err := harness.CheckHeadDim(o.headDim); err != nil {
		return o, usageError("--head-dim %v", err)
	}
	if o.dtype, err = tensor.ParseDType(c.String("dtype")); err != nil {
		return o, usageError("--dtype: %v", err)
	}
	if o.ulysses < 0 || o.ring < 0 || o.windows < 0 {
		return o, usageError("--ulysses %d --ring %d --windows %d: must not be negative", o.ulysses, o.ring, o.windows)
	}
	if o.block < 0 || o.stages < 0 {
		return o, usageError("--cp-block %d --cp-stages %d: give positive numbers, or 0 for the defaults", o.block, o.stages)
	}
	if o.stages > cp.MaxStages { // k stages cut a fetch in 2^k - 1 parts
		return o, usageError("--cp-stages %d: give at most %d, or 0 for the default", o.stages, cp.MaxStages)
	}
	if o.seqlen > 0 { // (with --tokens-per-rank, checkBlock once the ranks are known)
		if err := o.checkBlock(1); err != nil {
			return o, err
		}
	}
	if o.splits, err = splitsFlag(c.String("cp-ulysses")); err != nil {
		return o, err
	}
	if o.kvLayout, err = cp.ParseKVLayout(c.String("cp-layout")); err != nil {
		return o, usageError("%v", err)
	}
	if o.sharding, err = cp.ParseSharding(c.String("sharding")); err != nil {
		return o, usageError("%v", err)
	}
	if o.samples < 1 || o.samples > harness.MaxSamples {
		return o, usageError("--samples %d: need 1 to %d", o.samples, harness.MaxSamples)
	}
	if o.seed > math.MaxUint64-uint64(o.samples-1) { // the seeds would wrap to 0, 1, ...: a --seed 0 run's
		return o, usageError("--seed %d: with --samples %d the seeds seed..seed+%d pass %d: give a seed of at most %d", o.seed, o.samples, o.samples-1, uint64(math.MaxUint64), uint64(math.MaxUint64)-uint64(o.samples-1))
	}
	// simulate --nccl-table uses no documents: their flags are not read (a FIFO as
	// --counts hung it), and simulateAction says they change nothing
	if !c.Bool("nccl-table") {
		if o.docs, err = docsFromFlags(c); err != nil {
			return o, err
		}
	}
	if err := checkMaskOptions(c, o.masks, true); err != nil {
		return o, err
	}
	if o.passes, err = passesFlag(c); err != nil {
		return o, err
	}
	return o, nil
}

// methodFlags are the CP flags that only some methods read, and those methods.
var methodFlags = []struct {
	flag    string
	methods []string
}{
	{"ulysses", []string{"usp", "loongtrain"}}, {"ring", []string{"usp", "loongtrain"}}, {"windows", []string{"loongtrain"}},
	{"sharding", []string{"ring-p2p", "ring-allgather", "ulysses", "usp", "loongtrain"}}, // balanced cuts by its own dispatch
	{"cp-block", []string{"balanced"}}, {"cp-stages", []string{"balanced"}}, {"cp-ulysses", []string{"balanced"}}, {"cp-layout", []string{"balanced"}},
}

// warnMethodFlags says (a warning line) each flag given for methods none of which is in
// methods: it changes nothing in this run. Not refused: a script that runs one method at a
// time with the same mesh flags (spmd/cp/gpu.sh, balanced_gpu.sh's cudnn leg) is a fair use.
func warnMethodFlags(c *cli.Context, methods []string) {
	for _, f := range methodFlags {
		if c.IsSet(f.flag) && !slices.ContainsFunc(f.methods, func(m string) bool { return slices.Contains(methods, m) }) {
			log.Warn().Str("flag", "--"+f.flag).Msgf("--%s is read by %s only, and --methods has none of them (%s): it changes nothing in this run",
				f.flag, andList(f.methods), strings.Join(methods, ","))
		}
	}
}

// andList is "a", "a and b", or "a, b and c".
func andList(xs []string) string {
	if len(xs) < 2 {
		return strings.Join(xs, "")
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// checkBlock refuses a dispatch block longer than the sequence on n ranks: past it a block
// is padding only (a huge one panicked in the layout, and 1M on 128 tokens took 6 GB). A
// block longer than a rank's tokens is fine on a Ulysses mesh (a dispatch unit holds U
// ranks' tokens), and FitCP counts a rank padded up to it.
func (o cpSweepOptions) checkBlock(n int) error {
	if s := o.seqlenFor(n); o.block > s {
		what := fmt.Sprintf("%d ranks of --tokens-per-rank %s", n, harness.FormatSize(o.tokensPerRank))
		if o.seqlen > 0 {
			what = "--seqlen"
		}
		return usageError("--cp-block %d: give at most the sequence's %d tokens (%s), or 0 for the default", o.block, s, what)
	}
	return nil
}

// checkRanksHoldTokens refuses a --seqlen shorter than the n ranks it is cut over: most
// ranks held no token, and the rows read 0.0000 TFLOP/s per rank without a word.
func (o cpSweepOptions) checkRanksHoldTokens(n int) error {
	if o.seqlen > 0 && o.seqlen < n {
		return usageError("--seqlen %d over %d ranks leaves %d of them without a token: give at least %d tokens, or --tokens-per-rank", o.seqlen, n, n-o.seqlen, n)
	}
	return nil
}

// sweep is the harness's CP sweep of the flags on n ranks, run with kernel.
func (o cpSweepOptions) sweep(n int, kernel string) harness.CPSweep {
	return harness.CPSweep{
		Methods: o.methods, Masks: o.masks, SeqLen: o.seqlenFor(n), Heads: o.heads, HeadDim: o.headDim, DType: o.dtype,
		Passes: o.passes, Samples: o.samples, Seed: o.seed, Kernel: kernel,
		Mesh: cp.Config{Ulysses: o.ulysses, Ring: o.ring, Windows: o.windows, HeadFirst: o.headFirst, Sharding: o.sharding, Block: o.block, Stages: o.stages,
			Splits: o.splits, KVLayout: o.kvLayout},
		Build: o.docs.CPBuilder(), Docs: o.docs,
	}
}

// seqlenFor is the global length on n ranks.
func (o cpSweepOptions) seqlenFor(n int) int {
	if o.seqlen > 0 {
		return o.seqlen
	}
	return n * o.tokensPerRank
}

// splitsFlag reads --cp-ulysses: comma-separated head-parallel degrees of balanced, each
// 0 (chosen per mask) or positive; whether one divides the ranks and heads is the plan's
// to say (an unsupported row naming the fix).
func splitsFlag(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		u, err := strconv.Atoi(f)
		if err != nil || u < 0 {
			return nil, usageError("--cp-ulysses %q: give comma-separated head-parallel degrees such as 1,2,8 (0: chosen per mask)", s)
		}
		out = append(out, u)
	}
	return out, nil
}
