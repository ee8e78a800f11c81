package sim

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/spmd/cp"
	"github.com/longca/longca/tensor"
)

// BenchmarkPredictPerToken is the CPU time of one simulated case per token of the
// sequence, on 8 GPUs, for every method (its first mesh) and pass on a mask without
// documents and on a document mask, at two lengths: the measurement behind
// tokenSeconds and docSeconds (docs/hardening.md). Run with
//
//	go test -run '^$' -bench PredictPerToken -benchtime 1x ./sim
func BenchmarkPredictPerToken(b *testing.B) {
	const n = 8
	mc := MachinePresets[DefaultPreset]
	km, err := KernelPreset(mc.Kernel)
	if err != nil {
		b.Fatal(err)
	}
	for _, mk := range []string{"causal", "causal_document_long", "full_document_long"} {
		for _, seqlen := range []int{16 << 20, 64 << 20} {
			spec, err := mask.Build(mk, seqlen, mask.Options{Seed: 42, Purpose: mask.PurposeCP})
			if err != nil {
				b.Fatal(err)
			}
			docs, err := spec.Docs()
			if err != nil {
				b.Fatal(err)
			}
			p := kernels.Problem{HeadsQ: 64, HeadsKV: 8, HeadDim: 128, DType: tensor.BF16, Mask: spec.Mask}
			for _, method := range cp.Names() {
				m, _ := cp.New(method)
				cfg := configs(method, n)[0]
				cfg.Docs = docs
				for _, pass := range []kernels.Pass{kernels.Fwd, kernels.Bwd} {
					b.Run(fmt.Sprintf("%s/%dM/%s/%s", mk, seqlen>>20, method, pass), func(b *testing.B) {
						var el time.Duration
						for range b.N {
							t0 := time.Now()
							if _, _, err := Predict(context.Background(), m, cfg, p, []kernels.Pass{pass},
								Options{Machine: mc, Kernel: km, PartialDType: tensor.FP32}); err != nil {
								b.Fatal(err)
							}
							el += time.Since(t0)
						}
						b.ReportMetric(float64(el.Nanoseconds())/float64(b.N)/float64(seqlen), "ns/token")
						b.ReportMetric(float64(len(docs)), "docs")
					})
				}
			}
		}
	}
}
