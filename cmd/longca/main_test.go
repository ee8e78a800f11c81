package main

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/longca/longca/results"
)

// urfave/cli's own complaints (an unknown flag or command, a value that does not parse)
// end like every other bad input: exit status 2 and one line naming what was wrong.
func TestParseErrorsAreUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"masks", "--nope"}, []string{"--nope: no such flag", "longca masks --help"}},
		{[]string{"kernel", "-w", "x"}, []string{"-w x: give a whole number"}},
		{[]string{"selftest", "comm", "--nope"}, []string{"--nope: no such flag", "longca selftest comm --help"}},
		{[]string{"--bogus"}, []string{"--bogus: no such flag"}},
		{[]string{"nosuchcmd"}, []string{`unknown command "nosuchcmd"`}},
	} {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.want...)
	}
	if _, _, code := captureRun(t); code != 0 {
		t.Fatalf("no arguments (help): exit %d", code)
	}
}

// oneRowRun writes run id in dir: one rank, one ok row, closed.
func oneRowRun(t *testing.T, dir, id string) {
	t.Helper()
	w, err := results.Create(dir, id, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(results.Row{RunID: id, WorldSize: 1, Status: results.StatusOK}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestResultsRequestErrorsExit2 (issue 23, items 8 and 12): merge and report of an empty
// folder, merge of a run the folder does not hold, and a merge whose --out is a rank
// file exit 2 with one line (the issue: exit 1, and the rank file replaced).
func TestResultsRequestErrorsExit2(t *testing.T) {
	empty, dir := t.TempDir(), t.TempDir()
	oneRowRun(t, dir, "a")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"merge", empty}, "no rank files"},
		{[]string{"report", empty}, "no rank files"},
		{[]string{"merge", dir, "--run", "nosuch"}, "no files of run nosuch"},
		{[]string{"merge", dir, "--out", filepath.Join(dir, "c.rank-0-of-2.arrow")}, "named like a rank file"},
	} {
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.want)
	}
}

// TestSizeFlagsRefusedUpFront (issue 23, items 14 and 15, and the rank counts): sizes and
// counts a flag can raise are refused with exit 2 before anything is allocated (the
// issue: -b 1 -e 1G --step 1 died with fatal error: out of memory; data --samples 1e9
// grew past 5 GB).
func TestSizeFlagsRefusedUpFront(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"kernel", "--masks", "all", "-b", "1", "-e", "1G", "--step", "1", "--dry-run"}, "-b/-e/-f/--step"},
		{[]string{"data", "--seqlen", "16K", "--samples", "1000000000"}, "--samples"},
		{[]string{"cp", "--ranks", "100000", "--out", t.TempDir()}, "host memory"},
		{[]string{"cp", "--samples", "1000000000", "--dry-run"}, "--samples"},
		// world sizes past 2^20 by name (their tokens overflowed the estimate's arithmetic:
		// "rank(s) of 0 tokens", "-1K tokens")
		{[]string{"cp", "--ranks", "9223372036854775807", "--dry-run"}, "--ranks 9223372036854775807: at most 1048576"},
		{[]string{"simulate", "--gpus", "8,9223372036854775807"}, "--gpus 9223372036854775807: at most 1048576"},
		{[]string{"simulate", "--gpus", "16777216"}, "at most 1048576 GPUs"},
		{[]string{"simulate", "--gpus", "1048576"}, "host memory"},
		// repetitions past harness.MaxReps: -n 1e12 kept a sample an iteration and ran out of
		// memory after warning of 713 days; -w 1e12 ran until killed
		{[]string{"kernel", "--kernels", "ref", "--masks", "causal", "--seqlens", "128", "-n", "1000000000000"}, "-n 1000000000000: warm-ups must be 0 to 100000"},
		{[]string{"sparse", "--seqlens", "128", "-w", "1000000000000"}, "warm-ups must be 0 to 100000"},
		{[]string{"cp", "--dry-run", "-n", "100001"}, "iterations 1 to 100000"},
		{[]string{"run", "-n", "1000000000000"}, "-n 1000000000000: iterations must be 1 to 100000"},
		{[]string{"simulate", "--gpus", "8", "--calibrate", "ref", "--calibrate-iters", "1000000000000"}, "--calibrate-iters 1000000000000: give 1 to 100000"},
		// lengths past mask.MaxSeqLen (2G), where an area leaves int64: a dry run listed each
		// case with its error and exited 0, masks printed a negative area
		{[]string{"kernel", "--dry-run", "--masks", "full", "--seqlens", "8K,3G"}, "--seqlens: 3G is over the 2G tokens"},
		{[]string{"kernel", "--dry-run", "--masks", "full", "-b", "1G", "-e", "4G"}, "-b/-e: 4G is over the 2G tokens"},
		{[]string{"masks", "--mask", "full", "--seqlen", "3G"}, "--seqlen 3221225472 is over the 2147483648 tokens"},
	} {
		start := time.Now()
		_, errOut, code := captureRun(t, c.args...)
		checkUsageError(t, c.args, code, errOut, c.want)
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("%v: took %s to refuse", c.args, el)
		}
	}
}
