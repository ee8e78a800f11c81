package check

import (
	"context"
	"fmt"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// BenchmarkCheck times a whole check (inputs, candidate, exact and naive references) at
// the sizes the harness checks GPU kernels at, with the reference as the candidate.
func BenchmarkCheck(b *testing.B) {
	for _, s := range []int{2048, 4096} {
		for _, backward := range []bool{false, true} {
			m := mask.Mask{SeqQ: s, SeqK: s, Slices: []mask.Slice{{Q: mask.Range{Start: 0, End: s}, K: mask.Range{Start: 0, End: s}, Kind: mask.Causal}}}
			p := kernels.Problem{HeadsQ: 8, HeadsKV: 2, HeadDim: 128, DType: tensor.BF16, Mask: m}
			check, pass := Forward, "fwd"
			if backward {
				check, pass = Backward, "bwd"
			}
			b.Run(fmt.Sprintf("%s/S=%d", pass, s), func(b *testing.B) {
				for b.Loop() {
					r, err := check(context.Background(), ref.New(ref.Options{}), p, 1)
					if err != nil || !r.Pass {
						b.Fatalf("%v %v", r, err)
					}
					b.Log(r)
				}
			})
		}
	}
}
