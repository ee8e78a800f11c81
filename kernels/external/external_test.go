package external_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/external"
	"github.com/longca/longca/kernels/external/externaltest"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

func TestMain(m *testing.M) {
	externaltest.MaybeServe() // the fake worker, when this binary is started as one
	os.Exit(m.Run())
}

// fakeKernel is kernel remote of a fake worker in mode (this test binary re-executed),
// closed when the test ends.
func fakeKernel(t *testing.T, mode, remote string, timeout time.Duration) *external.Kernel {
	t.Helper()
	t.Setenv(externaltest.FakeEnv, mode)
	t.Setenv(externaltest.StateEnv, t.TempDir())
	w := external.NewWorker(external.Spec{Argv: []string{os.Args[0]}, Label: "fake worker (" + mode + ")"})
	t.Cleanup(w.Close)
	return external.NewKernel("exec:fake:"+remote, remote, w, timeout)
}

// runner checks and times cases with k, as longca kernel does.
func runner(k kernels.Kernel) *harness.Runner {
	return &harness.Runner{Check: harness.KernelCheck, Warmup: 1, Iters: 3,
		NewKernel: func(string) (kernels.Kernel, error) { return k, nil }}
}

func smallCase(m string, pass kernels.Pass) harness.Case {
	return harness.Case{Mask: m, SeqLen: 256, Heads: harness.Heads{Q: 4, KV: 2}, HeadDim: 16, DType: tensor.BF16,
		Kernel: "exec:fake", Pass: pass, Seed: 7}
}

func wantStatus(t *testing.T, row results.Row, st results.Status, reason ...string) {
	t.Helper()
	t.Logf("%s: %s", row.Status, row.Reason)
	if row.Status != st {
		t.Fatalf("status %s (%s), want %s", row.Status, row.Reason, st)
	}
	for _, r := range reason {
		if !strings.Contains(row.Reason, r) {
			t.Fatalf("reason %q does not say %q", row.Reason, r)
		}
	}
	if st != results.StatusOK && (row.MedianMs != nil || row.TFLOPs != nil) {
		t.Fatalf("a %s row has times", st)
	}
}

func TestFakeWorkerOK(t *testing.T) {
	k := fakeKernel(t, "ok", "ref", 0)
	r := runner(k)
	for _, m := range []string{"causal", "causal_document", "sliding_window"} {
		for _, pass := range []kernels.Pass{kernels.Fwd, kernels.Bwd} {
			row := r.Run(context.Background(), smallCase(m, pass))
			wantStatus(t, row, results.StatusOK)
			if row.CheckPass == nil || !*row.CheckPass || row.CheckSeqLen == nil || *row.CheckSeqLen != 256 {
				t.Fatalf("%s %s: check not recorded as passed at 256: %+v", m, pass, row)
			}
			// the fake answers the pass's FLOPs at 1 TFLOP/s
			if row.TFLOPs == nil || *row.TFLOPs < 0.99 || *row.TFLOPs > 1.01 {
				t.Fatalf("%s %s: TFLOP/s %v, want 1 (the fake's rate)", m, pass, row.TFLOPs)
			}
			if row.Device != "cpu" || row.Backend != "cpu" || row.DeviceIndex != nil {
				t.Fatalf("device %q backend %q index %v: want the worker's cpu", row.Device, row.Backend, row.DeviceIndex)
			}
			if row.KernelVariant != "fake-ok" || !strings.Contains(row.KernelVersions, `"fake":"1.0"`) ||
				!strings.Contains(row.KernelVersions, `"ref":"1"`) || !strings.Contains(row.KernelVersions, `"protocol":"1"`) {
				t.Fatalf("variant %q versions %s", row.KernelVariant, row.KernelVersions)
			}
			if row.PeakMemBytes == nil || *row.PeakMemBytes != 1<<20 {
				t.Fatalf("peak memory %v, want the worker's 1 MiB", row.PeakMemBytes)
			}
		}
	}
	if k.Crashes() != 0 {
		t.Fatalf("%d crashes", k.Crashes())
	}
}

// A time reply's variant (the path that ran, when it differs by pass) is the row's
// kernel_variant; without one, the supports answer's stays.
func TestFakeWorkerTimedVariant(t *testing.T) {
	k := fakeKernel(t, "timed-variant", "ref", 0)
	for _, pc := range []struct {
		pass kernels.Pass
		want string
	}{{kernels.Fwd, "fake-timed-variant"}, {kernels.Bwd, "fake-timed-bwd"}} {
		row := runner(k).Run(context.Background(), smallCase("causal", pc.pass))
		wantStatus(t, row, results.StatusOK)
		if row.KernelVariant != pc.want {
			t.Errorf("%s: variant %q, want %q", pc.pass, row.KernelVariant, pc.want)
		}
	}
}

func TestFakeWorkerWrongIsNeverTimed(t *testing.T) {
	k := fakeKernel(t, "wrong", "ref", 0)
	for _, pass := range []kernels.Pass{kernels.Fwd, kernels.Bwd} {
		row := runner(k).Run(context.Background(), smallCase("causal", pass))
		wantStatus(t, row, results.StatusWrong, "error")
		if row.CheckPass == nil || *row.CheckPass {
			t.Fatalf("check_pass %v on a wrong worker", row.CheckPass)
		}
	}
}

func TestFakeWorkerStatuses(t *testing.T) {
	for _, tc := range []struct {
		mode, remote, mask string
		st                 results.Status
		reason             []string
	}{
		{"unsupported", "ref", "causal", results.StatusUnsupported, []string{"refuses everything"}},
		{"ok", "fullonly", "causal", results.StatusUnsupported, []string{"fullonly takes one full slice"}},
		{"ok", "fullonly", "full", results.StatusOK, nil},
		{"ok", "gone", "full", results.StatusUnsupported, []string{"unavailable here", "no such device here"}},
		{"ok", "nosuch", "full", results.StatusUnsupported, []string{"serves ref, fullonly, gone", `not "nosuch"`}},
		{"ok", "", "full", results.StatusUnsupported, []string{"serves 3 kernels", "name one"}},
		{"oom", "ref", "causal", results.StatusOOM, []string{"out of memory"}},
		{"version", "ref", "causal", results.StatusError, []string{"speaks protocol 99, longca 1"}},
		{"badid", "ref", "causal", results.StatusError, []string{"malformed reply", "answers no request"}},
		{"malformed", "ref", "causal", results.StatusError, []string{"malformed reply", "median_ms"}},
		{"garbage-hello", "ref", "causal", results.StatusError, []string{"malformed reply", "this is not json"}},
		{"crash-hello", "ref", "causal", results.StatusError, []string{"exit status 4", "dying during hello"}},
	} {
		t.Run(tc.mode+"/"+tc.remote+"/"+tc.mask, func(t *testing.T) {
			k := fakeKernel(t, tc.mode, tc.remote, 0)
			row := runner(k).Run(context.Background(), smallCase(tc.mask, kernels.Fwd))
			wantStatus(t, row, tc.st, tc.reason...)
		})
	}
}

// A worker that crashes mid-case gives an error row naming its exit status and the end
// of its stderr; the next case gets a new worker.
func TestFakeWorkerCrashRestarts(t *testing.T) {
	k := fakeKernel(t, "crash-once", "ref", 0)
	r := runner(k)
	row := r.Run(context.Background(), smallCase("causal", kernels.Fwd))
	wantStatus(t, row, results.StatusError, "exit status 3", "crashing once", "during its time request")
	if k.Crashes() != 1 {
		t.Fatalf("%d crashes counted, want 1", k.Crashes())
	}
	row = r.Run(context.Background(), smallCase("causal", kernels.Bwd))
	wantStatus(t, row, results.StatusOK)

	k = fakeKernel(t, "crash", "ref", 0) // crashes on every time request: every case is an error
	r = runner(k)
	for i := 0; i < 2; i++ {
		wantStatus(t, r.Run(context.Background(), smallCase("causal", kernels.Fwd)), results.StatusError, "exit status 3")
	}
	if k.Crashes() != 2 {
		t.Fatalf("%d crashes counted, want 2", k.Crashes())
	}
}

// A worker that hangs is killed (with its process group) after the timeout: an error
// row, in bounded time, and the next request starts a new worker.
func TestFakeWorkerHangIsBounded(t *testing.T) {
	k := fakeKernel(t, "hang", "ref", 3*time.Second)
	t0 := time.Now()
	row := runner(k).Run(context.Background(), smallCase("causal", kernels.Fwd))
	wantStatus(t, row, results.StatusError, "no reply within 3s", "killed")
	if el := time.Since(t0); el > 30*time.Second {
		t.Fatalf("a hung worker took %s to give up", el)
	}
	if k.Crashes() != 1 {
		t.Fatalf("%d crashes, want 1", k.Crashes())
	}
	// the check (forward) of the next case works on a new worker
	if err := k.Supports(kernels.Problem{}); err == nil {
		t.Fatal("an invalid problem is supported")
	}
}

// Cancelling (Ctrl-C) kills a worker in the middle of a request at once.
func TestFakeWorkerCancel(t *testing.T) {
	k := fakeKernel(t, "hang", "ref", time.Hour)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	t0 := time.Now()
	row := runner(k).Run(ctx, smallCase("causal", kernels.Fwd))
	if row.Status == results.StatusOK || time.Since(t0) > 20*time.Second {
		t.Fatalf("status %s after %s", row.Status, time.Since(t0))
	}
}

func TestMissingProgramIsUnsupported(t *testing.T) {
	w := external.NewWorker(external.TorchSpec("/nonexistent/python3", 0))
	t.Cleanup(w.Close)
	k := external.NewKernel("torch:flex", "flex", w, 0)
	row := runner(k).Run(context.Background(), smallCase("causal", kernels.Fwd))
	wantStatus(t, row, results.StatusUnsupported, "/nonexistent/python3 not found", "--python")
}

// Without torch (or without a GPU) the embedded PyTorch worker says why, and each case
// is unsupported: the sweep goes on.
func TestTorchWorkerWithoutTorch(t *testing.T) {
	py := os.Getenv("LONGCA_TEST_PYTHON")
	if py != "" {
		t.Skip("LONGCA_TEST_PYTHON is set: the torch tests run instead")
	}
	w := external.NewWorker(external.TorchSpec("python3", 0))
	t.Cleanup(w.Close)
	for _, name := range []string{"flex", "flash"} {
		k := external.NewKernel("torch:"+name, name, w, 0)
		row := runner(k).Run(context.Background(), smallCase("causal", kernels.Fwd))
		wantStatus(t, row, results.StatusUnsupported)
		if !strings.Contains(row.Reason, "torch") && !strings.Contains(row.Reason, "not found") {
			t.Fatalf("reason %q says neither torch nor a missing interpreter", row.Reason)
		}
	}
}

func TestParseExec(t *testing.T) {
	self, _ := os.Executable()
	for _, tc := range []struct {
		rest, kernel, err string
	}{
		{os.Args[0], "", ""},
		{os.Args[0] + ":flex", "flex", ""},
		{"/nonexistent/worker", "", "no such file"},
		{"/nonexistent/worker:flex", "", "no such file"},
		{t.TempDir(), "", "not an executable file"},
	} {
		path, kernel, err := external.ParseExec(tc.rest)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("ParseExec(%q) error %v, want %q", tc.rest, err, tc.err)
		case tc.err == "" && err != nil:
			t.Errorf("ParseExec(%q): %v", tc.rest, err)
		case tc.err == "" && (kernel != tc.kernel || !strings.HasPrefix(path, "/")):
			t.Errorf("ParseExec(%q) = %q, %q", tc.rest, path, kernel)
		}
	}
	_ = self
}
