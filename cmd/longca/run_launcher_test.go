package main

import (
	"path/filepath"
	"testing"

	"github.com/longca/longca/results"
)

// `longca run` recorded launcher "" in every row, a value docs/results-format.md does not
// have, even under Slurm's variables, where `longca kernel` records slurm: run's rows now
// record the launcher as kernel's do (single with none).
func TestRunRecordsTheLauncher(t *testing.T) {
	for _, c := range []struct {
		want string
		env  map[string]string
	}{
		{"single", nil},
		{"slurm", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "1", "SLURM_LOCALID": "0", "SLURM_NODEID": "0",
			"SLURM_STEP_ID": "0", "SLURM_JOB_ID": "4242", "SLURM_JOB_NODELIST": "node07"}},
	} {
		t.Run(c.want, func(t *testing.T) {
			clearLaunchers(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			dir := t.TempDir()
			for _, cmd := range [][]string{
				{"run", "--suite", "smoke", "--masks", "causal", "--no-check", "--out", dir, "--run-id", "run"},
				{"kernel", "--kernels", "ref", "--masks", "causal", "--seqlens", "128", "--heads", "2:1", "--head-dim", "8",
					"--passes", "fwd", "-w", "0", "-n", "1", "--out", dir, "--run-id", "kernel"},
			} {
				if _, errs, code := runCLI(t, cmd...); code != 0 {
					t.Fatalf("%s: exit %d: %s", cmd[0], code, errs)
				}
				rows, _, err := results.ReadRows(filepath.Join(dir, cmd[len(cmd)-1]+".rank-0-of-1.arrow"))
				if err != nil || len(rows) == 0 {
					t.Fatalf("%s: %d rows, %v", cmd[0], len(rows), err)
				}
				for _, r := range rows {
					if r.Launcher != c.want {
						t.Fatalf("%s: a row's launcher %q; want %q", cmd[0], r.Launcher, c.want)
					}
				}
			}
		})
	}
}
