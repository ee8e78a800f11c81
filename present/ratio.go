package present

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/results"
)

// Fastest is the kernel with the most TFLOP/s among a case's ok cells ("" when none is
// ok) and that rate.
func (s Summary) Fastest(c CaseKey) (string, float64) {
	best, rate := "", 0.0
	for _, k := range s.Kernels {
		if cell, ok := s.Cells[c][k]; ok && cell.Status == results.StatusOK && cell.TFLOPs > rate {
			best, rate = k, cell.TFLOPs
		}
	}
	return best, rate
}

// WriteRatioTable prints "which is fastest here, and by how much": per case (mask,
// length, heads, pass) each kernel's TFLOP/s over the fastest kernel's (1.00 is the
// fastest; a status word where the kernel did not run ok), and the fastest kernel's
// name. Lines that are not cases start with '#'; the closing line gives each kernel's
// geometric mean ratio over the cases it ran and how often it was the fastest.
func WriteRatioTable(w io.Writer, title string, s Summary) error {
	kw := 12
	for _, k := range s.Kernels {
		kw = max(kw, len(k)+2)
	}
	mw := s.maskWidth()
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n#\n", title)
	writeRatioColumns(&b, mw, kw, s.Kernels, "(x fastest)", "fastest")
	logSum := map[string]float64{}
	n := map[string]int{}
	wins := map[string]int{}
	for _, c := range s.Cases {
		best, rate := s.Fastest(c)
		writeCase(&b, mw, c)
		for _, k := range s.Kernels {
			cell, ok := s.Cells[c][k]
			v := "-"
			switch {
			case !ok:
			case cell.Status == results.StatusOK && rate > 0:
				r := cell.TFLOPs / rate
				v = fmt.Sprintf("%.2f", r)
				logSum[k] += math.Log(r)
				n[k]++
			default:
				v = string(cell.Status)
			}
			fmt.Fprintf(&b, " %*s", kw, v)
		}
		if best == "" {
			fmt.Fprintf(&b, "  %s\n", "-")
		} else {
			wins[best]++
			fmt.Fprintf(&b, "  %s %s\n", best, formatTFLOPs(rate))
		}
	}
	b.WriteString("# Geomean x fastest (cases run) and times fastest:")
	for _, k := range s.Kernels {
		if n[k] == 0 {
			fmt.Fprintf(&b, " %s - (0) %d;", k, wins[k])
			continue
		}
		fmt.Fprintf(&b, " %s %.2f (%d) %d;", k, math.Exp(logSum[k]/float64(n[k])), n[k], wins[k])
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteAgainstTable prints every kernel against one named kernel, base: per case where base
// ran ok, each other kernel's TFLOP/s over base's (a status word where it did not run ok);
// then, per kernel, over the cases both ran, the geometric mean and the lowest with its case,
// and how many of the cases base ran ok it reaches at on (1.0: as fast as base; 1.3: 30%
// faster; a case it did not run ok counts as not reached, and is named by its status). "Is my kernel at cuDNN's rate
// on these masks, and where not?" Lines that are not cases start with '#'. Cases base did not
// run ok are counted in the header, not shown. Where the rows carry the GPU's SM clock while
// they were timed (--gpu-state), a closing line per kernel says on how many cases the two
// kernels ran at clocks ClockApart or more apart, and names the cases below at whose
// kernel ran at the lower clock: under a power or thermal cap a ratio is partly the
// card's state, not only the kernels'. A CP case's clock is the row the report keeps for it
// (its lowest rank's: onePerCPCase), one GPU of the run's.
//
// paired reads each case's ratio as PairedRatio's median where two or more processes' samples
// hold both kernels (a case with fewer keeps the means' ratio), and each kernel's line says on
// how many cases, over how many pairs, and in how many it was ahead.
func WriteAgainstTable(w io.Writer, title string, s Summary, base string, at float64, paired bool) error {
	kw := max(12, len(base)+5) // the units line's "(x base)"
	var others []string
	for _, k := range s.Kernels {
		if k != base {
			others = append(others, k)
			kw = max(kw, len(k)+2)
		}
	}
	mw := s.maskWidth()
	type low struct {
		r float64
		c CaseKey
	}
	logSum, n, reach, lowest := map[string]float64{}, map[string]int{}, map[string]int{}, map[string]low{}
	clk := map[string]*clockNote{}
	type pairNote struct{ cases, pairs, ahead int }
	pn := map[string]*pairNote{}
	failed := map[string]map[results.Status]int{} // cases base ran ok and the kernel did not
	var rowsOut strings.Builder
	skipped := 0
	for _, c := range s.Cases {
		bc, ok := s.Cells[c][base]
		if !ok || bc.Status != results.StatusOK || bc.TFLOPs <= 0 {
			skipped++
			continue
		}
		writeCase(&rowsOut, mw, c)
		for _, k := range others {
			cell, ok := s.Cells[c][k]
			v := "-"
			switch {
			case !ok:
			case cell.Status == results.StatusOK && cell.TFLOPs > 0:
				r := cell.TFLOPs / bc.TFLOPs
				if paired {
					if m, np, na := s.PairedRatio(c, k, base); np >= 2 {
						r = m
						if pn[k] == nil {
							pn[k] = &pairNote{}
						}
						pn[k].cases, pn[k].pairs, pn[k].ahead = pn[k].cases+1, pn[k].pairs+np, pn[k].ahead+na
					}
				}
				v = fmt.Sprintf("%.2f", r)
				logSum[k] += math.Log(r)
				n[k]++
				if r >= at {
					reach[k]++
				}
				if l, seen := lowest[k]; !seen || r < l.r {
					lowest[k] = low{r, c}
				}
				if cell.ClockMHz > 0 && bc.ClockMHz > 0 {
					if clk[k] == nil {
						clk[k] = &clockNote{}
					}
					clk[k].add(c, r < at, cell.ClockMHz, bc.ClockMHz)
				}
			default:
				v = string(cell.Status)
				if cell.Status == results.StatusOK { // ok without a rate
					v = "-"
				}
				if failed[k] == nil {
					failed[k] = map[results.Status]int{}
				}
				failed[k][cell.Status]++
			}
			fmt.Fprintf(&rowsOut, " %*s", kw, v)
		}
		fmt.Fprintf(&rowsOut, "  %s\n", formatTFLOPs(bc.TFLOPs))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n# each kernel's TFLOP/s over %s's, on the %d cases %s ran ok (%d others left out)\n#\n", title, base, len(s.Cases)-skipped, base, skipped)
	writeRatioColumns(&b, mw, kw, others, "(x "+base+")", base)
	b.WriteString(rowsOut.String())
	for _, k := range others {
		// the cases base ran ok and k did not (wrong, error, oom, unsupported): never "reached"
		var fails []string
		nf := 0
		for st, c := range failed[k] {
			nf += c
			name := string(st)
			if st == results.StatusOK {
				name = "no rate"
			}
			fails = append(fails, fmt.Sprintf("%s %d", name, c))
		}
		sort.Strings(fails)
		notOK := ""
		if nf > 0 {
			notOK = fmt.Sprintf("; not ok on %d more (%s)", nf, strings.Join(fails, ", "))
		}
		if n[k] == 0 {
			fmt.Fprintf(&b, "# %s against %s: no case both ran ok%s\n", k, base, notOK)
			continue
		}
		l := lowest[k]
		lowClock := ""
		if kc, bc := s.Cells[l.c][k].ClockMHz, s.Cells[l.c][base].ClockMHz; kc > 0 && bc > 0 {
			lowClock = fmt.Sprintf("; SM clock %.0f vs %.0f MHz", kc, bc)
		}
		fmt.Fprintf(&b, "# %s against %s: geomean %.3f over %d cases, at %.2fx or above on %d of %d, lowest %.3f (%s%s)%s\n",
			k, base, math.Exp(logSum[k]/float64(n[k])), n[k], at, reach[k], n[k]+nf, l.r, caseName(l.c), lowClock, notOK)
		if c := clk[k]; c != nil {
			b.WriteString(c.line(k, at))
		}
		if paired {
			if p := pn[k]; p != nil {
				fmt.Fprintf(&b, "#   paired within processes (--pairs): the median of the same-process ratios on %d of %d cases (the rest the means'), over %d pairs, %s ahead in %d\n", p.cases, n[k], p.pairs, k, p.ahead)
			} else {
				fmt.Fprintf(&b, "#   paired within processes (--pairs): no case has two processes or samples with both %s and %s: the ratios are the means'\n", k, base)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// PairedRatio is kernel k over base on case c paired within processes: for every process and
// sample (run_id, rank, sample) in which both have an ok rate there, k's over base's (each the
// mean of its rows); the median of those ratios, how many pairs, and in how many k was ahead.
// Where both kernels' rates are set per process (the H100's two rates at 8K and 16K,
// docs/perf.md "Calls 109-112"), a folder of runs read this way compares the kernels within
// each process, on the same documents, where the means' ratio mixes the processes' states.
func (s Summary) PairedRatio(c CaseKey, k, base string) (median float64, pairs, ahead int) {
	kr, br := s.runs[c][k], s.runs[c][base]
	var rs []float64
	for id, a := range kr {
		b, ok := br[id]
		if !ok || a.n == 0 || b.n == 0 || a.sum <= 0 || b.sum <= 0 {
			continue
		}
		r := (a.sum / float64(a.n)) / (b.sum / float64(b.n))
		rs = append(rs, r)
		if r > 1 {
			ahead++
		}
	}
	if len(rs) == 0 {
		return 0, 0, 0
	}
	return harness.Median(rs), len(rs), ahead
}

// ClockApart is how far apart (as a fraction of the lower) two rows' mean SM clocks must be
// for the against table to count their case as timed at different clocks.
const ClockApart = 0.03

// clockNote gathers, for one kernel against the base, the cases where both rows carry the
// GPU's SM clock while timed.
type clockNote struct {
	read, apart int
	slow        []string // cases below the bound where the kernel ran at the lower clock
}

func (c *clockNote) add(k CaseKey, below bool, kernelMHz, baseMHz float64) {
	c.read++
	if max(kernelMHz, baseMHz) < (1+ClockApart)*min(kernelMHz, baseMHz) {
		return
	}
	c.apart++
	if below && kernelMHz < baseMHz {
		c.slow = append(c.slow, fmt.Sprintf("%s: %.0f vs %.0f MHz", caseName(k), kernelMHz, baseMHz))
	}
}

// line is the kernel's closing clock line: how many cases were timed at clocks ClockApart or
// more apart, and the cases below at where the kernel ran at the lower (three named).
func (c *clockNote) line(k string, at float64) string {
	l := fmt.Sprintf("#   SM clocks while timed: %d of %d cases %.0f%% or more apart", c.apart, c.read, 100*ClockApart)
	if len(c.slow) > 0 {
		names := c.slow[:min(3, len(c.slow))]
		more := ""
		if len(c.slow) > 3 {
			more = fmt.Sprintf(", %d more", len(c.slow)-3)
		}
		l += fmt.Sprintf("; below %.2fx with %s at the lower clock: %d (%s%s)", at, k, len(c.slow), strings.Join(names, "; "), more)
	} else {
		l += fmt.Sprintf("; no case below %.2fx had %s at the lower of two clocks %.0f%% or more apart", at, k, 100*ClockApart)
	}
	return l + "\n"
}

// caseName is a case as the against table's closing lines name it: mask length q:kv pass.
func caseName(c CaseKey) string {
	return fmt.Sprintf("%s %d %d:%d %s", c.Mask, c.SeqLen, c.HeadsQ, c.HeadsKV, c.Pass)
}

// maskWidth is the mask column's width in the ratio tables: the longest case's mask, 21 at
// least.
func (s Summary) maskWidth() int {
	mw := 22
	for _, c := range s.Cases {
		mw = max(mw, len(c.Mask)+1)
	}
	return mw
}

// writeRatioColumns writes a ratio table's two header lines: the case's columns, a column of
// kw for each kernel (its unit line unit), then last, whose unit is TFLOP/s.
func writeRatioColumns(b *strings.Builder, mw, kw int, kernels []string, unit, last string) {
	fmt.Fprintf(b, "#%-*s %8s %7s %7s", mw-1, " mask", "seqlen", "heads", "pass")
	for _, k := range kernels {
		fmt.Fprintf(b, " %*s", kw, k)
	}
	fmt.Fprintf(b, "  %s\n", last)
	fmt.Fprintf(b, "#%-*s %8s %7s %7s", mw-1, "", "(tokens)", "(q:kv)", "")
	for range kernels {
		fmt.Fprintf(b, " %*s", kw, unit)
	}
	fmt.Fprintf(b, "  %s\n", "(TFLOP/s)")
}

// writeCase writes a ratio table's case columns: mask, length, heads, pass.
func writeCase(b *strings.Builder, mw int, c CaseKey) {
	fmt.Fprintf(b, " %-*s %8d %7s %7s", mw-1, c.Mask, c.SeqLen, fmt.Sprintf("%d:%d", c.HeadsQ, c.HeadsKV), c.Pass)
}
