package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/longca/longca/kernels/external"
	"github.com/longca/longca/kernels/external/externaltest"
	"github.com/longca/longca/results"
	"github.com/longca/longca/session"
)

func TestMain(m *testing.M) {
	externaltest.MaybeServe()                          // this test binary re-executed as the fake worker
	if args := os.Getenv(longcaChildEnv); args != "" { // re-executed as longca itself
		os.Exit(run(append([]string{"longca"}, strings.Fields(args)...)))
	}
	code := m.Run()
	external.CloseAll()
	os.Exit(code)
}

// fakeWorker sets up this test binary as an exec: worker in mode and returns its path.
func fakeWorker(t *testing.T, mode string) string {
	t.Helper()
	t.Setenv(externaltest.FakeEnv, mode)
	t.Setenv(externaltest.StateEnv, t.TempDir())
	t.Cleanup(func() { // a worker of one mode must not serve the next test
		external.CloseAll()
		session.ForgetKernels()
	})
	return os.Args[0]
}

func smallPeerArgs(out string) []string {
	return []string{"kernel", "--masks", "full,causal", "--seqlens", "256", "--heads", "4:2", "--head-dim", "16",
		"-w", "0", "-n", "2", "--out", out}
}

// Peers through exec: are checked and timed beside each other, one column each, with
// the ratio view; the rows record the worker's versions.
func TestKernelSweepWithExecPeers(t *testing.T) {
	w := fakeWorker(t, "ok")
	out := t.TempDir()
	stdout, stderr, code := runCLI(t, append(smallPeerArgs(out), "--kernels", "exec:"+w+":ref,exec:"+w+":fullonly,ref")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, s := range []string{"exec:" + w + ":ref", "exec:" + w + ":fullonly", "(x fastest)", "fastest", "Geomean"} {
		if !strings.Contains(stdout, s) {
			t.Fatalf("output lacks %q:\n%s", s, stdout)
		}
	}
	rows, err := results.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	st := map[string]results.Status{}
	for _, r := range rows {
		st[strings.TrimPrefix(r.Kernel, "exec:"+w+":")+"/"+r.Mask+"/"+r.Pass] = r.Status
		if strings.HasPrefix(r.Kernel, "exec:") && !strings.Contains(r.KernelVersions, `"fake":"1.0"`) {
			t.Errorf("%s: versions %s", r.Kernel, r.KernelVersions)
		}
	}
	for key, want := range map[string]results.Status{
		"ref/causal/fwd": results.StatusOK, "ref/causal/bwd": results.StatusOK, "fullonly/full/bwd": results.StatusOK,
		"fullonly/causal/fwd": results.StatusUnsupported,
	} {
		if st[key] != want {
			t.Errorf("%s: %s, want %s (all: %v)", key, st[key], want, st)
		}
	}
}

// A worker crash mid-case: with restart (the default) the sweep goes on with error
// rows naming the exit status; with stop it ends after that case, exit status 1, its
// rows kept.
func TestWorkerCrashRestartOrStop(t *testing.T) {
	w := fakeWorker(t, "crash")
	out := t.TempDir()
	_, stderr, code := runCLI(t, append(smallPeerArgs(out), "--kernels", "exec:"+w+":ref")...)
	if code != 0 {
		t.Fatalf("restart: exit %d: %s", code, stderr)
	}
	rows, err := results.Load(out)
	if err != nil || len(rows) != 4 {
		t.Fatalf("restart: %d rows, %v", len(rows), err)
	}
	for _, r := range rows {
		if r.Status != results.StatusError || !strings.Contains(r.Reason, "exit status 3") {
			t.Fatalf("restart: %s %s", r.Status, r.Reason)
		}
	}

	w = fakeWorker(t, "crash")
	out = t.TempDir()
	_, stderr, code = runCLI(t, append(smallPeerArgs(out), "--kernels", "exec:"+w+":ref", "--on-worker-crash", "stop")...)
	if code != 1 || !strings.Contains(stderr, "stopped after 1 of 4 rows") {
		t.Fatalf("stop: exit %d: %s", code, stderr)
	}
	if rows, err := results.Load(out); err != nil || len(rows) != 1 {
		t.Fatalf("stop: %d rows kept, want 1 (%v)", len(rows), err)
	}
}

func TestExecPeerBadInputExits2(t *testing.T) {
	for _, args := range [][]string{
		{"kernel", "--kernels", "exec:/nonexistent/worker", "--dry-run"},
		{"kernel", "--kernels", "ref", "--on-worker-crash", "sometimes", "--seqlens", "256", "--masks", "causal"},
		{"kernel", "--kernels", "ref", "--worker-timeout", "-1s", "--seqlens", "256"},
	} {
		_, stderr, code := runCLI(t, args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", args, code, stderr)
		}
	}
}

// Without a GPU or without torch, torch:flex cases are unsupported rows that say why,
// and longca exits 0.
func TestTorchPeerWithoutGPUIsUnsupported(t *testing.T) {
	if os.Getenv("LONGCA_PYTHON") != "" {
		t.Skip("LONGCA_PYTHON is set: this machine may have torch")
	}
	out := t.TempDir()
	stdout, stderr, code := runCLI(t, append(smallPeerArgs(out), "--kernels", "torch:flex,torch:cudnn")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows, err := results.Load(out)
	if err != nil || len(rows) != 8 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	for _, r := range rows {
		if r.Status != results.StatusUnsupported || r.Reason == "" {
			t.Fatalf("%s %s %s: %s %q", r.Kernel, r.Mask, r.Pass, r.Status, r.Reason)
		}
	}
	if !strings.Contains(stdout, "unsupported") {
		t.Fatalf("table does not show unsupported:\n%s", stdout)
	}
	t.Logf("reason: %s", rows[0].Reason)
}

// report --plot draws grouped bars beside the line plots.
func TestReportBars(t *testing.T) {
	w := fakeWorker(t, "ok")
	out := t.TempDir()
	if _, stderr, code := runCLI(t, append(smallPeerArgs(out), "--kernels", "exec:"+w+":ref,ref")...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	plots := filepath.Join(t.TempDir(), "plots")
	stdout, stderr, code := runCLI(t, "report", out, "--plot", plots)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, stderr)
	}
	for _, f := range []string{"bars_causal_fwd_4-2.png", "causal_fwd_4-2.png"} {
		if st, err := os.Stat(filepath.Join(plots, f)); err != nil || st.Size() < 1000 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if !strings.Contains(stdout, "(x fastest)") {
		t.Fatalf("report lacks the ratio view:\n%s", stdout)
	}
}

// TestWorkerStopCountsAsTheTable (issue 23, items 18 and 20): with a ref column and a
// worker that dies on supports, --on-worker-crash stop ends the sweep after that case,
// its worker started once, the last line counting rows as the table does ("Rows: 3"; the
// issue: "stopped after case 3 of 8" beside "Cases: 2 Rows: 3"), and the reason
// labelled supports, said once.
func TestWorkerStopCountsAsTheTable(t *testing.T) {
	w := fakeWorker(t, "crash-supports")
	out := t.TempDir()
	_, stderr, code := runCLI(t, "kernel", "--masks", "causal,full", "--seqlens", "256", "--heads", "4:2", "--head-dim", "16",
		"--passes", "fwd,bwd", "-w", "0", "-n", "1", "--kernels", "ref,exec:"+w+":ref", "--on-worker-crash", "stop", "--out", out)
	last := strings.TrimSpace(stderr)
	last = last[strings.LastIndex(last, "\n")+1:]
	if code != 1 || !strings.Contains(last, "stopped after 3 of 8 rows") || !strings.Contains(last, "ref supports: ") ||
		strings.Contains(last, "forward") || strings.Count(last, "failed during its") != 1 {
		t.Fatalf("exit %d, last line %q", code, last)
	}
	report, _, _ := runCLI(t, "report", out)
	if !strings.Contains(report, "Rows: 3") {
		t.Errorf("the report of the kept rows:\n%s", report)
	}
}

// cp takes a worker kernel (exec:PATH: it was refused as unknown although the list of
// kernels offered it) for the forward on every method, checked: the methods hand their
// kernel fp32 partial outputs, which the worker answers in the problem's dtype, and two
// in-process ranks share one worker (their call folders once collided). Its backward is
// refused by name: the protocol lets a worker answer it from a forward of its own, which
// a ring step cannot use.
func TestCPTakesAWorkerKernelForTheForward(t *testing.T) {
	w := fakeWorker(t, "ok")
	args := []string{"cp", "--ranks", "2", "--kernel", "exec:" + w + ":ref", "--methods", "ring-p2p,ulysses,balanced,ring-allgather",
		"--masks", "causal,full_document", "--tokens-per-rank", "128", "--heads", "4:2", "--head-dim", "16", "--samples", "1", "-w", "0", "-n", "1"}
	_, stderr, code := runCLI(t, append(args, "--out", t.TempDir())...)
	checkUsageError(t, args, code, stderr, "give --passes fwd")
	out := t.TempDir()
	if _, stderr, code := runCLI(t, append(args, "--passes", "fwd", "--out", out)...); code != 0 {
		t.Fatalf("--passes fwd: exit %d: %s", code, stderr)
	}
	rows, err := results.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 16 {
		t.Errorf("%d rows, want 16 (4 methods x 2 masks x 2 ranks)", len(rows))
	}
	for _, r := range rows {
		if r.Status != results.StatusOK {
			t.Errorf("%s %s %s: %s (%s)", r.Method, r.Mask, r.Pass, r.Status, r.Reason)
		}
	}
}

// A worker whose hello says its backward uses the out and lse it is given
// (backward_uses_given) runs the CP methods' backward too, checked on every method; the
// same run with a worker that does not say so is refused naming the field.
func TestCPTakesAWorkerBackwardThatUsesTheGivenForward(t *testing.T) {
	w := fakeWorker(t, "given")
	args := []string{"cp", "--ranks", "4", "--kernel", "exec:" + w + ":ref", "--methods", "ring-p2p,ring-allgather,ulysses,usp,loongtrain,balanced",
		"--masks", "causal,causal_document", "--tokens-per-rank", "128", "--heads", "4:4", "--head-dim", "16", "--samples", "1", "-w", "0", "-n", "1"}
	out := t.TempDir()
	if _, stderr, code := runCLI(t, append(args, "--out", out)...); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	rows, err := results.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	bwd := 0
	for _, r := range rows {
		if r.Status != results.StatusOK {
			t.Errorf("%s %s %s: %s (%s)", r.Method, r.Mask, r.Pass, r.Status, r.Reason)
		}
		if r.Pass == "bwd" {
			bwd++
		}
	}
	if want := 6 * 2 * 4; bwd != want {
		t.Errorf("%d backward rows, want %d (6 methods x 2 masks x 4 ranks)", bwd, want)
	}
	external.CloseAll()
	session.ForgetKernels()
	t.Setenv(externaltest.FakeEnv, "ok")
	_, stderr, code := runCLI(t, append(args, "--out", t.TempDir())...)
	checkUsageError(t, args, code, stderr, `"backward_uses_given": true`)
}
