package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/longca/longca/results"
)

// planOf reads a rank file's rows and the plan it records (results.MetaPlannedRows).
func planOf(t *testing.T, path string) (rows int, planned string) {
	t.Helper()
	rs, f, err := results.ReadRows(path)
	if err != nil {
		t.Fatal(err)
	}
	return len(rs), f.Meta(results.MetaPlannedRows)
}

// metaOf reads one schema metadata key of a results file.
func metaOf(t *testing.T, path, key string) string {
	t.Helper()
	_, f, err := results.ReadRows(path)
	if err != nil {
		t.Fatal(err)
	}
	return f.Meta(key)
}

// A kernel sweep stopped by SIGTERM (a batch system's time limit) printed "interrupted
// after 4 of 12 cases" and exited 130, but its rank file and the merged file said
// nothing of it: a later merge, report or notebook could not tell the partial sweep from
// a whole one (probe s41, F11). The rank file now records the rows planned, the merge
// names the run as incomplete in longca.incomplete and a '#' line, and the report says
// so in one line.
func TestInterruptedSweepMergesAsIncomplete(t *testing.T) {
	dir := t.TempDir()
	signalAfterTwoCases(t, syscall.SIGTERM, "kernel --kernels ref --masks full,causal,sliding_window --seqlens 256,512,1K,2K,4K "+
		"--heads 2:1 --head-dim 64 --passes fwd,bwd -w 0 -n 1 --out "+dir+" --run-id intr")
	rows, planned := planOf(t, filepath.Join(dir, "intr.rank-0-of-1.arrow"))
	if planned != "30" || rows < 2 || rows >= 30 {
		t.Fatalf("rank file: %d rows, %s %q; want 2 to 29 of the 30 cases planned", rows, results.MetaPlannedRows, planned)
	}
	want := fmt.Sprintf("run intr: %d of 30 planned rows", rows)
	stdout, stderr, code := captureRun(t, "merge", dir)
	if code != 0 || !strings.Contains(stdout, "# incomplete") || !strings.Contains(stdout, want) {
		t.Fatalf("merge: exit %d, want 0 and a '# incomplete' line naming %q:\n%s%s", code, want, stdout, stderr)
	}
	if got := metaOf(t, filepath.Join(dir, "merged.arrow"), results.MetaIncomplete); got != want {
		t.Errorf("merged.arrow: %s = %q, want %q", results.MetaIncomplete, got, want)
	}
	for _, p := range []string{dir, filepath.Join(dir, "merged.arrow"), filepath.Join(dir, "intr.rank-0-of-1.arrow")} {
		_, stderr, code := captureRun(t, "report", p)
		if code != 0 || strings.Count(stderr, want+": its sweep stopped before the end") != 1 {
			t.Errorf("report %s: exit %d, want 0 and one line saying %q stopped before the end:\n%s", p, code, want, stderr)
		}
	}
}

// A kernel sweep run whole plans its rows and writes every one: nothing says incomplete,
// in merge, the merged file or report.
func TestMergeOfAWholeSweepIsNotIncomplete(t *testing.T) {
	dir := t.TempDir()
	if _, stderr, code := captureRun(t, "kernel", "--kernels", "ref", "--masks", "causal", "--seqlens", "128,256", "--heads", "2:1",
		"--head-dim", "16", "--passes", "fwd,bwd", "-w", "0", "-n", "1", "--out", dir, "--run-id", "whole"); code != 0 {
		t.Fatalf("kernel: exit %d:\n%s", code, stderr)
	}
	if rows, planned := planOf(t, filepath.Join(dir, "whole.rank-0-of-1.arrow")); planned != "4" || rows != 4 {
		t.Fatalf("rank file: %d rows, %s %q; want 4 of 4", rows, results.MetaPlannedRows, planned)
	}
	stdout, stderr, code := captureRun(t, "merge", dir)
	if code != 0 || strings.Contains(stdout+stderr, "incomplete") {
		t.Fatalf("merge: exit %d:\n%s%s", code, stdout, stderr)
	}
	if got := metaOf(t, filepath.Join(dir, "merged.arrow"), results.MetaIncomplete); got != "" {
		t.Errorf("merged.arrow: %s = %q, want none", results.MetaIncomplete, got)
	}
	if _, stderr, code := captureRun(t, "report", dir); code != 0 || strings.Contains(stderr, "stopped before the end") {
		t.Errorf("report: exit %d:\n%s", code, stderr)
	}
}

// In-process cp ranks stopped by SIGTERM: each rank file planned the rows of every case,
// sample and pass, and the run's own merged file names the run as incomplete; a whole cp
// run's rank files hold their plan and its merged file says nothing.
func TestCPInterruptMergesAsIncomplete(t *testing.T) {
	dir := t.TempDir()
	signalAfterTwoCases(t, syscall.SIGTERM, "cp --ranks 2 --methods ring-p2p --masks causal,full,sliding_window "+
		"--tokens-per-rank 256 --heads 2:2 --head-dim 8 --passes fwd,bwd -w 0 -n 1 --samples 4 --baseline none "+
		"--timeout 20s --out "+dir+" --run-id c")
	total := 0
	for r := range 2 {
		rows, planned := planOf(t, filepath.Join(dir, results.FileName("c", r, 2)))
		if planned != "24" || rows >= 24 { // 3 cases x 4 samples x 2 passes
			t.Errorf("rank %d: %d rows, %s %q; want fewer than the 24 planned", r, rows, results.MetaPlannedRows, planned)
		}
		total += rows
	}
	want := fmt.Sprintf("run c: %d of 48 planned rows", total)
	if got := metaOf(t, results.MergedPath(dir, "c"), results.MetaIncomplete); got != want {
		t.Errorf("c.merged.arrow: %s = %q, want %q", results.MetaIncomplete, got, want)
	}

	whole := t.TempDir()
	if _, stderr, code := captureRun(t, cpTiny(whole)...); code != 0 {
		t.Fatalf("cp: exit %d:\n%s", code, stderr)
	}
	for r := range 2 {
		if rows, planned := planOf(t, filepath.Join(whole, results.FileName("r", r, 2))); planned != strconv.Itoa(rows) || rows != 1 {
			t.Errorf("whole cp, rank %d: %d rows, %s %q; want 1 of 1", r, rows, results.MetaPlannedRows, planned)
		}
	}
	if got := metaOf(t, results.MergedPath(whole, "r"), results.MetaIncomplete); got != "" {
		t.Errorf("whole cp's merged file: %s = %q, want none", results.MetaIncomplete, got)
	}
}

// simulate writes its rows once the sweep ends: a whole one plans exactly the rows it
// writes (nothing incomplete); one stopped by SIGTERM is checked in
// TestSimulateInterruptKeepsRows.
func TestMergeOfAWholeSimulateIsNotIncomplete(t *testing.T) {
	dir := t.TempDir()
	if _, stderr, code := captureRun(t, "simulate", "--gpus", "8,16", "--methods", "ring-p2p,usp", "--masks", "causal,causal_document",
		"--passes", "fwd,bwd", "--samples", "2", "--out", dir, "--run-id", "s"); code != 0 {
		t.Fatalf("simulate: exit %d:\n%s", code, stderr)
	}
	rows, planned := planOf(t, filepath.Join(dir, "s.rank-0-of-1.arrow"))
	if planned != strconv.Itoa(rows) || rows == 0 {
		t.Errorf("rank file: %d rows, %s %q; want as many planned", rows, results.MetaPlannedRows, planned)
	}
	if got := metaOf(t, results.MergedPath(dir, "s"), results.MetaIncomplete); got != "" {
		t.Errorf("merged file: %s = %q, want none", results.MetaIncomplete, got)
	}
}
