package ref

import (
	"context"
	"fmt"
	"math"

	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// forward computes out and lse over every (head, row block) in parallel.
func (e *engine[T]) forward(ctx context.Context, outT, lseT *tensor.Host) error {
	spans := make([][][]mask.Range, len(e.masks))
	for i, m := range e.masks {
		spans[i] = rowSpans(m)
	}
	out := make([]T, e.hq*e.sq*e.d)
	lse := make([]float64, e.hq*e.sq)
	nb := (e.sq + blockRows - 1) / blockRows
	err := parallelFor(ctx, e.hq*nb, func() func(int) {
		sbuf := make([]T, e.sk)
		return func(task int) {
			h, b := task/nb, task%nb
			rs := spans[e.maskOf[h]]
			for i := b * blockRows; i < min((b+1)*blockRows, e.sq); i++ {
				lse[h*e.sq+i] = e.forwardRow(h, i, rs[i], sbuf, e.row(out, h, i, e.sq))
			}
		}
	})
	if err != nil {
		return fmt.Errorf("%s forward: %w", e.name(), err)
	}
	storeTokenMajor(outT, out, e.sq, e.hq, e.d)
	for i, l := range lse {
		lseT.Set(i, l)
	}
	return nil
}

// forwardRow writes query i of head h into o (zeroed) and returns its lse. sbuf holds
// the row's scores, then its probabilities.
func (e *engine[T]) forwardRow(h, i int, spans []mask.Range, sbuf, o []T) float64 {
	qi := e.row(e.q, h, i, e.sq)
	kvh := h / e.group
	m := T(math.Inf(-1))
	n := 0
	for _, sp := range spans {
		for j := sp.Start; j < sp.End; j++ {
			s := dot(qi, e.row(e.k, kvh, j, e.sk)) * e.scale
			sbuf[n] = s
			n++
			m = max(m, s)
		}
	}
	if n == 0 {
		return math.Inf(-1) // o stays 0
	}
	var l T
	for t := 0; t < n; t++ {
		p := exp(sbuf[t] - m)
		sbuf[t] = p
		l += p
	}
	if e.emulate != 0 {
		// attention_ref(upcast=False): normalise, round P, then P*V in fp32.
		inv := 1 / l
		for t := 0; t < n; t++ {
			sbuf[t] = e.round(sbuf[t] * inv)
		}
	}
	n = 0
	for _, sp := range spans {
		for j := sp.Start; j < sp.End; j++ {
			axpy(sbuf[n], e.row(e.v, kvh, j, e.sk), o)
			n++
		}
	}
	if e.emulate == 0 {
		inv := 1 / l
		for x := range o {
			o[x] *= inv
		}
	}
	return float64(m) + math.Log(float64(l))
}

func (e *engine[T]) name() string {
	if e.emulate != 0 {
		return "ref-naive-" + e.emulate.String()
	}
	return "ref"
}
