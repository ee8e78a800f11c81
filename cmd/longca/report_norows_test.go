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

// TestReportOfDotNamesRowlessRuns: `report .` names a run without rows as `report DIR`
// does, where another file's name ends in its file's (a damaged ax.rank-0-of-1.arrow
// beside x.rank-0-of-1.arrow): the paths of a folder given as "." have no folder in front,
// and run x's was taken for named in the line about ax's (the review of the forty-second
// session's diff), so x went unnamed.
func TestReportOfDotNamesRowlessRuns(t *testing.T) {
	dir := t.TempDir()
	emptyRun(t, dir, "x", 1, true)
	oneRowRun(t, dir, "b")
	if err := os.WriteFile(filepath.Join(dir, "ax.rank-0-of-1.arrow"), []byte("not an arrow file"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, byDir, code := captureRun(t, "report", dir)
	if code != 0 || !strings.Contains(byDir, "run(s) x hold no rows") {
		t.Fatalf("report DIR: exit %d, stderr:\n%s\nwant run x named", code, byDir)
	}
	t.Chdir(dir)
	_, byDot, code := captureRun(t, "report", ".")
	if code != 0 || !strings.Contains(byDot, "run(s) x hold no rows") || !strings.Contains(byDot, "ax.rank-0-of-1.arrow") {
		t.Errorf("report .: exit %d, stderr:\n%s\nwant run x named as without rows, and ax's file as unreadable", code, byDot)
	}
}

func TestNamesPath(t *testing.T) {
	for _, c := range []struct {
		line, path string
		want       bool
	}{
		{"ax.rank-0-of-1.arrow: not an Arrow file", "x.rank-0-of-1.arrow", false},
		{"x.rank-0-of-1.arrow: not an Arrow file", "x.rank-0-of-1.arrow", true},
		{"open d/x.rank-0-of-1.arrow: permission denied", "d/x.rank-0-of-1.arrow", true},
		{"ax.rank-0-of-1.arrow and x.rank-0-of-1.arrow: bad", "x.rank-0-of-1.arrow", true},
		{"x.rank-0-of-1.arrowz: bad", "x.rank-0-of-1.arrow", false},
		{"file \"x.rank-0-of-1.arrow\" short", "x.rank-0-of-1.arrow", true},
		{"anything", "", false},
	} {
		if got := namesPath(c.line, c.path); got != c.want {
			t.Errorf("namesPath(%q, %q) = %v, want %v", c.line, c.path, got, c.want)
		}
	}
}
