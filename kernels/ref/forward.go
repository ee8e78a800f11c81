package ref

import (
	"context"
	"fmt"
	"math"

	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// tileCols is how many keys (or, in the key-side backward, queries) one tile holds:
// a tile of k rows (64 x 128 x 8 bytes) stays in L1/L2 while a block's rows use it.
const tileCols = 64

// forward computes out and lse over every (head, row block) in parallel.
func (e *engine[T]) forward(ctx context.Context, outT, lseT *tensor.Host) error {
	spans := make([][][]mask.Range, len(e.masks))
	for i, m := range e.masks {
		spans[i] = rowSpans(m)
	}
	out := make([]T, e.hq*e.sq*e.d)
	lse := make([]float64, e.hq*e.sq)
	nb := (e.sq + blockRows - 1) / blockRows
	err := parallelFor(ctx, e.hq*nb, e.work, func() func(int) {
		sc, inv := make([]T, blockRows*e.sk), make([]T, blockRows)
		return func(task int) {
			h, b := task/nb, task%nb
			i0, i1 := b*blockRows, min((b+1)*blockRows, e.sq)
			e.forwardBlock(h, i0, i1, spans[e.maskOf[h]], sc, inv, out, lse)
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

// forwardBlock computes rows [i0, i1) of head h: scores tile by tile of keys (so a
// tile of k serves every row of the block), the softmax per row, then P*V tile by tile.
// sc holds one row of scores, then probabilities, per query of the block; inv holds
// each row's 1/sum, applied after P*V in exact mode.
func (e *engine[T]) forwardBlock(h, i0, i1 int, rs [][]mask.Range, sc, inv, out []T, lse []float64) {
	kvh := h / e.group
	kh := e.k[kvh*e.sk*e.d : (kvh+1)*e.sk*e.d]
	vh := e.v[kvh*e.sk*e.d : (kvh+1)*e.sk*e.d]
	lo, hi := extent(rs[i0:i1])
	for kb := lo; kb < hi; kb += tileCols {
		ke := min(kb+tileCols, hi)
		for i := i0; i < i1; i++ {
			qi, row := e.row(e.q, h, i, e.sq), sc[(i-i0)*e.sk:(i-i0+1)*e.sk]
			for _, sp := range rs[i] {
				if a, b := max(sp.Start, kb), min(sp.End, ke); a < b {
					dots(qi, kh, e.d, a, b, row)
				}
			}
		}
	}
	for i := i0; i < i1; i++ {
		row := sc[(i-i0)*e.sk : (i-i0+1)*e.sk]
		lse[h*e.sq+i], inv[i-i0] = e.softmax(row, rs[i])
	}
	for kb := lo; kb < hi; kb += tileCols {
		ke := min(kb+tileCols, hi)
		for i := i0; i < i1; i++ {
			o, row := e.row(out, h, i, e.sq), sc[(i-i0)*e.sk:(i-i0+1)*e.sk]
			for _, sp := range rs[i] {
				if a, b := max(sp.Start, kb), min(sp.End, ke); a < b {
					axpys(row, vh, e.d, a, b, o)
				}
			}
		}
	}
	if e.emulate == 0 {
		for i := i0; i < i1; i++ {
			o := e.row(out, h, i, e.sq)
			for x := range o {
				o[x] *= inv[i-i0]
			}
		}
	}
}

// softmax turns a row's raw dot products (at its allowed keys) into exp(s - max), or in
// emulation the normalised probabilities rounded to the emulated type, and returns the
// row's lse and 1/sum. A row with no allowed key has lse -inf.
func (e *engine[T]) softmax(row []T, spans []mask.Range) (float64, T) {
	m := T(math.Inf(-1))
	for _, sp := range spans {
		for j := sp.Start; j < sp.End; j++ {
			row[j] *= e.scale
			m = max(m, row[j])
		}
	}
	if math.IsInf(float64(m), -1) {
		return math.Inf(-1), 0
	}
	var l T
	for _, sp := range spans {
		for j := sp.Start; j < sp.End; j++ {
			row[j] = exp(row[j] - m)
			l += row[j]
		}
	}
	inv := 1 / l
	if e.emulate != 0 {
		// attention_ref(upcast=False): normalise, round P, then P*V in fp32.
		for _, sp := range spans {
			for j := sp.Start; j < sp.End; j++ {
				row[j] = e.round(row[j] * inv)
			}
		}
	}
	return float64(m) + math.Log(float64(l)), inv
}

// extent is the smallest interval holding every span of the rows.
func extent(rows [][]mask.Range) (lo, hi int) {
	lo, hi = math.MaxInt, 0
	for _, r := range rows {
		if len(r) > 0 {
			lo, hi = min(lo, r[0].Start), max(hi, r[len(r)-1].End)
		}
	}
	if lo > hi {
		return 0, 0
	}
	return lo, hi
}

func (e *engine[T]) name() string {
	if e.emulate != 0 {
		return "ref-naive-" + e.emulate.String()
	}
	return "ref"
}
