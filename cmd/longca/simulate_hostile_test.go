package main

import (
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
