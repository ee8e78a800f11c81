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
		{"kernel", []results.Row{row("kernel", results.StatusOK, results.Ptr(2.0)), row("cp", results.StatusOK, results.Ptr(1.0))}, ""},
	} {
		dir := writeBaselineRows(t, c.name, c.rows...)
		b := &Baseline{File: dir}
		err := b.Load()
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			} else if v, _ := b.Lookup(BaselineKey{"ref", "causal", 128, 2, 1, 16, "bf16", "fwd"}); v != 2 {
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
