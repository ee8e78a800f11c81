package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/longca/longca/present"
)

// clearLaunchers unsets every launcher variable Discover reads, so the test sees only
// what it sets.
func clearLaunchers(t *testing.T) {
	for _, k := range []string{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
		"SLURM_PROCID", "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
		"SLURM_NTASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_JOB_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK",
		"MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES"} {
		t.Setenv(k, "")
	}
}

func TestEnvJSONUnderSlurm(t *testing.T) {
	clearLaunchers(t)
	for k, v := range map[string]string{"SLURM_STEP_ID": "0", "SLURM_PROCID": "5", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1",
		"SLURM_NTASKS_PER_NODE": "4(x2)", "SLURM_NODEID": "1", "SLURM_JOB_NODELIST": "gpu[07-08]", "CUDA_VISIBLE_DEVICES": "2,3,4,5"} {
		t.Setenv(k, v)
	}
	out, errs, code := runCLI(t, "env", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var r present.EnvReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Launcher != "slurm" || r.Rank != 5 || r.WorldSize != 8 || r.LocalRank != 1 || r.LocalSize != 4 || r.NodeID != 1 ||
		r.MasterAddr != "gpu07" || r.Backend != "tcp" || r.Device == nil || *r.Device != 1 {
		t.Errorf("report %+v", r)
	}
	if len(r.Libraries) != 5 {
		t.Errorf("%d libraries probed, want 5", len(r.Libraries))
	}
	for _, l := range r.Libraries {
		if l.Library == "libcuda" && !l.Found && r.CUDA != "no CUDA driver found" {
			t.Errorf("libcuda missing but cuda says %q", r.CUDA)
		}
		if !l.Found && l.Error == "" {
			t.Errorf("%s not found without a reason", l.Library)
		}
	}
}

func TestEnvText(t *testing.T) {
	clearLaunchers(t)
	out, errs, code := runCLI(t, "env")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"launcher     single", "rank         0 of 1", "backend      local", "libmpi", "libnccl", "cuda "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestEnvUsageErrors(t *testing.T) {
	clearLaunchers(t)
	cases := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"env", "--format", "yaml"}, nil, "--format"},
		{[]string{"env", "--master-port", "70000"}, nil, "--master-port"},
		{[]string{"env", "--backend", "pigeon"}, nil, "--backend"},
		{[]string{"env", "--timeout", "-1s"}, nil, "--timeout"},
		// (the probe of 2026-12-06: cp --ranks 2 --timeout 1ns failed each rank's first
		// collective, exit 1, a line per rank, two empty rank files left)
		{[]string{"cp", "--ranks", "2", "--timeout", "1ns", "--dry-run"}, nil, "--timeout 1ns: use at least 1s"},
		{[]string{"env"}, map[string]string{"SLURM_STEP_ID": "0", "SLURM_PROCID": "4", "SLURM_NTASKS": "4"}, "SLURM_PROCID"},
		{[]string{"selftest", "merged"}, nil, "FILE"},
	}
	for _, tc := range cases {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		_, errs, code := runCLI(t, tc.args...)
		checkUsageError(t, tc.args, code, errs, tc.want)
		for k := range tc.env {
			t.Setenv(k, "")
		}
	}
}

// TestSelftestOneRank: the comm table on a world of one, then a results file that merge
// joins and `selftest merged` checks (and refuses for a world of two).
func TestSelftestOneRank(t *testing.T) {
	clearLaunchers(t)
	out, errs, code := runCLI(t, "selftest", "comm", "--timeout", "20s")
	if code != 0 || !strings.Contains(out, "rank 0 of 1 (local): 14 passed, 0 failed, 0 not run") {
		t.Fatalf("exit %d: %s %s", code, out, errs)
	}
	dir := t.TempDir()
	if _, errs, code := runCLI(t, "selftest", "results", "--dir", dir, "--run", "t1"); code != 0 {
		t.Fatalf("selftest results: exit %d: %s", code, errs)
	}
	if _, errs, code := runCLI(t, "merge", dir); code != 0 {
		t.Fatalf("merge: exit %d: %s", code, errs)
	}
	merged := filepath.Join(dir, "merged.arrow")
	if out, errs, code := runCLI(t, "selftest", "merged", "--ranks", "1", merged); code != 0 || !strings.Contains(out, "1 rows from each of 1 ranks") {
		t.Errorf("merged, 1 rank: exit %d: %s %s", code, out, errs)
	}
	if _, errs, code := runCLI(t, "selftest", "merged", "--ranks", "2", merged); code != 1 || !strings.Contains(errs, "rank 1 has 0 rows") {
		t.Errorf("merged, 2 ranks: exit %d: %s", code, errs)
	}
	// flags after FILE, as report and merge take them (they were refused as a second FILE)
	if _, errs, code := runCLI(t, "selftest", "merged", merged, "--ranks", "2"); code != 1 || !strings.Contains(errs, "rank 1 has 0 rows") {
		t.Errorf("merged FILE --ranks 2: exit %d: %s", code, errs)
	}
}
