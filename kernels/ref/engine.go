package ref

import (
	"math"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// num is the accumulation type: float64 for the exact reference, float32 for the naive
// low-precision baseline.
type num interface{ ~float32 | ~float64 }

// engine holds one problem's inputs converted once to the accumulation type, in
// head-major layout ([head][token][dim]) so that a head's rows are contiguous.
type engine[T num] struct {
	sq, sk, hq, hkv, d, group int
	scale                     T
	// emulate is the dtype P, dP and dS are rounded to; 0 for none.
	emulate tensor.DType
	q, k, v []T
	// masks are the distinct masks; maskOf[h] is query head h's index into them.
	masks  []mask.Mask
	maskOf []int
	// work is the forward's multiply-adds: allowed pairs x query heads x 2 x dim.
	work int64
}

func newEngine[T num](p kernels.Problem, emulate tensor.DType, q, k, v *tensor.Host) *engine[T] {
	e := &engine[T]{
		sq: p.Mask.SeqQ, sk: p.Mask.SeqK, hq: p.HeadsQ, hkv: p.HeadsKV, d: p.HeadDim,
		group: p.HeadsQ / p.HeadsKV, scale: T(p.SoftmaxScale()), emulate: emulate,
	}
	e.maskOf = make([]int, e.hq)
	if len(p.HeadMasks) == 0 {
		e.masks = []mask.Mask{p.Mask}
	} else {
		e.masks = p.HeadMasks
		for h := range e.maskOf {
			e.maskOf[h] = h / e.group
		}
	}
	for h := range e.maskOf {
		e.work += e.masks[e.maskOf[h]].Area() * 2 * int64(e.d)
	}
	e.q = headMajor[T](q, e.sq, e.hq, e.d)
	e.k = headMajor[T](k, e.sk, e.hkv, e.d)
	e.v = headMajor[T](v, e.sk, e.hkv, e.d)
	return e
}

// headMajor converts a [tokens, heads, dim] host tensor to [heads][tokens][dim] in T.
func headMajor[T num](t *tensor.Host, s, h, d int) []T {
	out := make([]T, s*h*d)
	for i := 0; i < s; i++ {
		for j := 0; j < h; j++ {
			src := (i*h + j) * d
			dst := (j*s + i) * d
			for x := 0; x < d; x++ {
				out[dst+x] = T(t.At(src + x))
			}
		}
	}
	return out
}

// storeTokenMajor writes a [heads][tokens][dim] array into a [tokens, heads, dim]
// tensor, rounding to the tensor's dtype.
func storeTokenMajor[T num](t *tensor.Host, a []T, s, h, d int) {
	for i := 0; i < s; i++ {
		for j := 0; j < h; j++ {
			dst := (i*h + j) * d
			src := (j*s + i) * d
			for x := 0; x < d; x++ {
				t.Set(dst+x, float64(a[src+x]))
			}
		}
	}
}

// round rounds x to the emulated dtype (identity in exact mode).
func (e *engine[T]) round(x T) T {
	if e.emulate == 0 {
		return x
	}
	return T(tensor.Round(e.emulate, float64(x)))
}

// row returns row i of head h of a head-major array with s tokens.
func (e *engine[T]) row(a []T, h, i, s int) []T {
	off := (h*s + i) * e.d
	return a[off : off+e.d : off+e.d]
}

func exp[T num](x T) T { return T(math.Exp(float64(x))) }

// loadLSE reads a [heads, tokens] tensor as float64.
func loadLSE(t *tensor.Host) []float64 { return t.Float64s() }
