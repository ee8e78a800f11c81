package ref

import (
	"fmt"
	"testing"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// smallDocs draws document lengths 1..24 so that small S holds several documents.
var smallDocs = &dataset.Dist{Name: "small", Bins: []dataset.Bin{{Lo: 1, Hi: 8, P: 0.5}, {Lo: 8, Hi: 25, P: 0.5}}}

// checkDense runs ref on p and compares every output with the dense implementation.
func checkDense(t *testing.T, p kernels.Problem, seed uint64) {
	t.Helper()
	q, k, v, dout := inputs(p, p.DType, seed)
	got := runBoth(t, New(Options{}), p, q, k, v, dout, tensor.FP64, tensor.FP64)
	want := dense(p, q.Float64s(), k.Float64s(), v.Float64s(), dout.Float64s())
	for _, f := range []struct {
		name      string
		got, want []float64
	}{{"out", got.out, want.out}, {"lse", got.lse, want.lse}, {"dq", got.dq, want.dq}, {"dk", got.dk, want.dk}, {"dv", got.dv, want.dv}} {
		if e := relErr(f.got, f.want); e > 1e-12 {
			t.Errorf("%s: relative error %.3g against the dense reference", f.name, e)
		}
	}
}

// TestBuiltMasks runs every mask builder of package mask at small S.
func TestBuiltMasks(t *testing.T) {
	for _, name := range mask.Names() {
		for _, s := range []int{40, 96} {
			o := mask.Options{Seed: uint64(s), Source: smallDocs, Window: 9, BlockSize: 8, LongMin: 10, LongMax: 30}
			sp, err := mask.Build(name, s, o)
			if err != nil {
				t.Fatalf("mask.Build(%s, %d): %v", name, s, err)
			}
			p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 8, DType: tensor.BF16, Mask: sp.Mask}
			t.Run(fmt.Sprintf("%s/S=%d", name, s), func(t *testing.T) { checkDense(t, p, uint64(s)) })
		}
	}
}

// TestBlockSparseHeadMasks runs the per-KV-head block-sparse masks.
func TestBlockSparseHeadMasks(t *testing.T) {
	for _, o := range []mask.SparseOptions{
		{Seed: 1, Block: 8, Ratio: 0.5, Scores: mask.RandomScores, HeadsKV: 2},
		{Seed: 2, Block: 16, Ratio: 0.3, Scores: mask.RandomScores, HeadsKV: 4},
	} {
		sp, err := mask.BlockSparse(80, o, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := kernels.Problem{HeadsQ: 8, HeadsKV: o.HeadsKV, HeadDim: 8, DType: tensor.BF16,
			Mask: mask.Mask{SeqQ: 80, SeqK: 80}, HeadMasks: sp.Heads}
		t.Run(fmt.Sprintf("block=%d/kv=%d", o.Block, o.HeadsKV), func(t *testing.T) { checkDense(t, p, o.Seed) })
	}
}
