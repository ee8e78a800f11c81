package ref

import (
	"context"
	"fmt"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// BenchmarkCausal times forward and backward at a few thousand tokens, the size the
// check runs at; it reports the reference's GFLOP/s by the FLOPs rule of MASKS.md.
func BenchmarkCausal(b *testing.B) {
	for _, s := range []int{1024, 4096} {
		m := mask.Mask{SeqQ: s, SeqK: s, Slices: []mask.Slice{{Q: mask.Range{Start: 0, End: s}, K: mask.Range{Start: 0, End: s}, Kind: mask.Causal}}}
		p := kernels.Problem{HeadsQ: 8, HeadsKV: 2, HeadDim: 128, DType: tensor.BF16, Mask: m}
		q, k, v, dout := inputs(p, tensor.BF16, 1)
		qs, kvs, ls := p.Shapes()
		out, lse := tensor.NewHost(tensor.BF16, qs...), tensor.NewHost(tensor.FP32, ls...)
		dq, dk, dv := tensor.NewHost(tensor.BF16, qs...), tensor.NewHost(tensor.BF16, kvs...), tensor.NewHost(tensor.BF16, kvs...)
		r := New(Options{})
		ctx := context.Background()
		b.Run(fmt.Sprintf("fwd/S=%d", s), func(b *testing.B) {
			for b.Loop() {
				if err := r.Forward(ctx, p, q, k, v, out, lse); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(p.FLOPs(kernels.Fwd)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(fmt.Sprintf("bwd/S=%d", s), func(b *testing.B) {
			for b.Loop() {
				if err := r.Backward(ctx, p, q, k, v, out, lse, dout, dq, dk, dv); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(p.FLOPs(kernels.Bwd)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkSmall times the small problems the context-parallel tests run by the
// thousand: what matters there is the fixed cost of a call.
func BenchmarkSmall(b *testing.B) {
	m := mask.Mask{SeqQ: 64, SeqK: 96, Slices: []mask.Slice{{Q: mask.Range{Start: 0, End: 64}, K: mask.Range{Start: 0, End: 96}, Kind: mask.Causal}}}
	p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 16, DType: tensor.BF16, Mask: m}
	q, k, v, dout := inputs(p, tensor.BF16, 1)
	qs, kvs, ls := p.Shapes()
	out, lse := tensor.NewHost(tensor.BF16, qs...), tensor.NewHost(tensor.FP32, ls...)
	dq, dk, dv := tensor.NewHost(tensor.BF16, qs...), tensor.NewHost(tensor.BF16, kvs...), tensor.NewHost(tensor.BF16, kvs...)
	r := New(Options{})
	ctx := context.Background()
	for b.Loop() {
		if err := r.Forward(ctx, p, q, k, v, out, lse); err != nil {
			b.Fatal(err)
		}
		if err := r.Backward(ctx, p, q, k, v, out, lse, dout, dq, dk, dv); err != nil {
			b.Fatal(err)
		}
	}
}
