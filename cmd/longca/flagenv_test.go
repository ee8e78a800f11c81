package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// childRun runs this test binary as `longca --log-level warn ARGS` (longcaChildEnv) with
// env added: a flag read from the environment keeps the value in the process's flag for
// good (urfave/cli's Apply sets it), so such runs cannot share this process.
func childRun(t *testing.T, env []string, args ...string) (stderr string, code int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(append(os.Environ(), longcaChildEnv+"=--log-level warn "+strings.Join(args, " ")), env...)
	var errb strings.Builder
	cmd.Stderr = &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return errb.String(), cmd.ProcessState.ExitCode()
}

// A run id from LONGCA_RUN_ID is refused naming the variable (the eighth pass: the line
// named --run-id, which the command line did not give); one given as --run-id names the
// flag, the variable set or not. LONGCA_PYTHON, a setting of the shell, is not warned
// about as a --python that changes nothing in simulate.
func TestFlagFromEnvironment(t *testing.T) {
	clearLaunchers(t)
	out := func() string { return filepath.Join(t.TempDir(), "res") }
	env := []string{"LONGCA_RUN_ID=a/b"}
	for _, args := range [][]string{
		{"kernel", "--kernels", "ref", "--seqlens", "512", "--masks", "causal", "--heads", "1:1", "--head-dim", "8", "-w", "0", "-n", "1", "--out", out()},
		{"run", "--suite", "smoke", "--out", out()},
		{"cp", "--kernel", "ref", "--ranks", "2", "--masks", "causal", "--methods", "ring-p2p", "--tokens-per-rank", "128", "--samples", "1", "--out", out()},
		{"simulate", "--gpus", "8", "--masks", "causal", "--methods", "ring-p2p", "--out", out()},
	} {
		errOut, code := childRun(t, env, args...)
		checkUsageError(t, args, code, errOut, `longca: LONGCA_RUN_ID (--run-id from the environment): run id "a/b" has '/'`)
		args = append(args, "--run-id", "c/d")
		errOut, code = childRun(t, env, args...)
		checkUsageError(t, args, code, errOut, `longca: --run-id: run id "c/d" has '/'`)
		if strings.Contains(errOut, "LONGCA_RUN_ID") {
			t.Errorf("%v: %q names LONGCA_RUN_ID, though --run-id gave the value", args, errOut)
		}
	}
	env = []string{"LONGCA_PYTHON=python3"}
	args := []string{"simulate", "--gpus", "8", "--masks", "causal", "--methods", "ring-p2p", "--out", out()}
	if errOut, code := childRun(t, env, args...); code != 0 || strings.Contains(errOut, "--python") {
		t.Errorf("%v with LONGCA_PYTHON set: exit %d, stderr %q; want 0 and no word of --python", args, code, errOut)
	}
	args = append(args[:len(args)-1], out(), "--python", "python3")
	if errOut, code := childRun(t, env, args...); code != 0 || !strings.Contains(errOut, "--python is read by --calibrate only") {
		t.Errorf("%v: exit %d, stderr %q; want 0 and the warning", args, code, errOut)
	}
}
