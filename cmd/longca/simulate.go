package main

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/longca/longca/session"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/external"
	"github.com/longca/longca/results"
	"github.com/longca/longca/sim"
	"github.com/longca/longca/spmd"
	"github.com/urfave/cli/v2"
)

func init() {
	register(&cli.Command{
		Name:  "simulate",
		Usage: "predict each CP method's per-GPU TFLOP/s on many GPUs (8 .. 1024+) without them",
		Description: "For methods x meshes x masks x GPU counts (weak scaling: seqlen = GPUs x --tokens-per-rank),\n" +
			"each method's own code (spmd/cp, as longca cp runs it) is traced against placeholder tensors and\n" +
			"a recording communicator; the schedule (sub-mask per step, bytes per transfer, what overlaps what)\n" +
			"is replayed by an event simulation over a machine (--machine: a preset or a JSON file; flags\n" +
			"override its links) with kernel times from a tile-based rate model (a preset, --kernel-rows FILE\n" +
			"of measured longca kernel rows, or --calibrate KERNEL measured here). Prints per-GPU TFLOP/s (best\n" +
			"mesh per method), the exposed-communication share and the bottleneck link; writes predicted rows\n" +
			"(bench simulate, status predicted) and one plot per mask and pass. See docs/simulate.md.",
		Flags:  append(simulateFlags(), kernelFlags()...),
		Action: simulateAction,
	})
}

func simulateFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "gpus", Value: "8,64,512", Usage: "comma-separated GPU counts (ranks) to predict for"},
	}, append(cpSweepFlags(simulateDefaults),
		&cli.StringFlag{Name: "machine", Value: sim.DefaultPreset, Usage: "machine: a preset (" + strings.Join(sim.PresetNames(), ", ") + ") or a JSON machine file (docs/simulate.md)"},
		&cli.IntFlag{Name: "gpus-per-node", Usage: "override the machine's GPUs per node"},
		&cli.Float64Flag{Name: "intra-bw", Usage: "override the intra-node bandwidth, GB/s per GPU per direction (nccl-tests bus bandwidth)"},
		&cli.Float64Flag{Name: "intra-latency", Usage: "override the intra-node latency, microseconds"},
		&cli.Float64Flag{Name: "inter-bw", Usage: "override the inter-node bandwidth, GB/s per GPU (per node with --inter-shared)"},
		&cli.Float64Flag{Name: "inter-latency", Usage: "override the inter-node latency, microseconds"},
		&cli.BoolFlag{Name: "inter-shared", Usage: "the inter-node bandwidth is one port per node, shared by its GPUs"},
		&cli.StringFlag{Name: "collectives", Usage: "override the collective algorithms: nccl or direct (comm/local's)"},
		&cli.StringFlag{Name: "kernel-model", Usage: "kernel rate model preset (" + strings.Join(sim.KernelPresetNames(), ", ") + "; default: the machine's)"},
		&cli.StringFlag{Name: "kernel-rows", Usage: "calibrate the kernel model from measured longca kernel rows: a results file or folder"},
		&cli.StringFlag{Name: "rows-kernel", Usage: "with --kernel-rows: the kernel whose rows to use (default: the one with the most rows)"},
		&cli.StringFlag{Name: "calibrate", Usage: "calibrate the kernel model by timing this kernel here (ref, cuda, ...) on the calibration masks"},
		&cli.StringFlag{Name: "calibrate-seqlens", Usage: "lengths timed by --calibrate (default: tokens per GPU and twice that)"},
		&cli.IntFlag{Name: "calibrate-iters", Value: 5, Usage: "timed repetitions per --calibrate case"},
		&cli.BoolFlag{Name: "calibrate-check", Value: true, Usage: "check each --calibrate case against the reference first"},
		&cli.IntFlag{Name: "exact-ranks", Value: sim.DefaultExactRanks, Usage: "simulate every rank up to this many GPUs; above it, a sample of ranks with mirrored peers"},
		&cli.IntFlag{Name: "sampled-ranks", Usage: "ranks traced in a sampled simulation, at most the largest --gpus count (default: 16, 1024/ring on rings longer than 64, at least 4)"},
		&cli.StringFlag{Name: "compare", Usage: "measured longca cp rows (a results file or folder): print each case's measured and predicted time side by side"},
		&cli.BoolFlag{Name: "nccl-table", Usage: "print the predicted NCCL collectives on each --gpus count in nccl-tests' columns and exit"},
		&cli.StringFlag{Name: "nccl-sizes", Value: "8:8G", Usage: "with --nccl-table: smallest:largest size in bytes (doubling)"},
	)...)
}

// simOptions are the validated flags of `longca simulate`: the session's Simulation, the
// CP sweep's flags as longca cp reads them, and the NCCL table's.
type simOptions struct {
	session.Simulation
	cp               cpSweepOptions
	ignored          []string // kernel flags given without --calibrate: they change nothing
	ncclTable        bool
	ncclMin, ncclMax int64
}

// parseSimulateFlags checks every flag; bad input is one line naming the flag, exit 2.
func parseSimulateFlags(c *cli.Context) (simOptions, error) {
	var o simOptions
	for _, g := range splitList(c.String("gpus")) {
		n, err := strconv.Atoi(g)
		if err != nil || n < 1 {
			return o, usageError("--gpus %q: give GPU counts such as 8,64,512", c.String("gpus"))
		}
		if n > spmd.MaxWorld {
			return o, usageError("--gpus %d: at most %d GPUs", n, spmd.MaxWorld)
		}
		o.GPUs = append(o.GPUs, n)
	}
	if len(o.GPUs) == 0 {
		return o, usageError("--gpus is empty: give GPU counts such as 8,64,512")
	}
	slices.Sort(o.GPUs)
	o.GPUs = slices.Compact(o.GPUs)
	co, err := parseCPSweep(c)
	if err != nil {
		return o, err
	}
	if err := co.checkBlock(o.GPUs[0]); err != nil { // the fewest GPUs: the shortest sequence
		return o, err
	}
	if err := co.checkRanksHoldTokens(o.GPUs[len(o.GPUs)-1]); err != nil { // the most GPUs
		return o, err
	}
	o.cp = co
	if o.Machine, err = machineFromFlags(c); err != nil {
		return o, err
	}
	o.Exact, o.Sampled = c.Int("exact-ranks"), c.Int("sampled-ranks")
	if o.Exact < 1 || o.Sampled < 0 {
		return o, usageError("--exact-ranks %d --sampled-ranks %d: need at least 1 exact rank and a sample of 0 (the default) or more", o.Exact, o.Sampled)
	}
	if most := o.GPUs[len(o.GPUs)-1]; o.Sampled > most {
		// A sample is ranks of the world: more than the largest is none more (a billion
		// was taken as given, and the sweep grew to 10 GB).
		return o, usageError("--sampled-ranks %d: give at most the largest --gpus count (%d), or 0 for the default (16, fewer on long rings)", o.Sampled, most)
	}
	if err := checkBlockWork(co, o.GPUs, o.Exact, o.Sampled, session.Machine().HostBytes*0.85, max(runtime.GOMAXPROCS(0), 1)); err != nil {
		return o, err
	}
	// A flag read only with another is refused without it, as --column without --counts
	// is (each was ignored, exit 0).
	for _, f := range []struct{ flag, needs, does string }{
		{"rows-kernel", "kernel-rows", "it picks the kernel of the --kernel-rows rows"},
		{"calibrate-seqlens", "calibrate", "it sets the lengths --calibrate times"},
		{"calibrate-iters", "calibrate", "it sets the repetitions --calibrate times"},
		{"calibrate-check", "calibrate", "it checks the cases --calibrate times"},
		{"nccl-sizes", "nccl-table", "it sets the sizes of --nccl-table"},
	} {
		if c.IsSet(f.flag) && !c.IsSet(f.needs) {
			return o, usageError("--%s %s without --%s: %s", f.flag, c.String(f.flag), f.needs, f.does)
		}
	}
	o.ncclTable = c.Bool("nccl-table")
	lo, hi, ok := strings.Cut(c.String("nccl-sizes"), ":")
	a, errA := dataset.ParseSize(lo)
	b, errB := dataset.ParseSize(hi)
	if !ok || errA != nil || errB != nil || a < 1 || b < a {
		return o, usageError("--nccl-sizes %q: give smallest:largest bytes, such as 8:8G", c.String("nccl-sizes"))
	}
	o.ncclMin, o.ncclMax = int64(a), int64(b)
	name := c.String("kernel-model")
	if name == "" {
		name = o.Machine.Kernel
	}
	if o.Kernel, err = sim.KernelPreset(name); err != nil {
		if c.String("kernel-model") == "" {
			// the machine file's own model, named as the file's field (it was refused as
			// --kernel-model's, a flag not given); --kernel-model replaces it
			return o, usageError("--machine %s: its kernel %q is not a kernel model: use one of %s in the file, or give --kernel-model", c.String("machine"), name, strings.Join(sim.KernelPresetNames(), ", "))
		}
		return o, usageError("--kernel-model: %v", err)
	}
	o.KernelRows, o.RowsKernel = c.String("kernel-rows"), c.String("rows-kernel")
	if o.CompareSrc = c.String("compare"); o.CompareSrc != "" {
		rows, err := results.Load(o.CompareSrc)
		if err != nil {
			return o, usageError("--compare: %v", err)
		}
		for _, r := range rows {
			if r.Bench == "cp" && r.Status == results.StatusOK && r.MedianMs != nil && r.Rank == 0 {
				o.Compare = append(o.Compare, r)
			}
		}
		if len(o.Compare) == 0 {
			return o, usageError("--compare %s: no ok rows of longca cp (bench cp) to compare with", o.CompareSrc)
		}
		if o.Compare, err = sharedAsMachine(o.Compare, o.Machine, o.CompareSrc); err != nil {
			return o, err
		}
	}
	o.Calibrate, o.CalIters, o.CalCheck = c.String("calibrate"), c.Int("calibrate-iters"), c.Bool("calibrate-check")
	if err := o.readKernelFlags(c); err != nil {
		return o, err
	}
	if o.Calibrate != "" {
		if o.KernelRows != "" {
			return o, usageError("--calibrate and --kernel-rows both given: use one source of kernel rates")
		}
		if !kernels.Known(o.Calibrate) {
			return o, usageError("--calibrate: unknown kernel %q: registered are %s", o.Calibrate, strings.Join(kernels.Names(), ", "))
		}
		if err := external.CheckTempDir(o.Calibrate); err != nil {
			return o, usageError("--calibrate %s: %v", o.Calibrate, err)
		}
		if o.CalIters < 1 || o.CalIters > harness.MaxReps {
			return o, usageError("--calibrate-iters %d: give 1 to %d", o.CalIters, harness.MaxReps)
		}
		o.CalLens = []int{co.tokensPerRank, 2 * co.tokensPerRank}
		if c.IsSet("calibrate-seqlens") {
			if o.CalLens, err = harness.ParseSizeList(c.String("calibrate-seqlens")); err != nil {
				return o, usageError("--calibrate-seqlens: %v", err)
			}
		}
	}
	return o, nil
}

// maxBlockCaseSeconds is the longest balanced's dispatch may make one case (the session's
// limit for a whole case).
const maxBlockCaseSeconds = 3600

// checkBlockWork refuses a --cp-block whose blocks balanced's sub-masks cannot hold on
// some --gpus count (session.BalancedBlockWork: they grow as the square of the blocks) in
// avail bytes with workers cases at once, or in an hour; the line names the smallest
// block, a power of two, that fits. --cp-block 0 (the default, which the session's own
// estimate counts) and sweeps without balanced pass.
func checkBlockWork(co cpSweepOptions, gpus []int, exact, sampled int, avail float64, workers int) error {
	if co.block <= 0 || !slices.Contains(co.methods, "balanced") {
		return nil
	}
	work := func(n, block int) (bytes, seconds float64) {
		return session.BalancedBlockWork(co.sweep(n, ""), n, block, exact, sampled)
	}
	for _, n := range gpus {
		bytes, seconds := work(n, co.block)
		need := float64(workers) * bytes
		if need <= avail && seconds <= maxBlockCaseSeconds {
			continue
		}
		what := fmt.Sprintf("about %.1f GiB of host memory (%.1f GiB available)", need/(1<<30), avail/(1<<30))
		if need <= avail {
			what = fmt.Sprintf("about %.1f CPU hours a case (the limit is 1)", seconds/3600)
		}
		fix := "or 0 for the default"
		for b := 1; b <= co.seqlenFor(n); b *= 2 {
			if bb, t := work(n, b); b > co.block && float64(workers)*bb <= avail && t <= maxBlockCaseSeconds {
				fix = fmt.Sprintf("give --cp-block %d or more, or 0 for the default", b)
				break
			}
		}
		return usageError("--cp-block %d: balanced's dispatch of %s tokens in blocks of %d on %d GPUs would take %s (the sub-masks grow as the square of the blocks): %s",
			co.block, harness.FormatSize(co.seqlenFor(n)), co.block, n, what, fix)
	}
	return nil
}

// kernelFlagNames are the kernel flags (kernelFlags): what --calibrate's kernel is made
// with; without --calibrate each changes nothing.
var kernelFlagNames = []string{"device", "variant", "deterministic", "python", "worker-timeout", "on-worker-crash"}

// readKernelFlags checks the kernel flags whether or not --calibrate is given, as
// longca kernel reads them (--on-worker-crash x, --device -1 and --variant bogus were
// accepted without --calibrate, exit 0): with --calibrate they make its kernel (the
// device defaulting to the local rank's GPU under a launcher); without, a valid one is
// said to change nothing once every check has passed (simOptions.ignored, said by
// Simulation.AfterChecks).
func (o *simOptions) readKernelFlags(c *cli.Context) error {
	w := spmd.World{Size: 1}
	if o.Calibrate != "" {
		var err error
		if w, err = spmd.Discover(os.Getenv); err != nil {
			return usageError("%v", err)
		}
	}
	ko, err := kernelOptions(c, w)
	if err != nil {
		return err
	}
	if o.CalStopOnCrash, err = stopOnCrash(c); err != nil {
		return err
	}
	if o.Calibrate != "" {
		o.CalKernelOptions = ko
		return checkVariant(ko, true, o.Calibrate)
	}
	if err := checkVariant(ko, false, kernels.Names()...); err != nil { // a variant no kernel has
		return err
	}
	for _, f := range kernelFlagNames {
		if c.IsSet(f) && flagEnvVar(c, f) == "" { // (not LONGCA_PYTHON: a setting of the shell, not of this run)
			o.ignored = append(o.ignored, "--"+f)
		}
	}
	return nil
}

// machineFromFlags loads --machine and applies the link overrides.
func machineFromFlags(c *cli.Context) (sim.Machine, error) {
	m, err := sim.LoadMachine(c.String("machine"))
	if err != nil {
		return m, usageError("--machine: %v", err)
	}
	if c.IsSet("gpus-per-node") {
		if m.GPUsPerNode = c.Int("gpus-per-node"); m.GPUsPerNode < 1 || m.GPUsPerNode > sim.MaxGPUsPerNode {
			return m, usageError("--gpus-per-node %d: give 1 to %d", m.GPUsPerNode, sim.MaxGPUsPerNode)
		}
	}
	// Each link number is checked where it is given, naming its flag: NaN passed a "< 0"
	// check and the simulation then never finished an event.
	for _, f := range []struct {
		flag  string
		dst   *float64
		valid func(float64) bool
		what  string
	}{
		{"intra-bw", &m.Intra.BandwidthGBs, sim.Bandwidth, "GB/s, at least 1e-6, such as 360"},
		{"intra-latency", &m.Intra.LatencyUs, sim.Latency, "microseconds, 0 to 1e7, such as 3"},
		{"inter-bw", &m.Inter.BandwidthGBs, sim.Bandwidth, "GB/s, at least 1e-6, such as 45"},
		{"inter-latency", &m.Inter.LatencyUs, sim.Latency, "microseconds, 0 to 1e7, such as 8"},
	} {
		if !c.IsSet(f.flag) {
			continue
		}
		v := c.Float64(f.flag)
		if !f.valid(v) {
			return m, usageError("--%s %g: give a finite number of %s", f.flag, v, f.what)
		}
		*f.dst = v
	}
	if c.IsSet("inter-shared") {
		m.Inter.Shared = c.Bool("inter-shared")
	}
	if c.IsSet("collectives") {
		if m.Collectives = c.String("collectives"); m.Collectives != sim.CollNCCL && m.Collectives != sim.CollDirect {
			return m, usageError("--collectives %q: use %s or %s", m.Collectives, sim.CollNCCL, sim.CollDirect)
		}
	}
	if err := m.Validate(); err != nil {
		return m, usageError("--machine %s with the link flags: %v", m.Name, err)
	}
	// (the flags' numbers are held to these ranges above: a number out of them is the file's)
	if err := m.CheckRanges(); err != nil {
		return m, usageError("--machine %s: %v", c.String("machine"), err)
	}
	return m, nil
}

func simulateAction(c *cli.Context) error {
	start := time.Now()
	world, err := oneProcess("simulate")
	if err != nil {
		return err
	}
	o, err := parseSimulateFlags(c)
	if err != nil {
		return err
	}
	if o.ncclTable {
		for _, f := range docsFlags() { // not read (parseCPSweep): the table uses no documents
			if name := f.Names()[0]; c.IsSet(name) {
				log.Warn().Str("flag", "--"+name).Msgf("--%s is not read with --nccl-table, which uses no documents: it changes nothing in this run", name)
			}
		}
		for _, n := range o.GPUs { // every count checked before any table is printed
			if err := sim.CheckCollectives(n, o.ncclMin, o.ncclMax); err != nil {
				return usageError("--nccl-table: %v", err)
			}
		}
		for _, n := range o.GPUs {
			if err := sim.WriteCollectives(c.App.Writer, o.Machine, n, o.ncclMin, o.ncclMax); err != nil {
				return usageError("--nccl-table: %v", err)
			}
		}
		return nil
	}
	if o.cp.out == "" {
		if o.cp.out, err = session.DefaultOutDir("simulate", 1); err != nil {
			return err
		}
	}
	if o.cp.runID, err = resultsTarget(o.cp.out, o.cp.runID, flagFrom(c, "run-id"), 1, false); err != nil {
		return err
	}
	sm := o.Simulation
	sm.Sweep, sm.TokensPerRank, sm.SeqLen, sm.Docs = o.cp.sweep(0, ""), o.cp.tokensPerRank, o.cp.seqlen, o.cp.docs
	// said once the session has accepted the sweep too (its memory and time): a refused
	// run is one line
	sm.AfterChecks = func() {
		warnMethodFlags(c, o.cp.methods)
		for _, f := range o.ignored {
			log.Warn().Str("flag", f).Msgf("%s is read by --calibrate only: it changes nothing in this run", f)
		}
	}
	return newSession(c, "simulate", o.cp.out, o.cp.runID, world).Simulate(c.Context, sm, start)
}

// sharedAsMachine keeps the --compare rows whose ranks shared a GPU as the machine's ranks
// share one (min(ranks_per_gpu, world size) of them), so that 8 ranks timed on one GPU are
// not read against 8 GPUs (the default machine: every case about 87% off). Rows without
// ranks_per_device (written before it) are kept, and so are rows computed on the host (the
// in-process ranks of `cp --links`, whose machine file's ranks_per_gpu shapes the links and
// whose compute a scale calibrates). None left is a usage error naming --machine; some left
// out is a warning saying how many.
func sharedAsMachine(rows []results.Row, m sim.Machine, src string) ([]results.Row, error) {
	var kept []results.Row
	off := map[string]int{}
	hint := "--machine h100-ib or h200-ib give each rank its own GPU"
	for _, r := range rows {
		want := min(int64(m.RanksPerGPU), r.WorldSize)
		if r.RanksPerDevice == nil || *r.RanksPerDevice == want || want < 1 || r.Device == "cpu" {
			kept = append(kept, r)
			continue
		}
		off[fmt.Sprintf("%d ranks on a device where --machine %s puts %d", *r.RanksPerDevice, m.Name, want)]++
		if *r.RanksPerDevice > 1 {
			hint = "--machine h200-1gpu holds 8 ranks on one GPU"
		}
	}
	var why []string
	for k, n := range off {
		why = append(why, fmt.Sprintf("%d with %s", n, k))
	}
	slices.Sort(why)
	if len(kept) == 0 {
		return nil, usageError("--compare %s: no row's ranks shared their GPUs as the machine's do (%s): name a machine whose ranks share GPUs as they did (%s; a machine file sets ranks_per_gpu)",
			src, strings.Join(why, "; "), hint)
	}
	if len(why) > 0 {
		log.Warn().Str("flag", "--compare").Msgf("%d of %s's rows left out of the comparison (%s): another --machine compares them", len(rows)-len(kept), src, strings.Join(why, "; "))
	}
	return kept, nil
}
