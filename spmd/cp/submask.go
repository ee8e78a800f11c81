package cp

import "github.com/longca/longca/mask"

// SubMask is the part of the global mask m that the queries of local sequence qs
// (lq tokens) see of the keys of local sequence ks (lk tokens), in local coordinates.
// It is assembled from m.Window of every (query piece, key piece) pair, offset to the
// pieces' local positions; pairs that no slice of m touches (different documents) are
// skipped after one cheap rectangle test. Padding rows and columns allow nothing.
func SubMask(m mask.Mask, qs []Piece, lq int, ks []Piece, lk int) mask.Mask {
	out := mask.Mask{SeqQ: lq, SeqK: lk}
	var rows []mask.Slice
	for _, qp := range qs {
		rows = rows[:0]
		for _, s := range m.Slices {
			if s.Q.Intersect(qp.Src).Len() > 0 {
				rows = append(rows, s)
			}
		}
		if len(rows) == 0 {
			continue
		}
		for _, kp := range ks {
			var hit []mask.Slice
			for _, s := range rows {
				if s.K.Intersect(kp.Src).Len() > 0 {
					hit = append(hit, s)
				}
			}
			if len(hit) == 0 {
				continue
			}
			w := mask.Mask{SeqQ: m.SeqQ, SeqK: m.SeqK, Slices: hit}.Window(qp.Src, kp.Src)
			for _, s := range w.Slices {
				s.Q.Start += qp.At
				s.Q.End += qp.At
				s.K.Start += kp.At
				s.K.End += kp.At
				out.Slices = append(out.Slices, s)
			}
		}
	}
	return out
}

// shiftPieces returns ps moved by delta local positions.
func shiftPieces(ps []Piece, delta int) []Piece {
	out := make([]Piece, len(ps))
	for i, p := range ps {
		out[i] = Piece{p.Src, p.At + delta}
	}
	return out
}
