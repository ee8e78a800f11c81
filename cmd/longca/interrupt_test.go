package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/longca/longca/results"
)

// longcaChildEnv re-executes this test binary as `longca ARGS` (TestMain).
const longcaChildEnv = "LONGCA_TEST_CHILD_ARGS"

// Ctrl-C (SIGINT) in the middle of a kernel sweep: longca stops at the case at hand,
// prints the table of the rows measured so far, names the file that holds them and exits
// 130; the file reads back with those rows (call 19 on the H200: a timeout's SIGINT killed
// the process instead, through a library's signal handler).
func TestKernelInterruptKeepsRows(t *testing.T) {
	dir := t.TempDir()
	errLines, stdout := interruptAfterTwoCases(t, "kernel --kernels ref --masks full,causal,sliding_window --seqlens 256,512,1K,2K,4K "+
		"--heads 2:1 --head-dim 64 --passes fwd,bwd -w 0 -n 1 --out "+dir+" --run-id intr")
	last := errLines[len(errLines)-1]
	if !strings.Contains(last, "interrupted after") || !strings.Contains(last, "intr.rank-0-of-1.arrow") {
		t.Errorf("last line %q, want the interruption and the file", last)
	}
	if !strings.Contains(stdout, "# Cases:") {
		t.Errorf("no table of the rows so far on stdout:\n%s", stdout)
	}
	rows, _, err := results.ReadRows(filepath.Join(dir, "intr.rank-0-of-1.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 2 || len(rows) >= 30 {
		t.Errorf("%d rows in the file, want at least the 2 before the signal and fewer than the 30 cases", len(rows))
	}
}

// interruptAfterTwoCases runs this test binary as `longca ARGS` (longcaChildEnv), sends it
// SIGINT once its log says the second case is done, and requires exit status 130; it
// returns the child's stderr lines and stdout.
func interruptAfterTwoCases(t *testing.T, args string) (errLines []string, stdout string) {
	t.Helper()
	return signalAfterTwoCases(t, syscall.SIGINT, args)
}

// signalAfterTwoCases is interruptAfterTwoCases with sig for SIGINT.
func signalAfterTwoCases(t *testing.T, sig syscall.Signal, args string) (errLines []string, stdout string) {
	t.Helper()
	return signalAt(t, sig, args, `"case":2,`) // two rows written
}

// signalAt runs this test binary as `longca ARGS` (longcaChildEnv), sends it sig once a
// line of its log holds mark, and requires exit status 130; it returns the child's stderr
// lines and stdout.
func signalAt(t *testing.T, sig syscall.Signal, args, mark string) (errLines []string, stdout string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), longcaChildEnv+"="+args)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sent := false
	sc := bufio.NewScanner(stderr)
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	for sc.Scan() {
		errLines = append(errLines, sc.Text())
		if !sent && strings.Contains(sc.Text(), mark) {
			sent = true
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !sent || !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("%v sent %v; exit %v, want status 130; stderr:\n%s", sig, sent, err, strings.Join(errLines, "\n"))
	}
	return errLines, out.String()
}

// longca run stopped by Ctrl-C says so in its table's title in words, not Go's "context
// canceled" (probe of s40, finding 10).
func TestRunInterruptSaysInterrupted(t *testing.T) {
	dir := t.TempDir()
	_, stdout := interruptAfterTwoCases(t, "run --suite smoke -w 0 -n 1 --out "+dir)
	if !strings.Contains(stdout, "(stopped early: interrupted)") {
		t.Errorf("the table's title does not say the run was interrupted:\n%.600s", stdout)
	}
	if strings.Contains(stdout, "context canceled") {
		t.Errorf("Go's context canceled in the output:\n%.600s", stdout)
	}
	// its merged file says the sweep stopped before its end
	merged, _ := filepath.Glob(filepath.Join(dir, "*.merged.arrow"))
	if len(merged) != 1 {
		t.Fatalf("merged files %v, want one", merged)
	}
	if _, f, err := results.ReadRows(merged[0]); err != nil || !strings.Contains(f.Meta(results.MetaIncomplete), "planned rows") {
		t.Errorf("%s: %s %q (%v), want the run and its counts", merged[0], results.MetaIncomplete, f.Meta(results.MetaIncomplete), err)
	}
}
