package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestAnalyzeRefusesMergedFileOutOfDate (probe s41 F1): examples/analyze.py DIR read a
// merged.arrow (or its merged.csv) made by `longca merge DIR --csv` while the run was still
// writing: after the run finished it analysed the 2 rows of the merge, not the 5 of the rank
// file, without a word. It now holds the export to the rank files' sizes the merge
// recorded: exit 2 with one line naming the merge that renews it, after which it reads
// every row. An export without that record (an older merge's) whose rank files were
// written after it gets a warning.
func TestAnalyzeRefusesMergedFileOutOfDate(t *testing.T) {
	py := pandasPython(t)
	dir := filepath.Join(t.TempDir(), "live")
	w, write := liveRun(t, dir)
	write(0, 2)
	if _, errOut, code := captureRun(t, "merge", dir, "--csv"); code != 0 {
		t.Fatalf("merge while writing: exit %d: %s", code, errOut)
	}
	if out, errOut, code := runAnalyze(t, py, dir); code != 0 || !strings.Contains(out, ": 2 rows") {
		t.Fatalf("analyze.py of a merge just made: exit %d: %s%s", code, out, errOut)
	}
	write(2, 5)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runAnalyze(t, py, dir)
	msg := strings.TrimSpace(errOut)
	if code != 2 || strings.Contains(msg, "\n") || !strings.Contains(msg, "merged.csv is out of date: run live: rank 0 of 1 is ") {
		t.Fatalf("analyze.py after the run went on: exit %d, want 2 and one line saying the export is out of date:\n%s", code, msg)
	}
	m := regexp.MustCompile("`(longca merge [^`]*)`").FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("no longca merge command in the refusal: %s", msg)
	}
	if _, errOut, code := captureRun(t, strings.Fields(m[1])[1:]...); code != 0 {
		t.Fatalf("the refusal's %q: exit %d: %s", m[1], code, errOut)
	}
	if out, errOut, code := runAnalyze(t, py, dir); code != 0 || !strings.Contains(out, ": 5 rows") || strings.TrimSpace(errOut) != "" {
		t.Fatalf("analyze.py after the refusal's %q: exit %d: %s%s", m[1], code, out, errOut)
	}

	// An older merge's export: no record; a rank file written after it is warned of.
	os.Remove(filepath.Join(dir, "merged.arrow"))
	csv := filepath.Join(dir, "merged.csv")
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(csv, past, past); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runAnalyze(t, py, csv)
	if code != 0 || !strings.Contains(out, ": 5 rows") || !strings.Contains(errOut, "warning: "+csv+" may be out of date: live.rank-0-of-1.arrow written after it") {
		t.Errorf("analyze.py of an export without a record, older than its rank file: exit %d, want 0 and a warning:\n%s%s", code, out, errOut)
	}
}
