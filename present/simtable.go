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
	meshLabel := columnLabeler(rows, true) // balanced's meshes 1xN and Nx1 apart
	for _, r := range rows {
		k := simKey{r.Mask, r.Pass, fmt.Sprintf("%d:%d", r.HeadsQ, r.HeadsKV), r.WorldSize}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
		if !slices.Contains(methods, r.Method) {
			methods = append(methods, r.Method)
		}
		label := meshLabel(r)
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
			return PassRank(a.pass) < PassRank(b.pass)
		}
		return a.gpus < b.gpus
	})
	sort.Strings(methods)
	return best, keys, methods
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
		var top float64 // the fastest; methods within 0.05% of it are marked too
		for _, me := range methods {
			if c := best[k][me]; c != nil && c.n > 0 {
				top = max(top, c.tflops)
			}
		}
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
				v = FormatRate(c.tflops)
				if c.tflops >= top*(1-5e-4) {
					v += "*"
				}
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

// compareKey pairs a measured cp row with a predicted one.
type compareKey struct {
	label, mask, pass, heads string
	gpus, seqlen             int64
	seed                     uint64 // the mask sample: a prediction is compared on the masks measured
	docs                     string // doc_source and max_doc: never two inputs' cases
	headDim                  int64  // and never two problems' (a folder of runs at two head dims)
	dtype                    string
	plan                     string // the whole mesh, sharding, inner dimension and block: balanced 1x8 is not 8x1
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
	return compareKey{RowMeshLabel(r), r.Mask, r.Pass, fmt.Sprintf("%d:%d", r.HeadsQ, r.HeadsKV), r.WorldSize, r.SeqLen, r.Seed, docs, r.HeadDim, r.DType,
		RowMeshKey(r) + " " + r.CPSharding + " " + r.InnerDim + " " + block}
}

// WriteComparison prints every case measured (longca cp rows, rank 0, averaged over
// samples) and predicted side by side, with the error of the prediction, and a summary.
func WriteComparison(w io.Writer, src string, measured, predicted []results.Row) error {
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
	meas, measOrder := sum(measured, results.StatusOK)
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
			FormatRate(m.tf/float64(m.n)), FormatRate(p.tf/float64(p.n)))
	}
	// measured cases no prediction matched, by method and mesh (a flag of the run, such as
	// loongtrain's --windows or the documents, differs from this simulation's)
	unmatched, byLabel := 0, map[string]int{}
	var labels []string
	for _, k := range measOrder {
		if _, ok := pred[k]; ok {
			continue
		}
		unmatched++
		if byLabel[k.label] == 0 {
			labels = append(labels, k.label)
		}
		byLabel[k.label]++
	}
	if unmatched > 0 && len(errs) > 0 {
		var parts []string
		for _, l := range labels {
			parts = append(parts, fmt.Sprintf("%s %d", l, byLabel[l]))
		}
		fmt.Fprintf(&b, "# %d measured cases have no prediction here (%s): their method, mesh, windows, GPUs, length, pass, documents or problem differ from this simulation's flags\n",
			unmatched, strings.Join(parts, ", "))
	}
	if len(errs) == 0 {
		fmt.Fprintf(&b, "# no case of %s matches a prediction (same method, mesh, mask, pass, heads, head dim, dtype, GPUs and seqlen)\n", src)
	} else {
		slices.Sort(errs)
		fmt.Fprintf(&b, "# compared %d cases: median |error| %.1f%%, worst %.1f%% (%s)\n", len(errs), 100*errs[len(errs)/2], 100*worst, worstCase)
		// rows timed on the CPU against a GPU's kernel model read about 99% off: say how
		// to predict their kernel instead
		if errs[len(errs)/2] > 0.5 && slices.ContainsFunc(measured, func(r results.Row) bool { return r.Device == "cpu" }) {
			fmt.Fprintf(&b, "# the measured rows ran on the CPU: predict their kernel with --kernel-rows FILE (its longca kernel rows) or --calibrate ref, not a GPU's kernel model\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
