package harness

import (
	"context"
	"fmt"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// BenchmarkSweepChecks times the checks of one case for four kernels, forward and
// backward, with the references computed per check (KernelCheck) and shared through a
// cache (NewKernelCheck). The kernels here are the CPU reference behind a fake device, so
// the candidates cost as much as a reference; on a GPU the candidates are nearly free and
// the references are all of a check's cost.
func BenchmarkSweepChecks(b *testing.B) {
	c := Case{Mask: "causal_document", SeqLen: 1024, Heads: Heads{8, 2}, HeadDim: 64, DType: tensor.BF16, Seed: 42}
	for _, mode := range []string{"uncached", "cached"} {
		b.Run(mode, func(b *testing.B) {
			for b.Loop() {
				chk := KernelCheck
				if mode == "cached" {
					chk = NewKernelCheck()
				}
				for i := range 4 {
					k := newFake()
					r := &Runner{Check: chk, Warmup: 1, Iters: 3, NewKernel: func(string) (kernels.Kernel, error) { return k, nil }}
					for _, pass := range []kernels.Pass{kernels.Fwd, kernels.Bwd} {
						cc := c
						cc.Kernel, cc.Pass = fmt.Sprintf("k%d", i), pass
						if row := r.Run(context.Background(), cc); row.Status != results.StatusOK {
							b.Fatalf("%s %s: %s %s", cc.Kernel, pass, row.Status, row.Reason)
						}
					}
				}
			}
		})
	}
}
