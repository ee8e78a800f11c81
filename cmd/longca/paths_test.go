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
