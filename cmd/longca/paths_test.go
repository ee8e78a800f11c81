package main

import (
	"strings"
	"testing"
)

// TestUsageErrorOnceUnderALauncher: every rank of a launch finds the same bad flag; only
// rank 0 says it, the others exit 2 silently.
func TestUsageErrorOnceUnderALauncher(t *testing.T) {
	for _, rank := range []string{"0", "1", "3"} {
		t.Setenv("OMPI_COMM_WORLD_RANK", rank)
		t.Setenv("OMPI_COMM_WORLD_SIZE", "4")
		for _, args := range [][]string{
			{"cp", "--check-budget", "-1"},
			{"cp", "--run-id", "../x", "--out", t.TempDir()},
			{"kernel", "--heads", "3:2", "--out", t.TempDir()},
		} {
			_, errs, code := runCLI(t, args...)
			if code != 2 {
				t.Errorf("rank %s %v: exit %d, want 2", rank, args, code)
			}
			said := strings.TrimSpace(errs) != ""
			if said != (rank == "0") {
				t.Errorf("rank %s %v: stderr %q", rank, args, errs)
			}
		}
	}
}

// run and simulate are one process each: under a launcher of several ranks every rank ran the
// whole suite or sweep into a folder of its own (a review: `mpirun -np 2 longca run` wrote two
// runs of rank 0 of 1). Refused, once, with exit 2; a launch of one rank runs.
func TestOneProcessCommandsRefuseRanks(t *testing.T) {
	t.Setenv("OMPI_COMM_WORLD_RANK", "0")
	t.Setenv("OMPI_COMM_WORLD_SIZE", "2")
	for _, args := range [][]string{
		{"run", "--suite", "smoke", "--out", t.TempDir()},
		{"simulate", "--gpus", "8", "--masks", "full", "--out", t.TempDir()},
		{"simulate", "--nccl-table", "--gpus", "8"},
	} {
		_, errs, code := runCLI(t, args...)
		if code != 2 || !strings.Contains(errs, "runs as one process") || !strings.Contains(errs, "2 ranks") {
			t.Errorf("%v under 2 ranks: exit %d, stderr %q", args, code, errs)
		}
	}
	t.Setenv("OMPI_COMM_WORLD_SIZE", "1")
	if _, errs, code := runCLI(t, "simulate", "--nccl-table", "--gpus", "8"); code != 0 {
		t.Errorf("simulate --nccl-table under 1 rank: exit %d, %s", code, errs)
	}
}
