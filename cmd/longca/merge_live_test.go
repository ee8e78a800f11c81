package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/results"
)

// liveKernelRow is case i of a kernel sweep's rank file, as report shows it.
func liveKernelRow(i int) results.Row {
	return results.Row{RunID: "live", WorldSize: 1, Bench: "kernel", Kernel: "ref", Mask: "causal", SeqLen: int64(256 * (i + 1)),
		HeadsQ: 4, HeadsKV: 2, HeadDim: 32, DType: "fp32", Pass: "fwd", Status: results.StatusOK, FLOPs: 1e9, TFLOPs: results.Ptr(0.001)}
}

// liveRun creates run "live"'s rank file in dir, left open as a run still writing it
// (closed when the test ends), and returns it with a function writing its cases from to to.
func liveRun(t *testing.T, dir string) (*results.Writer, func(from, to int)) {
	t.Helper()
	w, err := results.Create(dir, "live", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, func(from, to int) {
		for i := from; i < to; i++ {
			if err := w.Write(liveKernelRow(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestReportAfterMergeWhileWriting (probe s41 F1): `longca merge DIR` while the run was
// still writing, then `longca report DIR` after it finished, showed the merge's rows only
// ("5 rows in all" of 12) and said the writer "was cut short", though it closed its file.
// Now the merge says the rank file is still being written (or was killed just now), and the
// report reads the rank files, saying the merged file is out of date and how to renew it.
func TestReportAfterMergeWhileWriting(t *testing.T) {
	dir := t.TempDir()
	w, write := liveRun(t, dir)
	write(0, 2)
	out, errOut, code := captureRun(t, "merge", dir)
	if code != 0 || !strings.Contains(out, "run live: rank 0 of 1 (last written ") || !strings.Contains(out, "still being written, or killed just now") {
		t.Fatalf("merge while the run writes: exit %d, stdout:\n%s\nstderr:\n%s\nwant the rank file said to be still being written", code, out, errOut)
	}
	out, errOut, code = captureRun(t, "report", dir)
	if code != 0 || !strings.Contains(out, "(2 rows in all)") || !strings.Contains(errOut, "is not closed and was last written") || strings.Contains(errOut, "cut short") {
		t.Errorf("report while the run writes, just merged: exit %d, stdout:\n%s\nstderr:\n%s\nwant its 2 rows, said still being written, not cut short", code, out, errOut)
	}

	write(2, 5)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = captureRun(t, "report", dir)
	if code != 0 || !strings.Contains(out, "(5 rows in all)") {
		t.Errorf("report after the run finished: exit %d, stdout:\n%s\nstderr:\n%s\nwant the rank file's 5 rows", code, out, errOut)
	}
	if strings.Contains(errOut, "cut short") || !strings.Contains(errOut, filepath.Join(dir, "merged.arrow")+" is out of date") || !strings.Contains(errOut, "longca merge "+dir) {
		t.Errorf("report after the run finished: stderr:\n%s\nwant merged.arrow said out of date, with the merge to renew it, and no writer cut short", errOut)
	}

	if _, errOut, code := captureRun(t, "merge", dir); code != 0 {
		t.Fatalf("merge after the run: exit %d: %s", code, errOut)
	}
	out, errOut, code = captureRun(t, "report", dir)
	if code != 0 || !strings.Contains(out, "(5 rows in all)") || strings.TrimSpace(errOut) != "" {
		t.Errorf("report after merging again: exit %d, stdout:\n%s\nstderr:\n%s\nwant 5 rows and nothing said", code, out, errOut)
	}
}

// TestMergeOfDeadWriterSaysCutShort: a rank file without its end marker that no one has
// written for longer than results.RecentWrite is reported as before: its writer was cut
// short (merge: did not finish), with no word of it being written.
func TestMergeOfDeadWriterSaysCutShort(t *testing.T) {
	dir := t.TempDir()
	_, write := liveRun(t, dir)
	write(0, 1)
	old := time.Now().Add(-2 * results.RecentWrite)
	if err := os.Chtimes(filepath.Join(dir, results.FileName("live", 0, 1)), old, old); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := captureRun(t, "merge", dir)
	if code != 0 || !strings.Contains(out, "# truncated (writer did not finish; its finished rows are kept): run live: rank 0 of 1\n") {
		t.Errorf("merge of a rank file left unclosed long ago: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	_, errOut, code = captureRun(t, "report", dir)
	if code != 0 || !strings.Contains(errOut, "run live: rank 0 of 1 was cut short") || strings.Contains(errOut, "not closed and was last written") {
		t.Errorf("report of a rank file left unclosed long ago: exit %d, stderr:\n%s\nwant it cut short", code, errOut)
	}
}
