package results

import (
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// hostileRow is an ok kernel row whose median and TFLOP/s are v.
func hostileRow(seqlen int64, v float64) Row {
	return Row{RunID: "h", Bench: "kernel", Kernel: "ref", Mask: "causal", SeqLen: seqlen, Pass: "fwd",
		Status: StatusOK, FLOPs: 1e9, MedianMs: Ptr(v), TFLOPs: Ptr(v)}
}

// TestLoadLeavesOutRowsNoMeasurementHas: rows of a valid file (their checksums hold)
// whose times or rates are NaN, infinite or negative were read as measurements: a
// report's average became NaN, a CP run's --baseline gave its rows kernel_tflops NaN
// and cp_efficiency NaN, simulate --compare an error of NaN. LoadChecked leaves them
// out, naming them, from a file, a folder's rank files and its merged file; the good
// rows stay, and a file none of whose rows is good is a usage error.
func TestLoadLeavesOutRowsNoMeasurementHas(t *testing.T) {
	dir := t.TempDir()
	rows := []Row{hostileRow(128, 0.5), hostileRow(256, math.NaN()), hostileRow(512, math.Inf(1)),
		hostileRow(1024, -3), hostileRow(2048, 0.25),
		{RunID: "h", Bench: "kernel", Status: StatusError, Reason: "x"}}
	w, err := Create(dir, "h", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rankFile := filepath.Join(dir, FileName("h", 0, 1))
	check := func(what string, l Loaded, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var lens []int64
		for _, r := range l.Rows {
			lens = append(lens, r.SeqLen)
		}
		if len(lens) != 3 || lens[0] != 128 || lens[1] != 2048 || lens[2] != 0 {
			t.Errorf("%s: rows of lengths %v, want [128 2048 0] (the ok rows with figures, and the error row)", what, lens)
		}
		if len(l.Skipped) != 1 || !strings.Contains(l.Skipped[0], "3 of its 6 rows left out") ||
			!strings.Contains(l.Skipped[0], "median_ms NaN") || !strings.Contains(l.Skipped[0], "tflops +Inf") || !strings.Contains(l.Skipped[0], "median_ms -3") {
			t.Errorf("%s: skipped %q, want the three rows named", what, l.Skipped)
		}
	}
	l, err := LoadChecked(rankFile)
	check("the rank file", l, err)
	l, err = LoadChecked(dir)
	check("the folder of rank files", l, err)
	if _, err := Merge(dir, MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err = LoadChecked(dir)
	check("the folder with its merged file", l, err)
	if f, err := Open(filepath.Join(dir, "merged.arrow")); err != nil || f.NumRows() != 6 {
		t.Errorf("the merge copies every row as it is: %v", err)
	}

	// A file of such rows only is refused, naming it.
	bad := t.TempDir()
	w, err = Create(bad, "b", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(hostileRow(128, math.NaN()))
	w.Close()
	_, err = LoadChecked(filepath.Join(bad, FileName("b", 0, 1)))
	if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "none of its rows can be used") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a file of NaN rows only: %v, want a one-line usage error", err)
	}
	// So is its folder, through its rank file and through its merged file (which gave an
	// empty table without a word).
	if _, err := LoadChecked(bad); !errors.Is(err, ErrUsage) {
		t.Errorf("a folder of a rank file of NaN rows only: %v, want a usage error", err)
	}
	if _, err := Merge(bad, MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadChecked(bad); !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), "merged.arrow: none of its rows can be used") {
		t.Errorf("a folder whose merged file holds NaN rows only: %v, want a usage error naming it", err)
	}
}

// TestLoadLeavesOutRowsOfImpossibleState: an ok row whose card state or check figures are
// NaN, infinite or negative (a clock of NaN, a power of +Inf, a check error of NaN) is left
// out as a row with such a time is: report --clocks had printed "SM clock NaN-NaN MHz".
func TestLoadLeavesOutRowsOfImpossibleState(t *testing.T) {
	dir := t.TempDir()
	good := hostileRow(128, 0.5)
	good.SMClockMHz, good.PowerW, good.CheckErr, good.CheckTol = Ptr(1980.0), Ptr(700.0), Ptr(0.001), Ptr(0.01)
	clock, power, checkErr := good, good, good
	clock.SeqLen, clock.SMClockMHz = 256, Ptr(math.NaN())
	power.SeqLen, power.PowerW = 512, Ptr(math.Inf(1))
	checkErr.SeqLen, checkErr.CheckErr = 1024, Ptr(math.NaN())
	w, err := Create(dir, "s", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []Row{good, clock, power, checkErr} {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := LoadChecked(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Rows) != 1 || l.Rows[0].SeqLen != 128 {
		t.Errorf("%d rows kept, want only the row of 128 tokens", len(l.Rows))
	}
	for _, want := range []string{"sm_clock_mhz NaN", "power_w +Inf", "check_err NaN"} {
		if len(l.Skipped) != 1 || !strings.Contains(l.Skipped[0], want) {
			t.Errorf("skipped %q does not name %q", l.Skipped, want)
		}
	}
}
