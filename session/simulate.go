package session

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/present"
	"github.com/longca/longca/results"
	"github.com/longca/longca/sim"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// Simulation is what `longca simulate` describes: the CP sweep (the same description
// `longca cp` runs, harness.CPSweep, its length per GPU count from TokensPerRank or
// SeqLen), the GPU counts, the machine and kernel model, where kernel rates come from
// (KernelRows, or Calibrate: a kernel timed here), and measured rows to compare with.
type Simulation struct {
	Sweep         harness.CPSweep
	TokensPerRank int
	SeqLen        int // 0: GPUs x TokensPerRank
	GPUs          []int
	Machine       sim.Machine
	Kernel        sim.KernelModel
	Exact         int
	Sampled       int
	// Calibrate times this kernel here on CalLens (CalIters repetitions, CalCheck),
	// made with CalKernelOptions; KernelRows reads measured rows of RowsKernel instead.
	Calibrate        string
	CalLens          []int
	CalIters         int
	CalCheck         bool
	CalKernelOptions kernels.Options
	// CalStopOnCrash ends the calibration after an external worker fails
	// (--on-worker-crash stop), as KernelSweep.StopOnCrash.
	CalStopOnCrash bool
	KernelRows     string
	RowsKernel     string
	// Compare holds measured longca cp rows (from CompareSrc) to print beside the
	// predictions.
	Compare    []results.Row
	CompareSrc string
	// Docs is where document masks' lengths come from (--dist, --counts, --max-doc).
	Docs harness.Docs
	// AfterChecks, when set, is called once every check has passed, before any work: the
	// command's own warnings (mesh flags its methods do not read, kernel flags without
	// --calibrate), so that a refused run is one line.
	AfterChecks func()
}

// header is what the table says of the run's lengths and documents.
func (o *Simulation) header() (size, docs string) {
	size = fmt.Sprintf("%s tokens per GPU", dataset.FormatSize(o.TokensPerRank))
	if o.SeqLen > 0 {
		size = fmt.Sprintf("seqlen %s", dataset.FormatSize(o.SeqLen))
	}
	docs = "documents: MASKS.md's rule"
	if o.Docs.Source != nil {
		docs = "documents: " + dataset.SourceID(o.Docs.Source)
	}
	if mc := o.Docs.MaxDoc; !mc.IsZero() {
		docs += ", --max-doc " + mc.String()
	} else if mc := dataset.DefaultCap(o.Docs.Source); !mc.IsZero() {
		docs += ", cut at " + mc.String() + " of the sequence"
	}
	return size, docs
}

// seqlenFor is the global length on n GPUs.
func (o *Simulation) seqlenFor(n int) int {
	if o.SeqLen > 0 {
		return o.SeqLen
	}
	return n * o.TokensPerRank
}

// sweep is the CP sweep on n GPUs.
func (o *Simulation) sweep(n int) harness.CPSweep {
	s := o.Sweep
	s.SeqLen = o.seqlenFor(n)
	return s
}

// calibration is a --calibrate run made ready by prepareCalibration: its kernel sweep,
// the session that writes its rows (its own run id, bench kernel) and its estimate.
type calibration struct {
	s     *Session
	sweep KernelSweep
	est   *harness.Estimate
}

// prepareCalibration checks, before anything runs, that --calibrate can run here (the
// kernel can be made and runs some calibration case: without a GPU --calibrate cuda
// gave 16 warnings and no model), then, through FitKernels as longca kernel does, that
// every case fits in memory (a case too large named by its --calibrate-seqlens length)
// and says how long the calibration will take when that is over SlowSweep. Nil without
// --calibrate.
func (s *Session) prepareCalibration(ctx context.Context, o *Simulation) (*calibration, error) {
	if o.Calibrate == "" {
		return nil, nil
	}
	sw := harness.CalibrationSweep(o.Calibrate, o.CalLens, o.Sweep.Heads[0], o.Sweep.HeadDim, o.Sweep.DType)
	cases := sw.Cases()
	fix := "calibrate on a machine where it runs, use --calibrate ref (the CPU reference), or give measured longca kernel rows with --kernel-rows FILE"
	k, err := NewKernel(o.Calibrate, o.CalKernelOptions)
	if err != nil {
		return nil, Usagef("--calibrate %s: the kernel cannot run here (%s): %s", o.Calibrate, oneLine(err), fix)
	}
	var refused error
	runs := false
	for _, cs := range cases {
		p, err := harness.PlanProblem(cs, nil)
		if err == nil {
			p.HeadDim, p.DType = cs.HeadDim, cs.DType
			err = k.Supports(p)
		}
		if err == nil {
			runs = true
			break
		}
		if refused == nil {
			refused = err
		}
	}
	if !runs {
		return nil, Usagef("--calibrate %s: the kernel runs none of the calibration cases (%s): %s", o.Calibrate, oneLine(refused), fix)
	}
	cal := *s
	cal.RunID, cal.Bench = s.RunID+"-calibration", "kernel"
	cal.World.Launcher = s.simLauncher() // (its kernel rows said launcher "")
	ks := KernelSweep{Sweep: sw, Warmup: 1, Iters: o.CalIters, Check: o.CalCheck, KernelOptions: o.CalKernelOptions, StopOnCrash: o.CalStopOnCrash, GPUState: true,
		// A case too large to fit is named by its length (--calibrate-seqlens 1G ran the
		// process out of memory before FitKernels refused it).
		Culprit: func(cs harness.Case, _ func(harness.Case) bool) string {
			return "--calibrate-seqlens " + harness.FormatSize(cs.SeqLen)
		}}
	est, err := cal.FitKernels(ctx, ks)
	if err != nil {
		return nil, err
	}
	return &calibration{s: &cal, sweep: ks, est: est}, nil
}

// oneLine is err's first line (a kernel's error may quote a compiler's output).
func oneLine(err error) string {
	if err == nil {
		return "no reason given"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(err.Error()), "\n")
	return line
}

// calibrateKernel replaces the preset kernel model by a fit to measured rows: from
// --kernel-rows, or timed here with --calibrate (cal, from prepareCalibration: the
// calibration is a kernel sweep, RunKernels, its rows written to the out folder under
// their own run id, bench kernel, each as soon as it is measured, with progress lines;
// Ctrl-C stops it keeping them).
func (s *Session) calibrateKernel(ctx context.Context, o *Simulation, cal *calibration) error {
	var rows []results.Row
	var source, kernel string
	switch {
	case o.KernelRows != "":
		var err error
		if rows, err = results.Load(o.KernelRows); err != nil {
			return Usagef("--kernel-rows: %v", err)
		}
		kernel = o.RowsKernel
		if kernel == "" {
			kernel = mostRowsKernel(rows)
		}
		if err := oneKindOfRows(rows, kernel, o.Sweep.DType.String()); err != nil {
			return Usagef("--kernel-rows %s: %v", o.KernelRows, err)
		}
		source = fmt.Sprintf("%s rows of %s", kernel, o.KernelRows)
	case cal != nil:
		res, err := cal.s.RunKernels(ctx, cal.sweep, cal.est)
		if errors.Is(err, context.Canceled) && res.File != "" {
			return &ExitError{Code: 130, Msg: fmt.Sprintf("longca simulate: calibration interrupted after %d of %d cases; their rows are in %s",
				len(res.Rows), len(cal.sweep.Sweep.Cases()), res.File)}
		}
		if err != nil {
			return err
		}
		rows = res.Rows
		for _, r := range rows {
			if r.Status != results.StatusOK {
				s.log().Warn().Str("mask", r.Mask).Int64("seqlen", r.SeqLen).Str("pass", r.Pass).Str("status", string(r.Status)).Str("reason", r.Reason).Msg("calibration case not used")
			}
		}
		kernel, source = o.Calibrate, fmt.Sprintf("%s timed here (%s)", o.Calibrate, res.File)
	default:
		return nil
	}
	samples, skipped := sim.SamplesFromRows(rows, kernel, o.Kernel.TileQ, o.Kernel.TileK)
	// The first few, each bounded (a row's names come from a file: 8 rows of 1 MB mask
	// names gave 16 MB of warnings), then how many more.
	for i, sk := range skipped {
		if i == maxSkipWarnings {
			s.log().Warn().Int("more", len(skipped)-i).Msgf("and %d more kernel rows not used for calibration", len(skipped)-i)
			break
		}
		if len(sk) > 300 {
			sk = sk[:300] + "..."
		}
		s.log().Warn().Str("row", sk).Msg("kernel row not used for calibration")
	}
	km, rep, err := sim.Fit(o.Kernel, samples, source)
	if err != nil {
		if o.KernelRows != "" {
			return Usagef("--kernel-rows %s: %v (need ok rows of bench kernel, fwd or bwd)", o.KernelRows, err)
		}
		return fmt.Errorf("--calibrate %s: %w", o.Calibrate, err)
	}
	s.log().Info().Str("model", km.Name).Str("fit", rep.String()).Msg("kernel model calibrated")
	if w := poorFitWarning(rep, o.Kernel.Name); w != "" {
		s.log().Warn().Str("fit", rep.String()).Msg(w)
	}
	km.FittedTo = kernel
	o.Kernel = km
	return nil
}

// poorFit is the rms relative error of a calibration above which simulate warns.
const poorFit = 0.25

// poorFitWarning is the warning for a fit of the prior model over poorFit, "" otherwise.
func poorFitWarning(rep sim.FitReport, prior string) string {
	worst := max(rep.RMSRel[0], rep.RMSRel[1])
	if worst <= poorFit { // (NaN warns)
		return ""
	}
	return fmt.Sprintf("the kernel rows fit the tile model of %s poorly (rms error %.0f%%): the predictions follow the rows' level, not their shape; give --kernel-model a preset of the rows' kind of kernel", prior, 100*worst)
}

// oneKindOfRows says where the ok kernel rows of kernel that a fit would take are not of one
// kind: of several variants (--variant runs merged), cards, or of another dtype than the
// simulation's. A fit over those would model none of them (it had fitted sm80 and sm90
// rows together, its error doubled, without a word).
func oneKindOfRows(rows []results.Row, kernel, dtype string) error {
	variants, devices, dtypes := map[string]bool{}, map[string]bool{}, map[string]bool{}
	// variants by case: a run's own rows name the path each case took (cuDNN's sdpa-op on
	// one mask, composite on another); two variants of one case are two runs
	perCase := map[string]map[string]bool{}
	for _, r := range rows {
		if r.Bench != "kernel" || r.Status != results.StatusOK || r.Kernel != kernel {
			continue
		}
		c := fmt.Sprintf("%s/%d/%d:%d/%d/%s/%d", r.Mask, r.SeqLen, r.HeadsQ, r.HeadsKV, r.HeadDim, r.Pass, r.Seed)
		if perCase[c] == nil {
			perCase[c] = map[string]bool{}
		}
		perCase[c][present.VariantKey(r)] = true
		if len(perCase[c]) > 1 {
			for v := range perCase[c] {
				variants[v] = true
			}
		}
		devices[present.ShortDevice(r.Device)] = true
		if r.DType != "" { // rows that name none are not held to it
			dtypes[r.DType] = true
		}
	}
	names := func(m map[string]bool) string {
		out := slices.Sorted(maps.Keys(m))
		if out[0] == "" {
			out[0] = "(none)"
		}
		return strings.Join(out, ", ")
	}
	switch {
	case len(variants) > 1:
		return fmt.Errorf("its %s rows are of %d variants on the same cases (%s): give the rows of one (longca merge DIR --run RUN), or --rows-kernel another kernel", kernel, len(variants), names(variants))
	case len(devices) > 1:
		return fmt.Errorf("its %s rows come from %d kinds of device (%s): give the rows of one", kernel, len(devices), names(devices))
	case len(dtypes) > 0 && (len(dtypes) > 1 || !dtypes[dtype]):
		return fmt.Errorf("its %s rows are %s, the simulation's --dtype %s: give rows of %s, or that --dtype", kernel, names(dtypes), dtype, dtype)
	}
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

// maskCache builds each mask sample once, for every method: maskFor(name, seqlen, seed).
func maskCache(o *Simulation) func(string, int, uint64) *builtMask {
	var mu sync.Mutex
	masks := map[string]*builtMask{}
	return func(name string, s int, seed uint64) *builtMask {
		key := fmt.Sprintf("%s/%d/%d", name, s, seed)
		mu.Lock()
		defer mu.Unlock()
		if b, ok := masks[key]; ok {
			return b
		}
		spec, docs, err := o.sweep(0).MaskSpec(name, s, seed)
		b := &builtMask{spec: spec, docs: docs, err: err}
		masks[key] = b
		return b
	}
}

// predicted is what predictAll finished: the rows, in a fixed order, of done of the
// sweep's jobs cases; interrupted when ctx was cancelled (Ctrl-C, SIGTERM) before every
// case was predicted. planned is the rows of every case: those predicted, and a row a
// pass of each case not predicted (as a predicted or refused case has), which the rank
// file records (results.MetaPlannedRows).
type predicted struct {
	rows        []results.Row
	done, jobs  int
	planned     int
	interrupted bool
}

// predictAll runs every prediction (in parallel, one per core) and returns the rows in
// a fixed order; fitSimulation has accepted o with the same maskFor. Once ctx is
// cancelled no case is started: the cases already predicted are returned (a case cut
// short, or one that failed meanwhile, is left out), interrupted set.
func (s *Session) predictAll(ctx context.Context, o *Simulation, maskFor func(string, int, uint64) *builtMask) (predicted, error) {
	// The jobs are longca cp's cases (harness.CPSweep.Configs: methods x meshes x masks x
	// heads, a method without a mesh of its own on n GPUs unsupported) x samples.
	// Each job's estimate (caseSeconds, the first sample's mask as the case lays it, built
	// already) and GPU count are for the progress lines.
	var (
		jobs  []simJob
		cost  []float64
		group []int
	)
	for gi, n := range o.GPUs {
		cases, err := o.sweep(n).Configs(n)
		if err != nil {
			return predicted{}, Usagef("%v", err)
		}
		for _, c := range cases {
			est := o.caseSeconds(n, c, maskFor)
			for smp := range o.samplesOf(n, c, maskFor) {
				jobs = append(jobs, simJob{n, c.Method, c.Config, c.Mask, c.Heads, smp, c.Skip})
				cost, group = append(cost, est), append(group, gi)
			}
		}
	}
	out := make([][]results.Row, len(jobs))
	errs := make([]error, len(jobs))
	finished := make([]bool, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	workers := max(runtime.GOMAXPROCS(0), 1)
	launcher := s.simLauncher() // (read once: it reads the environment and the host name)
	progress := newSimProgress(s.log(), jobs, cost, group, o.GPUs, workers)
	progress.begin(s.RunID)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				out[i], errs[i] = s.predictJob(ctx, o, jobs[i], maskFor, launcher)
				finished[i] = true
				progress.finished(i)
			}
		}()
	}
dispatch:
	for i := range jobs {
		select {
		case next <- i:
		case <-ctx.Done():
			break dispatch
		}
	}
	close(next)
	wg.Wait()
	res := predicted{jobs: len(jobs), interrupted: ctx.Err() != nil}
	for i := range jobs {
		switch {
		case res.interrupted && (!finished[i] || errs[i] != nil):
			res.planned += len(o.Sweep.Passes)
			continue // not started, or cut short: not written
		case errs[i] != nil:
			return predicted{}, errs[i]
		}
		res.rows = append(res.rows, out[i]...)
		res.planned += len(out[i])
		res.done++
	}
	res.interrupted = res.interrupted && res.done < len(jobs)
	setSimSpread(res.rows)
	return res, nil
}

// caseSeconds is case c's estimate on n GPUs for the progress lines and the sweep's bound
// (laidSeconds: the first sample's mask as the case lays it; 0 for a skipped case).
func (o *Simulation) caseSeconds(n int, c harness.CPCase, maskFor func(string, int, uint64) *builtMask) float64 {
	b := maskFor(c.Mask, o.seqlenFor(n), o.Sweep.Seed)
	if c.Skip != nil || b.err != nil {
		return 0
	}
	lays := o.docLayouts(n, []harness.CPCase{c}, c.Mask, b.laying(n))
	if len(lays) == 0 {
		return 0
	}
	return o.layoutSeconds(n, lays[0], float64(len(b.spec.Mask.Slices)))
}

// layoutSeconds is laidSeconds of case layout l on n GPUs, a mask of slices slices, with
// what balanced's dispatch adds (blockWork).
func (o *Simulation) layoutSeconds(n int, l caseLayout, slices float64) float64 {
	t := o.laidSeconds(n, l.own, l.walks, slices, o.seqlenFor(n))
	if l.method == "balanced" { // (its sub-masks)
		_, b := o.blockWork(n)
		t += b
	}
	return t
}

// samplesOf is how many jobs case c is on n GPUs: one where it is skipped (one row per
// pass says why) or where the seed does not change its mask (every sample is the same
// mask: no documents, random prefix or window), else --samples.
func (o *Simulation) samplesOf(n int, c harness.CPCase, maskFor func(string, int, uint64) *builtMask) int {
	if c.Skip != nil || o.Sweep.Samples <= 1 {
		return min(o.Sweep.Samples, 1)
	}
	a, b := maskFor(c.Mask, o.seqlenFor(n), o.Sweep.Seed), maskFor(c.Mask, o.seqlenFor(n), o.Sweep.Seed+1)
	if a.err != nil || b.err != nil || !slices.Equal(a.spec.Mask.Slices, b.spec.Mask.Slices) {
		return o.Sweep.Samples
	}
	return 1
}

// setSimSpread fills each row's sample-spread columns (harness.SetSpread): the samples of
// its case (method, mask, heads, GPUs, pass, and its series: a mesh given, or the mesh its
// plan chose per sample, present.SimSeries, as the table reads them) up to its own, in
// sample order. Keyed by the mesh each sample took, balanced's --cp-ulysses 0 rows had
// samples_n 1, 2, 3, 4 on the samples of its 1x8 and null on the one of 2x4.
func setSimSpread(rows []results.Row) {
	type key struct {
		gpus                      int64
		series, mask, heads, pass string
	}
	series := present.SimSeries(rows)
	cases := map[key][]int{} // each case's rows
	var order []key
	for i, r := range rows {
		k := key{r.WorldSize, series[i], r.Mask, fmt.Sprintf("%d:%d", r.HeadsQ, r.HeadsKV), r.Pass}
		if cases[k] == nil {
			order = append(order, k)
		}
		cases[k] = append(cases[k], i)
	}
	for _, k := range order {
		idx := cases[k]
		// in sample order (a series of rows of two jobs, --cp-ulysses 0,2, may come in two runs)
		slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(rows[a].Sample, rows[b].Sample) })
		// A running spread a case (O(log n) a row): sorting each row's samples so far made
		// --samples 100000 spend about 9.5 minutes here, after the last case, saying nothing.
		var r harness.RunningSpread
		for _, i := range idx {
			if rows[i].TFLOPs != nil {
				r.Add(*rows[i].TFLOPs)
			}
			harness.SetRunningSpread(&rows[i], &r, len(idx))
		}
	}
}

// builtMask is one sample of a mask at one length, built once for every method, with its
// layouts as the estimates count them (laidOn), each counted once.
type builtMask struct {
	spec mask.Spec
	docs []mask.Range
	err  error

	mu    sync.Mutex
	laids map[layoutKey]sim.Laid
}

// layoutKey names one layout of a mask: its world, its ring and whether it is zigzag.
type layoutKey struct {
	n, ring int
	zigzag  bool
}

// laidOn is b's layout on a ring of ring ranks of a world of n, zigzag or contiguous
// (sim.ZigzagLaid, sim.ContiguousLaid), counted once.
func (b *builtMask) laidOn(n, ring int, zigzag bool) sim.Laid {
	key := layoutKey{n, ring, zigzag}
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.laids[key]; ok {
		return l
	}
	var l sim.Laid
	if zigzag {
		l = sim.ZigzagLaid(n, ring, b.docs, b.spec.Mask)
	} else {
		l = sim.ContiguousLaid(ring, b.docs, b.spec.Mask)
	}
	if b.laids == nil {
		b.laids = map[layoutKey]sim.Laid{}
	}
	b.laids[key] = l
	return l
}

// laying is how b's documents are laid out on a world of n (docLayouts).
func (b *builtMask) laying(n int) maskLaying {
	return maskLaying{
		docs:       len(b.docs),
		slices:     float64(len(b.spec.Mask.Slices)),
		contiguous: func(ring int) sim.Laid { return b.laidOn(n, ring, false) },
		zigzag:     func(ring int) sim.Laid { return b.laidOn(n, ring, true) },
	}
}

// predictJob predicts one job's passes; a configuration the method refuses (heads that
// do not split, a mesh that does not fit) is an unsupported row with the method's reason
// (setRefusedColumns). launcher is the rows' (simLauncher).
func (s *Session) predictJob(ctx context.Context, o *Simulation, j simJob, maskFor func(string, int, uint64) *builtMask, launcher string) ([]results.Row, error) {
	seqlen := o.seqlenFor(j.n)
	seed := o.Sweep.Seed + uint64(j.sample)
	b := maskFor(j.mask, seqlen, seed)
	if b.err != nil {
		return nil, Usagef("--masks %s at seqlen %d: %v", j.mask, seqlen, b.err)
	}
	cfg := j.cfg
	cfg.Docs = b.docs
	p := o.sweep(j.n).Problem(j.heads, b.spec.Mask)
	m, err := cp.New(j.method)
	if err != nil {
		return nil, Usagef("%v", err)
	}
	opts := sim.Options{Machine: o.Machine, Kernel: o.Kernel, ExactRanks: o.Exact, SampledRanks: o.Sampled, PartialDType: tensor.FP32}
	var (
		pl    *cp.Plan
		preds []sim.Prediction
	)
	if j.refuse != nil {
		err = j.refuse
	} else {
		pl, preds, err = sim.Predict(ctx, m, cfg, p, o.Sweep.Passes, opts)
	}
	params, err2 := json.Marshal(b.spec.Params)
	if err2 != nil {
		return nil, fmt.Errorf("mask %s parameters: %w", j.mask, err2)
	}
	base := s.BaseRow(spmd.World{Size: j.n, Launcher: launcher})
	base.Time, base.Device, base.Backend, base.Kernel, base.KernelVersions, base.Method = time.Now().UTC(), o.Machine.Name, "sim", o.Kernel.Name, "{}", j.method
	base.Mask, base.MaskParams, base.Seed, base.Sample, base.SeqLen, base.Batch = j.mask, string(params), seed, int64(j.sample), int64(seqlen), 1
	base.HeadsQ, base.HeadsKV, base.HeadDim, base.DType = int64(j.heads.Q), int64(j.heads.KV), int64(o.Sweep.HeadDim), o.Sweep.DType.String()
	base.MaskArea = b.spec.Mask.Area()
	harness.SetDocColumns(&base, b.spec.Params)
	var rows []results.Row
	if err != nil {
		if pl != nil { // a failure of the simulation itself, not a refused configuration
			return nil, fmt.Errorf("simulating %s on %d GPUs, %s: %w", j.method, j.n, j.mask, err)
		}
		for _, pass := range o.Sweep.Passes {
			r := base
			r.Pass, r.FLOPs = pass.String(), p.FLOPs(pass)
			r.Status, r.Reason = results.StatusUnsupported, err.Error()
			setRefusedColumns(&r, cfg, seqlen, j.n)
			rows = append(rows, r)
		}
		return rows, nil
	}
	for _, pr := range preds {
		r := base
		harness.SetPlanColumns(&r, pl)
		r.Pass, r.FLOPs = pr.Pass.String(), p.FLOPs(pr.Pass)
		r.CommBytes = results.Ptr(pr.CommBytes)
		r.Status = results.StatusPredicted
		d := time.Duration(pr.Seconds * 1e9)
		r.SetTimes(d, d, d, d)
		r.TFLOPs = results.Ptr(pr.TFLOPsPerRank)
		r.ModelParams = sim.ModelParams(o.Machine, o.Kernel, pr.Sampled, pr.Traced)
		r.ExposedCommShare = results.Ptr(pr.ExposedShare)
		r.Bottleneck = pr.Bottleneck
		if pr.CountedBytes != pr.CommBytes {
			r.Reason = fmt.Sprintf("the traced rank sent %d bytes; CommBytes says %d", pr.CountedBytes, pr.CommBytes)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// setRefusedColumns fills the columns of an unsupported row, a case whose plan the method
// refused, as longca cp's rows of such a case have them (harness.CPRunner's row), so that
// predicted and measured rows group alike: the mesh the case names (its U x R, windows 1
// unless given), null where the method refused before it resolved one (ulysses' and the
// ring methods' own meshes, a 2-D method on a rank count without one, balanced's chosen
// U); the dimension inside a node; the sharding as given (default unless --sharding named
// one); and the tokens each rank holds, S / GPUs, which need no plan. They were 0 (mesh
// and seqlen_per_rank) and "" (cp_sharding): values docs/results-format.md rules out,
// which put the rows in a 0 bucket of seqlen_per_rank and of the mesh.
func setRefusedColumns(r *results.Row, cfg cp.Config, seqlen, n int) {
	harness.SetMeshColumns(r, cfg)
	r.SeqLenPerRank = int64(seqlen / max(n, 1))
}

// simLauncher is the launcher column of simulate's rows: what started the simulate process
// itself, from its environment as longca kernel and run read it (single with none, slurm
// under srun; it runs as one process, however many GPUs it predicts), where the session
// was not given it. The rows said "none", a value docs/results-format.md does not have.
func (s *Session) simLauncher() string {
	if s.World.Launcher != "" {
		return s.World.Launcher
	}
	if w, err := spmd.Discover(os.Getenv); err == nil {
		return w.Launcher
	}
	return "single" // (a malformed launcher environment: the command refused it before)
}

// maxSkipWarnings is how many kernel rows not used for calibration are named, each in a
// warning line of its own, before the rest are counted.
const maxSkipWarnings = 8

// maxCaseSeconds is the longest one case may be estimated to take (laidSeconds) before
// the sweep is refused.
const maxCaseSeconds = 3600

// fitSimulation refuses, before any work, a sweep whose largest case cannot fit in the
// memory this process may take (sim.MemoryBytes for each GPU count and mask, with as
// many cases at once as there are cores; each case's traced ranks, sim.TracedSteps:
// every rank where --exact-ranks covers the GPU count, else --sampled-ranks or the
// default sample) or would take more than an hour (laidSeconds, which counts the GPUs,
// the traced steps, the tokens and the documents as each case lays them). Everything that grows with the GPU
// count or the length is counted first, before a mask is built (a document mask of a
// million GPUs' tokens is itself large); then, still before a mask of documents is
// built, the documents each is expected to hold (expectedDocs), as each case lays them,
// with the masks the sweep keeps (heldMasks); then the documents of each mask built; then
// the whole sweep (fitSweep: its time on the workers and the rows and masks it keeps).
func fitSimulation(o *Simulation, maskFor func(string, int, uint64) *builtMask) error {
	return fitSimulationIn(o, maskFor, Machine().HostBytes*0.85, max(runtime.GOMAXPROCS(0), 1))
}

// blockWork is what balanced's dispatch adds to a case of n ranks at the sweep's block
// (BalancedBlockWork). 64 GPUs of 1M tokens at the default block took 7.7 GB under a
// logged at_most of 3 s (the twelfth pass).
func (o *Simulation) blockWork(n int) (bytes, seconds float64) {
	return BalancedBlockWork(o.sweep(n), n, o.Sweep.Mesh.Block, o.Exact, o.Sampled)
}

// BalancedBlockWork is what balanced's dispatch adds to a case of sw on n ranks (its
// SeqLen tokens; sim.BlockWork: its sub-masks grow as the square of the blocks) at block
// tokens a block (0: cp.DefaultBlock for the mesh), the worst over the meshes its plan may
// take: sw's --cp-ulysses, else every U up to 8 ranks, BalancedUlysses past; 0 where sw
// runs no balanced. exact and sampled are the traced ranks (--exact-ranks, --sampled-ranks).
func BalancedBlockWork(sw harness.CPSweep, n, block, exact, sampled int) (bytes, seconds float64) {
	if !slices.Contains(sw.Methods, "balanced") {
		return 0, 0
	}
	seqlen := sw.SeqLen
	for _, h := range sw.Heads {
		us := sw.Mesh.Splits
		if len(us) == 0 || slices.Contains(us, 0) {
			us = []int{cp.BalancedUlysses(n, kernels.Problem{HeadsQ: h.Q, HeadsKV: h.KV})}
			if n <= 8 {
				us = []int{1, 2, 4, 8}
			}
		}
		for _, u := range us {
			if u < 1 || n%u != 0 {
				continue
			}
			b := block
			if b <= 0 {
				b = cp.DefaultBlock(seqlen, n/u, u)
			}
			x, t := sim.BlockWork(n, seqlen, b, u, exact, sampled)
			bytes, seconds = max(bytes, x), max(seconds, t)
		}
	}
	return bytes, seconds
}

// fitSimulationIn is fitSimulation against avail bytes and workers cases at once.
func fitSimulationIn(o *Simulation, maskFor func(string, int, uint64) *builtMask, avail float64, workers int) error {
	exact := o.Exact
	if exact <= 0 {
		exact = sim.DefaultExactRanks
	}
	weight := sim.PassWeight(o.Sweep.Passes)
	// check refuses one GPU count and mask: lays are its cases' layouts of the documents
	// (nil: the worst, zigzag on every rank), the largest counted, held the sweep's masks
	// that the cache keeps beside the cases; slices are the mask's (each traced step walks
	// them).
	check := func(n int, what string, docs, seqlen int, blocks bool, lays []caseLayout, held masksHeld, slices float64) error {
		parallel := workers // ranks whose sub-masks are alive at once
		if n <= exact {
			parallel = n // every rank traced: the sub-masks are kept for all
		}
		steps := sim.TracedSteps(n, exact, o.Sampled)
		if lays == nil {
			lays = []caseLayout{{own: sim.ZigzagLaidExpected(n, n, float64(docs), seqlen), walks: n}}
		}
		// the case that needs the most, and what the others need
		memOf := func(l caseLayout, steps float64) float64 {
			return sim.MemoryBytesIn(n, l.memLayout(parallel), steps, weight, parallel) + sim.SequenceBytes(seqlen)
		}
		worst, base := 0, 0.0
		for i, l := range lays {
			if m := memOf(l, steps); m > base {
				worst, base = i, m
			}
		}
		var blockBytes, blockSeconds float64
		if blocks { // (after the masks' own refusals)
			blockBytes, blockSeconds = o.blockWork(n)
		}
		need := float64(workers)*(base+blockBytes) + held.bytes
		if need > avail {
			// A fix is named only where it lowers the figure below avail.
			fits := func(b float64) bool { return float64(workers)*(b+blockBytes)+held.bytes <= avail }
			fix := "use fewer GPUs or tokens per GPU"
			w := lays[worst]
			others := 0.0 // the most any case of another method needs
			for _, l := range lays {
				if l.method != w.method {
					others = max(others, memOf(l, steps))
				}
			}
			switch {
			case blockBytes > base:
				fix = "give a larger --cp-block, fewer GPUs or tokens per GPU, or leave balanced out (--methods): its sub-masks grow as the square of the sequence's blocks"
			case n <= exact && n > sim.DefaultExactRanks && fits(sim.MemoryBytesIn(n, w.memLayout(workers), sim.TracedSteps(n, sim.DefaultExactRanks, o.Sampled), weight, workers)+sim.SequenceBytes(seqlen)):
				fix = fmt.Sprintf("use a smaller --exact-ranks (%d traces every rank of %d), fewer GPUs or tokens per GPU", exact, n)
			case w.zigzag && fits(memOf(caseLayout{own: sim.Laid{Lay: w.contiguous}}, steps)):
				fix = fmt.Sprintf("give --sharding contiguous (%s's zigzag layout cuts each of the %d documents over every rank of its ring), fewer GPUs or tokens per GPU", w.method, docs)
			case len(lays) > 1 && others > 0 && fits(others):
				fix = fmt.Sprintf("leave %s out (--methods), use fewer GPUs or tokens per GPU", w.method)
			case n > exact && o.Sampled > 1 && fits(memOf(w, sim.TracedSteps(n, exact, 1))):
				fix = fmt.Sprintf("use a smaller --sampled-ranks (%d), fewer GPUs or tokens per GPU", o.Sampled)
			}
			return Usagef("--gpus %d: simulating %s needs about %.1f GiB of host memory; %.1f GiB available: %s",
				n, what, need/(1<<30), avail/(1<<30), fix)
		}
		fix := "use fewer GPUs or tokens per GPU"
		switch {
		case n <= exact && n > sim.DefaultExactRanks:
			fix = fmt.Sprintf("use a smaller --exact-ranks (%d traces every rank of %d), fewer GPUs or tokens per GPU", exact, n)
		case n > exact && o.Sampled > 0:
			fix = fmt.Sprintf("use a smaller --sampled-ranks (%d), fewer GPUs or tokens per GPU", o.Sampled)
		}
		passes := len(o.Sweep.Passes)
		t := 0.0 // the case that takes the longest
		for _, l := range lays {
			lt := o.laidSeconds(n, l.own, l.walks, slices, seqlen)
			if l.method == "balanced" {
				lt += blockSeconds
			}
			t = max(t, lt)
		}
		if t > maxCaseSeconds {
			if sim.SequenceSeconds(seqlen, passes) > maxCaseSeconds/2 {
				// The sequence's length, not the GPU count, makes it long: name its flag.
				flag, fix := "--tokens-per-rank "+harness.FormatSize(o.TokensPerRank), "give fewer --tokens-per-rank"
				if o.SeqLen > 0 {
					flag, fix = "--seqlen "+harness.FormatSize(o.SeqLen), "give a shorter --seqlen"
				}
				return Usagef("%s: simulating %s would take about %.0f CPU hours a case (the limit is 1 hour per case; the time grows with the tokens): %s",
					flag, what, t/3600, fix)
			}
			return Usagef("--gpus %d: simulating %s would take about %.0f CPU hours (the limit is 1 hour per case): %s",
				n, what, t/3600, fix)
		}
		return nil
	}
	for _, n := range o.GPUs {
		if err := check(n, fmt.Sprintf("%d ranks of %s tokens", n, harness.FormatSize(o.seqlenFor(n))), 1, o.seqlenFor(n), false, nil, masksHeld{}, 1); err != nil {
			return err
		}
	}
	// The masks' own refusals first, as they name their flags: those that come before a
	// mask is drawn (a sequence over mask.MaxSeqLen, documents too short for one sequence to
	// hold, dataset.CheckDocs) are had from the builder at no cost.
	for _, n := range o.GPUs {
		for _, mk := range o.Sweep.Masks {
			if o.refusedUpFront(mk, o.seqlenFor(n)) {
				if err := maskInputErr(mk, o.seqlenFor(n), maskFor(mk, o.seqlenFor(n), o.Sweep.Seed)); err != nil {
					return err
				}
			}
		}
	}
	// Then, before any mask is built (a mask of millions of documents is gigabytes, and
	// took 20 s to build before a refusal at 536 GiB), each mask of documents at the count
	// it is expected to hold (harness.MaskDocs), laid out as each case lays it, with the
	// masks the sweep keeps.
	// checkDocs checks every GPU count's masks of documents: layingOf gives a mask's
	// documents on n GPUs at a length, how many and how a ring lays them (false: none to
	// count here), label names the case (its mask, then the count).
	checkDocs := func(label string, held masksHeld, layingOf func(n int, mk string, seqlen int) (maskLaying, bool)) error {
		for _, n := range o.GPUs {
			cases, err := o.sweep(n).Configs(n)
			if err != nil {
				return Usagef("%v", err)
			}
			seqlen := o.seqlenFor(n)
			for _, mk := range o.Sweep.Masks {
				m, ok := layingOf(n, mk, seqlen)
				if !ok {
					continue
				}
				if err := check(n, fmt.Sprintf(label, mk, m.docs), m.docs, seqlen, true, o.docLayouts(n, cases, mk, m), held, m.slices); err != nil {
					return err
				}
			}
		}
		return nil
	}
	expected := o.heldMasks(func(n int, mk string) float64 { return o.expectedDocs(mk, o.seqlenFor(n)) })
	if err := checkDocs("%s (about %d documents)", expected, func(n int, mk string, seqlen int) (maskLaying, bool) {
		d := o.expectedDocs(mk, seqlen)
		return maskLaying{
			docs:       int(math.Ceil(d)),
			slices:     d,
			contiguous: func(ring int) sim.Laid { return sim.ContiguousLaidExpected(ring, d, seqlen) },
			zigzag:     func(ring int) sim.Laid { return sim.ZigzagLaidExpected(n, ring, d, seqlen) },
		}, d > 0 // (none: a few slices, built below)
	}); err != nil {
		return err
	}
	for _, n := range o.GPUs { // the masks' other refusals: they name their flags
		for _, mk := range o.Sweep.Masks {
			if err := maskInputErr(mk, o.seqlenFor(n), maskFor(mk, o.seqlenFor(n), o.Sweep.Seed)); err != nil {
				return err
			}
		}
	}
	// Each mask again, built: its own documents.
	held := o.heldMasks(func(n int, mk string) float64 {
		return float64(len(maskFor(mk, o.seqlenFor(n), o.Sweep.Seed).docs))
	})
	if err := checkDocs("%s (%d documents)", held, func(n int, mk string, seqlen int) (maskLaying, bool) {
		b := maskFor(mk, seqlen, o.Sweep.Seed)
		return b.laying(n), b.err == nil // (an error: the job reports it)
	}); err != nil {
		return err
	}
	return fitSweep(o, maskFor, avail, workers)
}

// maskInputErr is the usage error of a mask refused for its input (mask.InputError: it
// names its flag), nil for any other.
func maskInputErr(mk string, seqlen int, b *builtMask) error {
	if ie := (*mask.InputError)(nil); errors.As(b.err, &ie) { // bad input: before the sweep starts
		return Usagef("--masks %s at seqlen %d: %v", mk, seqlen, b.err)
	}
	return nil
}

// docs is where the simulation's masks take their documents (--dist, --counts,
// --max-doc).
func (o *Simulation) docs() harness.Docs {
	if o.Docs.IsDefault() {
		return o.Sweep.Docs
	}
	return o.Docs
}

// docSource is the source and the cap (in tokens, 0: none) that a mask of documents at
// seqlen tokens draws from, as mask.Build resolves them for a CP mask.
func (o *Simulation) docSource(seqlen int) (dataset.Source, int) {
	d := o.docs()
	src := d.Source
	if src == nil {
		b, err := dataset.Builtin(dataset.ForCP(seqlen))
		if err != nil {
			return nil, 0
		}
		src = b
	}
	c := d.MaxDoc
	if c.IsZero() {
		c = dataset.DefaultCap(src)
	}
	return src, c.Resolve(seqlen)
}

// refusedUpFront says whether mask.Build refuses mask mk at seqlen before it draws a
// document: a sequence over mask.MaxSeqLen, or documents too short for one sequence to
// hold (dataset.CheckDocs). Asking the builder for such a mask costs nothing.
func (o *Simulation) refusedUpFront(mk string, seqlen int) bool {
	if seqlen > mask.MaxSeqLen {
		return true
	}
	if !mask.DrawsDocuments(mk) {
		return false
	}
	src, c := o.docSource(seqlen)
	return src != nil && dataset.CheckDocs(src, seqlen, c) != nil
}

// expectedDocs is how many documents mask mk is expected to hold at seqlen tokens, before
// it is built: the sequence over the source's mean piece (harness.MaskDocs' Piece, its
// cap counted); a *_long mask draws only its long fraction from the source, the rest
// documents of mask.DefaultLongMin tokens or more, cut at the cap. 0 for a mask that
// draws none (a few slices). Without harness.MaskDocs' margin: the checks before the
// build refuse what the mask is expected to make too large, and the build itself takes
// less a document than any case's estimate, so a mask that draws more than expected is
// still built and refused by its own count.
func (o *Simulation) expectedDocs(mk string, seqlen int) float64 {
	if !mask.DrawsDocuments(mk) {
		return 0
	}
	S := float64(max(seqlen, 1))
	drawn := S / max(harness.CPSweep{Docs: o.docs()}.MaskDocs(mk, seqlen).Piece, 1)
	if !mask.ReadsOf(mk).Has(mask.ReadsLong) {
		return min(S, math.Ceil(drawn))
	}
	long := (1 - mask.DefaultLongFraction) * S
	piece := float64(mask.DefaultLongMin)
	if _, c := o.docSource(seqlen); c > 0 {
		piece = min(piece, float64(c))
	}
	// the drawn share, and the long documents' pieces (each long document's last piece
	// may be short)
	return min(S, math.Ceil(mask.DefaultLongFraction*drawn+long/piece+long/mask.DefaultLongMin+1))
}

// What a built mask of documents holds per document (maskCache keeps it to the end of the
// sweep) and what building one takes at its peak, the mask included: measured on 1-token
// and 1- to 64-token documents (causal_document, full_document, causal_document_long, 129K
// to 1M documents), 60-67 bytes a document live and 193-273 at the peak, the build's
// garbage not yet collected included (TestMaskBytesBoundBuiltMasks, heaptest.Peak; a
// sampler that missed the garbage left at the build's end read 106-189). Rounded up.
const (
	maskLiveBytes  = 96
	maskBuildBytes = 384
)

// masksHeld is what the cache holds of the sweep's masks while its checks run and its first
// cases are predicted: the first sample's mask of every mask and GPU count, and the
// second's where there are several (samplesOf compares them), with one more being built.
// fitSweep counts the other samples' masks.
type masksHeld struct{ bytes float64 }

// heldMasks is what the cache holds of the sweep's masks (masksHeld), docs(n, mk) being
// the documents of mask mk on n GPUs.
func (o *Simulation) heldMasks(docs func(n int, mk string) float64) masksHeld {
	kept := float64(min(max(o.Sweep.Samples, 1), 2))
	live, most := 0.0, 0.0
	for _, n := range o.GPUs {
		for _, mk := range o.Sweep.Masks {
			d := docs(n, mk)
			live += kept * maskLiveBytes * d
			most = max(most, d)
		}
	}
	return masksHeld{bytes: live + maskBuildBytes*most}
}

// caseLayout is how one case of the sweep lays a mask's documents over its ring (the
// memory and time its prediction takes grow with it): its method, its layout, the
// sub-masks a traced rank makes, and the contiguous layout of the same ring, for the
// hint, when its own is zigzag.
type caseLayout struct {
	method     string
	zigzag     bool
	own        sim.Laid
	walks      int // the sub-masks one of its traced ranks makes (laidSeconds)
	contiguous sim.DocLayout
}

// memLayout is l's memory with parallel ranks' sub-masks alive at once (sim.Laid.MemLayout).
func (l caseLayout) memLayout(parallel int) sim.DocLayout {
	return l.own.MemLayout(parallel, l.method == "ring-allgather")
}

// maskLaying is what docLayouts lays out of one mask: its documents, its slices (each
// traced step's sub-mask walks them) and its layouts on a ring, contiguous and zigzag
// (from the built mask, builtMask.laying, or from the documents it is expected to hold).
type maskLaying struct {
	docs       int
	slices     float64
	contiguous func(ring int) sim.Laid
	zigzag     func(ring int) sim.Laid
}

// docLayouts are the layouts of mask mk (m) by the cases of cases (the sweep's on n GPUs;
// those unsupported left out: they predict nothing), as each method's plan lays them
// (spmd/cp newPlan): the ring is every rank for ring-p2p and ring-allgather, one for
// ulysses, the mesh's R for usp and loongtrain; the sharding the case's, else zigzag,
// contiguous for ulysses and on a ring of one. balanced's dispatch lays blocks, not
// documents (sim.BalancedDocs; BlockWork counts its blocks); it was counted as zigzag on
// every rank, gigabytes where 55-68 MB were measured.
func (o *Simulation) docLayouts(n int, cases []harness.CPCase, mk string, m maskLaying) []caseLayout {
	seqlen := o.seqlenFor(n)
	var out []caseLayout
	for _, c := range cases {
		if c.Mask != mk || c.Skip != nil {
			continue
		}
		ring := n
		switch {
		case c.Method == "ulysses":
			ring = 1
		case c.Method == "balanced":
			meshes := 1 // (the plan's choice dispatches every split of up to 8 ranks)
			if c.Config.Ulysses <= 0 && n <= 8 {
				meshes = 4
			}
			out = append(out, caseLayout{method: c.Method, own: sim.BalancedLaid(m.docs, meshes), walks: 1})
			continue
		case c.Config.Ring > 0 && n%c.Config.Ring == 0:
			ring = c.Config.Ring
		case c.Config.Ulysses > 0 && n%c.Config.Ulysses == 0:
			ring = n / c.Config.Ulysses
		}
		l := caseLayout{method: c.Method, walks: ring, contiguous: m.contiguous(ring).Lay}
		if c.Method == "ring-allgather" {
			l.walks = 1 // (one sub-mask, against every rank's keys)
		}
		switch c.Config.Sharding {
		case cp.Contiguous:
		case cp.Zigzag:
			l.zigzag = true
		default:
			l.zigzag = !(c.Method == "ulysses" || (ring == 1 && seqlen%n == 0))
		}
		if l.zigzag {
			l.own = m.zigzag(ring)
		} else {
			l.own = m.contiguous(ring)
		}
		out = append(out, l)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// maxSweepSeconds is the longest the whole sweep may be estimated to take on this host's
// workers (the least at_most can be) before it is refused.
const maxSweepSeconds = 24 * 3600

// simJobBytes is what each job (one case's sample) keeps until the rows are written: its
// rows and its sample's mask. simulate --gpus 8 --methods ulysses --masks
// causal_document_long --passes fwd --samples 100000 grew by about 20 KB a job.
const simJobBytes = 20 << 10

// fitSweep refuses a sweep whose jobs (predictAll's, counted without laying them out)
// would take more than maxSweepSeconds on workers workers or keep more than avail bytes:
// --gpus 8,64,512 --samples 100000 was 8.4M jobs, at_most 2982 hours, and grew by 7 GB in
// 100 s. A sample's mask of many documents is counted at its documents (maskLiveBytes
// each, the first sample's count), beyond the simJobBytes a job has for it.
func fitSweep(o *Simulation, maskFor func(string, int, uint64) *builtMask, avail float64, workers int) error {
	jobs, total, longest, masks := 0, 0.0, 0.0, 0.0
	for _, n := range o.GPUs {
		cases, err := o.sweep(n).Configs(n)
		if err != nil {
			return Usagef("%v", err)
		}
		samples := map[string]int{} // the samples predicted of each mask
		for _, c := range cases {
			k := o.samplesOf(n, c, maskFor)
			if k <= 0 {
				continue
			}
			if c.Skip == nil {
				samples[c.Mask] = max(samples[c.Mask], k)
			}
			est := o.caseSeconds(n, c, maskFor)
			jobs += k
			total += float64(k) * est
			longest = max(longest, est)
		}
		for _, mk := range o.Sweep.Masks {
			docs := float64(len(maskFor(mk, o.seqlenFor(n), o.Sweep.Seed).docs))
			masks += float64(samples[mk]) * max(maskLiveBytes*docs-simJobBytes, 0)
		}
	}
	seconds := max(total/float64(max(workers, 1)), longest) // at_most is at least this
	bytes := float64(jobs)*simJobBytes + masks
	if seconds <= maxSweepSeconds && bytes <= avail {
		return nil
	}
	gpus := make([]string, len(o.GPUs))
	for i, n := range o.GPUs {
		gpus[i] = strconv.Itoa(n)
	}
	return Usagef("--samples %d --gpus %s: %d cases would take at least %s on %d workers (the limit is %s) and keep about %.1f GiB of rows and masks (%.1f GiB available): give fewer --samples or --gpus (or fewer --methods, --masks)",
		o.Sweep.Samples, strings.Join(gpus, ","), jobs, durationOf(seconds), max(workers, 1), durationOf(maxSweepSeconds),
		bytes/(1<<30), avail/(1<<30))
}

// Simulate predicts every case of o on every GPU count (calibrating the kernel model
// first when asked), writes the predicted rows (bench simulate, status predicted) to the
// session's run and merges them, draws one scaling plot per mask, pass and heads, and
// prints the table (and the comparison with measured rows); start is when the command
// began, for the closing line. Ctrl-C, SIGTERM or SIGHUP (Interruptible) stops the sweep
// at the cases at hand: the cases predicted so far are written, merged and shown, and the
// command exits 130 saying so (they were all lost, with no word: the rows were written
// only once every case was predicted); a second signal ends the process at once.
func (s *Session) Simulate(ctx context.Context, o Simulation, start time.Time) error {
	ctx, stop := Interruptible(ctx)
	defer stop()
	// Every check before any work: the sweep's memory and time, then the calibration's
	// (which would otherwise run for minutes before the sweep was refused).
	maskFor := maskCache(&o)
	if err := fitSimulation(&o, maskFor); err != nil {
		return err
	}
	cal, err := s.prepareCalibration(ctx, &o)
	if err != nil {
		return err
	}
	if o.AfterChecks != nil {
		o.AfterChecks()
	}
	if err := s.calibrateKernel(ctx, &o, cal); err != nil {
		return err
	}
	pr, err := s.predictAll(ctx, &o, maskFor)
	if err != nil {
		return err
	}
	rows := pr.rows
	if pr.interrupted {
		s.log().Warn().Int("done", pr.done).Int("cases", pr.jobs).Msg("interrupted: writing the cases predicted so far")
		if len(rows) == 0 {
			return &ExitError{Code: 130, Msg: fmt.Sprintf("longca simulate: interrupted before any of %d cases was predicted; nothing written", pr.jobs)}
		}
	}
	file, err := s.WriteRows(s.RunID, rows, pr.planned)
	if err != nil {
		return err
	}
	res, err := s.MergeRun(results.MergedPath(s.Out, s.RunID), false)
	if err != nil {
		return fmt.Errorf("merging the rows: %w", err)
	}
	plotDir := filepath.Join(s.Out, "plots")
	plots, err := present.WriteScalingPlots(plotDir, rows)
	if err != nil {
		return err
	}
	w := s.Stdout
	size, docs := o.header()
	h := present.SimHeader{Machine: o.Machine, Kernel: o.Kernel, Size: size, Docs: docs, HeadDim: o.Sweep.HeadDim,
		DType: o.Sweep.DType.String(), Samples: o.Sweep.Samples, Exact: o.Exact}
	if err := present.WriteSimTable(w, h, rows); err != nil {
		return err
	}
	if len(o.Compare) > 0 {
		if err := present.WriteComparison(w, o.CompareSrc, o.Compare, rows); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "# rows: %s (%d rows); plots: %d in %s; %.1f s\n", res.Files[0], res.Rows, len(plots), plotDir, time.Since(start).Seconds())
	if pr.interrupted {
		return &ExitError{Code: 130, Msg: fmt.Sprintf("longca simulate: interrupted after %d of %d cases; their rows are in %s and %s", pr.done, pr.jobs, file, res.Files[0])}
	}
	return nil
}
