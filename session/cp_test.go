package session

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	_ "github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/tensor"
)

// A CP run stopped by Ctrl-C (its context cancelled) stops every rank at the same case,
// still merges the rank files and exits 130, as kernel sweeps do; before, the error
// returned before the merge, and nothing caught the signal.
func TestCPInterruptedKeepsRows(t *testing.T) {
	sw := harness.CPSweep{Methods: []string{"ring-p2p"}, Masks: []string{"causal", "full"}, SeqLen: 128, Heads: []harness.Heads{{Q: 2, KV: 1}},
		HeadDim: 8, DType: tensor.FP32, Passes: []kernels.Pass{kernels.Fwd}, Samples: 1, Seed: 42, Kernel: "ref"}
	cases, err := sw.Cases(2)
	if err != nil {
		t.Fatal(err)
	}
	k, err := kernels.New("ref", kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := New("cp", dir, "x", spmd.World{Size: 1}, "test", nil, io.Discard, io.Discard)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Ctrl-C before the first case
	err = s.CP(ctx, CPRun{Sweep: sw, Cases: cases, Ranks: 2, InProcess: true, Kernel: k, Warmup: 0, Iters: 1})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != 130 {
		t.Fatalf("interrupted CP run: %v, want an exit 130", err)
	}
	if _, err := results.Load(results.MergedPath(dir, "x")); err != nil {
		t.Errorf("the rank files were not merged: %v", err)
	}
}
