package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

// fakeSrun is a stand-in for Slurm's srun: `srun [-n N] [--option ...] CMD ...` runs N
// tasks of CMD (SLURM_NTASKS by default) with the per-task variables Slurm sets, and
// exits with the last failing task's status.
const fakeSrun = `#!/usr/bin/env bash
n=${SLURM_NTASKS:-1}
while [ $# -gt 0 ]; do
	case $1 in
	-n) n=$2; shift 2 ;;
	-*) shift ;;
	*) break ;;
	esac
done
pids=()
for ((i = 0; i < n; i++)); do
	SLURM_PROCID=$i SLURM_LOCALID=$i SLURM_NODEID=0 SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=$n \
		SLURM_TASKS_PER_NODE=$n SLURM_NTASKS_PER_NODE=$n SLURM_NNODES=1 SLURM_NODELIST=$SLURM_JOB_NODELIST "$@" &
	pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=$?; done
exit $rc
`

// A job Slurm requeues keeps its job id: the scripts' run id was job<id> for every attempt,
// so a requeued job exited 2 at once on the first attempt's rank files, and with set -e
// never merged them. Each attempt is now a run of its own (SLURM_RESTART_COUNT), and the
// merge runs even when cp fails, the script exiting with cp's status.
func TestSlurmScriptRequeueAndMergeAfterFailure(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("bash is needed to run the Slurm scripts: ", err)
	}
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "srun"), []byte(fakeSrun), 0o755); err != nil {
		t.Fatal(err)
	}
	// longca is this test binary re-executed (TestMain, longcaChildEnv)
	wrapper := fmt.Sprintf("#!/bin/sh\n%s=\"$*\" exec %q -test.run '^$'\n", longcaChildEnv, os.Args[0])
	if err := os.WriteFile(filepath.Join(bin, "longca"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0") // a free port for rank 0's store
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	out := filepath.Join(t.TempDir(), "out")
	attempt := func(restart, cpArgs string) (int, string) {
		cmd := exec.Command("bash", "../../slurm/run_cpu_ci.sh")
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "SLURM_JOB_ID=77", "SLURM_NTASKS=4",
			"SLURM_JOB_NODELIST=localhost", "LONGCA="+filepath.Join(bin, "longca"), "LONGCA_OUT="+out,
			fmt.Sprintf("MASTER_PORT=%d", port), "LONGCA_CP_ARGS="+cpArgs, "SLURM_RESTART_COUNT="+restart)
		b, err := cmd.CombinedOutput()
		code := 0
		if err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok {
				t.Fatal(err)
			}
			code = ee.ExitCode()
		}
		return code, string(b)
	}
	small := "--methods ring-p2p --masks causal --tokens-per-rank 64 --heads 2:2 --head-dim 16 --dtype fp32 --samples 1 -w 0 -n 1 --passes fwd"
	for _, restart := range []string{"0", "1"} {
		if code, log := attempt(restart, small); code != 0 {
			t.Fatalf("attempt %s: exit %d\n%s", restart, code, log)
		}
	}
	code, log := attempt("2", "--methods nope") // cp refuses: the merge still runs, the job fails
	if code != 2 || !strings.Contains(log, "merged 8 rows of 2 run(s)") {
		t.Errorf("a failed cp after two attempts: exit %d, want 2 with the two runs merged\n%s", code, log)
	}
	rows, _, err := results.ReadRows(filepath.Join(out, "merged.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, r := range rows {
		runs[r.RunID]++
	}
	if len(runs) != 2 || runs["job77"] != 4 || runs["job77-requeue1"] != 4 {
		t.Errorf("merged runs %v, want job77 and job77-requeue1 with 4 rows each", runs)
	}
}
