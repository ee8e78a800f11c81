package results

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"syscall"
	"testing"
)

// Environment of the WriteAll child process (the test binary re-executed).
const (
	envWriteAllChild = "LONGCA_RESULTS_WRITEALL_CHILD"
	envWriteAllLimit = "LONGCA_RESULTS_WRITEALL_LIMIT" // the file-size limit, bytes
	killedRows       = 3000                            // rows the child hands WriteAll
)

// TestWriteAllChild is the child's body; it does nothing in a normal test run. Under a
// file-size limit (RLIMIT_FSIZE: Go ignores SIGXFSZ, so the write that reaches it fails)
// it creates rank 0 of 1 of run "wa" in the folder given, hands WriteAll killedRows rows,
// and kills itself (SIGKILL) once WriteAll fails: a process killed while WriteAll writes,
// at a byte that the limit makes the same every time.
func TestWriteAllChild(t *testing.T) {
	if os.Getenv(envWriteAllChild) == "" {
		return
	}
	limit, err := strconv.ParseUint(os.Getenv(envWriteAllLimit), 10, 64)
	if err != nil {
		os.Exit(3)
	}
	w, err := Create(os.Getenv(envWriteAllChild), "wa", 0, 1)
	if err != nil {
		os.Exit(3)
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
		os.Exit(3)
	}
	if err := w.WriteAll(writeAllRows(killedRows)); err == nil || !NoRoom(err) {
		os.Exit(4) // the limit was not reached, or another error
	}
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// A process killed while WriteAll writes keeps every row it had handed the kernel in a
// whole batch: the rows of a call are written a batch of writeRows at a time, so the kill
// loses at most the batch at hand (and the rows not yet reached), not a chunk of up to
// syncRows rows written before it. The child writes 3000 rows in one call, killed (at a
// file-size limit) once the file reaches a tenth, a half, and all but a tenth of its
// whole size; each time its file reads back the rows written, in order, less at most
// writeRows past the cut. Before, the 3000 rows were one record batch, and each kill left
// none of them.
func TestKilledWriteAllKeepsItsWrittenBatches(t *testing.T) {
	rows := writeAllRows(killedRows)
	// The whole file, written in this process: its size, and where its rows' bytes end.
	whole := t.TempDir()
	w, err := Create(whole, "wa", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	head := fileSize(t, w.Path())
	if err := w.WriteAll(rows); err != nil {
		t.Fatal(err)
	}
	end := fileSize(t, w.Path())
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	perRow := float64(end-head) / float64(len(rows))
	for _, share := range []float64{0.1, 0.5, 0.9} {
		cut := head + int64(share*float64(end-head))
		dir := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestWriteAllChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), envWriteAllChild+"="+dir, envWriteAllLimit+"="+strconv.FormatInt(cut, 10))
		out, err := cmd.CombinedOutput()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
			t.Fatalf("cut at %d bytes: the child was not killed in WriteAll: %v\n%s", cut, err, out)
		}
		path := filepath.Join(dir, FileName("wa", 0, 1))
		if size := fileSize(t, path); size != cut {
			t.Fatalf("the killed child's file is %d bytes, its limit %d", size, cut)
		}
		got, f, err := ReadRows(path)
		if err != nil {
			t.Fatalf("cut at %d bytes: %v", cut, err)
		}
		if !f.Truncated || len(got) > len(rows) || len(got) > 0 && !reflect.DeepEqual(got, rows[:len(got)]) {
			t.Fatalf("cut at %d bytes: read %d rows (truncated %v), want the first rows written, in order", cut, len(got), f.Truncated)
		}
		// rows whose share of the file lies before the cut, less the batch the cut tore
		if before := int(float64(cut-head) / perRow); len(got) < before-writeRows {
			t.Errorf("killed at %.0f%% of the file (%d bytes, about %d rows written): %d rows read back, more than a batch (%d rows) lost", 100*share, cut, before, len(got), writeRows)
		}
		t.Logf("killed at %.0f%% of the file: %d of %d rows read back", 100*share, len(got), len(rows))
	}
	// the file of a whole call still reads back every row, through Merge too
	res, err := Merge(whole, MergeOptions{})
	if err != nil || res.Rows != int64(len(rows)) {
		t.Fatalf("merge of the whole file: %d rows, %v", res.Rows, err)
	}
	if merged, err := Load(res.Files[0]); err != nil || !reflect.DeepEqual(merged, rows) {
		t.Fatalf("merged: %d rows (%v), want the %d written", len(merged), err, len(rows))
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
