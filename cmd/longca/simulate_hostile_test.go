package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/results"
)

// TestKernelRowsWarningsBounded: the kernel rows simulate cannot use are named in a
// warning each; rows of 1 MB mask names gave 2 MB of stderr a row. The first few are
// named, each bounded, then counted.
func TestKernelRowsWarningsBounded(t *testing.T) {
	dir := t.TempDir()
	w, err := results.Create(dir, "big", 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.Repeat("m", 1<<20)
	for i := 0; i < 20; i++ {
		if err := w.Write(results.Row{RunID: "big", Bench: "kernel", Kernel: "ref", Mask: name, SeqLen: int64(1024 << (i % 4)), Pass: "fwd",
			Status: results.StatusOK, FLOPs: 1e9, MedianMs: results.Ptr(1.0), TFLOPs: results.Ptr(1.0)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	args := []string{"simulate", "--kernel-rows", filepath.Join(dir, results.FileName("big", 0, 1)), "--gpus", "8", "--masks", "causal",
		"--samples", "1", "--out", filepath.Join(t.TempDir(), "sim")}
	_, errOut, code := captureWithin(t, 60*time.Second, args...)
	if code != 2 {
		t.Errorf("exit %d, want 2 (no row can be used): %.300s", code, errOut)
	}
	if len(errOut) > 64<<10 {
		t.Errorf("stderr of %d bytes for 20 rows, want the warnings bounded", len(errOut))
	}
	if !strings.Contains(errOut, "12 more kernel rows not used") {
		t.Errorf("stderr does not count the rows not named: %.2000s", errOut)
	}
}

// TestMachineFileKernelModel: a machine file's unknown kernel model is named as the file's
// (it was refused as "--kernel-model", a flag not given), and --kernel-model replaces it.
func TestMachineFileKernelModel(t *testing.T) {
	m := filepath.Join(t.TempDir(), "m.json")
	if err := os.WriteFile(m, []byte(`{"preset":"h100-ib","kernel":"fa4-b200"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	base := []string{"simulate", "--machine", m, "--gpus", "8", "--tokens-per-rank", "1K", "--masks", "causal", "--methods", "ring-p2p", "--passes", "fwd", "--out", t.TempDir()}
	_, errOut, code := captureRun(t, base...)
	checkUsageError(t, base, code, errOut, "--machine "+m+`: its kernel "fa4-b200" is not a kernel model`, "--kernel-model")
	if _, errOut, code := captureRun(t, append(base, "--kernel-model", "fa3-h100")...); code != 0 {
		t.Errorf("with --kernel-model: exit %d: %s", code, errOut)
	}
}

// TestSimulateCPBlockCounted: balanced's sub-masks grow as the square of the blocks, which
// the session's estimate does not count: --cp-block 1 on 64 GPUs of 128K tokens logged
// "at_most 5s" and grew to 23 GB; on the default sweep, 3 GB. Each is one line naming
// --cp-block and the smallest block that fits, at once; that block runs.
func TestSimulateCPBlockCounted(t *testing.T) {
	withMachine(t, 18/0.85*(1<<30))
	out := filepath.Join(t.TempDir(), "out")
	refusedWithin(t, 20*time.Second, []string{"simulate", "--gpus", "64", "--tokens-per-rank", "128K", "--masks", "causal_document", "--passes", "fwd",
		"--samples", "1", "--methods", "balanced", "--cp-block", "1", "--out", out}, "--cp-block 1:", "64 GPUs", "host memory", "give --cp-block")
	refusedWithin(t, 20*time.Second, []string{"simulate", "--methods", "balanced", "--cp-block", "1", "--out", out}, "--cp-block 1:", "give --cp-block")
	args := []string{"simulate", "--gpus", "8", "--masks", "causal", "--passes", "fwd", "--samples", "1", "--methods", "balanced", "--cp-block", "1", "--out", out}
	_, errOut, _ := captureRun(t, args...)
	_, fix, ok := strings.Cut(errOut, "give --cp-block ")
	block, _, _ := strings.Cut(fix, " ")
	if !ok || block == "" {
		t.Fatalf("%v: %s, want the smallest block that fits", args, errOut)
	}
	args[len(args)-3] = block
	if _, errOut, code := captureWithin(t, 60*time.Second, args...); code != 0 {
		t.Errorf("--cp-block %s, the block the refusal named: exit %d: %s", block, code, errOut)
	}
	// without balanced, --cp-block changes nothing and nothing is refused for it
	if _, errOut, code := captureWithin(t, 60*time.Second, "simulate", "--gpus", "8", "--masks", "causal", "--passes", "fwd", "--methods", "ring-p2p",
		"--cp-block", "1", "--out", filepath.Join(t.TempDir(), "o")); code != 0 {
		t.Errorf("ring-p2p with --cp-block 1: exit %d: %s", code, errOut)
	}
}

// TestSimulateHugePortScopes: a shared port over a node of a billion GPUs (--gpus-per-node,
// or a machine file's ranks_per_gpu of 2^63-1) spun for good on 64 GPUs ("0s" estimated);
// past the largest world each is one line naming its flag or field, and the largest node
// runs in no time.
func TestSimulateHugePortScopes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "m.json")
	if err := os.WriteFile(file, []byte(`{"preset":"h100-ib","ranks_per_gpu":9223372036854775807}`), 0o644); err != nil {
		t.Fatal(err)
	}
	base := func(extra ...string) []string {
		return append([]string{"simulate", "--gpus", "64", "--masks", "full", "--methods", "ulysses,balanced", "--passes", "fwd", "--out", filepath.Join(t.TempDir(), "o")}, extra...)
	}
	refusedWithin(t, 20*time.Second, base("--gpus-per-node", "100000000", "--inter-shared"), "--gpus-per-node 100000000: give 1 to 1048576")
	refusedWithin(t, 20*time.Second, base("--machine", "h100-roce-shared", "--gpus-per-node", "1000000000"), "--gpus-per-node 1000000000: give 1 to 1048576")
	refusedWithin(t, 20*time.Second, base("--machine", file), "--machine", "ranks_per_gpu 9223372036854775807: need 1 to 1048576")
	if _, errOut, code := captureWithin(t, 30*time.Second, base("--gpus-per-node", "1048576", "--inter-shared")...); code != 0 {
		t.Errorf("--gpus-per-node 1048576 --inter-shared: exit %d: %s", code, errOut)
	}
}

// TestSimulateTimesOutOfRange: link and machine numbers that made a predicted time leave
// time.Duration's range are refused naming the flag or field (--intra-bw 1e-12 wrote a
// row of -9.2e12 ms that longca report then refused, exit 0); a prediction past a year
// with numbers in range is one line too, and no row is written.
func TestSimulateTimesOutOfRange(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ flag, value, want string }{
		{"--intra-bw", "1e-12", "--intra-bw 1e-12: give a finite number of GB/s, at least 1e-6"},
		{"--inter-bw", "1e-300", "--inter-bw 1e-300: give a finite number of GB/s, at least 1e-6"},
		{"--inter-latency", "1e300", "--inter-latency 1e+300: give a finite number of microseconds, 0 to 1e7"},
		{"--intra-latency", "1e8", "--intra-latency 1e+08"},
	} {
		refusedWithin(t, 20*time.Second, simBase(t, c.flag, c.value), c.want)
	}
	for i, c := range []struct{ file, want string }{
		{`{"preset":"h100-ib","compute_scale":1e300}`, "compute_scale 1e+300: give 1e-06 to 1e+06, or 0"},
		{`{"preset":"h100-ib","step_us":1e300}`, "step_us 1e+300"},
		{`{"preset":"h100-ib","helpers":{"bandwidth_gbs":1e-300,"launch_us":5}}`, "helpers: bandwidth_gbs 1e-300: give at least 1e-06"},
		{`{"preset":"h100-ib","local":{"bandwidth_gbs":1000,"latency_us":1e300,"shared":true}}`, "local: latency_us 1e+300"},
	} {
		file := filepath.Join(dir, fmt.Sprintf("m%d.json", i))
		if err := os.WriteFile(file, []byte(c.file), 0o644); err != nil {
			t.Fatal(err)
		}
		refusedWithin(t, 20*time.Second, simBase(t, "--machine", file), "--machine "+file+": ", c.want)
	}
	out := filepath.Join(t.TempDir(), "slow")
	// (found while predicting: after the sweep's progress lines)
	_, errOut, code := captureWithin(t, 60*time.Second, "simulate", "--gpus", "8", "--gpus-per-node", "1", "--inter-bw", "0.001", "--tokens-per-rank", "4M",
		"--heads", "1024:1024", "--head-dim", "1024", "--masks", "full", "--methods", "ring-p2p", "--passes", "fwd", "--samples", "1", "--out", out)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if last := lines[len(lines)-1]; code != 2 || !strings.Contains(last, "past a year") || !strings.Contains(last, "the link flags") {
		t.Errorf("1 MB/s links under 1024:1024 heads of 1024 on 4M tokens a GPU: exit %d, last line %q; want 2 and the time past a year", code, last)
	}
	if rows, _ := results.Load(out); len(rows) > 0 {
		t.Errorf("%d rows written for a prediction past a year", len(rows))
	}
}
