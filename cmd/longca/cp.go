package main

import (
	"fmt"
	"math"
	"slices"
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
			"iteration, median over -n iterations; TFLOP/s per GPU = mask FLOPs / (ranks x time).",
		Flags:  append(append(cpFlags(), worldFlags()...), kernelFlags()...),
		Action: cpAction,
	})
}

func cpFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "methods", Usage: "comma-separated CP methods (default: all of " + strings.Join(cp.Names(), ", ") + ")"},
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
		&cli.IntFlag{Name: "samples", Value: 30, Usage: "masks per case (seeds seed..seed+samples-1), averaged in reports"},
		&cli.Uint64Flag{Name: "seed", Value: 42, Usage: "first mask seed"},
		&cli.IntFlag{Name: "warmup", Aliases: []string{"w"}, Value: 5, Usage: "untimed warm-up iterations"},
		&cli.IntFlag{Name: "iters", Aliases: []string{"n"}, Value: 15, Usage: "timed iterations (median of the slowest rank)"},
		&cli.StringFlag{Name: "passes", Value: "fwd,bwd", Usage: "comma-separated: fwd, bwd, fwd+bwd"},
		&cli.BoolFlag{Name: "check", Value: true, Usage: "check each case against the reference before timing"},
		&cli.BoolFlag{Name: "no-check", Usage: "time without checking"},
		&cli.Float64Flag{Name: "check-budget", Value: harness.DefaultCheckBudget, Usage: "largest checked case in multiply-adds (area x heads x dim); larger cases are checked at a halved seqlen"},
		&cli.IntFlag{Name: "ranks", Usage: "in-process ranks (comm/local) when not started by a launcher (default 1)"},
		&cli.StringFlag{Name: "kernel", Value: "ref", Usage: "attention kernel of every step"},
		&cli.StringFlag{Name: "out", Usage: "results folder (default out/cp-<time>)"},
		&cli.StringFlag{Name: "run-id", EnvVars: []string{"LONGCA_RUN_ID"}, Usage: "run id in file names and rows (default: the folder's name)"},
		&cli.BoolFlag{Name: "dry-run", Usage: "print the cases (mesh, padding, FLOPs, bytes) and run nothing"},
		&cli.StringFlag{Name: "links", Usage: "in-process ranks only: emulate a machine's links (a longca simulate --machine preset or file): each message waits bytes/bandwidth + latency"},
	}
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
	out, runID      string
	dryRun          bool
	links           *sim.Machine // emulated links between in-process ranks (--links)
}

// parseCPFlags checks every flag; bad input is one line naming the flag, exit status 2.
func parseCPFlags(c *cli.Context) (cpOptions, error) {
	o := cpOptions{
		headDim: c.Int("head-dim"), ulysses: c.Int("ulysses"), ring: c.Int("ring"), windows: c.Int("windows"),
		headFirst: c.Bool("head-first"), samples: c.Int("samples"), seed: c.Uint64("seed"),
		warmup: c.Int("warmup"), iters: c.Int("iters"), check: c.Bool("check") && !c.Bool("no-check"),
		checkBudget: c.Float64("check-budget"), ranks: c.Int("ranks"), kernel: c.String("kernel"),
		out: c.String("out"), runID: c.String("run-id"), dryRun: c.Bool("dry-run"),
	}
	o.methods, o.methodsExplicit = splitList(c.String("methods")), c.IsSet("methods")
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
	switch c.String("masks") {
	case "":
		o.masks = mask.CPMasks()
	default:
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
	if o.sharding, err = cp.ParseSharding(c.String("sharding")); err != nil {
		return o, usageError("%v", err)
	}
	if o.samples < 1 {
		return o, usageError("--samples %d: need at least 1", o.samples)
	}
	if o.warmup < 0 || o.iters < 1 {
		return o, usageError("-w %d -n %d: warm-ups must be >= 0 and iterations >= 1", o.warmup, o.iters)
	}
	for _, p := range splitList(c.String("passes")) {
		pass, err := kernels.ParsePass(p)
		if err != nil {
			return o, usageError("--passes: %v", err)
		}
		o.passes = append(o.passes, pass)
	}
	if len(o.passes) == 0 {
		return o, usageError("--passes is empty: use fwd, bwd or fwd+bwd")
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
	return o, nil
}

// cpCase is one method, mesh, mask and head setting; its rows are samples x passes.
type cpCase struct {
	method string
	cfg    cp.Config // Docs filled per sample
	mask   string
	heads  harness.Heads
}

func (c cpCase) String() string {
	return fmt.Sprintf("%s %s %s %s", c.method, c.cfg.Mesh(), c.mask, c.heads)
}

// meshesFor lists the configurations of a method on n ranks: the flags' mesh when given;
// for usp and loongtrain otherwise every U x R = n with U, R >= 2 (or the default mesh
// when n has no such split).
func meshesFor(method string, n int, o cpOptions) []cp.Config {
	base := cp.Config{Ranks: n, HeadFirst: o.headFirst, Sharding: o.sharding}
	if method != "usp" && method != "loongtrain" {
		return []cp.Config{base}
	}
	base.Windows = o.windows
	if o.ulysses > 0 || o.ring > 0 {
		base.Ulysses, base.Ring = o.ulysses, o.ring
		return []cp.Config{base}
	}
	var out []cp.Config
	for u := 2; u <= n/2; u++ {
		if n%u == 0 {
			c := base
			c.Ulysses, c.Ring = u, n/u
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		out = append(out, base)
	}
	return out
}

// seqlenFor is the global length on n ranks.
func (o cpOptions) seqlenFor(n int) int {
	if o.seqlen > 0 {
		return o.seqlen
	}
	return n * o.tokensPerRank
}

// buildCPMask builds one sample of a case's mask (every rank builds the same).
func buildCPMask(name string, seqlen int, seed uint64) (mask.Spec, []mask.Range, error) {
	spec, err := mask.Build(name, seqlen, mask.Options{Seed: seed, Purpose: mask.PurposeCP})
	if err != nil {
		return spec, nil, err
	}
	docs, err := spec.Docs()
	return spec, docs, err
}

// problemFor is the global problem of a case.
func (o cpOptions) problemFor(h harness.Heads, m mask.Mask) kernels.Problem {
	return kernels.Problem{HeadsQ: h.Q, HeadsKV: h.KV, HeadDim: o.headDim, DType: o.dtype, Mask: m}
}

// cpCases expands the sweep for n ranks and plans each case's first sample, so that an
// impossible configuration fails before any work: a usage error when the user named the
// method, else the case is dropped with a warning (returned as skipped).
func cpCases(o cpOptions, n int) (cases []cpCase, skipped []string, err error) {
	s := o.seqlenFor(n)
	for _, name := range o.methods {
		m, err := cp.New(name)
		if err != nil {
			return nil, nil, usageError("%v", err)
		}
		for _, cfg := range meshesFor(name, n, o) {
			for _, mk := range o.masks {
				spec, docs, err := buildCPMask(mk, s, o.seed)
				if err != nil {
					return nil, nil, usageError("--masks %s at seqlen %d: %v", mk, s, err)
				}
				for _, h := range o.heads {
					c := cfg
					c.Docs = docs
					pl, err := m.Plan(c, o.problemFor(h, spec.Mask))
					if err != nil {
						if o.methodsExplicit {
							return nil, nil, usageError("%v", err)
						}
						skipped = append(skipped, err.Error())
						continue
					}
					resolved := pl.Config
					resolved.Docs = nil
					cases = append(cases, cpCase{method: name, cfg: resolved, mask: mk, heads: h})
				}
			}
		}
	}
	if len(cases) == 0 {
		return nil, skipped, usageError("no CP case can run on %d ranks: %s", n, strings.Join(skipped, "; "))
	}
	return cases, skipped, nil
}
