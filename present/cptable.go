package present

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/longca/longca/results"
)

// cpKey groups a CP table's rows: one line per method, mesh, mask (with the settings that
// tell apart rows of different problems: caseLabeler), length, heads and pass, the samples
// averaged.
type cpKey struct {
	method, mesh, mask string
	seqlen             int64
	heads, pass        string
}

// cpAgg is one line of the CP table.
type cpAgg struct {
	n, ok                        int
	ms, tflops, devTF, gbs       float64
	kernTF, eff, noComm, exposed float64
	nKern, nNoComm               int
	ranksPerDevice               int64
	peak                         int64
	status                       results.Status
	reason                       string
	checkPass                    *bool
	checkWorst                   string
	checkRatio                   float64
	rates                        []float64 // each ok sample's TFLOP/s per rank
}

// cpMethodLabeler returns a CP row's method, with its kernel and variant where rows of one
// case, method and mesh differ in them (ring-p2p[cudnn] beside ring-p2p[cuda]: two `cp`
// runs in one folder).
func cpMethodLabeler(rows []results.Row) func(results.Row) string {
	group := func(r results.Row) string { return caseKey(r, r.Method+" "+cpMesh(r)) }
	show := colliding(rows, group, func(r results.Row) []setting {
		return []setting{{"kernel", r.Kernel}, {"variant", VariantKey(r)}}
	})
	return func(r results.Row) string { return withTags(r.Method, r, show) }
}

// cpMesh names a row's mesh: UxR, with LoongTrain's windows.
func cpMesh(r results.Row) string {
	if r.Ulysses == nil || r.Ring == nil {
		return "-"
	}
	m := fmt.Sprintf("%dx%d", *r.Ulysses, *r.Ring)
	if r.Windows != nil && *r.Windows > 1 {
		m += fmt.Sprintf("w%d", *r.Windows)
	}
	return m
}

// WriteCPTable prints CP rows as a TextTable, one line per method, mesh, mask, length
// (the whole sequence's tokens), heads and pass (the samples averaged, and their smallest and largest TFLOP/s per rank when there
// are several; only the lowest rank's rows, since every rank records the
// slowest rank's time): the per-rank TFLOP/s (MASKS.md's per-GPU figure when each rank
// has its device), how many ranks share a device and what the device did, the bare
// kernel's TFLOP/s at the same per-rank work and the efficiency, the time without
// transfers (--overlap) and the share the transfers add, bandwidth, the check and the
// peak memory. A line that is not ok shows its status.
func WriteCPTable(w io.Writer, title string, rows []results.Row) error {
	low := int64(math.MaxInt64)
	for _, r := range rows {
		low = min(low, r.Rank)
	}
	var order []cpKey
	aggs := map[cpKey]*cpAgg{}
	counts := map[results.Status]int{}
	method := cpMethodLabeler(rows)
	caseLabel := caseLabeler(rows, func(r results.Row) string { return method(r) + " " + cpMesh(r) })
	for _, r := range rows {
		if r.Rank != low {
			continue
		}
		counts[r.Status]++
		k := cpKey{method(r), cpMesh(r), caseLabel(r), r.SeqLen, fmt.Sprintf("%d:%d", r.HeadsQ, r.HeadsKV), r.Pass}
		a := aggs[k]
		if a == nil {
			a = &cpAgg{status: results.StatusOK}
			aggs[k] = a
			order = append(order, k)
		}
		a.n++
		if r.CheckPass != nil {
			a.checkPass, a.checkWorst = r.CheckPass, r.CheckWorst
			if r.CheckErr != nil && r.CheckTol != nil && *r.CheckTol > 0 {
				a.checkRatio = *r.CheckErr / *r.CheckTol
			}
		}
		if r.RanksPerDevice != nil {
			a.ranksPerDevice = *r.RanksPerDevice
		}
		if r.Status != results.StatusOK || r.MedianMs == nil || r.TFLOPs == nil {
			if a.status == results.StatusOK {
				a.status, a.reason = r.Status, r.Reason
			}
			continue
		}
		a.ok++
		a.ms += *r.MedianMs
		a.tflops += *r.TFLOPs
		a.rates = append(a.rates, *r.TFLOPs)
		if r.DeviceTFLOPs != nil {
			a.devTF += *r.DeviceTFLOPs
		}
		if r.BandwidthGBs != nil {
			a.gbs += *r.BandwidthGBs
		}
		if r.KernelTFLOPs != nil && r.CPEfficiency != nil {
			a.nKern++
			a.kernTF += *r.KernelTFLOPs
			a.eff += *r.CPEfficiency
		}
		if r.NoCommMs != nil && *r.MedianMs > 0 {
			a.nNoComm++
			a.noComm += *r.NoCommMs
			a.exposed += (*r.MedianMs - *r.NoCommMs) / *r.MedianMs
		}
		if r.PeakMemBytes != nil {
			a.peak = max(a.peak, *r.PeakMemBytes)
		}
	}
	t := TextTable{Title: []string{title}, Columns: []TextColumn{
		{Name: "method", Left: true}, {Name: "mesh", Left: true}, {Name: "mask", Left: true}, {Name: "seqlen", Unit: "tokens"}, {Name: "heads", Unit: "q:kv"},
		{Name: "pass", Left: true}, {Name: "samples"}, {Name: "time", Unit: "ms"}, {Name: "TFLOPs/rank", Unit: "TFLOP/s"},
		{Name: "min-max", Unit: "TFLOP/s"}, {Name: "ranks/dev"}, {Name: "device", Unit: "TFLOP/s"}, {Name: "kernel", Unit: "TFLOP/s"}, {Name: "eff"},
		{Name: "no-comm", Unit: "ms"}, {Name: "xfer", Unit: "%"}, {Name: "bw", Unit: "GB/s"}, {Name: "check", Left: true},
		{Name: "err/tol"}, {Name: "peak", Unit: "GiB"},
	}}
	f := func(v float64, n int, format string) string {
		if n == 0 {
			return "-"
		}
		return fmt.Sprintf(format, v/float64(n))
	}
	var effSum, tfSum float64
	var effN, tfN int
	shared := int64(1)
	for _, k := range order {
		a := aggs[k]
		chk, ratio := "-", "-"
		if a.checkPass != nil {
			chk = "OK"
			if !*a.checkPass {
				chk = "WRONG"
			}
			chk += " " + a.checkWorst
			ratio = fmt.Sprintf("%.2f", a.checkRatio)
		}
		rpd := "-"
		if a.ranksPerDevice > 0 {
			rpd = fmt.Sprint(a.ranksPerDevice)
			shared = max(shared, a.ranksPerDevice)
		}
		line := []string{k.method, k.mesh, k.mask, fmt.Sprint(k.seqlen), k.heads, k.pass, fmt.Sprint(a.n)}
		if a.ok == 0 {
			line = append(line, string(a.status), "-", "-", rpd, "-", "-", "-", "-", "-", "-", chk, ratio, "-")
			t.Rows = append(t.Rows, line)
			continue
		}
		peak := "-"
		if a.peak > 0 {
			peak = fmt.Sprintf("%.2f", float64(a.peak)/(1<<30))
		}
		tf := func(v float64, n int) string {
			if n == 0 {
				return "-"
			}
			return formatTFLOPs(v / float64(n))
		}
		spread := "-" // over the mask samples, when there are several
		if len(a.rates) > 1 {
			lo, hi := slices.Min(a.rates), slices.Max(a.rates)
			spread = formatTFLOPs(lo) + "-" + formatTFLOPs(hi)
		}
		line = append(line, f(a.ms, a.ok, "%.3f"), tf(a.tflops, a.ok), spread, rpd, tf(a.devTF, a.ok),
			tf(a.kernTF, a.nKern), f(a.eff, a.nKern, "%.2f"), f(a.noComm, a.nNoComm, "%.3f"),
			f(100*a.exposed, a.nNoComm, "%.0f"), f(a.gbs, a.ok, "%.1f"), chk, ratio, peak)
		t.Rows = append(t.Rows, line)
		tfSum += a.tflops / float64(a.ok)
		tfN++
		if a.nKern > 0 {
			effSum += a.eff / float64(a.nKern)
			effN++
		}
	}
	var b strings.Builder
	n := 0
	for _, c := range counts {
		n += c
	}
	avgTF := "-"
	if tfN > 0 {
		avgTF = formatTFLOPs(tfSum / float64(tfN))
	}
	fmt.Fprintf(&b, "Cases: %d  Rows: %d%s  Avg TFLOP/s per rank: %s  Avg efficiency: %s",
		len(order), n, statusCounts(counts), avgTF, f(effSum, effN, "%.2f"))
	t.Summary = append(t.Summary, b.String())
	if shared > 1 {
		t.Summary = append(t.Summary, fmt.Sprintf("%d ranks share one device: TFLOPs/rank is one rank's share, device is what the device did (the sum); eff = device / kernel alone", shared))
	}
	for _, l := range []string{GPUStateLine(rows, "", true), PowerCapHint(rows, "", true), ProvenanceLine(rows, "", true)} { // the rows given (each rank's reads its own GPU)
		if l != "" {
			t.Summary = append(t.Summary, l)
		}
	}
	return t.Write(w)
}
