package harness

import (
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

// writeBaselineRows writes rows as rank 0 of 1 of run id into a new folder, and returns it.
func writeBaselineRows(t *testing.T, id string, rows ...results.Row) string {
	t.Helper()
	dir := t.TempDir()
	w, err := results.Create(dir, id, 0, 1)
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
	return dir
}

// A --baseline file without an ok kernel row (a cp run's, a sparse run's, a kernel run
// whose cases all failed) is refused by Load, naming --baseline and what it needs; CP
// rows read against it lacked kernel_tflops and cp_efficiency, silently.
func TestBaselineNeedsOKKernelRows(t *testing.T) {
	row := func(bench string, st results.Status, tflops *float64) results.Row {
		return results.Row{RunID: "r", Bench: bench, Kernel: "ref", Mask: "causal", SeqLen: 128, HeadsQ: 2, HeadsKV: 1,
			HeadDim: 16, DType: "bf16", Pass: "fwd", Status: st, TFLOPs: tflops}
	}
	for _, c := range []struct {
		name string
		rows []results.Row
		want string // "" when the file is a baseline
	}{
		{"cp", []results.Row{row("cp", results.StatusOK, results.Ptr(1.0)), row("cp", results.StatusOK, results.Ptr(1.0))}, "2 rows: 2 cp"},
		{"sparse", []results.Row{row("sparse", results.StatusOK, results.Ptr(1.0))}, "1 rows: 1 sparse"},
		{"failed", []results.Row{row("kernel", results.StatusOOM, nil)}, "1 rows: 1 kernel (none ok"},
		{"empty", nil, "no rows"},
		// the eleventh pass: a rate of 5e-324 made every CP row's cp_efficiency +Inf, and
		// report then refused the run's rows
		{"tiny-rate", []results.Row{row("kernel", results.StatusOK, results.Ptr(5e-324))}, "1 rows: 1 kernel"},
		{"kernel", []results.Row{row("kernel", results.StatusOK, results.Ptr(2.0)), row("cp", results.StatusOK, results.Ptr(1.0))}, ""},
	} {
		dir := writeBaselineRows(t, c.name, c.rows...)
		b := &Baseline{File: dir}
		err := b.Load()
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			} else if v, _, _ := b.Lookup(BaselineKey{"ref", "causal", 128, 2, 1, 16, "bf16", "fwd"}, BaselineCond{}); v != 2 {
				t.Errorf("%s: baseline %v, want 2", c.name, v)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: a file without an ok kernel row was accepted as --baseline", c.name)
			continue
		}
		for _, w := range []string{"--baseline " + dir, c.want, "longca kernel", "measure or none"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
}

// A --baseline figure serves a CP row only where the file's rows of its case were measured
// as the row was: on the same card and documents, and under one condition (a folder of two
// runs' rows, an H100's and an H200's, would have given their mean).
func TestBaselineMatchesCardAndDocuments(t *testing.T) {
	key := BaselineKey{"ref", "causal_document", 128, 2, 1, 16, "bf16", "fwd"}
	row := func(dev, docs string, tf float64) results.Row {
		return results.Row{RunID: "r", Bench: "kernel", Kernel: "ref", Mask: "causal_document", SeqLen: 128, HeadsQ: 2, HeadsKV: 1,
			HeadDim: 16, DType: "bf16", Pass: "fwd", Status: results.StatusOK, TFLOPs: results.Ptr(tf), Device: dev, DocSource: docs}
	}
	h200 := BaselineCond{Device: "NVIDIA H200", DocSource: "pile"}
	for _, c := range []struct {
		name string
		rows []results.Row
		want BaselineCond
		tf   float64
		why  string
	}{
		{"same card and documents, another index", []results.Row{row("cuda:3 NVIDIA H200", "pile", 500), row("cuda:0 NVIDIA H200", "pile", 520)}, h200, 510, ""},
		{"another card", []results.Row{row("cuda:0 NVIDIA H100 80GB HBM3", "pile", 400)}, h200, 0, "measured on NVIDIA H100 80GB HBM3 with documents pile and this run's on NVIDIA H200 with documents pile"},
		{"other documents", []results.Row{row("cuda:0 NVIDIA H200", "prolong64k", 400)}, h200, 0, "with documents prolong64k and this run's on NVIDIA H200 with documents pile"},
		{"two cards in one file", []results.Row{row("cuda:0 NVIDIA H200", "pile", 500), row("cuda:0 NVIDIA H100 80GB HBM3", "pile", 400)}, h200, 0,
			"measured under NVIDIA H100 80GB HBM3 with documents pile; NVIDIA H200 with documents pile, whose mean no run measured"},
		{"the CPU", []results.Row{row("cpu", "", 1)}, BaselineCond{Device: "cpu"}, 1, ""},
	} {
		b := &Baseline{File: writeBaselineRows(t, "r", c.rows...)}
		tf, why, err := b.Lookup(key, c.want)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if tf != c.tf || (c.why == "") != (why == "") || !strings.Contains(why, c.why) {
			t.Errorf("%s: figure %v (%q), want %v (%q)", c.name, tf, why, c.tf, c.why)
		}
	}
}
