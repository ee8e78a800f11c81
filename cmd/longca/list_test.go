package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/longca/longca/kernels"
)

// alive says whether pid is a process that has not ended (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || (s[i+2] != 'Z' && s[i+2] != 'X')
}

// Finding 8 of the thirteenth probe: SIGTERM to `longca list` while a torch worker's
// Python hangs (on import: an NFS home, a conda lock) killed longca at once, and the
// worker's own children stayed behind. It stops the worker with its process group and
// exits 130.
func TestListSIGTERMStopsTheWorkersGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	hang := filepath.Join(dir, "hangpy")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nsleep 300 &\necho $! > "+pidFile+".tmp\nmv "+pidFile+".tmp "+pidFile+"\nwait\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), longcaChildEnv+"=list --python "+hang)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	pid := 0
	for deadline := time.Now().Add(time.Minute); pid == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
	}
	if pid == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the hanging python never started its child; stderr:\n%s", stderr.String())
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("SIGTERM: %v, want exit status 130 saying interrupted; stderr:\n%s", err, stderr.String())
	}
	for deadline := time.Now().Add(10 * time.Second); alive(pid) && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
	}
	if alive(pid) {
		t.Errorf("the worker's child %d outlived longca list", pid)
	}
}

// Finding 6 of the thirteenth probe: an exec: program that is there but that the system
// cannot start is bad input, said in one line naming --kernels exec:... and the fix, exit
// 2 (it gave unsupported rows and exit 0), as a program that is not there is.
func TestExecProgramThatCannotStartExits2(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ body, want string }{
		{"echo hi\n", "add a #! line"},
		{"#!/nonexistent/interp\n", "/nonexistent/interp, which is not there"},
		{"\x7fELFgarbage", "is not a binary this system can run"},
	} {
		w := filepath.Join(dir, "w")
		out := filepath.Join(dir, "out"+strconv.Itoa(len(c.body)))
		if err := os.WriteFile(w, []byte(c.body), 0o755); err != nil {
			t.Fatal(err)
		}
		args := []string{"kernel", "--kernels", "exec:" + w, "--masks", "causal", "--seqlens", "128", "--heads", "2:1",
			"--head-dim", "32", "-w", "1", "-n", "2", "--out", out}
		_, stderr, code := captureRun(t, args...)
		checkUsageError(t, args, code, stderr, "--kernels: exec:"+w+": "+w+" ", c.want)
	}
}

// longca list is read by people: a variant's description (its record: sm90's was one line
// of 6,845 characters) is cut unless --long, and a mask of both benches says both, as
// longca masks does (probe of s40, finding 9).
func TestListIsReadable(t *testing.T) {
	stdout, stderr, code := runCLI(t, "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, l := range strings.Split(stdout, "\n") {
		if strings.Contains(l, "--variant ") && len(l) > 220 {
			t.Errorf("a variant line of %d bytes: %.80s...", len(l), strings.TrimSpace(l))
		}
	}
	if !strings.Contains(stdout, "longca list --long prints them whole") {
		t.Error("cut variants without saying how to read them whole")
	}
	for _, m := range []string{"full", "causal"} {
		if !regexp.MustCompile(`(?m)^  ` + m + ` +kernel,cp `).MatchString(stdout) {
			t.Errorf("mask %s not listed as kernel,cp", m)
		}
	}
	long, _, code := runCLI(t, "list", "--long")
	if code != 0 || len(long) <= len(stdout)+1000 {
		t.Errorf("list --long: exit %d, %d bytes against %d cut", code, len(long), len(stdout))
	}
	for _, v := range kernels.Variants("cuda") {
		if !strings.Contains(long, "--variant "+v+"\n") {
			t.Errorf("list --long lacks the whole line of variant %.40s...", v)
		}
	}
}
