package ref

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// denseOut is the plain O(S^2) attention over the materialised mask, in float64, in the
// tensors' [tokens, heads, dim] layout.
type denseOut struct {
	out, lse, dq, dk, dv []float64
}

// dense computes forward and backward by the textbook formulas, visiting every (q, k)
// pair and asking the mask whether it is allowed.
func dense(p kernels.Problem, q, k, v, dout []float64) denseOut {
	sq, sk, hq, hkv, d := p.Mask.SeqQ, p.Mask.SeqK, p.HeadsQ, p.HeadsKV, p.HeadDim
	g := hq / hkv
	scale := p.SoftmaxScale()
	r := denseOut{
		out: make([]float64, sq*hq*d), lse: make([]float64, hq*sq),
		dq: make([]float64, sq*hq*d), dk: make([]float64, sk*hkv*d), dv: make([]float64, sk*hkv*d),
	}
	qa := func(i, h int) []float64 { return q[(i*hq+h)*d : (i*hq+h+1)*d] }
	ka := func(j, h int) []float64 { return k[(j*hkv+h)*d : (j*hkv+h+1)*d] }
	va := func(j, h int) []float64 { return v[(j*hkv+h)*d : (j*hkv+h+1)*d] }
	doa := func(i, h int) []float64 { return dout[(i*hq+h)*d : (i*hq+h+1)*d] }
	for h := 0; h < hq; h++ {
		m := p.MaskFor(h)
		kh := h / g
		for i := 0; i < sq; i++ {
			s := make([]float64, sk)
			mx := math.Inf(-1)
			for j := 0; j < sk; j++ {
				s[j] = math.Inf(-1)
				if m.Allowed(i, j) {
					s[j] = scale * dotF(qa(i, h), ka(j, kh))
					mx = math.Max(mx, s[j])
				}
			}
			if math.IsInf(mx, -1) {
				r.lse[h*sq+i] = mx
				continue
			}
			var l float64
			for j := range s {
				s[j] = math.Exp(s[j] - mx) // masked: exp(-inf) = 0
				l += s[j]
			}
			r.lse[h*sq+i] = mx + math.Log(l)
			o := r.out[(i*hq+h)*d : (i*hq+h+1)*d]
			for j := range s {
				s[j] /= l
				for x := range o {
					o[x] += s[j] * va(j, kh)[x]
				}
			}
			// backward: dP = dO.v, dS = P (dP - sum_j P dP)
			dp := make([]float64, sk)
			var rs float64
			for j := range s {
				dp[j] = dotF(doa(i, h), va(j, kh))
				rs += s[j] * dp[j]
			}
			for j := range s {
				ds := s[j] * (dp[j] - rs)
				for x := 0; x < d; x++ {
					r.dq[(i*hq+h)*d+x] += scale * ds * ka(j, kh)[x]
					r.dk[(j*hkv+kh)*d+x] += scale * ds * qa(i, h)[x]
					r.dv[(j*hkv+kh)*d+x] += s[j] * doa(i, h)[x]
				}
			}
		}
	}
	return r
}

func dotF(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// cuts returns sorted distinct cut points 0 = c0 < ... < cn = n.
func cuts(rng *rand.Rand, n, pieces int) []int {
	set := map[int]bool{0: true, n: true}
	for i := 0; i < pieces; i++ {
		set[rng.IntN(n+1)] = true
	}
	out := make([]int, 0, len(set))
	for c := range set {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}

// randMask builds a random multi-slice mask from mask.Slice values: Q and K are cut
// into random ranges, and a random subset of the grid's cells each get a slice of a
// random kind, so slices never overlap.
func randMask(rng *rand.Rand, sq, sk int) mask.Mask {
	m := mask.Mask{SeqQ: sq, SeqK: sk}
	qc, kc := cuts(rng, sq, 1+rng.IntN(4)), cuts(rng, sk, 1+rng.IntN(4))
	for a := 0; a+1 < len(qc); a++ {
		for b := 0; b+1 < len(kc); b++ {
			if rng.IntN(3) == 0 {
				continue
			}
			m.Slices = append(m.Slices, mask.Slice{
				Q: mask.Range{Start: qc[a], End: qc[a+1]}, K: mask.Range{Start: kc[b], End: kc[b+1]},
				Kind: mask.Kind(rng.IntN(4)),
			})
		}
	}
	return m
}

// inputs makes random q, k, v, dout of problem p in dtype dt.
func inputs(p kernels.Problem, dt tensor.DType, seed uint64) (q, k, v, dout *tensor.Host) {
	rng := rand.New(rand.NewPCG(seed, 99))
	qs, kvs, _ := p.Shapes()
	q, k, v, dout = tensor.NewHost(dt, qs...), tensor.NewHost(dt, kvs...), tensor.NewHost(dt, kvs...), tensor.NewHost(dt, qs...)
	for _, t := range []*tensor.Host{q, k, v, dout} {
		t.FillNormal(rng, 1)
	}
	return
}
