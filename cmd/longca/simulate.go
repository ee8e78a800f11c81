package main

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/longca/longca/present"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/dataset"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
	"github.com/longca/longca/sim"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
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
		Flags:  append(append(simulateFlags(), kernelFlags()...), docsFlags()...),
		Action: simulateAction,
	})
}

func simulateFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "gpus", Value: "8,64,512", Usage: "comma-separated GPU counts (ranks) to predict for"},
		&cli.StringFlag{Name: "methods", Usage: "comma-separated CP methods (default: all of " + strings.Join(cp.Names(), ", ") + ")"},
		&cli.StringFlag{Name: "masks", Usage: "comma-separated masks, or all (default: " + strings.Join(mask.CPMasks(), ",") + ")"},
		&cli.StringFlag{Name: "tokens-per-rank", Value: "8K", Usage: "tokens per GPU (weak scaling: seqlen = GPUs x this)"},
		&cli.StringFlag{Name: "seqlen", Usage: "global sequence length instead of --tokens-per-rank"},
		&cli.StringFlag{Name: "heads", Value: "64:8", Usage: "query:KV head settings, comma-separated"},
		&cli.IntFlag{Name: "head-dim", Value: 128, Usage: "head dimension"},
		&cli.StringFlag{Name: "dtype", Value: "bf16", Usage: "bf16, fp16, fp32 or fp64"},
		&cli.IntFlag{Name: "ulysses", Usage: "Ulysses degree U of usp/loongtrain (default: every mesh U x R = GPUs with U, R >= 2, as longca cp)"},
		&cli.IntFlag{Name: "ring", Usage: "ring degree R of usp/loongtrain"},
		&cli.IntFlag{Name: "windows", Usage: "loongtrain: windows the ring is cut into (default: windows of at most 8 GPUs)"},
		&cli.BoolFlag{Name: "head-first", Value: true, Usage: "a Ulysses group is consecutive ranks (inside a node); --head-first=false puts the ring there"},
		&cli.StringFlag{Name: "sharding", Value: "default", Usage: "contiguous, zigzag or default (zigzag; contiguous for ulysses)"},
		&cli.IntFlag{Name: "cp-block", Usage: "balanced: dispatch block in tokens (0: the largest power of two <= 512 giving each rank >= 8 blocks), as longca cp"},
		&cli.IntFlag{Name: "cp-stages", Usage: "balanced: most stages a rank's fetch is cut into (0: one up to 8 GPUs, else a pyramid of small-large-small stages), as longca cp"},
		&cli.IntFlag{Name: "samples", Value: 5, Usage: "masks per document case (seeds seed..seed+samples-1): the table shows the median and the min-max; masks without documents are drawn once"},
		&cli.Uint64Flag{Name: "seed", Value: 42, Usage: "first mask seed"},
		&cli.StringFlag{Name: "passes", Value: "fwd,bwd", Usage: "comma-separated: fwd, bwd, fwd+bwd"},
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
		&cli.IntFlag{Name: "sampled-ranks", Usage: "ranks traced in a sampled simulation (default: 16, 2048/ring on rings longer than 128, at least 4)"},
		&cli.StringFlag{Name: "out", Usage: "results folder (default out/simulate-<time>)"},
		&cli.StringFlag{Name: "run-id", EnvVars: []string{"LONGCA_RUN_ID"}, Usage: "run id in file names and rows (default: the folder's name)"},
		&cli.StringFlag{Name: "compare", Usage: "measured longca cp rows (a results file or folder): print each case's measured and predicted time side by side"},
		&cli.BoolFlag{Name: "nccl-table", Usage: "print the predicted NCCL collectives on each --gpus count in nccl-tests' columns and exit"},
		&cli.StringFlag{Name: "nccl-sizes", Value: "8:8G", Usage: "with --nccl-table: smallest:largest size in bytes (doubling)"},
	}
}

// simOptions are the validated flags of `longca simulate`.
type simOptions struct {
	gpus       []int
	cp         cpOptions // methods, masks, lengths, heads, mesh flags (as longca cp)
	samples    int
	machine    sim.Machine
	kernel     sim.KernelModel
	exact      int
	sampled    int
	ncclTable  bool
	ncclMin    int64
	ncclMax    int64
	calibrate  string
	calLens    []int
	calIters   int
	calCheck   bool
	kernelRows string
	rowsKernel string
	compare    []results.Row // measured cp rows (--compare)
	compareSrc string
}

// parseSimulateFlags checks every flag; bad input is one line naming the flag, exit 2.
func parseSimulateFlags(c *cli.Context) (simOptions, error) {
	var o simOptions
	for _, g := range splitList(c.String("gpus")) {
		n, err := strconv.Atoi(g)
		if err != nil || n < 1 {
			return o, usageError("--gpus %q: give GPU counts such as 8,64,512", c.String("gpus"))
		}
		o.gpus = append(o.gpus, n)
	}
	if len(o.gpus) == 0 {
		return o, usageError("--gpus is empty: give GPU counts such as 8,64,512")
	}
	slices.Sort(o.gpus)
	o.gpus = slices.Compact(o.gpus)
	co := cpOptions{headDim: c.Int("head-dim"), ulysses: c.Int("ulysses"), ring: c.Int("ring"), windows: c.Int("windows"),
		block: c.Int("cp-block"), stages: c.Int("cp-stages"), headFirst: c.Bool("head-first"), seed: c.Uint64("seed"), samples: c.Int("samples")}
	co.methods, co.methodsExplicit = splitList(c.String("methods")), c.IsSet("methods")
	if len(co.methods) == 0 {
		if co.methodsExplicit {
			return o, usageError("--methods is empty: name methods (%s)", strings.Join(cp.Names(), ","))
		}
		co.methods = cp.Names()
	}
	for _, m := range co.methods {
		if !slices.Contains(cp.Names(), m) {
			return o, usageError("--methods: unknown method %q: use some of %s", m, strings.Join(cp.Names(), ", "))
		}
	}
	var err error
	if c.String("masks") == "" {
		co.masks = mask.CPMasks()
	} else if co.masks, err = parseMasks(c.String("masks")); err != nil {
		return o, err
	}
	if co.tokensPerRank, err = dataset.ParseSize(c.String("tokens-per-rank")); err != nil || co.tokensPerRank < 1 {
		return o, usageError("--tokens-per-rank %q: give a positive size such as 8K", c.String("tokens-per-rank"))
	}
	if c.IsSet("seqlen") {
		if c.IsSet("tokens-per-rank") {
			return o, usageError("--seqlen and --tokens-per-rank both given: use one")
		}
		if co.seqlen, err = dataset.ParseSize(c.String("seqlen")); err != nil || co.seqlen < 1 {
			return o, usageError("--seqlen %q: give a positive size such as 64K", c.String("seqlen"))
		}
	}
	if co.heads, err = harness.ParseHeads(c.String("heads")); err != nil {
		return o, usageError("--heads: %v", err)
	}
	if co.headDim <= 0 {
		return o, usageError("--head-dim %d: must be positive (e.g. 128)", co.headDim)
	}
	if co.dtype, err = tensor.ParseDType(c.String("dtype")); err != nil {
		return o, usageError("--dtype: %v", err)
	}
	if co.ulysses < 0 || co.ring < 0 || co.windows < 0 {
		return o, usageError("--ulysses %d --ring %d --windows %d: must not be negative", co.ulysses, co.ring, co.windows)
	}
	if co.block < 0 || co.stages < 0 {
		return o, usageError("--cp-block %d --cp-stages %d: give positive numbers, or 0 for the defaults", co.block, co.stages)
	}
	if co.sharding, err = cp.ParseSharding(c.String("sharding")); err != nil {
		return o, usageError("%v", err)
	}
	if co.samples < 1 || co.samples > harness.MaxSamples {
		return o, usageError("--samples %d: need 1 to %d", co.samples, harness.MaxSamples)
	}
	if co.docs, err = docsFromFlags(c); err != nil {
		return o, err
	}
	for _, p := range splitList(c.String("passes")) {
		pass, err := kernels.ParsePass(p)
		if err != nil {
			return o, usageError("--passes: %v", err)
		}
		co.passes = append(co.passes, pass)
	}
	if len(co.passes) == 0 {
		return o, usageError("--passes is empty: use fwd, bwd or fwd+bwd")
	}
	co.out, co.runID = c.String("out"), c.String("run-id")
	o.cp, o.samples = co, co.samples
	if o.machine, err = machineFromFlags(c); err != nil {
		return o, err
	}
	o.exact, o.sampled = c.Int("exact-ranks"), c.Int("sampled-ranks")
	if o.exact < 1 || o.sampled < 0 {
		return o, usageError("--exact-ranks %d --sampled-ranks %d: need at least 1 exact rank and a sample of 0 (the default) or more", o.exact, o.sampled)
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
		name = o.machine.Kernel
	}
	if o.kernel, err = sim.KernelPreset(name); err != nil {
		return o, usageError("--kernel-model: %v", err)
	}
	o.kernelRows, o.rowsKernel = c.String("kernel-rows"), c.String("rows-kernel")
	if o.compareSrc = c.String("compare"); o.compareSrc != "" {
		rows, err := results.Load(o.compareSrc)
		if err != nil {
			return o, usageError("--compare: %v", err)
		}
		for _, r := range rows {
			if r.Bench == "cp" && r.Status == results.StatusOK && r.MedianMs != nil && r.Rank == 0 {
				o.compare = append(o.compare, r)
			}
		}
		if len(o.compare) == 0 {
			return o, usageError("--compare %s: no ok rows of longca cp (bench cp) to compare with", o.compareSrc)
		}
	}
	o.calibrate, o.calIters, o.calCheck = c.String("calibrate"), c.Int("calibrate-iters"), c.Bool("calibrate-check")
	if o.calibrate != "" {
		if o.kernelRows != "" {
			return o, usageError("--calibrate and --kernel-rows both given: use one source of kernel rates")
		}
		if !kernels.Known(o.calibrate) {
			return o, usageError("--calibrate: unknown kernel %q: registered are %s", o.calibrate, strings.Join(kernels.Names(), ", "))
		}
		if o.calIters < 1 {
			return o, usageError("--calibrate-iters %d: need at least 1", o.calIters)
		}
		o.calLens = []int{co.tokensPerRank, 2 * co.tokensPerRank}
		if c.IsSet("calibrate-seqlens") {
			if o.calLens, err = harness.ParseSizeList(c.String("calibrate-seqlens")); err != nil {
				return o, usageError("--calibrate-seqlens: %v", err)
			}
		}
	}
	return o, nil
}

// machineFromFlags loads --machine and applies the link overrides.
func machineFromFlags(c *cli.Context) (sim.Machine, error) {
	m, err := sim.LoadMachine(c.String("machine"))
	if err != nil {
		return m, usageError("--machine: %v", err)
	}
	if c.IsSet("gpus-per-node") {
		m.GPUsPerNode = c.Int("gpus-per-node")
	}
	if c.IsSet("intra-bw") {
		m.Intra.BandwidthGBs = c.Float64("intra-bw")
	}
	if c.IsSet("intra-latency") {
		m.Intra.LatencyUs = c.Float64("intra-latency")
	}
	if c.IsSet("inter-bw") {
		m.Inter.BandwidthGBs = c.Float64("inter-bw")
	}
	if c.IsSet("inter-latency") {
		m.Inter.LatencyUs = c.Float64("inter-latency")
	}
	if c.IsSet("inter-shared") {
		m.Inter.Shared = c.Bool("inter-shared")
	}
	if c.IsSet("collectives") {
		m.Collectives = c.String("collectives")
	}
	if err := m.Validate(); err != nil {
		return m, usageError("--machine %s with the link flags: %v", m.Name, err)
	}
	return m, nil
}

func simulateAction(c *cli.Context) error {
	start := time.Now()
	o, err := parseSimulateFlags(c)
	if err != nil {
		return err
	}
	w := c.App.Writer
	if o.ncclTable {
		for _, n := range o.gpus {
			if err := sim.WriteCollectives(w, o.machine, n, o.ncclMin, o.ncclMax); err != nil {
				return usageError("--nccl-table: %v", err)
			}
		}
		return nil
	}
	if o.cp.out == "" {
		o.cp.out = defaultOutDir("simulate")
	}
	if o.cp.runID, err = resultsTarget(o.cp.out, o.cp.runID); err != nil {
		return err
	}
	ctx := c.Context
	if ctx == nil {
		ctx = context.Background()
	}
	if err := calibrateKernel(ctx, c, &o); err != nil {
		return err
	}
	rows, err := predictAll(ctx, o)
	if err != nil {
		return err
	}
	wr, err := results.Create(o.cp.out, o.cp.runID, 0, 1)
	if err != nil {
		return fmt.Errorf("--out %s: %w", o.cp.out, err)
	}
	for _, r := range rows {
		if err := wr.Write(r); err != nil {
			_ = wr.Close()
			return err
		}
	}
	if err := wr.Close(); err != nil {
		return err
	}
	res, err := results.Merge(o.cp.out, results.MergeOptions{Runs: []string{o.cp.runID}, Out: results.MergedPath(o.cp.out, o.cp.runID)})
	if err != nil {
		return fmt.Errorf("merging the rows: %w", err)
	}
	plots, err := writeScalingPlots(filepath.Join(o.cp.out, "plots"), rows)
	if err != nil {
		return err
	}
	if err := printSimTable(w, o, rows); err != nil {
		return err
	}
	if len(o.compare) > 0 {
		if err := printComparison(w, o.compareSrc, o.compare, rows); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "# rows: %s (%d rows); plots: %d in %s; %.1f s\n", res.Files[0], res.Rows, len(plots), filepath.Join(o.cp.out, "plots"), time.Since(start).Seconds())
	return nil
}

// calibrateKernel replaces the preset kernel model by a fit to measured rows: from
// --kernel-rows, or timed here with --calibrate (the rows are written to the out folder
// under their own run id, bench kernel).
func calibrateKernel(ctx context.Context, c *cli.Context, o *simOptions) error {
	var rows []results.Row
	var source, kernel string
	switch {
	case o.kernelRows != "":
		var err error
		if rows, err = results.Load(o.kernelRows); err != nil {
			return usageError("--kernel-rows: %v", err)
		}
		kernel = o.rowsKernel
		if kernel == "" {
			kernel = mostRowsKernel(rows)
		}
		source = fmt.Sprintf("%s rows of %s", kernel, o.kernelRows)
	case o.calibrate != "":
		w, err := spmd.Discover(os.Getenv)
		if err != nil {
			return usageError("%v", err)
		}
		ko, err := kernelOptions(c, w)
		if err != nil {
			return err
		}
		runID := o.cp.runID + "-calibration"
		base := baseRow(runID, "kernel", spmd.World{Size: 1})
		r := &harness.Runner{Warmup: 1, Iters: o.calIters, Base: base, KernelOptions: ko}
		if o.calCheck {
			r.Check = harness.KernelCheck
		}
		defer r.Close()
		cases := harness.CalibrationSweep(o.calibrate, o.calLens, o.cp.heads[0], o.cp.headDim, o.cp.dtype).Cases()
		if err := r.RunAll(ctx, cases, func(_ int, row results.Row) error { rows = append(rows, row); return nil }); err != nil {
			return err
		}
		wr, err := results.Create(o.cp.out, runID, 0, 1)
		if err != nil {
			return fmt.Errorf("--out %s: %w", o.cp.out, err)
		}
		for _, r := range rows {
			if err := wr.Write(r); err != nil {
				_ = wr.Close()
				return err
			}
			if r.Status != results.StatusOK {
				log.Warn().Str("mask", r.Mask).Int64("seqlen", r.SeqLen).Str("pass", r.Pass).Str("status", string(r.Status)).Str("reason", r.Reason).Msg("calibration case not used")
			}
		}
		if err := wr.Close(); err != nil {
			return err
		}
		kernel, source = o.calibrate, fmt.Sprintf("%s timed here (%s)", o.calibrate, wr.Path())
	default:
		return nil
	}
	samples, skipped := sim.SamplesFromRows(rows, kernel, o.kernel.TileQ, o.kernel.TileK)
	for _, s := range skipped {
		log.Warn().Str("row", s).Msg("kernel row not used for calibration")
	}
	km, rep, err := sim.Fit(o.kernel, samples, source)
	if err != nil {
		if o.kernelRows != "" {
			return usageError("--kernel-rows %s: %v (need ok rows of bench kernel, fwd or bwd)", o.kernelRows, err)
		}
		return fmt.Errorf("--calibrate %s: %w", o.calibrate, err)
	}
	log.Info().Str("model", km.Name).Str("fit", rep.String()).Msg("kernel model calibrated")
	o.kernel = km
	return nil
}

// mostRowsKernel is the kernel with the most ok kernel rows.
func mostRowsKernel(rows []results.Row) string {
	n := map[string]int{}
	best := ""
	for _, r := range rows {
		if r.Bench == "kernel" && r.Status == results.StatusOK {
			n[r.Kernel]++
			if n[r.Kernel] > n[best] || (n[r.Kernel] == n[best] && r.Kernel < best) {
				best = r.Kernel
			}
		}
	}
	return best
}

// simJob is one prediction: a method on a mesh, a mask sample, a head setting, a world.
type simJob struct {
	n      int
	method string
	cfg    cp.Config
	mask   string
	heads  harness.Heads
	sample int
	refuse error // the method has no mesh of its own on n GPUs (cp.MeshRefuser): unsupported rows
}

// predictAll runs every prediction (in parallel, one per core) and returns the rows in
// a fixed order.
func predictAll(ctx context.Context, o simOptions) ([]results.Row, error) {
	var mu sync.Mutex
	masks := map[string]*builtMask{}
	maskFor := func(name string, s int, seed uint64) *builtMask {
		key := fmt.Sprintf("%s/%d/%d", name, s, seed)
		mu.Lock()
		defer mu.Unlock()
		if b, ok := masks[key]; ok {
			return b
		}
		spec, err := o.cp.docs.CPBuilder()(name, s, seed)
		var docs []mask.Range
		if err == nil {
			docs, err = spec.Docs()
		}
		b := &builtMask{spec, docs, err}
		masks[key] = b
		return b
	}
	if err := fitSimulation(o, maskFor); err != nil {
		return nil, err
	}
	// seeded says whether the seed changes mask mk at n GPUs (documents, a random prefix or
	// window); a mask that does not is simulated once, whatever --samples says.
	seeded := func(n int, mk string) bool {
		a, b := maskFor(mk, o.cp.seqlenFor(n), o.cp.seed), maskFor(mk, o.cp.seqlenFor(n), o.cp.seed+1)
		return a.err != nil || b.err != nil || !slices.Equal(a.spec.Mask.Slices, b.spec.Mask.Slices)
	}
	var jobs []simJob
	for _, n := range o.gpus {
		for _, method := range o.cp.methods {
			m, err := cp.New(method)
			if err != nil {
				return nil, usageError("%v", err)
			}
			fixed := o.cp.sweep(n).Mesh
			fixed.Ranks = n
			var refuse error
			if r, ok := m.(cp.MeshRefuser); ok {
				refuse = r.NoMesh(fixed)
			}
			for _, cfg := range m.Meshes(fixed) { // the method says which meshes it runs on
				for _, mk := range o.cp.masks {
					for _, h := range o.cp.heads {
						for s := range o.samples {
							jobs = append(jobs, simJob{n, method, cfg, mk, h, s, refuse})
							if refuse != nil || (o.samples > 1 && !seeded(n, mk)) {
								break // one row per pass says why; or every sample is the same mask
							}
						}
					}
				}
			}
		}
	}
	out := make([][]results.Row, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(runtime.GOMAXPROCS(0), 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i], errs[i] = predictJob(ctx, o, jobs[i], maskFor)
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	var rows []results.Row
	for i := range jobs {
		if errs[i] != nil {
			return nil, errs[i]
		}
		rows = append(rows, out[i]...)
	}
	setSimSpread(rows)
	return rows, nil
}

// setSimSpread fills each row's sample-spread columns (harness.SetSpread): the samples of
// its case (method, mesh, mask, heads, GPUs, pass) up to its own, in sample order.
func setSimSpread(rows []results.Row) {
	type key struct {
		gpus                     int64
		label, mask, heads, pass string
	}
	keyOf := func(r results.Row) key {
		return key{r.WorldSize, rowMeshLabel(r), r.Mask, fmt.Sprintf("%d:%d", r.HeadsQ, r.HeadsKV), r.Pass}
	}
	count := map[key]int{}
	for _, r := range rows {
		count[keyOf(r)]++
	}
	rates := map[key][]float64{}
	for i := range rows {
		k := keyOf(rows[i])
		if rows[i].TFLOPs != nil {
			rates[k] = append(rates[k], *rows[i].TFLOPs)
		}
		harness.SetSpread(&rows[i], rates[k], count[k])
	}
}

// builtMask is one sample of a mask at one length, built once for every method.
type builtMask struct {
	spec mask.Spec
	docs []mask.Range
	err  error
}

// predictJob predicts one job's passes; a configuration the method refuses (heads that
// do not split, a mesh that does not fit) is an unsupported row with the method's reason.
func predictJob(ctx context.Context, o simOptions, j simJob, maskFor func(string, int, uint64) *builtMask) ([]results.Row, error) {
	s := o.cp.seqlenFor(j.n)
	seed := o.cp.seed + uint64(j.sample)
	b := maskFor(j.mask, s, seed)
	if b.err != nil {
		return nil, usageError("--masks %s at seqlen %d: %v", j.mask, s, b.err)
	}
	cfg := j.cfg
	cfg.Docs = b.docs
	p := o.cp.sweep(j.n).Problem(j.heads, b.spec.Mask)
	m, err := cp.New(j.method)
	if err != nil {
		return nil, usageError("%v", err)
	}
	opts := sim.Options{Machine: o.machine, Kernel: o.kernel, ExactRanks: o.exact, SampledRanks: o.sampled, PartialDType: tensor.FP32}
	var (
		pl    *cp.Plan
		preds []sim.Prediction
	)
	if j.refuse != nil {
		err = j.refuse
	} else {
		pl, preds, err = sim.Predict(ctx, m, cfg, p, o.cp.passes, opts)
	}
	params, _ := json.Marshal(b.spec.Params)
	base := results.Row{
		RunID: o.cp.runID, Time: time.Now().UTC(), Host: hostName(), WorldSize: int64(j.n), Launcher: "none",
		Device: o.machine.Name, Backend: "sim", Bench: "simulate", Kernel: o.kernel.Name, KernelVersions: "{}", Method: j.method,
		Mask: j.mask, MaskParams: string(params), Seed: seed, Sample: int64(j.sample), SeqLen: int64(s), Batch: 1,
		HeadsQ: int64(j.heads.Q), HeadsKV: int64(j.heads.KV), HeadDim: int64(o.cp.headDim), DType: o.cp.dtype.String(),
		MaskArea: b.spec.Mask.Area(), Version: Version, Command: strings.Join(os.Args, " "),
	}
	harness.SetDocColumns(&base, b.spec.Params)
	var rows []results.Row
	if err != nil {
		if pl != nil { // a failure of the simulation itself, not a refused configuration
			return nil, fmt.Errorf("simulating %s on %d GPUs, %s: %w", j.method, j.n, j.mask, err)
		}
		for _, pass := range o.cp.passes {
			r := base
			r.Pass, r.FLOPs = pass.String(), p.FLOPs(pass)
			r.Status, r.Reason = results.StatusUnsupported, err.Error()
			r.Ulysses, r.Ring = results.Ptr(int64(cfg.Ulysses)), results.Ptr(int64(cfg.Ring))
			rows = append(rows, r)
		}
		return rows, nil
	}
	inner := "ring"
	if pl.Config.HeadFirst && pl.Config.Ulysses > 1 {
		inner = "ulysses"
	}
	for _, pr := range preds {
		r := base
		r.Ulysses, r.Ring, r.Windows = results.Ptr(int64(pl.Config.Ulysses)), results.Ptr(int64(pl.Config.Ring)), results.Ptr(int64(pl.Config.Windows))
		r.InnerDim, r.SeqLenPerRank, r.PadTokens = inner, int64(pl.Tokens), results.Ptr(int64(pl.Padding()))
		if pl.Config.Block > 0 {
			r.CPBlock, r.CPStages = results.Ptr(int64(pl.Config.Block)), results.Ptr(int64(pl.Config.Stages))
		}
		r.Pass, r.FLOPs = pr.Pass.String(), p.FLOPs(pr.Pass)
		r.CommBytes = results.Ptr(pr.CommBytes)
		r.Status = results.StatusPredicted
		d := time.Duration(pr.Seconds * 1e9)
		r.SetTimes(d, d, d, d)
		r.TFLOPs = results.Ptr(pr.TFLOPsPerRank)
		r.ModelParams = sim.ModelParams(o.machine, o.kernel, pr.Sampled, pr.Traced)
		r.ExposedCommShare = results.Ptr(pr.ExposedShare)
		r.Bottleneck = pr.Bottleneck
		if pr.CountedBytes != pr.CommBytes {
			r.Reason = fmt.Sprintf("the traced rank sent %d bytes; CommBytes says %d", pr.CountedBytes, pr.CommBytes)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// linksOf is the link emulator of comm/local for a machine.
func linksOf(m sim.Machine) local.Links {
	l := func(k sim.Link) local.Link {
		return local.Link{Bandwidth: k.BandwidthGBs * 1e9, Latency: time.Duration(k.LatencyUs * float64(time.Microsecond)), Shared: k.Shared}
	}
	return local.Links{GPUsPerNode: m.GPUsPerNode, RanksPerGPU: m.RanksPerGPU, Local: l(m.Local), Intra: l(m.Intra), Inter: l(m.Inter)}
}

func hostName() string {
	h, _ := os.Hostname()
	return h
}

// simCell is one method's best mesh for a (mask, pass, heads, GPUs): mean over samples.
type simCell struct {
	method             string
	label              string // method with its mesh (usp-8x8)
	tflops, ms, expose float64
	lo, hi             float64 // the samples' smallest and largest TFLOP/s (tflops is their median)
	rates              []float64
	bottleneck         string
	n                  int
	status             results.Status
	reason             string
}

type simKey struct {
	mask, pass, heads string
	gpus              int64
}

// bestCells averages each method-and-mesh over samples and keeps each method's best mesh.
func bestCells(rows []results.Row) (map[simKey]map[string]*simCell, []simKey, []string) {
	type mk struct {
		k     simKey
		label string
	}
	sums := map[mk]*simCell{}
	var keys []simKey
	seen := map[simKey]bool{}
	var methods []string
	for _, r := range rows {
		k := simKey{r.Mask, r.Pass, fmt.Sprintf("%d:%d", r.HeadsQ, r.HeadsKV), r.WorldSize}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
		if !slices.Contains(methods, r.Method) {
			methods = append(methods, r.Method)
		}
		label := rowMeshLabel(r)
		c := sums[mk{k, label}]
		if c == nil {
			c = &simCell{method: r.Method, label: label, status: r.Status, reason: r.Reason}
			sums[mk{k, label}] = c
		}
		if r.Status == results.StatusPredicted && r.TFLOPs != nil {
			c.status = r.Status
			c.n++
			c.rates = append(c.rates, *r.TFLOPs)
			c.ms += *r.MedianMs
			c.expose += *r.ExposedCommShare
			c.bottleneck = r.Bottleneck
		}
	}
	best := map[simKey]map[string]*simCell{}
	for k, c := range sums {
		if c.n > 0 {
			c.tflops, c.lo, c.hi = harness.Spread(c.rates)
			c.ms, c.expose = c.ms/float64(c.n), c.expose/float64(c.n)
		}
		method := c.method
		m := best[k.k]
		if m == nil {
			m = map[string]*simCell{}
			best[k.k] = m
		}
		if cur := m[method]; cur == nil || (c.n > 0 && (cur.n == 0 || c.tflops > cur.tflops)) {
			m[method] = c
		}
	}
	var maskOrder []string
	for _, r := range rows {
		if !slices.Contains(maskOrder, r.Mask) {
			maskOrder = append(maskOrder, r.Mask)
		}
	}
	sort.SliceStable(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		switch {
		case a.mask != b.mask:
			return slices.Index(maskOrder, a.mask) < slices.Index(maskOrder, b.mask)
		case a.heads != b.heads:
			return a.heads < b.heads
		case a.pass != b.pass:
			return present.PassRank(a.pass) < present.PassRank(b.pass)
		}
		return a.gpus < b.gpus
	})
	sort.Strings(methods)
	return best, keys, methods
}

// rowMeshLabel names a row's method and mesh: usp-8x8, loongtrain-8x8-w8, ring-p2p.
func rowMeshLabel(r results.Row) string {
	l := r.Method
	if r.Ulysses != nil && r.Ring != nil && *r.Ulysses > 1 && *r.Ring > 1 {
		l += fmt.Sprintf("-%dx%d", *r.Ulysses, *r.Ring)
	}
	if r.Windows != nil && *r.Windows > 1 {
		l += fmt.Sprintf("-w%d", *r.Windows)
	}
	return l
}

// printSimTable prints per-GPU TFLOP/s (each method's best mesh) per mask, pass and GPU
// count in nccl-tests style (every non-data line starts with #), the fastest marked *,
// then each best mesh's exposed-communication share and bottleneck, then the crossovers.
func printSimTable(w io.Writer, o simOptions, rows []results.Row) error {
	best, keys, methods := bestCells(rows)
	m := o.machine
	var b strings.Builder
	perGPU := ""
	if m.RanksPerGPU > 1 {
		perGPU = fmt.Sprintf(", %d ranks per GPU (local %g GB/s %g us)", m.RanksPerGPU, m.Local.BandwidthGBs, m.Local.LatencyUs)
	}
	fmt.Fprintf(&b, "# longca simulate: machine %s: %d GPUs per node%s; intra %g GB/s %g us%s; inter %g GB/s %g us%s; collectives %s\n",
		m.Name, m.GPUsPerNode, perGPU, m.Intra.BandwidthGBs, m.Intra.LatencyUs, sharedNote(m.Intra), m.Inter.BandwidthGBs, m.Inter.LatencyUs, sharedNote(m.Inter), m.Collectives)
	fmt.Fprintf(&b, "# kernel model %s: %s\n", o.kernel.Name, o.kernel.Source)
	size := fmt.Sprintf("%s tokens per GPU", dataset.FormatSize(o.cp.tokensPerRank))
	if o.cp.seqlen > 0 {
		size = fmt.Sprintf("seqlen %s", dataset.FormatSize(o.cp.seqlen))
	}
	docs := "documents: MASKS.md's rule"
	if o.cp.docs.Source != nil {
		docs = "documents: " + dataset.SourceID(o.cp.docs.Source)
	}
	if c := o.cp.docs.MaxDoc; !c.IsZero() {
		docs += ", --max-doc " + c.String()
	} else if c := dataset.DefaultCap(o.cp.docs.Source); !c.IsZero() {
		docs += ", cut at " + c.String() + " of the sequence"
	}
	fmt.Fprintf(&b, "# %s, head dim %d, %s, %s, %d mask sample(s) per document case; ranks simulated one by one up to %d GPUs, sampled above\n#\n", size, o.cp.headDim, o.cp.dtype, docs, o.samples, o.exact)
	mw := 22
	for _, k := range keys {
		mw = max(mw, len(k.mask)+1)
	}
	cw := 16
	header := func(title string) {
		fmt.Fprintf(&b, "# %s\n#%-*s %-7s %6s %6s", title, mw-1, " mask", "pass", "heads", "GPUs")
		for _, me := range methods {
			fmt.Fprintf(&b, " %*s", cw, me)
		}
		b.WriteString("\n")
	}
	spread := false
	for _, k := range keys {
		for _, c := range best[k] {
			spread = spread || c.n > 1
		}
	}
	if spread {
		cw = 24
	}
	title := "per-GPU TFLOP/s (best mesh per method; * fastest)"
	if spread {
		title = "per-GPU TFLOP/s, median over the mask samples (min-max) (best mesh per method by median; * fastest)"
	}
	header(title)
	fmt.Fprintf(&b, "#%-*s %-7s %6s %6s", mw-1, "", "", "", "")
	for range methods {
		fmt.Fprintf(&b, " %*s", cw, "(TFLOP/s)")
	}
	b.WriteString("\n")
	series := map[[3]string]map[string][]present.ScalingPoint{}
	var order [][3]string
	for _, k := range keys {
		fmt.Fprintf(&b, " %-*s %-7s %6s %6d", mw-1, k.mask, k.pass, k.heads, k.gpus)
		var top float64 // the fastest; methods within 0.05% of it are marked too
		for _, me := range methods {
			if c := best[k][me]; c != nil && c.n > 0 {
				top = max(top, c.tflops)
			}
		}
		g := [3]string{k.mask, k.pass, k.heads}
		if series[g] == nil {
			series[g] = map[string][]present.ScalingPoint{}
			order = append(order, g)
		}
		for _, me := range methods {
			c := best[k][me]
			v := "-"
			switch {
			case c == nil:
			case c.n > 0:
				v = formatRate(c.tflops)
				if c.tflops >= top*(1-5e-4) {
					v += "*"
				}
				if c.n > 1 {
					v += fmt.Sprintf(" (%s-%s)", formatRate(c.lo), formatRate(c.hi))
				}
				series[g][me] = append(series[g][me], present.ScalingPoint{GPUs: int(k.gpus), TFLOPs: c.tflops})
			default:
				v = string(c.status)
			}
			fmt.Fprintf(&b, " %*s", cw, v)
		}
		b.WriteString("\n")
	}
	b.WriteString("#\n")
	cw = 24
	header("best mesh, exposed communication share, bottleneck")
	for _, k := range keys {
		fmt.Fprintf(&b, " %-*s %-7s %6s %6d", mw-1, k.mask, k.pass, k.heads, k.gpus)
		for _, me := range methods {
			c := best[k][me]
			v := "-"
			if c != nil && c.n > 0 {
				mesh := strings.TrimPrefix(strings.TrimPrefix(c.label, me), "-")
				if mesh == "" {
					mesh = "="
				}
				v = fmt.Sprintf("%s %d%% %s", mesh, int(c.expose*100+0.5), c.bottleneck)
			} else if c != nil {
				v = string(c.status)
			}
			fmt.Fprintf(&b, " %*s", cw, v)
		}
		b.WriteString("\n")
	}
	counts := map[results.Status]int{}
	for _, r := range rows {
		counts[r.Status]++
	}
	fmt.Fprintf(&b, "# Rows: %d  predicted: %d  unsupported: %d\n", len(rows), counts[results.StatusPredicted], counts[results.StatusUnsupported])
	for _, g := range order {
		for _, x := range present.Crossovers(series[g]) {
			fmt.Fprintf(&b, "# crossover: %s %s %s: %s\n", g[0], g[1], g[2], x)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// formatRate keeps 4 significant digits of a TFLOP/s figure (CPU runs are tiny).
func formatRate(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.1f", v)
	case v >= 1:
		return fmt.Sprintf("%.2f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

func sharedNote(l sim.Link) string {
	if l.Shared {
		return " shared per node"
	}
	return " per GPU"
}

// writeScalingPlots draws one plot per mask, pass and heads: per-GPU TFLOP/s against
// GPUs, each method's best mesh.
func writeScalingPlots(dir string, rows []results.Row) ([]string, error) {
	best, keys, _ := bestCells(rows)
	series := map[[3]string]map[string][]present.ScalingPoint{}
	var order [][3]string
	for _, k := range keys {
		g := [3]string{k.mask, k.pass, k.heads}
		if series[g] == nil {
			series[g] = map[string][]present.ScalingPoint{}
			order = append(order, g)
		}
		for me, c := range best[k] {
			if c.n > 0 {
				series[g][me] = append(series[g][me], present.ScalingPoint{GPUs: int(k.gpus), TFLOPs: c.tflops})
			}
		}
	}
	var files []string
	for _, g := range order {
		name := fmt.Sprintf("%s_%s_%s_scaling.png", g[0], strings.ReplaceAll(g[1], "+", ""), strings.ReplaceAll(g[2], ":", "-"))
		path := filepath.Join(dir, name)
		if err := present.WriteScalingPlot(path, fmt.Sprintf("%s, %s, heads %s (predicted)", g[0], g[1], g[2]), series[g]); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}

// compareKey pairs a measured cp row with a predicted one.
type compareKey struct {
	label, mask, pass, heads string
	gpus, seqlen             int64
	seed                     uint64 // the mask sample: a prediction is compared on the masks measured
	docs                     string // doc_source and max_doc: never two inputs' cases
}

func compareKeyOf(r results.Row) compareKey {
	docs := r.DocSource
	if r.MaxDoc != nil {
		docs += fmt.Sprintf("/%d", *r.MaxDoc)
	}
	if docs == "" && strings.Contains(r.MaskParams, `"dist":`) { // rows written before doc_source
		var p map[string]string
		if json.Unmarshal([]byte(r.MaskParams), &p) == nil {
			docs = p["dist"]
		}
	}
	return compareKey{rowMeshLabel(r), r.Mask, r.Pass, fmt.Sprintf("%d:%d", r.HeadsQ, r.HeadsKV), r.WorldSize, r.SeqLen, r.Seed, docs}
}

// printComparison prints every case measured (longca cp rows, rank 0, averaged over
// samples) and predicted side by side, with the error of the prediction, and a summary.
func printComparison(w io.Writer, src string, measured, predicted []results.Row) error {
	type acc struct {
		ms, tf float64
		n      int
	}
	sum := func(rows []results.Row, st results.Status) (map[compareKey]*acc, []compareKey) {
		m := map[compareKey]*acc{}
		var order []compareKey
		for _, r := range rows {
			if r.Status != st || r.MedianMs == nil || r.TFLOPs == nil {
				continue
			}
			k := compareKeyOf(r)
			a := m[k]
			if a == nil {
				a = &acc{}
				m[k] = a
				order = append(order, k)
			}
			a.ms += *r.MedianMs
			a.tf += *r.TFLOPs
			a.n++
		}
		return m, order
	}
	meas, _ := sum(measured, results.StatusOK)
	pred, order := sum(predicted, results.StatusPredicted)
	var b strings.Builder
	fmt.Fprintf(&b, "#\n# measured (%s) against predicted\n", src)
	fmt.Fprintf(&b, "# %-22s %-22s %-7s %6s %7s %12s %12s %8s %12s %12s\n", "method", "mask", "pass", "heads", "GPUs", "measured_ms", "predicted_ms", "error", "meas_TF/GPU", "pred_TF/GPU")
	var errs []float64
	worst, worstCase := 0.0, ""
	for _, k := range order {
		m, ok := meas[k]
		if !ok {
			continue
		}
		p := pred[k]
		mm, pm := m.ms/float64(m.n), p.ms/float64(p.n)
		e := pm/mm - 1
		errs = append(errs, math.Abs(e))
		if math.Abs(e) > worst {
			worst, worstCase = math.Abs(e), fmt.Sprintf("%s %s %s on %d", k.label, k.mask, k.pass, k.gpus)
		}
		fmt.Fprintf(&b, "  %-22s %-22s %-7s %6s %7d %12.3f %12.3f %+7.1f%% %12s %12s\n", k.label, k.mask, k.pass, k.heads, k.gpus, mm, pm, 100*e,
			formatRate(m.tf/float64(m.n)), formatRate(p.tf/float64(p.n)))
	}
	if len(errs) == 0 {
		fmt.Fprintf(&b, "# no case of %s matches a prediction (same method, mesh, mask, pass, heads, GPUs and seqlen)\n", src)
	} else {
		slices.Sort(errs)
		fmt.Fprintf(&b, "# compared %d cases: median |error| %.1f%%, worst %.1f%% (%s)\n", len(errs), 100*errs[len(errs)/2], 100*worst, worstCase)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// maxCaseSeconds is the longest one case may be estimated to take (sim.Seconds) before
// the sweep is refused.
const maxCaseSeconds = 3600

// fitSimulation refuses, before any work, a sweep whose largest case cannot fit in the
// memory this process may take (sim.MemoryBytes for each GPU count and mask, with as
// many cases and traced ranks at once as there are cores) or would take more than an
// hour (sim.Seconds). Everything that grows with the GPU count is counted first, before
// a mask is built (a document mask of a million GPUs' tokens is itself large); then the
// documents of each mask.
func fitSimulation(o simOptions, maskFor func(string, int, uint64) *builtMask) error {
	avail := harness.ThisMachine().HostBytes * 0.85
	workers := max(runtime.GOMAXPROCS(0), 1)
	check := func(n int, what string, docs int) error {
		need := float64(workers) * sim.MemoryBytes(n, docs, workers)
		if need > avail {
			return usageError("--gpus %d: simulating %s needs about %.1f GiB of host memory; %.1f GiB available: use fewer GPUs or tokens per GPU",
				n, what, need/(1<<30), avail/(1<<30))
		}
		if t := sim.Seconds(n, docs); t > maxCaseSeconds {
			return usageError("--gpus %d: simulating %s would take about %.0f CPU hours (the limit is 1 hour per case): use fewer GPUs or tokens per GPU",
				n, what, t/3600)
		}
		return nil
	}
	for _, n := range o.gpus {
		if err := check(n, fmt.Sprintf("%d ranks", n), 1); err != nil {
			return err
		}
	}
	for _, n := range o.gpus {
		for _, mk := range o.cp.masks {
			b := maskFor(mk, o.cp.seqlenFor(n), o.cp.seed)
			if b.err != nil {
				continue // reported by the job itself
			}
			if err := check(n, fmt.Sprintf("%s (%d documents)", mk, len(b.docs)), len(b.docs)); err != nil {
				return err
			}
		}
	}
	return nil
}
