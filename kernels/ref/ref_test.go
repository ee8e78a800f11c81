package ref

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// result is a kernel's forward and backward outputs, as float64.
type result struct {
	out, lse, dq, dk, dv []float64
}

// runBoth runs k's forward (out in outDT, lse in lseDT) then its backward with dout,
// gradients in outDT.
func runBoth(t *testing.T, k kernels.Kernel, p kernels.Problem, q, kk, v, dout *tensor.Host, outDT, lseDT tensor.DType) result {
	t.Helper()
	qs, kvs, ls := p.Shapes()
	out, lse := tensor.NewHost(outDT, qs...), tensor.NewHost(lseDT, ls...)
	ctx := context.Background()
	if err := k.Forward(ctx, p, q, kk, v, out, lse); err != nil {
		t.Fatal(err)
	}
	dq, dk, dv := tensor.NewHost(outDT, qs...), tensor.NewHost(outDT, kvs...), tensor.NewHost(outDT, kvs...)
	for _, g := range []*tensor.Host{dq, dk, dv} {
		g.Fill(math.NaN()) // backward must overwrite
	}
	if err := k.Backward(ctx, p, q, kk, v, out, lse, dout, dq, dk, dv); err != nil {
		t.Fatal(err)
	}
	return result{out.Float64s(), lse.Float64s(), dq.Float64s(), dk.Float64s(), dv.Float64s()}
}

// relErr is max|a-b| / max(1, max|b|); NaN anywhere, or an infinity in one but not
// the other, gives +Inf.
func relErr(a, b []float64) float64 {
	var e, scale float64 = 0, 1
	for i := range a {
		switch {
		case math.IsNaN(a[i]) || math.IsNaN(b[i]):
			return math.Inf(1)
		case math.IsInf(a[i], 0) || math.IsInf(b[i], 0):
			if a[i] != b[i] {
				return math.Inf(1)
			}
			continue
		}
		e = math.Max(e, math.Abs(a[i]-b[i]))
		scale = math.Max(scale, math.Abs(b[i]))
	}
	return e / scale
}

type maskCase struct {
	name string
	m    mask.Mask
}

// maskCases is every kind on a square and on an offset non-square rectangle, random
// multi-slice masks, an empty mask and masks with fully masked rows.
func maskCases() []maskCase {
	var cs []maskCase
	for kind := mask.Full; kind <= mask.BiCausal; kind++ {
		cs = append(cs,
			maskCase{kind.String() + "/square", mask.Mask{SeqQ: 23, SeqK: 23, Slices: []mask.Slice{{Q: mask.Range{Start: 0, End: 23}, K: mask.Range{Start: 0, End: 23}, Kind: kind}}}},
			maskCase{kind.String() + "/tall", mask.Mask{SeqQ: 30, SeqK: 17, Slices: []mask.Slice{{Q: mask.Range{Start: 3, End: 29}, K: mask.Range{Start: 2, End: 13}, Kind: kind}}}},
			maskCase{kind.String() + "/wide", mask.Mask{SeqQ: 14, SeqK: 33, Slices: []mask.Slice{{Q: mask.Range{Start: 1, End: 12}, K: mask.Range{Start: 4, End: 31}, Kind: kind}}}},
		)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for i := 0; i < 8; i++ {
		sq, sk := 5+rng.IntN(40), 5+rng.IntN(40)
		cs = append(cs, maskCase{fmt.Sprintf("random%d", i), randMask(rng, sq, sk)})
	}
	// larger than a tile (64) and a row block (16) several times over, so that spans
	// cross tile edges
	for i := 0; i < 3; i++ {
		sq, sk := 130+rng.IntN(80), 130+rng.IntN(80)
		cs = append(cs, maskCase{fmt.Sprintf("random-large%d", i), randMask(rng, sq, sk)})
	}
	cs = append(cs, maskCase{"empty", mask.Mask{SeqQ: 9, SeqK: 11}})
	return cs
}

func TestMatchesDense(t *testing.T) {
	heads := [][2]int{{3, 3}, {8, 2}, {4, 1}}
	ref := New(Options{})
	for ci, c := range maskCases() {
		for hi, hd := range heads {
			for _, dt := range []tensor.DType{tensor.BF16, tensor.FP64} {
				p := kernels.Problem{HeadsQ: hd[0], HeadsKV: hd[1], HeadDim: 5 + 4*hi, DType: dt, Mask: c.m}
				if hi == 1 {
					p.Scale = 0.37
				}
				t.Run(fmt.Sprintf("%s/%d:%d/%s", c.name, hd[0], hd[1], dt), func(t *testing.T) {
					q, k, v, dout := inputs(p, dt, uint64(100*ci+hi))
					got := runBoth(t, ref, p, q, k, v, dout, tensor.FP64, tensor.FP64)
					want := dense(p, q.Float64s(), k.Float64s(), v.Float64s(), dout.Float64s())
					for _, f := range []struct {
						name      string
						got, want []float64
					}{{"out", got.out, want.out}, {"lse", got.lse, want.lse}, {"dq", got.dq, want.dq}, {"dk", got.dk, want.dk}, {"dv", got.dv, want.dv}} {
						if e := relErr(f.got, f.want); e > 1e-12 {
							t.Errorf("%s: relative error %.3g against the dense reference", f.name, e)
						}
					}
				})
			}
		}
	}
}

// TestFiniteDifferences checks the backward against central differences of the
// scalar loss sum(out * dout) on random elements of q, k and v (fp64 tensors).
func TestFiniteDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	ref := New(Options{})
	for it := 0; it < 6; it++ {
		sq, sk := 8+rng.IntN(20), 8+rng.IntN(20)
		hq, hkv := []int{2, 4, 6}[it%3], []int{2, 1, 3}[it%3]
		p := kernels.Problem{HeadsQ: hq, HeadsKV: hkv, HeadDim: 6, DType: tensor.FP64, Mask: randMask(rng, sq, sk)}
		q, k, v, dout := inputs(p, tensor.FP64, uint64(it))
		for _, lseDT := range []tensor.DType{tensor.FP32, tensor.FP64} {
			g := runBoth(t, ref, p, q, k, v, dout, tensor.FP64, lseDT)
			loss := func() float64 {
				r := runBoth(t, ref, p, q, k, v, dout, tensor.FP64, tensor.FP64)
				return dotF(r.out, dout.Float64s())
			}
			for _, x := range []struct {
				name string
				in   *tensor.Host
				grad []float64
			}{{"q", q, g.dq}, {"k", k, g.dk}, {"v", v, g.dv}} {
				scale := 0.0
				for _, gv := range x.grad {
					scale = math.Max(scale, math.Abs(gv))
				}
				for n := 0; n < 4; n++ {
					i := rng.IntN(x.in.Numel())
					const eps = 1e-5
					x0 := x.in.At(i)
					x.in.Set(i, x0+eps)
					lp := loss()
					x.in.Set(i, x0-eps)
					lm := loss()
					x.in.Set(i, x0)
					fd := (lp - lm) / (2 * eps)
					// fp32 lse perturbs P by ~6e-8 relative; fp64 lse leaves only the
					// difference quotient's own error.
					tol := 1e-8 * math.Max(1, scale)
					if lseDT == tensor.FP32 {
						tol = 1e-6 * math.Max(1, scale)
					}
					if math.Abs(fd-x.grad[i]) > tol {
						t.Errorf("case %d lse %s: d loss/d %s[%d] = %.10g by differences, %.10g by backward", it, lseDT, x.name, i, fd, x.grad[i])
					}
				}
			}
		}
	}
}

func TestFullyMaskedRows(t *testing.T) {
	// rows 0-3 and 10-11 have no slice; key columns 0-1 are never attended.
	m := mask.Mask{SeqQ: 12, SeqK: 9, Slices: []mask.Slice{
		{Q: mask.Range{Start: 4, End: 10}, K: mask.Range{Start: 2, End: 9}, Kind: mask.Causal},
	}}
	p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 8, DType: tensor.BF16, Mask: m}
	for _, emulate := range []tensor.DType{0, tensor.BF16} {
		q, k, v, dout := inputs(p, tensor.BF16, 5)
		r := runBoth(t, New(Options{Emulate: emulate}), p, q, k, v, dout, tensor.BF16, tensor.FP32)
		for h := 0; h < p.HeadsQ; h++ {
			for i := 0; i < m.SeqQ; i++ {
				masked := i < 4 || i >= 10
				lse := r.lse[h*m.SeqQ+i]
				if masked != math.IsInf(lse, -1) || math.IsNaN(lse) {
					t.Errorf("emulate %v: head %d row %d: lse %v", emulate, h, i, lse)
				}
				for x := 0; x < p.HeadDim; x++ {
					o, g := r.out[(i*p.HeadsQ+h)*p.HeadDim+x], r.dq[(i*p.HeadsQ+h)*p.HeadDim+x]
					if math.IsNaN(o) || math.IsNaN(g) || masked && (o != 0 || g != 0) {
						t.Fatalf("emulate %v: head %d row %d: out %v dq %v", emulate, h, i, o, g)
					}
				}
			}
		}
		for i, g := range append(r.dk, r.dv...) {
			col := (i % len(r.dk)) / (p.HeadsKV * p.HeadDim)
			if math.IsNaN(g) || col < 2 && g != 0 {
				t.Fatalf("emulate %v: dk/dv element %d (key %d) = %v", emulate, i, col, g)
			}
		}
	}
}

func TestHeadMasks(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for it := 0; it < 4; it++ {
		hkv := 1 + it
		p := kernels.Problem{HeadsQ: 2 * hkv, HeadsKV: hkv, HeadDim: 8, DType: tensor.FP32, Mask: mask.Mask{SeqQ: 26, SeqK: 19}}
		for h := 0; h < hkv; h++ {
			p.HeadMasks = append(p.HeadMasks, randMask(rng, 26, 19))
		}
		q, k, v, dout := inputs(p, tensor.FP32, uint64(it))
		got := runBoth(t, New(Options{}), p, q, k, v, dout, tensor.FP64, tensor.FP64)
		want := dense(p, q.Float64s(), k.Float64s(), v.Float64s(), dout.Float64s())
		for _, e := range []float64{relErr(got.out, want.out), relErr(got.lse, want.lse), relErr(got.dq, want.dq), relErr(got.dk, want.dk), relErr(got.dv, want.dv)} {
			if e > 1e-12 {
				t.Fatalf("head masks, %d KV heads: relative error %.3g", hkv, e)
			}
		}
		// and the masks really differ per head: the shared p.Mask (empty) gives zeros.
		shared := p
		shared.HeadMasks = nil
		if relErr(runBoth(t, New(Options{}), shared, q, k, v, dout, tensor.FP64, tensor.FP64).out, want.out) == 0 {
			t.Fatal("head masks made no difference")
		}
	}
}

// TestEmulate checks that the naive low-precision mode is close to the exact reference
// (within a few bf16 or fp32 roundings) but not equal to it.
func TestEmulate(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	m := randMask(rng, 40, 40)
	for _, c := range []struct {
		dt       tensor.DType
		min, max float64
	}{{tensor.BF16, 1e-4, 5e-2}, {tensor.FP16, 1e-5, 1e-2}, {tensor.FP32, 1e-9, 1e-5}} {
		p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 16, DType: c.dt, Mask: m}
		q, k, v, dout := inputs(p, c.dt, 3)
		exact := runBoth(t, New(Options{}), p, q, k, v, dout, tensor.FP64, tensor.FP64)
		// outputs stored in fp64, so that only the internal rounding is measured
		naive := runBoth(t, New(Options{Emulate: c.dt}), p, q, k, v, dout, tensor.FP64, tensor.FP32)
		for _, f := range []struct {
			name       string
			got, exact []float64
		}{{"out", naive.out, exact.out}, {"dq", naive.dq, exact.dq}, {"dk", naive.dk, exact.dk}, {"dv", naive.dv, exact.dv}} {
			if e := relErr(f.got, f.exact); e < c.min || e > c.max {
				t.Errorf("%s %s: naive error %.3g outside [%g, %g]", c.dt, f.name, e, c.min, c.max)
			}
		}
	}
}

// TestDeterministic checks that the result does not depend on the number of cores.
func TestDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 8, DType: tensor.BF16, Mask: randMask(rng, 70, 60)}
	q, k, v, dout := inputs(p, tensor.BF16, 1)
	prev := runtime.GOMAXPROCS(1)
	one := runBoth(t, New(Options{}), p, q, k, v, dout, tensor.FP32, tensor.FP32)
	runtime.GOMAXPROCS(max(prev, 3))
	many := runBoth(t, New(Options{}), p, q, k, v, dout, tensor.FP32, tensor.FP32)
	runtime.GOMAXPROCS(prev)
	for _, pair := range [][2][]float64{{one.out, many.out}, {one.lse, many.lse}, {one.dq, many.dq}, {one.dk, many.dk}, {one.dv, many.dv}} {
		for i := range pair[0] {
			if math.Float64bits(pair[0][i]) != math.Float64bits(pair[1][i]) {
				t.Fatalf("element %d: %v on one core, %v on many", i, pair[0][i], pair[1][i])
			}
		}
	}
}

func TestRegisteredAndErrors(t *testing.T) {
	k, err := kernels.New("ref", kernels.Options{})
	if err != nil || k.Name() != "ref" {
		t.Fatalf("kernels.New(ref) = %v, %v", k, err)
	}
	m := mask.Mask{SeqQ: 4, SeqK: 4, Slices: []mask.Slice{{Q: mask.Range{Start: 0, End: 4}, K: mask.Range{Start: 0, End: 4}}}}
	p := kernels.Problem{HeadsQ: 2, HeadsKV: 1, HeadDim: 4, DType: tensor.FP32, Mask: m}
	q, kk, v, _ := inputs(p, tensor.FP32, 1)
	bad := []struct {
		name string
		p    kernels.Problem
		out  tensor.Tensor
	}{
		{"heads", kernels.Problem{HeadsQ: 3, HeadsKV: 2, HeadDim: 4, Mask: m}, tensor.NewHost(tensor.FP32, 4, 2, 4)},
		{"shape", p, tensor.NewHost(tensor.FP32, 4, 2, 5)},
		{"slice outside", kernels.Problem{HeadsQ: 2, HeadsKV: 1, HeadDim: 4, Mask: mask.Mask{SeqQ: 4, SeqK: 4, Slices: []mask.Slice{{Q: mask.Range{Start: 0, End: 5}, K: mask.Range{Start: 0, End: 4}}}}}, tensor.NewHost(tensor.FP32, 4, 2, 4)},
		{"head mask size", kernels.Problem{HeadsQ: 2, HeadsKV: 1, HeadDim: 4, Mask: m, HeadMasks: []mask.Mask{{SeqQ: 4, SeqK: 5}}}, tensor.NewHost(tensor.FP32, 4, 2, 4)},
	}
	for _, b := range bad {
		err := k.Forward(context.Background(), b.p, q, kk, v, b.out, tensor.NewHost(tensor.FP32, 2, 4))
		if err == nil {
			t.Errorf("%s: no error", b.name)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := k.Forward(ctx, p, q, kk, v, tensor.NewHost(tensor.FP32, 4, 2, 4), tensor.NewHost(tensor.FP32, 2, 4)); err == nil {
		t.Error("cancelled context: no error")
	}
}
