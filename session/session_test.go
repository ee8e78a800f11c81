package session

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// clearLaunchers unsets every variable spmd.JobID reads, so that the test's own launcher
// (a CI job under Slurm, say) does not name the folder.
func clearLaunchers(t *testing.T) {
	t.Helper()
	for _, k := range []string{"LONGCA_JOB_ID", "SLURM_JOB_ID", "SLURM_STEP_ID", "PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "TORCHELASTIC_RUN_ID"} {
		t.Setenv(k, "")
	}
}

// One process given no --out: a run started in the same second as the last one gets a
// folder of its own (the second kernel sweep of a script was refused: "exists").
func TestDefaultOutDirOneProcess(t *testing.T) {
	t.Chdir(t.TempDir())
	seen := map[string]bool{}
	for range 3 {
		dir, err := DefaultOutDir("kernel", 1)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(dir, filepath.Join("out", "kernel-")) || seen[dir] {
			t.Fatalf("DefaultOutDir = %q (seen before: %v)", dir, seen[dir])
		}
		seen[dir] = true
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// One process given no --out where ./out is a file: a usage error naming --out and the file
// (it was "--out out/kernel-<time>-99: not a directory", after 99 tries, a flag not given).
func TestDefaultOutDirOutIsFile(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.WriteFile("out", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ue *UsageError
	_, err := DefaultOutDir("kernel", 1)
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--out") || !strings.Contains(err.Error(), "./out is a file") {
		t.Fatalf("err %v, want a usage error naming --out and ./out", err)
	}
}

// Several ranks given no --out: the launcher's job id names the folder, the same on every
// rank whatever its clock says; without one, a usage error naming --out.
func TestDefaultOutDirRanks(t *testing.T) {
	clearLaunchers(t)
	var ue *UsageError
	if _, err := DefaultOutDir("cp", 4); !errors.As(err, &ue) || !strings.Contains(err.Error(), "--out") {
		t.Fatalf("no launcher: err %v, want a usage error naming --out", err)
	}
	t.Setenv("SLURM_JOB_ID", "4242")
	t.Setenv("SLURM_STEP_ID", "3")
	if dir, err := DefaultOutDir("cp", 4); err != nil || dir != filepath.Join("out", "cp-slurm-4242.3") {
		t.Fatalf("Slurm: %q, %v; want out/cp-slurm-4242.3", dir, err)
	}
	clearLaunchers(t)
	t.Setenv("PMIX_NAMESPACE", "prterun-node1-812@1")
	if dir, err := DefaultOutDir("kernel", 2); err != nil || dir != filepath.Join("out", "kernel-pmix_namespace-prterun-node1-812-1") {
		t.Fatalf("PMIx: %q, %v", dir, err)
	}
}
