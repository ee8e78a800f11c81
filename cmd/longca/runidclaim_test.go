package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

// emptyRun writes run id's rank files of n ranks in dir with no row: closed, or left open
// (a writer killed before its first row).
func emptyRun(t *testing.T, dir, id string, n int, closed bool) {
	t.Helper()
	for r := range n {
		w, err := results.Create(dir, id, r, n)
		if err != nil {
			t.Fatal(err)
		}
		if closed {
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A merge whose runs hold no row at all is refused (exit 2, one line, nothing written),
// saying what the files are and how to free the run id: it printed "merged 0 rows" and
// exited 0 on the empty files two cp runs that raced for one run id left (the probe of
// session 41, F2). A folder where some run holds rows merges as before.
func TestMergeOfRunsWithoutRowsExitsTwo(t *testing.T) {
	closed, open, mixed := t.TempDir(), t.TempDir(), t.TempDir()
	emptyRun(t, closed, "x", 4, true)
	emptyRun(t, open, "x", 2, false)
	emptyRun(t, mixed, "x", 2, true)
	oneRowRun(t, mixed, "a")
	for _, c := range []struct {
		args  []string
		wants []string
	}{
		{[]string{"merge", closed}, []string{"merge " + closed + ": nothing to merge", "the 4 rank file(s) of run(s) x hold no rows and were all closed",
			"stopped before its first row", "rm " + closed + "/x.rank-*.arrow"}},
		{[]string{"merge", open, "--csv"}, []string{"the 2 rank file(s) of run(s) x hold no rows and 2 of them are not closed", "still writing"}},
		{[]string{"merge", mixed, "--run", "x"}, []string{"nothing to merge"}},
	} {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.wants...)
	}
	for _, dir := range []string{closed, open, mixed} {
		if m, _ := filepath.Glob(filepath.Join(dir, "merged.*")); len(m) > 0 {
			t.Errorf("a refused merge wrote %v", m)
		}
	}
	if out, errOut, code := captureRun(t, "merge", mixed); code != 0 || !strings.Contains(out, "merged 1 rows of 2 run(s)") {
		t.Errorf("merge of a folder where a run holds rows: exit %d: %s%s", code, out, errOut)
	}
}

// Rank files of the run id closed with no row (what two cp runs that raced for one id
// left): a new run under that id is refused as before, and the line says the files hold
// nothing and how to free the id; once they are removed, the id runs.
func TestCPOnEmptyLeftoversSaysSo(t *testing.T) {
	out := filepath.Join(t.TempDir(), "x")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	emptyRun(t, out, "x", 2, true)
	cp := []string{"cp", "--ranks", "2", "--methods", "ring-p2p", "--masks", "causal", "--tokens-per-rank", "64", "--heads", "2:2",
		"--head-dim", "8", "--passes", "fwd", "-w", "0", "-n", "1", "--samples", "1", "--baseline", "none", "--out", out}
	_, errOut, code := captureRun(t, cp...)
	checkUsageError(t, cp, code, errOut, "--out "+out, "x.rank-0-of-2.arrow exists", "give another run id or folder",
		"its 2 rank file(s) there were closed with no row", "rm "+out+"/x.rank-*-of-2.arrow frees the run id")
	m, _ := filepath.Glob(filepath.Join(out, "x.rank-*-of-2.arrow"))
	for _, f := range m {
		os.Remove(f)
	}
	if _, errOut, code := captureRun(t, cp...); code != 0 {
		t.Errorf("cp once the leftovers were removed: exit %d: %s", code, errOut)
	}
}
