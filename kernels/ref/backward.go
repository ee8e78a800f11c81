package ref

import (
	"context"
	"fmt"
	"math"

	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// grad holds what both backward passes read, per query head and row, head-major: dout,
// D = rowsum(dout*out) and lse.
type grad[T num] struct {
	do   []T
	dsum []T
	lse  []T
}

// backward computes dq in a query-side pass and dk, dv in a key-side pass over the
// transposed spans; each pass recomputes P and dS, so no gradient is accumulated by two
// goroutines and the result does not depend on the number of cores.
func (e *engine[T]) backward(ctx context.Context, outT, lseT, doutT, dqT, dkT, dvT *tensor.Host) error {
	g := &grad[T]{do: headMajor[T](doutT, e.sq, e.hq, e.d), dsum: make([]T, e.hq*e.sq), lse: make([]T, e.hq*e.sq)}
	o := headMajor[T](outT, e.sq, e.hq, e.d)
	for h := 0; h < e.hq; h++ {
		for i := 0; i < e.sq; i++ {
			g.dsum[h*e.sq+i] = dot(e.row(g.do, h, i, e.sq), e.row(o, h, i, e.sq))
			g.lse[h*e.sq+i] = T(lseT.At(h*e.sq + i))
		}
	}
	rows := make([][][]mask.Range, len(e.masks))
	cols := make([][][]mask.Range, len(e.masks))
	for i, m := range e.masks {
		rows[i], cols[i] = rowSpans(m), colSpans(m)
	}

	dq := make([]T, e.hq*e.sq*e.d)
	nb := (e.sq + blockRows - 1) / blockRows
	err := parallelFor(ctx, e.hq*nb, 3*e.work/2, func() func(int) {
		p, ds := make([]T, blockRows*e.sk), make([]T, blockRows*e.sk)
		return func(task int) {
			h, b := task/nb, task%nb
			e.dqBlock(g, h, b*blockRows, min((b+1)*blockRows, e.sq), rows[e.maskOf[h]], p, ds, dq)
		}
	})
	if err != nil {
		return fmt.Errorf("%s backward: %w", e.name(), err)
	}

	dk := make([]T, e.hkv*e.sk*e.d)
	dv := make([]T, e.hkv*e.sk*e.d)
	nk := (e.sk + blockRows - 1) / blockRows
	err = parallelFor(ctx, e.hkv*nk, 2*e.work, func() func(int) {
		p, ds := make([]T, blockRows*e.sq), make([]T, blockRows*e.sq)
		return func(task int) {
			kvh, b := task/nk, task%nk
			j0, j1 := b*blockRows, min((b+1)*blockRows, e.sk)
			for h := kvh * e.group; h < (kvh+1)*e.group; h++ {
				e.dkvBlock(g, h, j0, j1, cols[e.maskOf[h]], p, ds, dk, dv)
			}
			for j := j0; j < j1; j++ {
				dkj := e.row(dk, kvh, j, e.sk)
				for x := range dkj {
					dkj[x] *= e.scale
				}
			}
		}
	})
	if err != nil {
		return fmt.Errorf("%s backward: %w", e.name(), err)
	}
	storeTokenMajor(dqT, dq, e.sq, e.hq, e.d)
	storeTokenMajor(dkT, dk, e.sk, e.hkv, e.d)
	storeTokenMajor(dvT, dv, e.sk, e.hkv, e.d)
	return nil
}

// pds turns a pair's raw q.k and dO.v into P = exp(scale*q.k - lse) and
// dS = P*(dP - D), each rounded where a naive low-precision kernel rounds; a row with
// lse -inf (no allowed key) contributes nothing.
func (e *engine[T]) pds(g *grad[T], h, i int, qk, dov T) (p, ds T) {
	l := g.lse[h*e.sq+i]
	if math.IsInf(float64(l), -1) {
		return 0, 0
	}
	p = e.round(exp(qk*e.scale - l))
	return p, e.round(p * (e.round(dov) - g.dsum[h*e.sq+i]))
}

// dqBlock writes dq of rows [i0, i1) of head h: q.k and dO.v tile by tile of keys,
// then P and dS per pair, then dS*K tile by tile. p and ds are per-row scratch.
func (e *engine[T]) dqBlock(g *grad[T], h, i0, i1 int, rs [][]mask.Range, p, ds, dq []T) {
	kvh := h / e.group
	kh := e.k[kvh*e.sk*e.d : (kvh+1)*e.sk*e.d]
	vh := e.v[kvh*e.sk*e.d : (kvh+1)*e.sk*e.d]
	lo, hi := extent(rs[i0:i1])
	for kb := lo; kb < hi; kb += tileCols {
		ke := min(kb+tileCols, hi)
		for i := i0; i < i1; i++ {
			qi, doi := e.row(e.q, h, i, e.sq), e.row(g.do, h, i, e.sq)
			pr, dr := p[(i-i0)*e.sk:(i-i0+1)*e.sk], ds[(i-i0)*e.sk:(i-i0+1)*e.sk]
			for _, sp := range rs[i] {
				if a, b := max(sp.Start, kb), min(sp.End, ke); a < b {
					dots(qi, kh, e.d, a, b, pr)
					dots(doi, vh, e.d, a, b, dr)
				}
			}
		}
	}
	for i := i0; i < i1; i++ {
		pr, dr := p[(i-i0)*e.sk:(i-i0+1)*e.sk], ds[(i-i0)*e.sk:(i-i0+1)*e.sk]
		for _, sp := range rs[i] {
			for j := sp.Start; j < sp.End; j++ {
				pr[j], dr[j] = e.pds(g, h, i, pr[j], dr[j])
			}
		}
	}
	for kb := lo; kb < hi; kb += tileCols {
		ke := min(kb+tileCols, hi)
		for i := i0; i < i1; i++ {
			dqi, dr := e.row(dq, h, i, e.sq), ds[(i-i0)*e.sk:(i-i0+1)*e.sk]
			for _, sp := range rs[i] {
				if a, b := max(sp.Start, kb), min(sp.End, ke); a < b {
					axpys(dr, kh, e.d, a, b, dqi)
				}
			}
		}
	}
	for i := i0; i < i1; i++ {
		dqi := e.row(dq, h, i, e.sq)
		for x := range dqi {
			dqi[x] *= e.scale
		}
	}
}

// dkvBlock adds query head h's contributions to dk (unscaled) and dv of keys [j0, j1),
// the transpose of dqBlock: tiles of queries serve every key of the block.
func (e *engine[T]) dkvBlock(g *grad[T], h, j0, j1 int, cs [][]mask.Range, p, ds, dk, dv []T) {
	kvh := h / e.group
	qh := e.q[h*e.sq*e.d : (h+1)*e.sq*e.d]
	doh := g.do[h*e.sq*e.d : (h+1)*e.sq*e.d]
	lo, hi := extent(cs[j0:j1])
	for qb := lo; qb < hi; qb += tileCols {
		qe := min(qb+tileCols, hi)
		for j := j0; j < j1; j++ {
			kj, vj := e.row(e.k, kvh, j, e.sk), e.row(e.v, kvh, j, e.sk)
			pc, dc := p[(j-j0)*e.sq:(j-j0+1)*e.sq], ds[(j-j0)*e.sq:(j-j0+1)*e.sq]
			for _, sp := range cs[j] {
				if a, b := max(sp.Start, qb), min(sp.End, qe); a < b {
					dots(kj, qh, e.d, a, b, pc)
					dots(vj, doh, e.d, a, b, dc)
				}
			}
		}
	}
	for j := j0; j < j1; j++ {
		pc, dc := p[(j-j0)*e.sq:(j-j0+1)*e.sq], ds[(j-j0)*e.sq:(j-j0+1)*e.sq]
		for _, sp := range cs[j] {
			for i := sp.Start; i < sp.End; i++ {
				pc[i], dc[i] = e.pds(g, h, i, pc[i], dc[i])
			}
		}
	}
	for qb := lo; qb < hi; qb += tileCols {
		qe := min(qb+tileCols, hi)
		for j := j0; j < j1; j++ {
			dkj, dvj := e.row(dk, kvh, j, e.sk), e.row(dv, kvh, j, e.sk)
			pc, dc := p[(j-j0)*e.sq:(j-j0+1)*e.sq], ds[(j-j0)*e.sq:(j-j0+1)*e.sq]
			for _, sp := range cs[j] {
				if a, b := max(sp.Start, qb), min(sp.End, qe); a < b {
					axpys(pc, doh, e.d, a, b, dvj)
					axpys(dc, qh, e.d, a, b, dkj)
				}
			}
		}
	}
}
