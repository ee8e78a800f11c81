package present

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

func ratioRows() []results.Row {
	mk := func(kernel string, seqlen int64, st results.Status, tf float64) results.Row {
		r := results.Row{Kernel: kernel, Mask: "causal", SeqLen: seqlen, HeadsQ: 64, HeadsKV: 8, Pass: "fwd", Status: st}
		if st == results.StatusOK {
			r.TFLOPs = results.Ptr(tf)
		}
		return r
	}
	return []results.Row{
		mk("cuda", 8192, results.StatusOK, 250), mk("torch:flex", 8192, results.StatusOK, 400), mk("torch:cudnn", 8192, results.StatusOK, 500),
		mk("cuda", 16384, results.StatusOK, 300), mk("torch:flex", 16384, results.StatusWrong, 0), mk("torch:cudnn", 16384, results.StatusUnsupported, 0),
	}
}

func TestRatioTable(t *testing.T) {
	s := Summarize(ratioRows(), "")
	if k, r := s.Fastest(s.Cases[0]); k != "torch:cudnn" || r != 500 {
		t.Fatalf("fastest %s %g", k, r)
	}
	var b strings.Builder
	if err := WriteRatioTable(&b, "t", s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		" causal                    8192    64:8     fwd          0.50          0.80          1.00  torch:cudnn 500.0",
		" causal                   16384    64:8     fwd          1.00         wrong   unsupported  cuda 300.0",
		"cuda 0.71 (2) 1; torch:flex 0.80 (1) 0; torch:cudnn 1.00 (1) 1;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ratio table lacks %q:\n%s", want, out)
		}
	}
}

func TestBarCharts(t *testing.T) {
	dir := t.TempDir()
	files, err := WriteBarCharts(dir, Summarize(ratioRows(), ""))
	if err != nil || len(files) != 1 || filepath.Base(files[0]) != "bars_causal_fwd_64-8.png" {
		t.Fatalf("%v %v", files, err)
	}
	if st, err := os.Stat(files[0]); err != nil || st.Size() < 2000 {
		t.Fatalf("%v %v", st, err)
	}
	one := Summarize(ratioRows()[:1], "")
	if files, err := WriteBarCharts(dir, one); err != nil || len(files) != 0 {
		t.Fatalf("one kernel: %v %v", files, err)
	}
}

// Against a named kernel: the ratios of the cases it ran ok, the others counted and left
// out, and per kernel the geometric mean, the cases at the bound and the lowest.
func TestAgainstTable(t *testing.T) {
	s := Summarize(ratioRows(), "")
	var b strings.Builder
	if err := WriteAgainstTable(&b, "t", s, "torch:flex", 1.3, false); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"on the 1 cases torch:flex ran ok (1 others left out)",
		" causal                    8192    64:8     fwd            0.62            1.25  400.0",
		"(x torch:flex)  (x torch:flex)  (TFLOP/s)",
		"# cuda against torch:flex: geomean 0.625 over 1 cases, at 1.30x or above on 0 of 1, lowest 0.625 (causal 8192 64:8 fwd)",
		"# torch:cudnn against torch:flex: geomean 1.250 over 1 cases, at 1.30x or above on 0 of 1",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("against table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "16384") {
		t.Errorf("a case torch:flex did not run ok is shown:\n%s", out)
	}
	b.Reset()
	if err := WriteAgainstTable(&b, "t", s, "cuda", 1.0, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		" causal                   16384    64:8     fwd         wrong   unsupported  300.0",
		// a case cuda ran ok and the kernel did not is not reached, and named
		"# torch:cudnn against cuda: geomean 2.000 over 1 cases, at 1.00x or above on 1 of 2, lowest 2.000 (causal 8192 64:8 fwd); not ok on 1 more (unsupported 1)",
		"# torch:flex against cuda: geomean 1.600 over 1 cases, at 1.00x or above on 1 of 2, lowest 1.600 (causal 8192 64:8 fwd); not ok on 1 more (wrong 1)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("against cuda lacks %q:\n%s", want, b.String())
		}
	}
}

// The rows' SM clocks while timed: the cell is their mean, the against table counts the cases
// timed at clocks 3% or more apart and names those below the bound whose kernel ran at the
// lower clock; rows without readings add no clock line.
func TestAgainstTableClocks(t *testing.T) {
	mk := func(kernel string, seqlen int64, tf float64, mhz ...float64) []results.Row {
		var rows []results.Row
		for _, m := range mhz {
			r := results.Row{Kernel: kernel, Mask: "full", SeqLen: seqlen, HeadsQ: 64, HeadsKV: 8, Pass: "bwd", Status: results.StatusOK, TFLOPs: results.Ptr(tf)}
			if m > 0 {
				r.SMClockMHz = results.Ptr(m)
			}
			rows = append(rows, r)
		}
		return rows
	}
	var rows []results.Row
	for _, g := range [][]results.Row{
		mk("cudnn", 8192, 540, 1980), mk("cuda", 8192, 550, 1980), // level clocks, reached
		mk("cudnn", 16384, 550, 1646), mk("cuda", 16384, 530, 1500, 1626), // below, cuda slower clock (mean 1563)
		mk("cudnn", 32768, 545, 1500), mk("cuda", 32768, 540, 1600), // below, cuda faster clock
		mk("cudnn", 49152, 545, 1500), mk("cuda", 49152, 560, 0), // cuda read nothing: not counted
	} {
		rows = append(rows, g...)
	}
	// a case of one kernel with an error row first, then ok rows of which one read no clock
	errRow := results.Row{Kernel: "cudnn", Mask: "causal", SeqLen: 8192, HeadsQ: 64, HeadsKV: 8, Pass: "bwd", Status: results.StatusError, SMClockMHz: results.Ptr(900.0)}
	rows = append(rows, errRow)
	rows = append(rows, mk("cudnn", 8192, 500, 1800, 0, 1700)...)
	for i := range rows[len(rows)-3:] {
		rows[len(rows)-3+i].Mask = "causal"
	}
	s := Summarize(rows, "")
	if c := s.Cells[s.Cases[1]]["cuda"]; c.ClockMHz != 1563 || c.N != 2 {
		t.Fatalf("cell %+v, want the mean clock 1563 over 2 rows", c)
	}
	causal := CaseKey{"causal", 8192, 64, 8, "bwd"}
	if c := s.Cells[causal]["cudnn"]; c.Status != results.StatusOK || c.N != 3 || c.ClockMHz != 1750 {
		t.Fatalf("cell %+v, want ok over 3 rows, the clock 1750 from the 2 that read one (the error row's left out)", c)
	}
	var b strings.Builder
	if err := WriteAgainstTable(&b, "t", s, "cudnn", 1.0, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"lowest 0.964 (full 16384 64:8 bwd; SM clock 1563 vs 1646 MHz)",
		"#   SM clocks while timed: 2 of 3 cases 3% or more apart; below 1.00x with cuda at the lower clock: 1 (full 16384 64:8 bwd: 1563 vs 1646 MHz)\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("against table lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := WriteAgainstTable(&b, "t", Summarize(ratioRows(), ""), "cuda", 1.0, false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "SM clock") {
		t.Errorf("rows without readings got a clock note:\n%s", b.String())
	}
}

// --clocks: each kernel's mean SM clock per case in the table's layout, "-" where none was
// read or the kernel did not run ok, and each kernel's range over its cases.
func TestClockTable(t *testing.T) {
	ok := func(kernel string, seqlen int64, mhz float64) results.Row {
		r := results.Row{Kernel: kernel, Mask: "full", SeqLen: seqlen, HeadsQ: 64, HeadsKV: 8, Pass: "fwd", Status: results.StatusOK, TFLOPs: results.Ptr(500.0)}
		if mhz > 0 {
			r.SMClockMHz = results.Ptr(mhz)
		}
		return r
	}
	rows := []results.Row{ok("cuda", 8192, 1980), ok("cudnn", 8192, 1900), ok("cuda", 16384, 1563), ok("cudnn", 16384, 0),
		{Kernel: "torch:flex", Mask: "full", SeqLen: 8192, HeadsQ: 64, HeadsKV: 8, Pass: "fwd", Status: results.StatusError, SMClockMHz: results.Ptr(1700.0)}}
	var b strings.Builder
	if err := WriteClockTable(&b, "t", Summarize(rows, "")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  full     8192   64:8  fwd  1980  1900          -\n",
		"  full    16384   64:8  fwd  1563     -          -\n",
		"# SM clock range over the cases: cuda 1563-1980; cudnn 1900-1900; torch:flex -;",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("clock table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestAgainstTablePairs: over a folder of runs (one process each) whose two kernels share
// each run's state, --pairs reads a case's ratio as the median of each run's own ratio: here
// cuda ahead in two of three runs by 7-9% and behind in one by 6%, where the means' ratio says
// 1.04; a case with one run keeps the means' ratio, and a lone run says so.
func TestAgainstTablePairs(t *testing.T) {
	row := func(run, kernel string, n int64, tf float64) results.Row {
		r := settingRow(kernel, tf)
		r.RunID, r.SeqLen = run, n
		return r
	}
	var rows []results.Row
	for i, p := range [][2]float64{{700, 640}, {650, 690}, {710, 660}} {
		id := fmt.Sprintf("p-%d", i)
		rows = append(rows, row(id, "cuda", 16384, p[0]), row(id, "cudnn", 16384, p[1]))
	}
	rows = append(rows, row("p-0", "cuda", 8192, 500), row("p-0", "cudnn", 8192, 400))
	s := Summarize(rows, "")
	c16 := s.Cases[0]
	for _, c := range s.Cases {
		if c.SeqLen == 16384 {
			c16 = c
		}
	}
	if m, n, ahead := s.PairedRatio(c16, "cuda", "cudnn"); n != 3 || ahead != 2 || math.Abs(m-710.0/660) > 1e-12 {
		t.Fatalf("PairedRatio = %v over %d, ahead %d; want 710/660 over 3, ahead 2", m, n, ahead)
	}
	var b strings.Builder
	if err := WriteAgainstTable(&b, "t", s, "cudnn", 1.0, true); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{" 1.08 ", " 1.25 ", "the median of the same-process ratios on 1 of 2 cases (the rest the means'), over 3 pairs, cuda ahead in 2"} {
		if !strings.Contains(out, want) {
			t.Fatalf("paired table lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := WriteAgainstTable(&b, "t", Summarize(rows[6:], ""), "cudnn", 1.0, true); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "no case has two processes or samples with both cuda and cudnn") {
		t.Fatalf("one run:\n%s", b.String())
	}
	// one launched run of four ranks (processes, one run id): each rank pairs its own two
	// rates; a rank whose cuda row is ok without a rate (0) pairs with nothing
	var launched []results.Row
	for rank, p := range [][2]float64{{600, 620}, {500, 515}, {700, 720}, {0, 640}} {
		a, b := row("job", "cuda", 16384, p[0]), row("job", "cudnn", 16384, p[1])
		a.Rank, b.Rank = int64(rank), int64(rank)
		launched = append(launched, a, b)
	}
	ls := Summarize(launched, "")
	if m, n, ahead := ls.PairedRatio(ls.Cases[0], "cuda", "cudnn"); n != 3 || ahead != 0 || math.Abs(m-500.0/515) > 1e-12 {
		t.Fatalf("ranks of one run: %v over %d, ahead %d; want 500/515 over 3 (the rank without a rate left out), ahead 0", m, n, ahead)
	}
	b.Reset()
	if err := WriteAgainstTable(&b, "t", s, "cudnn", 1.0, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), " 1.04 ") || strings.Contains(b.String(), "paired") {
		t.Fatalf("unpaired: the means' ratio (2060/1990 = 1.04):\n%s", b.String())
	}
}
