package main

import (
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/sim"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:  "cp",
		Usage: "context-parallel attention: check each method against the single-device reference, then time it",
		Description: "Cases are methods x meshes x masks x heads x passes, each averaged over --samples masks\n" +
			"(seeds seed..seed+samples-1). Weak scaling by default: seqlen = ranks x --tokens-per-rank.\n" +
			"Ranks: --ranks N runs N in-process ranks (comm/local) in one process; under mpirun or srun\n" +
			"each process is one rank. A case is checked first (out, lse; dq, dk, dv) on its first sample;\n" +
			"a wrong method is not timed and the command exits 1. Time is the slowest rank's per\n" +
			"iteration, median over -n iterations; TFLOP/s per rank = mask FLOPs / (ranks x time). Every\n" +
			"outcome is a row (ok, unsupported, oom, wrong, error), agreed by the ranks. Efficiency: what\n" +
			"each device did over the kernel alone at the same per-rank work (--baseline).",
		Flags:  append(append(cpFlags(), worldFlags()...), kernelFlags()...),
		Action: cpAction,
	})
}

func cpFlags() []cli.Flag {
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
		&cli.StringFlag{Name: "sharding", Value: "default", Usage: "contiguous, zigzag (per document, padded) or default (zigzag; contiguous for ulysses)"},
		&cli.IntFlag{Name: "cp-block", Usage: "balanced: dispatch block in tokens (0: the largest power of two <= 512 giving each rank >= 8 blocks); recorded as cp_block"},
		&cli.StringFlag{Name: "cp-ulysses", Value: "0", Usage: "balanced: head-parallel degrees U of its U x (ranks/U) mesh, comma-separated, one mesh each (e.g. 1,2,8; 1: the dispatch alone; ranks: Ulysses on a contiguous layout; 0: chosen per mask by the plan's model, spmd/cp.BalancedMeshChoice); recorded as cp_ulysses and cp_ring"},
		&cli.IntFlag{Name: "cp-stages", Usage: "balanced: most stages a rank's fetch is cut into, each overlapping the one before's attention (0: one up to 8 ranks, else a pyramid of small-large-small stages); recorded as cp_stages"},
		&cli.IntFlag{Name: "samples", Value: 30, Usage: "masks per case (seeds seed..seed+samples-1), averaged in reports"},
		&cli.Uint64Flag{Name: "seed", Value: 42, Usage: "first mask seed"},
		&cli.IntFlag{Name: "warmup", Aliases: []string{"w"}, Value: 5, Usage: "untimed warm-up iterations"},
		&cli.IntFlag{Name: "iters", Aliases: []string{"n"}, Value: 15, Usage: "timed iterations (median of the slowest rank)"},
		&cli.StringFlag{Name: "passes", Value: "fwd,bwd", Usage: "comma-separated: fwd, bwd, fwd+bwd"},
		&cli.BoolFlag{Name: "check", Value: true, Usage: "check each case against the reference before timing"},
		&cli.BoolFlag{Name: "no-check", Usage: "time without checking"},
		&cli.Float64Flag{Name: "check-budget", Value: harness.DefaultCheckBudget, Usage: "largest checked case in multiply-adds (area x heads x dim); larger cases are checked smaller (4K, 2K, 1K, 512 tokens in all; KV heads halved)"},
		&cli.IntFlag{Name: "ranks", Usage: "in-process ranks (comm/local) when not started by a launcher (default 1)"},
		&cli.StringFlag{Name: "kernel", Value: "ref", Usage: "attention kernel of every step"},
		&cli.BoolFlag{Name: "staged", Usage: "allow a device kernel that is not a cp.DeviceKernel: every step copies through the host (rows say KERNEL+staged)"},
		&cli.StringFlag{Name: "baseline", Value: "measure", Usage: "the efficiency yardstick, the kernel alone at the same per-rank work: measure (in this run), none, or a results FILE of longca kernel"},
		&cli.BoolFlag{Name: "overlap", Usage: "also time every pass with the transfers skipped (no_comm_ms): what communication adds to a step"},
		&cli.StringFlag{Name: "out", Usage: "results folder (default out/cp-<time>)"},
		&cli.StringFlag{Name: "run-id", EnvVars: []string{"LONGCA_RUN_ID"}, Usage: "run id in file names and rows (default: the folder's name)"},
		&cli.BoolFlag{Name: "dry-run", Usage: "print the cases (mesh, padding, FLOPs, bytes) and run nothing"},
		&cli.StringFlag{Name: "links", Usage: "in-process ranks only: emulate a machine's links (a longca simulate --machine preset or file): each message waits bytes/bandwidth + latency"},
	}, docsFlags()...)
}

// cpOptions are the validated flags of `longca cp`.
type cpOptions struct {
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
	warmup, iters   int
	passes          []kernels.Pass
	check           bool
	checkBudget     float64
	ranks           int
	kernel          string
	kernelOpts      kernels.Options // device index, variant: set once the world is known
	staged, overlap bool
	baseline        string // measure, none or a file
	out, runID      string
	dryRun          bool
	block, stages   int          // balanced's dispatch block and stages (--cp-block, --cp-stages); 0: the defaults
	splits          []int        // balanced's head-parallel degrees (--cp-ulysses); 0: chosen per mask
	links           *sim.Machine // emulated links between in-process ranks (--links)
	docs            harness.Docs // where document masks' lengths come from (--dist, --counts, --max-doc)
}

// parseCPFlags checks every flag; bad input is one line naming the flag, exit status 2.
func parseCPFlags(c *cli.Context) (cpOptions, error) {
	o, err := cpSweepFlags(c)
	if err != nil {
		return o, err
	}
	o.warmup, o.iters, o.check = c.Int("warmup"), c.Int("iters"), c.Bool("check") && !c.Bool("no-check")
	o.checkBudget, o.ranks, o.kernel = c.Float64("check-budget"), c.Int("ranks"), c.String("kernel")
	o.staged, o.overlap, o.baseline, o.dryRun = c.Bool("staged"), c.Bool("overlap"), c.String("baseline"), c.Bool("dry-run")
	if o.warmup < 0 || o.iters < 1 {
		return o, usageError("-w %d -n %d: warm-ups must be >= 0 and iterations >= 1", o.warmup, o.iters)
	}
	if !(o.checkBudget > 0) || math.IsInf(o.checkBudget, 0) {
		return o, usageError("--check-budget %g: give a positive number of multiply-adds (default %g)", o.checkBudget, harness.DefaultCheckBudget)
	}
	if c.IsSet("ranks") && o.ranks < 1 {
		return o, usageError("--ranks %d: need at least 1", o.ranks)
	}
	if !slices.Contains(kernels.Names(), o.kernel) {
		return o, usageError("--kernel: unknown kernel %q: registered are %s", o.kernel, strings.Join(kernels.Names(), ", "))
	}
	if c.IsSet("links") {
		m, err := sim.LoadMachine(c.String("links"))
		if err != nil {
			return o, usageError("--links: %v", err)
		}
		o.links = &m
	}
	switch o.baseline {
	case "measure", "none":
	default:
		if _, err := os.Stat(o.baseline); err != nil {
			return o, usageError("--baseline %q: neither measure, none nor a readable results file (%v)", o.baseline, err)
		}
	}
	return o, nil
}

// cpSweepFlags reads the flags `longca cp` and `longca simulate` share, the CP sweep they
// describe alike: methods, masks, lengths, heads, mesh, sharding, samples, documents,
// passes, and where the rows go.
func cpSweepFlags(c *cli.Context) (cpOptions, error) {
	o := cpOptions{headDim: c.Int("head-dim"), ulysses: c.Int("ulysses"), ring: c.Int("ring"), windows: c.Int("windows"),
		block: c.Int("cp-block"), stages: c.Int("cp-stages"), headFirst: c.Bool("head-first"), samples: c.Int("samples"), seed: c.Uint64("seed"),
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
	if o.headDim <= 0 {
		return o, usageError("--head-dim %d: must be positive (e.g. 128)", o.headDim)
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
	if o.splits, err = splitsFlag(c.String("cp-ulysses")); err != nil {
		return o, err
	}
	if o.sharding, err = cp.ParseSharding(c.String("sharding")); err != nil {
		return o, usageError("%v", err)
	}
	if o.samples < 1 || o.samples > harness.MaxSamples {
		return o, usageError("--samples %d: need 1 to %d", o.samples, harness.MaxSamples)
	}
	if o.docs, err = docsFromFlags(c); err != nil {
		return o, err
	}
	if o.passes, err = passesFlag(c); err != nil {
		return o, err
	}
	return o, nil
}

// sweep is the harness's CP sweep of the flags on n ranks.
func (o cpOptions) sweep(n int) harness.CPSweep {
	return harness.CPSweep{
		Methods: o.methods, Masks: o.masks, SeqLen: o.seqlenFor(n), Heads: o.heads, HeadDim: o.headDim, DType: o.dtype,
		Passes: o.passes, Samples: o.samples, Seed: o.seed, Kernel: o.kernel,
		Mesh:  cp.Config{Ulysses: o.ulysses, Ring: o.ring, Windows: o.windows, HeadFirst: o.headFirst, Sharding: o.sharding, Block: o.block, Stages: o.stages, Splits: o.splits},
		Build: o.docs.CPBuilder(),
	}
}

// seqlenFor is the global length on n ranks.
func (o cpOptions) seqlenFor(n int) int {
	if o.seqlen > 0 {
		return o.seqlen
	}
	return n * o.tokensPerRank
}

// cpCases expands the sweep for n ranks (harness.CPSweep.Cases). A case whose plan
// refuses its mesh is kept as unsupported rows, except that a method the user named
// whose settings cannot run is a usage error; so is a sweep where nothing can run. A
// 2-D method on a rank count without a 2-D mesh (usp on 1 rank) stays unsupported rows
// even when named, so a sweep over every method still runs the others.
func cpCases(o cpOptions, n int) ([]harness.CPCase, error) {
	cases, err := o.sweep(n).Cases(n)
	if err != nil {
		return nil, usageError("--masks or --methods: %v", err)
	}
	runs := 0
	var skipped []string
	for _, c := range cases {
		if c.Skip == nil {
			runs++
			continue
		}
		if o.methodsExplicit && !c.NoMesh {
			return nil, usageError("%v", c.Skip)
		}
		skipped = append(skipped, c.Skip.Error())
	}
	if runs == 0 {
		return nil, usageError("no CP case can run on %d ranks: %s", n, strings.Join(skipped, "; "))
	}
	return cases, nil
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
