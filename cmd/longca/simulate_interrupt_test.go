package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/longca/longca/results"
)

// SIGTERM (a batch system's limit) in the middle of a simulate sweep: longca stops at the
// cases at hand, writes and merges the cases predicted so far, prints their table and
// exits 130 saying so. It died of the signal at once, with no word and an empty --out
// (probe of s40, finding 2).
func TestSimulateInterruptKeepsRows(t *testing.T) {
	dir := t.TempDir()
	args := "simulate --gpus 8,64 --methods ring-p2p,ring-allgather --masks causal_document --passes fwd --samples 5 --out " + dir + " --run-id intr"
	errLines, stdout := signalAt(t, syscall.SIGTERM, args, `"simulate gpus"`) // the 8 GPUs' cases done
	last := errLines[len(errLines)-1]
	if !strings.Contains(last, "longca simulate: interrupted after") || !strings.Contains(last, "intr.merged.arrow") {
		t.Errorf("last line %q, want the interruption and the merged file", last)
	}
	if !strings.Contains(stdout, "# Rows:") {
		t.Errorf("no table of the cases predicted so far on stdout:\n%s", stdout)
	}
	rows, f, err := results.ReadRows(filepath.Join(dir, "intr.merged.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	// 8 GPUs: 2 methods x 5 samples; 64 GPUs as many again
	if len(rows) < 10 || len(rows) >= 20 {
		t.Errorf("%d rows in the merged file, want the 10 of 8 GPUs at least and fewer than the 20 cases", len(rows))
	}
	// the merged file says the sweep stopped before its end: a row a case (one pass)
	if want := fmt.Sprintf("run intr: %d of 20 planned rows", len(rows)); f.Meta(results.MetaIncomplete) != want {
		t.Errorf("merged file: %s = %q, want %q", results.MetaIncomplete, f.Meta(results.MetaIncomplete), want)
	}
}

// simulate --nccl-table uses no documents: a --counts that is a FIFO with no writer does
// not hang it, and the flag is said to change nothing (it was read, and hung).
func TestSimulateNCCLTableReadsNoDocuments(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip(err)
	}
	done := make(chan struct{})
	var stdout, stderr string
	var code int
	go func() {
		defer close(done)
		stdout, stderr, code = captureRun(t, "simulate", "--nccl-table", "--gpus", "16", "--nccl-sizes", "1K:4K", "--counts", fifo, "--masks", "causal_document")
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		f, _ := os.OpenFile(fifo, os.O_WRONLY, 0) // let the reader go
		f.Close()
		<-done
		t.Fatal("simulate --nccl-table --counts FIFO waited for a writer")
	}
	if code != 0 || !strings.Contains(stdout, "all_reduce_perf") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "--counts is not read with --nccl-table") || !strings.Contains(stderr, "changes nothing in this run") {
		t.Errorf("no warning that --counts changes nothing:\n%s", stderr)
	}
}
