package present

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/longca/longca/results"
)

// CaseKey identifies one row of a report: a mask at one length, head setting and pass.
// Mask is the mask's label, with the settings that tell apart rows of different problems
// in one file where there are such (caseLabeler: causal_d64 beside causal_d32).
type CaseKey struct {
	Mask            string
	SeqLen          int64
	HeadsQ, HeadsKV int64
	Pass            string
}

// Cell is one kernel's figure for one case: the mean TFLOP/s of its ok rows, or the
// status of its first row when none is ok; ClockMHz is the mean SM clock while timed
// (sm_clock_mhz) over those of its ok rows that read one (0 where none did).
type Cell struct {
	TFLOPs   float64
	Status   results.Status
	N        int
	ClockMHz float64
}

// Summary is the report's content: cases in order, kernels, and the cells.
type Summary struct {
	Cases   []CaseKey
	Kernels []string
	Cells   map[CaseKey]map[string]Cell
	Area    map[CaseKey]int64
	FLOPs   map[CaseKey]float64
	Counts  map[results.Status]int
	// Sampled counts, per case, the mask samples of their own area (document samples of a
	// CP run): where over one, Area and FLOPs are the mean over those samples, as each
	// cell's TFLOP/s is the mean of their rates
	Sampled map[CaseKey]int

	// runs holds each cell's ok rates by process and sample (run_id, rank, sample): a folder of
	// several runs of the same cases pairs two kernels within each process's sample
	// (PairedRatio).
	runs map[CaseKey]map[string]map[procSample]runRate
}

// procSample is one process's sample of a case: the run, the rank and the sample.
type procSample struct {
	run          string
	rank, sample int64
}

// runRate is one run's ok rows of a cell: their TFLOP/s summed, and how many.
type runRate struct {
	sum float64
	n   int
}

// kernelLabel is the column name of a row: the kernel, or the CP method with its 2-D
// mesh (usp-2x4: Ulysses 2 x ring 4; -w2: LoongTrain's windows) so meshes stay apart.
func kernelLabel(r results.Row) string {
	if r.Method == "" {
		return r.Kernel
	}
	return RowMeshLabel(r)
}

// MaskLabel names a row's mask in reports: the mask, or for block-sparse rows
// <mask>_b<block>_r<ratio> (with _content for content scores), so settings stay apart.
func MaskLabel(r results.Row) string {
	if r.KeptRatio == nil || r.BlockSize == nil {
		return r.Mask
	}
	l := fmt.Sprintf("%s_b%d_r%g", r.Mask, *r.BlockSize, *r.KeptRatio)
	if strings.Contains(r.MaskParams, `"scores":"content"`) {
		l += "_content"
	}
	return l
}

// Summarize groups rows by case and kernel; pass, when not empty, keeps only that pass.
// Rows of different problems or conditions (head dim, dtype, batch, mask parameters,
// documents, device, settle, a CP run's settings) are different cases, and rows of other
// variants or meshes of one kernel or method different columns, each labelled by what
// differs (settings.go), never averaged together.
// Cases are ordered by the mask's first appearance, then heads, pass and length.
func Summarize(rows []results.Row, pass string) Summary {
	s := Summary{Cells: map[CaseKey]map[string]Cell{}, Area: map[CaseKey]int64{}, FLOPs: map[CaseKey]float64{}, Counts: map[results.Status]int{},
		Sampled: map[CaseKey]int{}, runs: map[CaseKey]map[string]map[procSample]runRate{}}
	// each case's mask samples (run and seed) with their area and FLOPs: a CP case's
	// document samples differ, and the table had shown the first one's alone beside the
	// mean of every sample's rate
	type sampleKey struct {
		run  string
		seed uint64
	}
	type areaFLOPs struct {
		area  int64
		flops float64
	}
	samplesOf := map[CaseKey]map[sampleKey]areaFLOPs{}
	maskOrder := map[string]int{}
	kernelSeen := map[string]bool{}
	// the sums behind each cell's means: its ok rows' TFLOP/s, and the clocks of those that
	// read one (nclk of them)
	type sum struct {
		tflops, clk float64
		nclk        int
	}
	sums := map[CaseKey]map[string]sum{}
	// rows of other problems, conditions, variants or meshes stay apart (settings.go)
	columnLabel := columnLabeler(rows, false)
	caseLabel := caseLabeler(rows, columnLabel)
	for _, r := range rows {
		if pass != "" && r.Pass != pass {
			continue
		}
		label := caseLabel(r)
		k := CaseKey{label, r.SeqLen, r.HeadsQ, r.HeadsKV, r.Pass}
		if _, ok := maskOrder[label]; !ok {
			maskOrder[label] = len(maskOrder)
		}
		name := columnLabel(r)
		if !kernelSeen[name] {
			kernelSeen[name] = true
			s.Kernels = append(s.Kernels, name)
		}
		if s.Cells[k] == nil {
			s.Cells[k] = map[string]Cell{}
			sums[k] = map[string]sum{}
			s.Cases = append(s.Cases, k)
			s.Area[k], s.FLOPs[k] = r.MaskArea, r.FLOPs
			samplesOf[k] = map[sampleKey]areaFLOPs{}
		}
		if sk := (sampleKey{r.RunID, r.Seed}); samplesOf[k][sk] == (areaFLOPs{}) {
			samplesOf[k][sk] = areaFLOPs{r.MaskArea, r.FLOPs}
		}
		s.Counts[r.Status]++
		c := s.Cells[k][name]
		if r.Status == results.StatusOK && r.TFLOPs != nil {
			if c.Status != results.StatusOK {
				c = Cell{Status: results.StatusOK}
			}
			c.N++
			sm := sums[k][name]
			sm.tflops += *r.TFLOPs
			c.TFLOPs = sm.tflops / float64(c.N)
			if r.SMClockMHz != nil && *r.SMClockMHz > 0 {
				sm.clk, sm.nclk = sm.clk+*r.SMClockMHz, sm.nclk+1
				c.ClockMHz = sm.clk / float64(sm.nclk)
			}
			sums[k][name] = sm
			if r.RunID != "" { // (a row without a run id pairs with nothing)
				if s.runs[k] == nil {
					s.runs[k] = map[string]map[procSample]runRate{}
				}
				if s.runs[k][name] == nil {
					s.runs[k][name] = map[procSample]runRate{}
				}
				pk := procSample{r.RunID, r.Rank, r.Sample}
				rr := s.runs[k][name][pk]
				rr.sum, rr.n = rr.sum+*r.TFLOPs, rr.n+1
				s.runs[k][name][pk] = rr
			}
		} else if c.Status == "" {
			c.Status = r.Status
		}
		s.Cells[k][name] = c
	}
	for k, smp := range samplesOf {
		areas := map[int64]bool{}
		var area, flops float64
		for _, af := range smp {
			areas[af.area] = true
			area += float64(af.area)
			flops += af.flops
		}
		if len(areas) > 1 {
			s.Sampled[k] = len(smp)
			s.Area[k], s.FLOPs[k] = int64(math.Round(area/float64(len(smp)))), flops/float64(len(smp))
		}
	}
	sort.SliceStable(s.Cases, func(i, j int) bool {
		a, b := s.Cases[i], s.Cases[j]
		switch {
		case a.Mask != b.Mask:
			return maskOrder[a.Mask] < maskOrder[b.Mask]
		case a.HeadsQ != b.HeadsQ:
			return a.HeadsQ < b.HeadsQ
		case a.HeadsKV != b.HeadsKV:
			return a.HeadsKV < b.HeadsKV
		case a.Pass != b.Pass:
			return PassRank(a.Pass) < PassRank(b.Pass)
		}
		return a.SeqLen < b.SeqLen
	})
	return s
}

// PassRank orders passes as tables show them: fwd, bwd, then anything else.
func PassRank(p string) int {
	switch p {
	case "fwd":
		return 0
	case "bwd":
		return 1
	}
	return 2
}

// formatTFLOPs keeps 4 significant digits in a fixed width: FormatRate's from 1 TFLOP/s up,
// four decimals below (FormatRate keeps 3 significant digits there), and 3 significant
// digits below a thousandth.
func formatTFLOPs(v float64) string {
	switch {
	case v > 0 && v < 0.001: // a CPU's rate: 0.0000 said nothing (cp --ranks 64, 16 tokens a rank)
		return fmt.Sprintf("%.3g", v)
	case v < 1:
		return fmt.Sprintf("%.4f", v)
	}
	return FormatRate(v)
}

// WriteTable prints the summary as a TextTable: a units row under the header, one line
// per case with each kernel's TFLOP/s side by side (or its status word), and a closing
// '#' summary line.
func WriteTable(w io.Writer, title string, s Summary) error {
	t := TextTable{Title: []string{title}, Columns: []TextColumn{
		{Name: "mask", Left: true}, {Name: "seqlen", Unit: "tokens"}, {Name: "heads", Unit: "q:kv"},
		{Name: "pass"}, {Name: "area", Unit: "pairs"}, {Name: "flops", Unit: "GFLOP"},
	}}
	for _, k := range s.Kernels {
		t.Columns = append(t.Columns, TextColumn{Name: k, Unit: "TFLOP/s"})
	}
	sum := map[string]float64{}
	n := map[string]int{}
	for _, c := range s.Cases {
		row := []string{c.Mask, fmt.Sprint(c.SeqLen), fmt.Sprintf("%d:%d", c.HeadsQ, c.HeadsKV), c.Pass,
			fmt.Sprint(s.Area[c]), fmt.Sprintf("%.3f", s.FLOPs[c]/1e9)}
		for _, k := range s.Kernels {
			cell, ok := s.Cells[c][k]
			v := "-"
			switch {
			case !ok:
			case cell.Status == results.StatusOK:
				v = formatTFLOPs(cell.TFLOPs)
				sum[k] += cell.TFLOPs
				n[k]++
			default:
				v = string(cell.Status)
			}
			row = append(row, v)
		}
		t.Rows = append(t.Rows, row)
	}
	rows := 0
	for _, n := range s.Counts {
		rows += n
	}
	sampled, most := 0, 0
	for _, c := range s.Cases {
		if n := s.Sampled[c]; n > 1 {
			sampled, most = sampled+1, max(most, n)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Cases: %d  Rows: %d%s  Avg TFLOP/s:", len(s.Cases), rows, statusCounts(s.Counts))
	for _, k := range s.Kernels {
		if n[k] == 0 {
			fmt.Fprintf(&b, " %s -", k)
		} else {
			fmt.Fprintf(&b, " %s %s", k, formatTFLOPs(sum[k]/float64(n[k])))
		}
	}
	t.Summary = []string{b.String()}
	if sampled > 0 {
		t.Summary = append(t.Summary, fmt.Sprintf("area and flops of %d case(s) are the mean over their mask samples (up to %d, each of its own documents), as their TFLOP/s is the mean of the samples' rates", sampled, most))
	}
	return t.Write(w)
}

// WriteClockTable prints, in the kernel table's layout, each kernel's mean SM clock while its
// ok rows were timed (sm_clock_mhz, MHz), "-" where none was read, and per kernel the range
// over its cases: on a power-capped card, which kernel ran at which clock beside which.
func WriteClockTable(w io.Writer, title string, s Summary) error {
	t := TextTable{Title: []string{title}, Columns: []TextColumn{
		{Name: "mask", Left: true}, {Name: "seqlen", Unit: "tokens"}, {Name: "heads", Unit: "q:kv"}, {Name: "pass"},
	}}
	for _, k := range s.Kernels {
		t.Columns = append(t.Columns, TextColumn{Name: k, Unit: "MHz"})
	}
	lo, hi := map[string]float64{}, map[string]float64{}
	for _, c := range s.Cases {
		row := []string{c.Mask, fmt.Sprint(c.SeqLen), fmt.Sprintf("%d:%d", c.HeadsQ, c.HeadsKV), c.Pass}
		for _, k := range s.Kernels {
			v := "-"
			if cell, ok := s.Cells[c][k]; ok && cell.Status == results.StatusOK && cell.ClockMHz > 0 {
				v = fmt.Sprintf("%.0f", cell.ClockMHz)
				if l, seen := lo[k]; !seen || cell.ClockMHz < l {
					lo[k] = cell.ClockMHz
				}
				hi[k] = max(hi[k], cell.ClockMHz)
			}
			row = append(row, v)
		}
		t.Rows = append(t.Rows, row)
	}
	var b strings.Builder
	b.WriteString("SM clock range over the cases:")
	for _, k := range s.Kernels {
		if _, ok := lo[k]; !ok {
			fmt.Fprintf(&b, " %s -;", k)
			continue
		}
		fmt.Fprintf(&b, " %s %.0f-%.0f;", k, lo[k], hi[k])
	}
	t.Summary = []string{b.String()}
	return t.Write(w)
}

// WriteReport prints the nccl-tests style table of rows and, when several kernels ran,
// each one's ratio to the fastest: what `longca kernel`, `run` and `report` print.
func WriteReport(w io.Writer, rows []results.Row, pass, title string) error {
	sum := Summarize(rows, pass)
	if err := WriteTable(w, title, sum); err != nil {
		return err
	}
	for _, l := range []string{GPUStateLine(rows, pass, false), PowerCapHint(rows, pass, false), ProvenanceLine(rows, pass, false)} {
		if l == "" {
			continue
		}
		if _, err := fmt.Fprintf(w, "# %s\n", l); err != nil {
			return err
		}
	}
	if len(sum.Kernels) < 2 {
		return nil
	}
	if _, err := io.WriteString(w, "#\n"); err != nil {
		return err
	}
	return WriteRatioTable(w, "each kernel's TFLOP/s over the fastest kernel's, per case", sum)
}
