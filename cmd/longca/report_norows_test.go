package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A report with no row at all to show is refused (exit 2, one line), saying what the
// files are and how to free the run id, as merge refuses them
// (TestMergeOfRunsWithoutRowsExitsTwo): it printed a table of 0 rows and exited 0. A
// folder where some run holds rows reports them as before, naming the runs without rows on
// stderr.
func TestReportOfRunsWithoutRowsExitsTwo(t *testing.T) {
	closed, open, mixed, damaged := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
	emptyRun(t, closed, "x", 4, true)
	emptyRun(t, open, "x", 2, false)
	emptyRun(t, damaged, "x", 1, true)
	if err := os.WriteFile(filepath.Join(damaged, "y.rank-0-of-1.arrow"), []byte("not an arrow file"), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyRun(t, mixed, "x", 2, true)
	oneRowRun(t, mixed, "a")
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"report", closed}, []string{"report " + closed + ": nothing to report", "the 4 rank file(s) of run(s) x hold no rows and were all closed",
			"stopped before its first row", "rm " + closed + "/x.rank-*.arrow"}},
		{[]string{"report", open}, []string{"the 2 rank file(s) of run(s) x hold no rows and 2 of them are not closed", "still writing"}},
		{[]string{"report", filepath.Join(closed, "x.rank-1-of-4.arrow")}, []string{"nothing to report", "rank 1 of 4 of run x holds no rows and was closed",
			"longca report " + closed, "rm " + closed + "/x.rank-*.arrow"}},
		{[]string{"report", closed, "--pass", "fwd", "--masks", "causal"}, []string{"nothing to report"}}, // (not the filters' own refusals)
		// a run whose file cannot be read is not called one without rows; the file is named
		{[]string{"report", damaged}, []string{"the 1 rank file(s) of run(s) x hold no rows", "1 file(s) could not be read", "y.rank-0-of-1.arrow"}},
	} {
		out, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.wants...)
		if out != "" {
			t.Errorf("%v: a refused report printed %q", c.args, out)
		}
	}
	out, errOut, code := captureRun(t, "report", mixed)
	if code != 0 || !strings.Contains(out, "(1 rows in all)") ||
		!strings.Contains(errOut, "the 2 rank file(s) of run(s) x hold no rows") || !strings.Contains(errOut, "rm "+mixed+"/x.rank-*.arrow") {
		t.Errorf("report of a folder where a run holds rows: exit %d, stdout:\n%s\nstderr:\n%s\nwant its row, and run x named on stderr", code, out, errOut)
	}
	if _, errOut, code := captureRun(t, "merge", mixed); code != 0 {
		t.Fatalf("merge %s: exit %d: %s", mixed, code, errOut)
	}
	out, errOut, code = captureRun(t, "report", mixed) // (through its merged.arrow)
	if code != 0 || !strings.Contains(out, "(1 rows in all)") || !strings.Contains(errOut, "run(s) x hold no rows") {
		t.Errorf("report of the merged folder: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	// the merged file given by name names the run it merged without a row (it said nothing)
	merged := filepath.Join(mixed, "merged.arrow")
	out, errOut, code = captureRun(t, "report", merged)
	if code != 0 || !strings.Contains(out, "(1 rows in all)") || !strings.Contains(errOut, "run(s) x merged into "+merged+" hold no rows") {
		t.Errorf("report of the merged file by name: exit %d, stdout:\n%s\nstderr:\n%s\nwant its row, and run x named on stderr", code, out, errOut)
	}
}
