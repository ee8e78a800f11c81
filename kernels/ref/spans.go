package ref

import (
	"slices"

	"github.com/longca/longca/mask"
)

// rowSpans is each query row's allowed key intervals, sorted and merged, so that a
// pair allowed by two overlapping slices is still visited once.
func rowSpans(m mask.Mask) [][]mask.Range {
	rows := m.RowSpans()
	for i, r := range rows {
		rows[i] = merge(r)
	}
	return rows
}

// colSpans is each key column's allowed query intervals, sorted and merged: the
// transpose of rowSpans, for the key-side pass of the backward.
func colSpans(m mask.Mask) [][]mask.Range {
	cols := make([][]mask.Range, m.SeqK)
	for _, s := range m.Slices {
		lo, hi := s.Band()
		for k := max(s.K.Start, 0); k < min(s.K.End, m.SeqK); k++ {
			// lo <= k-q <= hi  <=>  k-hi <= q <= k-lo
			a := max(s.Q.Start, k-hi, 0)
			b := min(s.Q.End-1, k-lo, m.SeqQ-1)
			if a <= b {
				cols[k] = append(cols[k], mask.Range{Start: a, End: b + 1})
			}
		}
	}
	for k, c := range cols {
		slices.SortFunc(c, func(x, y mask.Range) int { return x.Start - y.Start })
		cols[k] = merge(c)
	}
	return cols
}

// merge joins overlapping or touching intervals of a list sorted by Start, in place.
func merge(r []mask.Range) []mask.Range {
	if len(r) < 2 {
		return r
	}
	out := r[:1]
	for _, x := range r[1:] {
		last := &out[len(out)-1]
		if x.Start <= last.End {
			last.End = max(last.End, x.End)
			continue
		}
		out = append(out, x)
	}
	return out
}
