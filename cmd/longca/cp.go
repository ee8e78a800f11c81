package main

import (
	"os"
	"strings"
	"time"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/session"
	"github.com/longca/longca/sim"
	"github.com/longca/longca/spmd"
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
		Flags:  append(append(append(cpFlags(), worldFlags()...), kernelFlags()...), gpuStateFlag(), settleFlag()),
		Action: cpAction,
	})
}

func cpFlags() []cli.Flag {
	return append(append(cpSweepFlags(cpDefaults), checkFlags()...),
		&cli.IntFlag{Name: "warmup", Aliases: []string{"w"}, Value: 5, Usage: "untimed warm-up iterations"},
		&cli.IntFlag{Name: "iters", Aliases: []string{"n"}, Value: 15, Usage: "timed iterations (median of the slowest rank)"},
		&cli.IntFlag{Name: "ranks", Usage: "in-process ranks (comm/local) when not started by a launcher (default 1)"},
		&cli.StringFlag{Name: "kernel", Value: "ref", Usage: "attention kernel of every step"},
		&cli.BoolFlag{Name: "staged", Usage: "allow a device kernel that is not a cp.DeviceKernel: every step copies through the host (rows say KERNEL+staged)"},
		&cli.StringFlag{Name: "baseline", Value: "measure", Usage: "the efficiency yardstick, the kernel alone at the same per-rank work: measure (in this run), none, or a results FILE of longca kernel"},
		&cli.BoolFlag{Name: "overlap", Usage: "also time every pass with the transfers skipped (no_comm_ms): what communication adds to a step"},
		&cli.BoolFlag{Name: "dry-run", Usage: "print the cases (mesh, padding, FLOPs, bytes) and run nothing"},
		&cli.StringFlag{Name: "links", Usage: "in-process ranks only: emulate a machine's links (a longca simulate --machine preset or file): each message waits bytes/bandwidth + latency"},
	)
}

// cpOptions are the validated flags of `longca cp`: the CP sweep's (cpSweepOptions) and
// how it is measured.
type cpOptions struct {
	cpSweepOptions
	warmup, iters   int
	check           bool
	checkBudget     float64
	ranks           int
	kernel          string
	kernelOpts      kernels.Options // device index, variant: set once the world is known
	staged, overlap bool
	baseline        string            // measure, none or a file
	base            *harness.Baseline // baselineOf(baseline), a file's figures read
	dryRun          bool
	links           *sim.Machine // emulated links between in-process ranks (--links)
	settle          time.Duration
}

// parseCPFlags checks every flag; bad input is one line naming the flag, exit status 2.
func parseCPFlags(c *cli.Context) (cpOptions, error) {
	var o cpOptions
	var err error
	if o.cpSweepOptions, err = parseCPSweep(c); err != nil {
		return o, err
	}
	if o.warmup, o.iters, err = repsFromFlags(c); err != nil {
		return o, err
	}
	if o.settle, err = settleFromFlags(c); err != nil {
		return o, err
	}
	if o.check, o.checkBudget, err = checkFromFlags(c); err != nil {
		return o, err
	}
	o.ranks, o.kernel = c.Int("ranks"), c.String("kernel")
	o.staged, o.overlap, o.baseline, o.dryRun = c.Bool("staged"), c.Bool("overlap"), c.String("baseline"), c.Bool("dry-run")
	if c.IsSet("ranks") && o.ranks < 1 {
		return o, usageError("--ranks %d: need at least 1", o.ranks)
	}
	if o.ranks > spmd.MaxWorld { // (the tokens of a larger world overflowed the estimate's arithmetic)
		return o, usageError("--ranks %d: at most %d ranks", o.ranks, spmd.MaxWorld)
	}
	if !kernels.Known(o.kernel) { // a registered name, or a family's (exec:PATH)
		return o, usageError("--kernel: unknown kernel %q: registered are %s", o.kernel, strings.Join(kernels.Names(), ", "))
	}
	if c.IsSet("links") {
		m, err := sim.LoadMachine(c.String("links"))
		if err == nil {
			err = session.CheckLinks(m, c.Duration("timeout"))
		}
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
	// a file is read now, once: a file that is not results is bad input before any rank
	// starts, not an error of every rank after the sweep began
	if o.base = baselineOf(o.baseline); o.base != nil && o.base.File != "" {
		if err := o.base.Load(); err != nil {
			return o, usageError("%v", err)
		}
	}
	// cp has no policy for a crashed worker, but a value that kernel would refuse is refused
	// here too (--on-worker-crash x was accepted, exit 0), and a valid one is said to do nothing.
	if _, err := stopOnCrash(c); err != nil {
		return o, err
	}
	if c.IsSet("on-worker-crash") {
		log.Warn().Str("flag", "--on-worker-crash").Msg("--on-worker-crash is read by kernel, sparse and run only: it changes nothing in cp")
	}
	// said last, once every flag is accepted: bad input is one line (a negative --ulysses
	// was a warning that it changes nothing, then the error)
	warnMethodFlags(c, o.methods)
	return o, nil
}

// sweep is the harness's CP sweep of the flags on n ranks.
func (o cpOptions) sweep(n int) harness.CPSweep { return o.cpSweepOptions.sweep(n, o.kernel) }

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
