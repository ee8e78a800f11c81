package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
	"github.com/longca/longca/session"
)

// simBase is a small simulate run: one method, one mask, 8 GPUs.
func simBase(t *testing.T, extra ...string) []string {
	return append([]string{"simulate", "--gpus", "8", "--methods", "ring-p2p", "--masks", "causal", "--out", filepath.Join(t.TempDir(), "out")}, extra...)
}

// refusedWithin runs args and checks a one-line usage error naming wants, within limit:
// a guard that lets the run start fails the test instead of taking the machine.
func refusedWithin(t *testing.T, limit time.Duration, args []string, wants ...string) {
	t.Helper()
	type result struct {
		errOut string
		code   int
	}
	done := make(chan result, 1)
	go func() {
		_, errOut, code := captureRun(t, args...)
		done <- result{errOut, code}
	}()
	select {
	case r := <-done:
		checkUsageError(t, args, r.code, r.errOut, wants...)
	case <-time.After(limit):
		t.Fatalf("%v was not refused within %s: the guard let it start", args, limit)
	}
}

// Every exact rank's trace is counted: 4096 exact ranks of ring-p2p passed the memory
// check ("at_most 6s") and grew to 23.5 GB; on a host with about 18 GiB to give it is
// one line naming --exact-ranks, at once.
func TestSimulateExactRanksCounted(t *testing.T) {
	withMachine(t, 18/0.85*(1<<30))
	args := []string{"simulate", "--gpus", "4096", "--methods", "ring-p2p", "--masks", "causal", "--exact-ranks", "4096", "--out", filepath.Join(t.TempDir(), "out")}
	refusedWithin(t, 20*time.Second, args, "--gpus 4096", "host memory", "use a smaller --exact-ranks")
}

// --sampled-ranks is at most the GPU count (a billion grew to 10 GB: the sample was every
// rank and the estimate did not count it), and a sample that fits the GPU count but not
// the memory is refused naming it.
func TestSimulateSampledRanksBounded(t *testing.T) {
	withMachine(t, 18/0.85*(1<<30))
	args := []string{"simulate", "--gpus", "4096", "--methods", "ring-p2p", "--masks", "causal", "--sampled-ranks", "1000000000", "--out", filepath.Join(t.TempDir(), "out")}
	refusedWithin(t, 20*time.Second, args, "--sampled-ranks 1000000000: give at most the largest --gpus count (4096)")
	args = []string{"simulate", "--gpus", "4096", "--methods", "ring-p2p", "--masks", "causal", "--sampled-ranks", "4096", "--out", filepath.Join(t.TempDir(), "out")}
	refusedWithin(t, 20*time.Second, args, "--gpus 4096", "host memory", "use a smaller --sampled-ranks (4096)")
}

// A link number that is not a finite number of its unit is refused naming its flag: NaN
// passed "< 0" and the simulation failed with 3 lines ("never finished event 0"), exit 1.
func TestSimulateLinkNumbersFinite(t *testing.T) {
	for _, c := range [][]string{
		{"--inter-latency", "NaN"}, {"--intra-latency", "nan"}, {"--inter-latency", "+Inf"}, {"--intra-latency", "-1"},
		{"--inter-bw", "NaN"}, {"--intra-bw", "+Inf"}, {"--inter-bw", "-Inf"}, {"--intra-bw", "0"},
	} {
		refusedWithin(t, 20*time.Second, simBase(t, c...), c[0]+" ", "give a finite number")
	}
	refusedWithin(t, 20*time.Second, simBase(t, "--gpus-per-node", "0"), "--gpus-per-node 0: give 1 to 1048576")
}

// The kernel flags are checked without --calibrate too, as longca kernel checks them
// (each of these exited 0); a valid one is said to change nothing, after every check (a
// refused run is one line).
func TestSimulateKernelFlagsChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--on-worker-crash", "x"}, `--on-worker-crash "x": use restart or stop`},
		{[]string{"--device", "-1"}, "--device -1: give a GPU index"},
		{[]string{"--variant", "bogus"}, `--variant: kernel cuda has no variant "bogus"`},
		{[]string{"--worker-timeout", "-1s"}, "--worker-timeout"},
	} {
		refusedWithin(t, 20*time.Second, simBase(t, c.args...), c.want)
	}
	// refused by the memory check: no warning before the one line
	refusedWithin(t, 20*time.Second, []string{"simulate", "--gpus", "65536", "--masks", "causal_document_long", "--variant", "sm90", "--out", filepath.Join(t.TempDir(), "out")}, "host memory")
	_, errOut, code := captureRun(t, simBase(t, "--variant", "sm90", "--on-worker-crash", "stop")...)
	if code != 0 || !strings.Contains(errOut, "--variant is read by --calibrate only") || !strings.Contains(errOut, "--on-worker-crash is read by --calibrate only") {
		t.Errorf("--variant sm90 --on-worker-crash stop without --calibrate: exit %d, want 0 and a warning for each:\n%s", code, errOut)
	}
}

// --calibrate with a kernel that cannot run here is one line naming the fixes, exit 2
// (without a GPU, --calibrate cuda gave 16 warnings and "no usable kernel rows", exit 1).
func TestSimulateCalibrateKernelThatCannotRun(t *testing.T) {
	if !kernels.Known("cuda") {
		t.Skip("no cuda kernel in this build")
	}
	if _, err := session.NewKernel("cuda", kernels.Options{}); err == nil {
		t.Skip("the cuda kernel runs here")
	}
	refusedWithin(t, 60*time.Second, simBase(t, "--calibrate", "cuda"), "--calibrate cuda: the kernel cannot run here", "--calibrate ref", "--kernel-rows FILE")
}

// --calibrate is a kernel sweep: it says how long it will take when that is long, logs a
// line a case, writes each row as it is measured, and Ctrl-C keeps them (exit 130). It
// printed nothing for 10 minutes and kept its rows in memory until the end.
func TestSimulateCalibrationKeepsRows(t *testing.T) {
	dir := t.TempDir()
	lines, _ := interruptAfterTwoCases(t, "simulate --gpus 8 --methods ring-p2p --masks causal --samples 1 --calibrate ref "+
		"--calibrate-seqlens 256,512,1K,2K --heads 2:1 --head-dim 64 --calibrate-iters 1 --out "+dir+" --run-id sim")
	file := filepath.Join(dir, "sim-calibration.rank-0-of-1.arrow")
	if last := lines[len(lines)-1]; !strings.Contains(last, "calibration interrupted after") || !strings.Contains(last, file) {
		t.Errorf("last line %q, want the interruption and the file", last)
	}
	rows, _, err := results.ReadRows(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 2 || len(rows) >= 16 {
		t.Errorf("%d rows in the file, want at least the 2 before the signal and fewer than the 16 cases", len(rows))
	}
	for _, r := range rows {
		if r.Bench != "kernel" || r.RunID != "sim-calibration" {
			t.Fatalf("calibration row of bench %q, run %q", r.Bench, r.RunID)
		}
	}
}

// A calibration that will take long says so before it starts (as longca kernel): the
// default lengths with the CPU reference take hours.
func TestSimulateCalibrationSaysHowLong(t *testing.T) {
	withMachine(t, 24<<30)
	dir := t.TempDir()
	// The calibration's file exists already: it stops when it creates it, after the
	// estimate has been said; nothing is timed.
	if err := os.WriteFile(filepath.Join(dir, "slow-calibration.rank-0-of-1.arrow"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := captureRun(t, "--log-format", "json", "simulate", "--gpus", "8", "--methods", "ring-p2p", "--masks", "causal",
		"--samples", "1", "--calibrate", "ref", "--out", dir, "--run-id", "slow")
	if code == 0 || !strings.Contains(errOut, "exists") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "this sweep will take about") || !strings.Contains(errOut, `"longest_case":"ref full S=16K`) {
		t.Errorf("no estimate logged:\n%s", errOut)
	}
}
