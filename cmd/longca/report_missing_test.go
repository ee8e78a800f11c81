package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

// rowsOfRanks writes run id in dir as n ranks, each with one ok row, closed, leaving out
// the ranks in skip (their files never written: a node whose disk was lost).
func rowsOfRanks(t *testing.T, dir, id string, n int, skip ...int) {
	t.Helper()
	for r := range n {
		if slices.Contains(skip, r) {
			continue
		}
		w, err := results.Create(dir, id, r, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(results.Row{RunID: id, Rank: int64(r), WorldSize: int64(n), Status: results.StatusOK}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// A report of a folder whose run lacks a rank file (rank 2 of 4: a node's results lost), or
// of the file `merge --allow-missing` made of it, says which ranks are missing, as merge
// does: it printed the rows of the ranks there and said nothing (the s44-D probe), where
// merge refuses the same folder without --allow-missing.
func TestReportNamesMissingRanks(t *testing.T) {
	dir := t.TempDir()
	rowsOfRanks(t, dir, "r", 4, 2)
	want := "run r: rank 2 of 4 missing"
	out, errOut, code := captureRun(t, "report", dir)
	if code != 0 || !strings.Contains(out, "(3 rows in all)") || !strings.Contains(errOut, want) {
		t.Errorf("report of a folder without rank 2: exit %d, stdout:\n%s\nstderr:\n%s\nwant its 3 rows, and %q on stderr", code, out, errOut, want)
	}
	if _, errOut, code := captureRun(t, "merge", dir, "--allow-missing"); code != 0 {
		t.Fatalf("merge --allow-missing: exit %d: %s", code, errOut)
	}
	for _, path := range []string{dir, filepath.Join(dir, "merged.arrow")} { // the folder (through merged.arrow), the file by name
		out, errOut, code := captureRun(t, "report", path)
		if code != 0 || !strings.Contains(out, "(3 rows in all)") || !strings.Contains(errOut, want) {
			t.Errorf("report %s after merge --allow-missing: exit %d, stdout:\n%s\nstderr:\n%s\nwant its 3 rows, and %q on stderr", path, code, out, errOut, want)
		}
	}
	// a whole run says nothing of missing ranks
	whole := t.TempDir()
	rowsOfRanks(t, whole, "w", 2)
	if _, errOut, code := captureRun(t, "report", whole); code != 0 || strings.Contains(errOut, "missing") {
		t.Errorf("report of a whole run: exit %d, stderr:\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(whole, "merged.arrow")); err == nil {
		t.Fatal("report wrote a merged file")
	}
}
