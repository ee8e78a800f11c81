package present

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/results"
	"github.com/longca/longca/sim"
)

// SimHeader is what the table of `longca simulate` says of its run: the machine, the
// kernel model, the size ("8K tokens per GPU" or "seqlen 64K"), where the documents come
// from, head dim, dtype, mask samples, and up to how many GPUs every rank is simulated.
type SimHeader struct {
	Machine    sim.Machine
	Kernel     sim.KernelModel
	Size, Docs string
	HeadDim    int
	DType      string
	Samples    int
	Exact      int
}

// simCell is one method's series for a (mask, pass, heads, GPUs): a mesh given, or the
// mesh its plan chose per sample (SimSeries); the median and range over its samples.
type simCell struct {
	method             string
	label              string // method with its mesh (usp-8x8); for a mesh chosen per sample, the meshes it took (balanced-1x8 x4, 2x4 x1)
	tflops, ms, expose float64
	lo, hi             float64 // the samples' smallest and largest TFLOP/s (tflops is their median)
	rates              []float64
	bottleneck         string
	n                  int
	status             results.Status
	reason             string
	meshes             map[string]int // the whole mesh (1x8, 8x1) of each predicted sample: how many took it
}

type simKey struct {
	mask, pass, heads string
	gpus              int64
}

func simKeyOf(r results.Row) simKey {
	return simKey{r.Mask, r.Pass, fmt.Sprintf("%d:%d", r.HeadsQ, r.HeadsKV), r.WorldSize}
}

// chosenPerSample marks the series of a mesh chosen per sample in SimSeries' names.
const chosenPerSample = " (mesh chosen per sample)"

// SimSeries names the series each of simulate's rows is a sample of, so that the table's
// cells and the sample-spread columns (samples_n) agree: within one method, mask, pass,
// heads and GPU count, a mesh found in every mask sample (a mesh given, or the method's
// own) is a series of its own (RowMeshKey); the rows left, one a sample, are the mesh the
// plan chose per sample (balanced with --cp-ulysses 0, whose choice follows the
// documents): one series over all the samples (the method's name and chosenPerSample),
// whichever mesh each took. A mesh seen in some samples only is never a series of its own:
// the table took balanced's 2x4, chosen in 1 sample of 5, as its best mesh. Rows of a mesh
// given and also chosen in every sample stay one series (the same computation twice).
func SimSeries(rows []results.Row) []string {
	type group struct {
		k      simKey
		method string
	}
	type groupMesh struct {
		g    group
		mesh string
	}
	type sampleOf struct {
		gm     groupMesh
		sample int64
	}
	groups := make([]groupMesh, len(rows))
	samples := map[group]map[int64]bool{}
	count := map[sampleOf]int{}      // rows of a mesh in a sample
	inSamples := map[groupMesh]int{} // samples the mesh is found in
	for i, r := range rows {
		gm := groupMesh{group{simKeyOf(r), r.Method}, RowMeshKey(r)}
		groups[i] = gm
		s := samples[gm.g]
		if s == nil {
			s = map[int64]bool{}
			samples[gm.g] = s
		}
		s[r.Sample] = true
		if count[sampleOf{gm, r.Sample}]++; count[sampleOf{gm, r.Sample}] == 1 {
			inSamples[gm]++
		}
	}
	// fixed: the rows a sample that are the mesh's own series, the fewest of any sample
	// where the mesh is in every sample (more in a sample: the plan chose it there too)
	fixed := map[groupMesh]int{}
	for so, n := range count {
		if inSamples[so.gm] < len(samples[so.gm.g]) {
			continue
		}
		if f, ok := fixed[so.gm]; !ok || n < f {
			fixed[so.gm] = n
		}
	}
	out := make([]string, len(rows))
	taken := map[sampleOf]int{}
	for i, r := range rows {
		so := sampleOf{groups[i], r.Sample}
		if taken[so] < fixed[so.gm] {
			taken[so]++
			out[i] = so.gm.mesh
			continue
		}
		out[i] = r.Method + chosenPerSample
	}
	return out
}

// bestCells gathers each method's series (SimSeries) over its samples and keeps each
// method's best by median: a mesh given for every sample, or the mesh chosen per sample
// as one series.
func bestCells(rows []results.Row) (map[simKey]map[string]*simCell, []simKey, []string) {
	type mk struct {
		k      simKey
		series string
	}
	sums := map[mk]*simCell{}
	var keys []simKey
	seen := map[simKey]bool{}
	var methods []string
	meshLabel := columnLabeler(rows, true) // balanced's meshes 1xN and Nx1 apart
	series := SimSeries(rows)
	for i, r := range rows {
		k := simKeyOf(r)
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
		if !slices.Contains(methods, r.Method) {
			methods = append(methods, r.Method)
		}
		c := sums[mk{k, series[i]}]
		if c == nil {
			c = &simCell{method: r.Method, label: meshLabel(r), status: r.Status, reason: r.Reason, meshes: map[string]int{}}
			sums[mk{k, series[i]}] = c
		}
		if r.Status == results.StatusPredicted && r.TFLOPs != nil {
			c.status = r.Status
			c.n++
			c.rates = append(c.rates, *r.TFLOPs)
			c.ms += *r.MedianMs
			c.expose += *r.ExposedCommShare
			c.bottleneck = r.Bottleneck
			c.meshes[strings.TrimPrefix(RowMeshKey(r), r.Method+"-")]++
		}
	}
	best := map[simKey]map[string]*simCell{}
	for k, c := range sums {
		if c.n > 0 {
			c.tflops, c.lo, c.hi = harness.Spread(c.rates)
			c.ms, c.expose = c.ms/float64(c.n), c.expose/float64(c.n)
		}
		if len(c.meshes) > 1 {
			c.label = c.method + "-" + meshCounts(c.meshes)
		}
		method := c.method
		m := best[k.k]
		if m == nil {
			m = map[string]*simCell{}
			best[k.k] = m
		}
		if cur := m[method]; cur == nil || (c.n > 0 && (cur.n == 0 || c.tflops > cur.tflops || c.tflops == cur.tflops && c.label < cur.label)) {
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
			return PassRank(a.pass) < PassRank(b.pass)
		}
		return a.gpus < b.gpus
	})
	sort.Strings(methods)
	return best, keys, methods
}

// meshCounts lists the meshes a plan chose over the samples, the most taken first, with
// how many took each: "1x8 x4, 2x4 x1".
func meshCounts(m map[string]int) string {
	meshes := make([]string, 0, len(m))
	for k := range m {
		meshes = append(meshes, k)
	}
	sort.Slice(meshes, func(i, j int) bool {
		if m[meshes[i]] != m[meshes[j]] {
			return m[meshes[i]] > m[meshes[j]]
		}
		return meshes[i] < meshes[j]
	})
	for i, k := range meshes {
		meshes[i] = fmt.Sprintf("%s x%d", k, m[k])
	}
	return strings.Join(meshes, ", ")
}

// RowMeshLabel names a row's method and mesh: usp-8x8, loongtrain-8x8-w8, ring-p2p (the
// mesh where both dimensions are above 1; columnLabeler gives the whole mesh where two
// meshes of one method meet, and RowMeshKey always does).
func RowMeshLabel(r results.Row) string { return meshLabel(r, false) }

// meshLabel is the method with its mesh: where both dimensions are above 1, or (whole)
// wherever the row has one; and LoongTrain's windows.
func meshLabel(r results.Row, whole bool) string {
	l := r.Method
	if r.Ulysses != nil && r.Ring != nil && (whole || *r.Ulysses > 1 && *r.Ring > 1) {
		l += fmt.Sprintf("-%dx%d", *r.Ulysses, *r.Ring)
	}
	if r.Windows != nil && *r.Windows > 1 {
		l += fmt.Sprintf("-w%d", *r.Windows)
	}
	return l
}

// WriteSimTable prints per-GPU TFLOP/s (each method's best mesh) per mask, pass and GPU
// count in nccl-tests style (every non-data line starts with #), the fastest marked *,
// then each best mesh's exposed-communication share and bottleneck, then the crossovers.
func WriteSimTable(w io.Writer, h SimHeader, rows []results.Row) error {
	best, keys, methods := bestCells(rows)
	m := h.Machine
	var b strings.Builder
	perGPU := ""
	if m.RanksPerGPU > 1 {
		perGPU = fmt.Sprintf(", %d ranks per GPU (local %g GB/s %g us)", m.RanksPerGPU, m.Local.BandwidthGBs, m.Local.LatencyUs)
	}
	fmt.Fprintf(&b, "# longca simulate: machine %s: %d GPUs per node%s; intra %g GB/s %g us%s; inter %g GB/s %g us%s; collectives %s\n",
		m.Name, m.GPUsPerNode, perGPU, m.Intra.BandwidthGBs, m.Intra.LatencyUs, sharedNote(m.Intra), m.Inter.BandwidthGBs, m.Inter.LatencyUs, sharedNote(m.Inter), m.Collectives)
	fmt.Fprintf(&b, "# kernel model %s: %s\n", h.Kernel.Name, h.Kernel.Source)
	fmt.Fprintf(&b, "# %s, head dim %d, %s, %s, %d mask sample(s) per document case; ranks simulated one by one up to %d GPUs, sampled above\n#\n", h.Size, h.HeadDim, h.DType, h.Docs, h.Samples, h.Exact)
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
	chosen := false // a best series of a mesh chosen per sample: say how it is read
	for _, k := range keys {
		for _, c := range best[k] {
			chosen = chosen || len(c.meshes) > 1
		}
	}
	if chosen {
		title += "\n# a mesh its plan chose per sample (balanced, --cp-ulysses 0) is one series: the median over all its samples; the meshes it took are listed below"
	}
	header(title)
	fmt.Fprintf(&b, "#%-*s %-7s %6s %6s", mw-1, "", "", "", "")
	for range methods {
		fmt.Fprintf(&b, " %*s", cw, "(TFLOP/s)")
	}
	b.WriteString("\n")
	series := map[[3]string]map[string][]ScalingPoint{}
	var order [][3]string
	for _, k := range keys {
		fmt.Fprintf(&b, " %-*s %-7s %6s %6d", mw-1, k.mask, k.pass, k.heads, k.gpus)
		top := topRate(best[k])
		g := [3]string{k.mask, k.pass, k.heads}
		if series[g] == nil {
			series[g] = map[string][]ScalingPoint{}
			order = append(order, g)
		}
		for _, me := range methods {
			c := best[k][me]
			v := "-"
			switch {
			case c == nil:
			case c.n > 0:
				v = c.rate(top)
				if c.n > 1 {
					v += fmt.Sprintf(" (%s-%s)", FormatRate(c.lo), FormatRate(c.hi))
				}
				series[g][me] = append(series[g][me], ScalingPoint{GPUs: int(k.gpus), TFLOPs: c.tflops})
			default:
				v = string(c.status)
			}
			fmt.Fprintf(&b, " %*s", cw, v)
		}
		b.WriteString("\n")
	}
	b.WriteString("#\n")
	cells := map[simKey][]string{}
	cw = 24
	for _, k := range keys {
		for _, me := range methods {
			c := best[k][me]
			v := "-"
			if c != nil && c.n > 0 {
				v = fmt.Sprintf("%s %d%% %s", c.mesh(me), int(c.expose*100+0.5), c.bottleneck)
			} else if c != nil {
				v = string(c.status)
			}
			cells[k] = append(cells[k], v)
			cw = max(cw, len(v)) // (the meshes a plan chose may be several)
		}
	}
	header("best mesh, exposed communication share, bottleneck")
	for _, k := range keys {
		fmt.Fprintf(&b, " %-*s %-7s %6s %6d", mw-1, k.mask, k.pass, k.heads, k.gpus)
		for _, v := range cells[k] {
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
		for _, x := range Crossovers(series[g]) {
			fmt.Fprintf(&b, "# crossover: %s %s %s: %s\n", g[0], g[1], g[2], x)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// FormatRate keeps 4 significant digits of a TFLOP/s figure (CPU runs are tiny).
func FormatRate(v float64) string {
	switch {
	case v >= 1e6:
		// no GPU gives this, but a file may say it: 4 digits, not a 300-digit cell
		return fmt.Sprintf("%.3e", v)
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

// WriteScalingPlots draws one plot per mask, pass and heads: per-GPU TFLOP/s against
// GPUs, each method's best mesh.
func WriteScalingPlots(dir string, rows []results.Row) ([]string, error) {
	best, keys, _ := bestCells(rows)
	series := map[[3]string]map[string][]ScalingPoint{}
	var order [][3]string
	for _, k := range keys {
		g := [3]string{k.mask, k.pass, k.heads}
		if series[g] == nil {
			series[g] = map[string][]ScalingPoint{}
			order = append(order, g)
		}
		for me, c := range best[k] {
			if c.n > 0 {
				series[g][me] = append(series[g][me], ScalingPoint{GPUs: int(k.gpus), TFLOPs: c.tflops})
			}
		}
	}
	var files []string
	for _, g := range order {
		name := fmt.Sprintf("%s_%s_%s_scaling.png", fileSafe(g[0]), fileSafe(strings.ReplaceAll(g[1], "+", "")), fileSafe(strings.ReplaceAll(g[2], ":", "-")))
		path := filepath.Join(dir, name)
		if err := WriteScalingPlot(path, fmt.Sprintf("%s, %s, heads %s (predicted)", g[0], g[1], g[2]), series[g]); err != nil {
			return files, err
		}
		if _, err := os.Stat(path); err == nil { // (a group with no predicted point draws none)
			files = append(files, path)
		}
	}
	return files, nil
}

// compareCase is a case of the comparison: a method on a mesh, a mask, pass, problem and
// documents, on a GPU count, without its mask sample.
type compareCase struct {
	label, mask, pass, heads string
	gpus, seqlen             int64
	docs                     string // doc_source and max_doc: never two inputs' cases
	headDim                  int64  // and never two problems' (a folder of runs at two head dims)
	dtype                    string
	plan                     string // the whole mesh, sharding, inner dimension and block: balanced 1x8 is not 8x1
}

// compareKey pairs measured cp rows with predicted ones: a case on one mask (maskIdentity).
// Not the seed: a mask the seed does not change (full, causal) is simulated once and
// stands for every sample measured; a document mask pairs sample by sample.
type compareKey struct {
	compareCase
	maskID string
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
	block := ""
	if r.CPBlock != nil {
		block = fmt.Sprint(*r.CPBlock)
	}
	return compareKey{compareCase{RowMeshLabel(r), r.Mask, r.Pass, fmt.Sprintf("%d:%d", r.HeadsQ, r.HeadsKV), r.WorldSize, r.SeqLen, docs, r.HeadDim, r.DType,
		RowMeshKey(r) + " " + r.CPSharding + " " + r.InnerDim + " " + block}, maskIdentity(r)}
}

// maskIdentity is the mask a row ran on: its area and the parameters its seed drew (the
// documents' lengths, a prefix, a window), less the documents' source and cap (the case's).
func maskIdentity(r results.Row) string {
	id := strconv.FormatInt(r.MaskArea, 10)
	if r.MaskParams == "" || r.MaskParams == "{}" {
		return id
	}
	var p map[string]any
	if json.Unmarshal([]byte(r.MaskParams), &p) != nil {
		return id + " " + r.MaskParams
	}
	delete(p, "dist")
	delete(p, "max_doc")
	b, err := json.Marshal(p) // (keys sorted)
	if err != nil {
		return id + " " + r.MaskParams
	}
	return id + " " + string(b)
}

// compareLine is one line of the comparison: a case on one mask, its measured and
// predicted rows.
type compareLine struct {
	ms, tf   []float64
	samples  []int64
	pms, ptf []float64
	psamples []int64
	first    results.Row // a measured row of the line
	matched  bool
}

// WriteComparison prints each case measured (longca cp rows, rank 0) beside its prediction
// on the same mask, with the error of the prediction, and a summary. A line is a case on
// one mask: a mask the seed does not change (full, causal) is one line over every sample
// measured, a document mask one line a sample (its documents differ); each side is the
// median over the line's rows (each row a sample's median time). Measured cases without
// a prediction are counted, with the flags they differ in.
func WriteComparison(w io.Writer, src string, measured, predicted []results.Row) error {
	lines := map[compareKey]*compareLine{}
	var measOrder, predOrder []compareKey
	lineOf := func(k compareKey) *compareLine {
		l := lines[k]
		if l == nil {
			l = &compareLine{}
			lines[k] = l
		}
		return l
	}
	for _, r := range measured {
		if r.Status != results.StatusOK || r.MedianMs == nil || r.TFLOPs == nil {
			continue
		}
		k := compareKeyOf(r)
		l := lineOf(k)
		if len(l.ms) == 0 {
			l.first = r
			measOrder = append(measOrder, k)
		}
		l.ms, l.tf, l.samples = append(l.ms, *r.MedianMs), append(l.tf, *r.TFLOPs), append(l.samples, r.Sample)
	}
	for _, r := range predicted {
		if r.Status != results.StatusPredicted || r.MedianMs == nil || r.TFLOPs == nil {
			continue
		}
		k := compareKeyOf(r)
		l := lineOf(k)
		if len(l.pms) == 0 {
			predOrder = append(predOrder, k)
		}
		l.pms, l.ptf, l.psamples = append(l.pms, *r.MedianMs), append(l.ptf, *r.TFLOPs), append(l.psamples, r.Sample)
	}
	// how many lines each case has: a case of several masks names the sample of its worst
	perCase := map[compareCase]int{}
	predCases := map[compareCase]bool{}
	for _, k := range predOrder {
		predCases[k.compareCase] = true
		if len(lines[k].ms) > 0 {
			perCase[k.compareCase]++
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "#\n# measured (%s) against predicted\n", src)
	b.WriteString("# measured_ms, meas_TF/GPU: the median over a line's measured samples of each sample's median time, as simulate's table takes the median over samples (longca cp's table shows their mean: its time column)\n")
	b.WriteString("# predicted_ms, pred_TF/GPU: the prediction on the same mask; a mask the seed does not change is one line over every sample, a document mask one line a sample (samples: the measured ones)\n")
	fmt.Fprintf(&b, "# %-22s %-22s %-7s %6s %7s %12s %12s %8s %12s %12s %8s\n", "method", "mask", "pass", "heads", "GPUs", "measured_ms", "predicted_ms", "error", "meas_TF/GPU", "pred_TF/GPU", "samples")
	var errs []float64
	worst, worstCase := 0.0, ""
	cases, samples := map[compareCase]bool{}, 0
	for _, k := range predOrder {
		l := lines[k]
		if len(l.ms) == 0 {
			continue
		}
		l.matched = true
		cases[k.compareCase] = true
		samples += len(l.ms)
		mm, _, _ := harness.Spread(l.ms)
		pm, _, _ := harness.Spread(l.pms)
		mt, _, _ := harness.Spread(l.tf)
		pt, _, _ := harness.Spread(l.ptf)
		e := pm/mm - 1
		errs = append(errs, math.Abs(e))
		if math.Abs(e) > worst {
			worst, worstCase = math.Abs(e), fmt.Sprintf("%s %s %s on %d", k.label, k.mask, k.pass, k.gpus)
			if perCase[k.compareCase] > 1 {
				worstCase += ", sample " + sampleList(l.samples)
			}
		}
		fmt.Fprintf(&b, "  %-22s %-22s %-7s %6s %7d %12.3f %12.3f %+7.1f%% %12s %12s %8s\n", k.label, k.mask, k.pass, k.heads, k.gpus, mm, pm, 100*e,
			FormatRate(mt), FormatRate(pt), sampleList(l.samples))
	}
	// measured lines no prediction matched: of a case simulated on other masks (documents
	// drawn from other seeds, or fewer samples), or of a case this simulation's flags do not
	// make (a method, mesh, length, problem or documents of its own)
	var otherMasks, otherFlags []compareKey
	for _, k := range measOrder {
		if lines[k].matched {
			continue
		}
		if predCases[k.compareCase] {
			otherMasks = append(otherMasks, k)
		} else {
			otherFlags = append(otherFlags, k)
		}
	}
	byLabel := func(ks []compareKey) string {
		n := map[string]int{}
		var labels, parts []string
		for _, k := range ks {
			if n[k.label] == 0 {
				labels = append(labels, k.label)
			}
			n[k.label]++
		}
		for _, l := range labels {
			parts = append(parts, fmt.Sprintf("%s %d", l, n[l]))
		}
		return strings.Join(parts, ", ")
	}
	if len(errs) > 0 && len(otherFlags) > 0 {
		var rows []results.Row
		for _, k := range otherFlags {
			rows = append(rows, lines[k].first)
		}
		fmt.Fprintf(&b, "# %d measured cases have no prediction here (%s): their method, mesh, windows, GPUs, length, pass, documents or problem differ from this simulation's flags%s\n",
			len(otherFlags), byLabel(otherFlags), flagDiffs(rows, predicted))
	}
	if len(otherMasks) > 0 {
		// the samples and first seeds (--seed) of both sides, in those cases
		var meas, sim []int64
		measSeeds, simSeeds, of := map[uint64]bool{}, map[uint64]bool{}, map[compareCase]bool{}
		for _, k := range otherMasks {
			meas = append(meas, lines[k].samples...)
			measSeeds[lines[k].first.Seed-uint64(lines[k].first.Sample)] = true
			of[k.compareCase] = true
		}
		for _, r := range predicted {
			if r.Status == results.StatusPredicted && of[compareKeyOf(r).compareCase] {
				sim = append(sim, r.Sample)
				simSeeds[r.Seed-uint64(r.Sample)] = true
			}
		}
		fmt.Fprintf(&b, "# %d measured mask samples have no prediction here (%s): their masks were not simulated (measured: samples %s of --seed %s; this simulation: samples %s of --seed %s): give simulate the run's --seed and --samples\n",
			len(otherMasks), byLabel(otherMasks), sampleList(meas), joinSorted(measSeeds), sampleList(sim), joinSorted(simSeeds))
	}
	if len(errs) == 0 {
		fmt.Fprintf(&b, "# no case of %s matches a prediction (same method, mesh, mask, pass, heads, head dim, dtype, GPUs and seqlen)%s\n", src, flagDiffs(measured, predicted))
	} else {
		slices.Sort(errs)
		what := fmt.Sprintf("%d cases", len(cases))
		if len(errs) != len(cases) || samples != len(errs) {
			what += fmt.Sprintf(" in %d lines (%d measured samples)", len(errs), samples)
		}
		fmt.Fprintf(&b, "# compared %s: median |error| %.1f%%, worst %.1f%% (%s)\n", what, 100*errs[len(errs)/2], 100*worst, worstCase)
		// rows timed on the CPU against a GPU's kernel model read about 99% off: say how
		// to predict their kernel instead; against a model of the CPU reference already
		// (--calibrate ref, --kernel-rows of ref rows, cpu-ref), what is left is that the
		// measured ranks shared the host's cores where the machine gives each its own GPU
		// (the kernel hint was said again after --calibrate ref, where it had been taken)
		if med := errs[len(errs)/2]; slices.ContainsFunc(measured, func(r results.Row) bool { return r.Device == "cpu" }) {
			cpuModel, machine, perGPU := predictedCPUModel(predicted)
			shared := sharedCPURanks(measured)
			switch {
			case med > 0.5 && !cpuModel:
				fmt.Fprintf(&b, "# the measured rows ran on the CPU: predict their kernel with --kernel-rows FILE (its longca kernel rows) or --calibrate ref, not a GPU's kernel model\n")
			case med > 0.25 && cpuModel && shared > perGPU:
				fmt.Fprintf(&b, "# the measured rows' %d ranks shared this host's cores (ranks_per_device), where --machine %s gives %d rank(s) a device: a machine file with \"ranks_per_gpu\": %d queues their kernels as they ran (docs/simulate.md, the network)\n",
					shared, machine, perGPU, shared)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// predictedCPUModel says whether the predicted rows' kernel model is the CPU reference's
// (the cpu-ref preset, or a fit to ref rows: --calibrate ref, --kernel-rows of ref rows),
// and names their machine with its ranks per GPU (1 where the rows do not say).
func predictedCPUModel(predicted []results.Row) (cpu bool, machine string, perGPU int) {
	perGPU = 1
	for _, r := range predicted {
		var mp struct {
			Machine struct {
				Name        string `json:"name"`
				RanksPerGPU int    `json:"ranks_per_gpu"`
			} `json:"machine"`
			Kernel struct {
				Name     string `json:"name"`
				FittedTo string `json:"fitted_to"`
			} `json:"kernel_model"`
		}
		if r.Status != results.StatusPredicted || r.ModelParams == "" || json.Unmarshal([]byte(r.ModelParams), &mp) != nil {
			continue
		}
		machine = mp.Machine.Name
		perGPU = max(mp.Machine.RanksPerGPU, 1)
		cpu = strings.HasPrefix(mp.Kernel.Name, "cpu-ref") || mp.Kernel.FittedTo == "ref"
		return cpu, machine, perGPU
	}
	return false, machine, perGPU
}

// sharedCPURanks is the most ranks that shared one host's cores among the measured CPU rows
// of in-process or launched ranks (not cp --links rows, whose machine file's ranks_per_gpu
// shaped their links); 0 where none says.
func sharedCPURanks(measured []results.Row) int {
	n := 0
	for _, r := range measured {
		if r.Device == "cpu" && r.Backend != "local+links" && r.RanksPerDevice != nil {
			n = max(n, int(*r.RanksPerDevice))
		}
	}
	return n
}

// sampleList writes sample indices short: 0-2,5 (each once, in order).
func sampleList(s []int64) string {
	s = slices.Clone(s)
	slices.Sort(s)
	s = slices.Compact(s)
	var parts []string
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, strconv.FormatInt(s[i], 10))
		default:
			parts = append(parts, fmt.Sprintf("%d-%d", s[i], s[j]))
		}
		i = j + 1
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// joinSorted is a set's values, in order, comma-separated.
func joinSorted[T int64 | uint64 | string](set map[T]bool) string {
	out := make([]T, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.Sort(out)
	parts := make([]string, len(out))
	for i, v := range out {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ",")
}

// compareFlags are the flags of longca cp and longca simulate that make a case, each as
// it reads from a row ("" where the row has none of it), and its scope: where set, a
// measured row's value is weighed only where the simulation has the row's scope (the
// documents of a mask it simulates, the mesh of a method on a GPU count it simulates).
var compareFlags = []struct {
	flag      string
	of, scope func(results.Row) string
}{
	{"--methods", func(r results.Row) string { return r.Method }, nil},
	{"--gpus", func(r results.Row) string { return strconv.FormatInt(r.WorldSize, 10) }, nil},
	{"--tokens-per-rank", func(r results.Row) string {
		if r.WorldSize > 0 && r.SeqLen%r.WorldSize == 0 {
			return harness.FormatSize(int(r.SeqLen / r.WorldSize))
		}
		return ""
	}, nil},
	{"--seqlen", func(r results.Row) string {
		if r.WorldSize > 0 && r.SeqLen%r.WorldSize == 0 {
			return ""
		}
		return harness.FormatSize(int(r.SeqLen))
	}, nil},
	{"--heads", func(r results.Row) string { return fmt.Sprintf("%d:%d", r.HeadsQ, r.HeadsKV) }, nil},
	{"--head-dim", func(r results.Row) string { return strconv.FormatInt(r.HeadDim, 10) }, nil},
	{"--dtype", func(r results.Row) string { return r.DType }, nil},
	{"--masks", func(r results.Row) string { return r.Mask }, nil},
	{"--passes", func(r results.Row) string { return r.Pass }, nil},
	{"--dist", func(r results.Row) string { return compareKeyOf(r).docs }, func(r results.Row) string { return r.Mask }},
	{"mesh", RowMeshKey, methodOn},
	{"--sharding", func(r results.Row) string { return r.CPSharding }, methodOn},
	{"cp_inner_dim", func(r results.Row) string { return r.InnerDim }, methodOn},
	{"--cp-block", func(r results.Row) string {
		if r.CPBlock == nil {
			return ""
		}
		return strconv.FormatInt(*r.CPBlock, 10)
	}, methodOn},
}

// methodOn is a row's method and GPU count.
func methodOn(r results.Row) string { return fmt.Sprintf("%s/%d", r.Method, r.WorldSize) }

// flagDiffs says which flags of the measured rows no predicted row has, with the
// simulation's own: "; measured: --tokens-per-rank 256 --head-dim 32; this simulation:
// --tokens-per-rank 8K --head-dim 128" ("" where every value is simulated: a combination
// of them is not).
func flagDiffs(measured, predicted []results.Row) string {
	var meas, sim []string
	for _, f := range compareFlags {
		m, p := map[string]bool{}, map[string]bool{}
		scopes, weighed := map[string]bool{}, map[string]bool{} // the simulation's; the measured rows' weighed
		for _, r := range predicted {
			if f.scope != nil {
				scopes[f.scope(r)] = true
			}
		}
		for _, r := range measured {
			if f.scope != nil {
				if !scopes[f.scope(r)] {
					continue
				}
				weighed[f.scope(r)] = true
			}
			if v := f.of(r); v != "" {
				m[v] = true
			}
		}
		for _, r := range predicted {
			if f.scope != nil && !weighed[f.scope(r)] {
				continue
			}
			if v := f.of(r); v != "" {
				p[v] = true
			}
		}
		differ := false
		for v := range m {
			differ = differ || !p[v]
		}
		if !differ {
			continue
		}
		meas = append(meas, f.flag+" "+joinValues(m))
		if len(p) > 0 {
			sim = append(sim, f.flag+" "+joinValues(p))
		}
	}
	if len(meas) == 0 {
		return ""
	}
	s := "; measured: " + strings.Join(meas, " ")
	if len(sim) > 0 {
		s += "; this simulation: " + strings.Join(sim, " ")
	}
	return s
}

// joinValues is a set of flag values in order (numbers by value), comma-separated.
func joinValues(set map[string]bool) string {
	out := make([]string, 0, len(set))
	for v := range set {
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b string) int {
		x, errA := strconv.Atoi(a)
		y, errB := strconv.Atoi(b)
		if errA == nil && errB == nil {
			return x - y
		}
		return strings.Compare(a, b)
	})
	return strings.Join(out, ",")
}

// topRate is the fastest ok cell's TFLOP/s of a case's methods (0: none ran).
func topRate(cells map[string]*simCell) float64 {
	var top float64
	for _, c := range cells {
		if c != nil && c.n > 0 {
			top = max(top, c.tflops)
		}
	}
	return top
}

// rate is an ok cell's TFLOP/s as the tables print it, marked * within 0.05% of top
// (the fastest of its case: methods that close are marked too).
func (c *simCell) rate(top float64) string {
	v := FormatRate(c.tflops)
	if c.tflops >= top*(1-5e-4) {
		v += "*"
	}
	return v
}

// mesh is the cell's mesh as the tables print it: its label without method me's name,
// "=" for the method's one mesh.
func (c *simCell) mesh(me string) string {
	if m := strings.TrimPrefix(strings.TrimPrefix(c.label, me), "-"); m != "" {
		return m
	}
	return "="
}
