package main

import (
	"path/filepath"
	"testing"
)

// report's bad input, one line and exit 2 each: a --pass the rows do not have (it printed
// an empty table and exit 0, where --masks without rows exits 2), an empty --against (it
// was ignored, and --at then asked for --against), and a CSV export given for the Arrow
// file it came from (named as such, with the file to give instead).
func TestReportRefusesWhatItCannotShow(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k")
	args := []string{"--log-level", "warn", "kernel", "--kernels", "ref", "--masks", "causal", "--seqlens", "64", "--heads", "2:1", "--head-dim", "8",
		"-w", "0", "-n", "1", "--out", dir, "--run-id", "k"}
	if _, errOut, code := captureRun(t, args...); code != 0 {
		t.Fatalf("%v: exit %d: %s", args, code, errOut)
	}
	csv := filepath.Join(dir, "k.merged.arrow")
	if _, errOut, code := captureRun(t, "merge", dir, "--csv", "--out", csv); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, errOut)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"report", dir, "--pass", "fwd+bwd"}, []string{"--pass fwd+bwd: no fwd+bwd rows in " + dir, "its passes: fwd, bwd"}},
		{[]string{"report", dir, "--against", ""}, []string{"--against needs a kernel of the report", "--against cudnn"}},
		{[]string{"report", filepath.Join(dir, "k.merged.csv")}, []string{"a CSV or Parquet export is for notebooks", "give the Arrow file it was exported from"}},
	} {
		_, errOut, code := captureRun(t, tc.args...)
		checkUsageError(t, tc.args, code, errOut, tc.want...)
	}
}
