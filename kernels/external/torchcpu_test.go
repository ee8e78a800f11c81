//go:build torchcpu

package external_test

import (
	"context"
	"os"
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/external"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// The embedded PyTorch worker's FlexAttention path on the CPU (eager, --cpu), checked
// against the reference on every kernel mask and on block-sparse masks, forward and
// backward: the protocol, the layouts, the .npy files, the lse convention and the block
// masks (verified element by element by the worker) all run. Needs a Python with torch
// >= 2.5 and numpy: LONGCA_TEST_PYTHON=/path/to/python go test -tags torchcpu.
func TestTorchWorkerFlexOnCPU(t *testing.T) {
	py := os.Getenv("LONGCA_TEST_PYTHON")
	if py == "" {
		t.Fatal("set LONGCA_TEST_PYTHON to a Python with torch and numpy")
	}
	w := external.NewWorker(external.TorchSpec(py, 0, "--cpu"))
	t.Cleanup(w.Close)
	k := external.NewKernel("torch:flex", "flex", w, 0)
	r := &harness.Runner{Check: harness.KernelCheck, Warmup: 0, Iters: 1,
		NewKernel: func(string) (kernels.Kernel, error) { return k, nil }}
	var cases []harness.Case
	for _, m := range mask.KernelMasks() {
		for _, pass := range []kernels.Pass{kernels.Fwd, kernels.Bwd} {
			cases = append(cases, harness.Case{Mask: m, SeqLen: 1024, Heads: harness.Heads{Q: 4, KV: 2}, HeadDim: 16,
				DType: tensor.BF16, Kernel: "torch:flex", Pass: pass, Seed: 42})
		}
	}
	for _, sp := range []harness.SparseSpec{{Block: 64, Ratio: 0.5}, {Block: 128, Ratio: 0.3}, {AvgBlock: 256, Ratio: 0.5}} {
		for _, pass := range []kernels.Pass{kernels.Fwd, kernels.Bwd} {
			cases = append(cases, harness.Case{Mask: sp.MaskName(), SeqLen: 1024, Heads: harness.Heads{Q: 4, KV: 2}, HeadDim: 16,
				DType: tensor.BF16, Kernel: "torch:flex", Pass: pass, Seed: 42, Sparse: sp})
		}
	}
	for _, c := range cases {
		row := r.Run(context.Background(), c)
		t.Logf("%s %s: %s %s variant %q versions %s", c.Label(), c.Pass, row.Status, row.Reason, row.KernelVariant, row.KernelVersions)
		if row.Status != results.StatusOK {
			t.Errorf("%s %s: %s: %s", c.Label(), c.Pass, row.Status, row.Reason)
		}
	}
	for _, name := range []string{"flash", "cudnn", "efficient", "varlen"} {
		sk := external.NewKernel("torch:"+name, name, w, 0)
		rr := &harness.Runner{Check: harness.KernelCheck, Warmup: 0, Iters: 1,
			NewKernel: func(string) (kernels.Kernel, error) { return sk, nil }}
		row := rr.Run(context.Background(), cases[0])
		if row.Status != results.StatusUnsupported {
			t.Errorf("torch:%s on the CPU: %s %s, want unsupported", name, row.Status, row.Reason)
		}
	}
}
