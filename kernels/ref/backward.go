package ref

import (
	"context"
	"fmt"
	"math"

	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// grad holds what both backward passes read: dout, D = rowsum(dout*out) and lse, per
// query head and row.
type grad[T num] struct {
	do   []T
	dsum []T
	lse  []T
}

// backward computes dq in a query-side pass and dk, dv in a key-side pass over the
// transposed spans; each pass recomputes P and dS, so no gradient is accumulated by two
// goroutines and the result does not depend on the number of cores.
func (e *engine[T]) backward(ctx context.Context, outT, lseT, doutT, dqT, dkT, dvT *tensor.Host) error {
	g := grad[T]{do: headMajor[T](doutT, e.sq, e.hq, e.d), dsum: make([]T, e.hq*e.sq), lse: make([]T, e.hq*e.sq)}
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
	err := parallelFor(ctx, e.hq*nb, func() func(int) {
		return func(task int) {
			h, b := task/nb, task%nb
			rs := rows[e.maskOf[h]]
			for i := b * blockRows; i < min((b+1)*blockRows, e.sq); i++ {
				e.dqRow(&g, h, i, rs[i], e.row(dq, h, i, e.sq))
			}
		}
	})
	if err != nil {
		return fmt.Errorf("%s backward: %w", e.name(), err)
	}

	dk := make([]T, e.hkv*e.sk*e.d)
	dv := make([]T, e.hkv*e.sk*e.d)
	nk := (e.sk + blockRows - 1) / blockRows
	err = parallelFor(ctx, e.hkv*nk, func() func(int) {
		return func(task int) {
			kvh, b := task/nk, task%nk
			for j := b * blockRows; j < min((b+1)*blockRows, e.sk); j++ {
				dkj, dvj := e.row(dk, kvh, j, e.sk), e.row(dv, kvh, j, e.sk)
				for h := kvh * e.group; h < (kvh+1)*e.group; h++ {
					e.dkvCol(&g, h, j, cols[e.maskOf[h]][j], dkj, dvj)
				}
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

// pds returns P and dS of pair (i, j) of query head h: P = exp(scale*q.k - lse) and
// dS = P*(dO.v - D), each rounded where a naive low-precision kernel rounds.
func (e *engine[T]) pds(g *grad[T], h, i, j int, qi, doi []T) (p, ds T) {
	kvh := h / e.group
	s := dot(qi, e.row(e.k, kvh, j, e.sk)) * e.scale
	p = e.round(exp(s - g.lse[h*e.sq+i]))
	dp := e.round(dot(doi, e.row(e.v, kvh, j, e.sk)))
	return p, e.round(p * (dp - g.dsum[h*e.sq+i]))
}

// dqRow writes dq of query i of head h into dqi (zeroed).
func (e *engine[T]) dqRow(g *grad[T], h, i int, spans []mask.Range, dqi []T) {
	if math.IsInf(float64(g.lse[h*e.sq+i]), -1) {
		return
	}
	qi, doi := e.row(e.q, h, i, e.sq), e.row(g.do, h, i, e.sq)
	kvh := h / e.group
	for _, sp := range spans {
		for j := sp.Start; j < sp.End; j++ {
			_, ds := e.pds(g, h, i, j, qi, doi)
			axpy(ds, e.row(e.k, kvh, j, e.sk), dqi)
		}
	}
	for x := range dqi {
		dqi[x] *= e.scale
	}
}

// dkvCol adds query head h's contributions to dk (unscaled) and dv of key j.
func (e *engine[T]) dkvCol(g *grad[T], h, j int, spans []mask.Range, dkj, dvj []T) {
	for _, sp := range spans {
		for i := sp.Start; i < sp.End; i++ {
			if math.IsInf(float64(g.lse[h*e.sq+i]), -1) {
				continue
			}
			qi, doi := e.row(e.q, h, i, e.sq), e.row(g.do, h, i, e.sq)
			p, ds := e.pds(g, h, i, j, qi, doi)
			axpy(p, doi, dvj)
			axpy(ds, qi, dkj)
		}
	}
}
