// Package mask is the mask model of the benchmark: a mask is a list of slices over a
// packed sequence, each a (query range, key range, kind) triple, and every derived
// quantity (area, FLOPs, block maps, the sub-masks of context-parallel steps) is computed
// from the slices, never written per mask.
package mask

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// Kind says which (q, k) pairs of a slice's rectangle are allowed.
type Kind uint8

const (
	// Full allows every pair of the rectangle.
	Full Kind = iota
	// Causal allows k <= q + (ke - qe): bottom-right aligned, as FlashAttention >= 2.1.
	Causal
	// InvCausal allows k >= q + (ks - qs): top-left aligned.
	InvCausal
	// BiCausal allows both of the above: a band.
	BiCausal
)

var kindNames = [...]string{"full", "causal", "invcausal", "bicausal"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind reads a kind's name.
func ParseKind(s string) (Kind, error) {
	for i, n := range kindNames {
		if strings.EqualFold(s, n) {
			return Kind(i), nil
		}
	}
	return 0, fmt.Errorf("unknown slice kind %q: use full, causal, invcausal or bicausal", s)
}

// Range is the half-open interval [Start, End).
type Range struct{ Start, End int }

// Len is the number of positions in the range (0 when empty).
func (r Range) Len() int {
	if r.End <= r.Start {
		return 0
	}
	return r.End - r.Start
}

// Intersect returns the common part of r and o (possibly empty).
func (r Range) Intersect(o Range) Range {
	return Range{max(r.Start, o.Start), min(r.End, o.End)}
}

// Contains says whether i lies in the range.
func (r Range) Contains(i int) bool { return i >= r.Start && i < r.End }

// Slice is one rectangle of a mask and the rule for the pairs inside it.
type Slice struct {
	Q, K Range
	Kind Kind
}

// Mask is a set of non-overlapping slices over a SeqQ x SeqK attention matrix.
type Mask struct {
	SeqQ, SeqK int
	Slices     []Slice
}

// unbounded stands for a missing diagonal bound.
const unbounded = math.MaxInt64 / 4

// Band returns the slice's rule as bounds on the diagonal offset: a pair (q, k) of the
// rectangle is allowed when lo <= k-q <= hi. A missing bound is +-2^61.
func (s Slice) Band() (lo, hi int) {
	lo, hi = -unbounded, unbounded
	if s.Kind == Causal || s.Kind == BiCausal {
		hi = s.K.End - s.Q.End
	}
	if s.Kind == InvCausal || s.Kind == BiCausal {
		lo = s.K.Start - s.Q.Start
	}
	return lo, hi
}

// Allowed says whether the slice allows the pair (q, k).
func (s Slice) Allowed(q, k int) bool {
	if !s.Q.Contains(q) || !s.K.Contains(k) {
		return false
	}
	lo, hi := s.Band()
	return k-q >= lo && k-q <= hi
}

// Allowed says whether any slice of the mask allows (q, k).
func (m Mask) Allowed(q, k int) bool {
	for _, s := range m.Slices {
		if s.Allowed(q, k) {
			return true
		}
	}
	return false
}

// rowSpan is the allowed key interval [L, R] of query q inside rectangle K with band
// [lo, hi]; empty when L > R.
func rowSpan(q int, k Range, lo, hi int) (int, int) {
	return max(k.Start, q+lo), min(k.End-1, q+hi)
}

// pieces cuts the pairs q in Q, k in K, lo <= k-q <= hi into canonical slices (each
// with no empty query row), at most three: within each piece the row's left end is
// either constant or on the diagonal, and likewise its right end.
func pieces(q, k Range, lo, hi int, emit func(Slice)) {
	if q.Len() == 0 || k.Len() == 0 || lo > hi {
		return
	}
	// Breakpoints: the left end leaves the constant k.Start at q = k.Start-lo;
	// the right end reaches the constant k.End-1 at q = k.End-1-hi.
	cuts := []int{q.Start, q.End}
	for _, c := range []int{k.Start - lo, k.End - hi} {
		if c > q.Start && c < q.End {
			cuts = append(cuts, c)
		}
	}
	if len(cuts) == 4 && cuts[2] > cuts[3] {
		cuts[2], cuts[3] = cuts[3], cuts[2]
	}
	// order: q.Start, interior cuts ascending, q.End
	order := append([]int{cuts[0]}, cuts[2:]...)
	order = append(order, cuts[1])
	for i := 0; i+1 < len(order); i++ {
		a, b := order[i], order[i+1]
		if a >= b {
			continue
		}
		// Within [a, b) each end is linear; trim rows where the span is empty. The width
		// R-L is monotone in q, so the non-empty rows are one interval.
		a, b = nonEmpty(a, b, k, lo, hi)
		if a >= b {
			continue
		}
		// An end is on the diagonal over the whole piece when it is at the piece's edge
		// row nearest the cut (the two forms agree at the cut itself).
		diagL := a+lo >= k.Start
		diagR := b-1+hi <= k.End-1
		var s Slice
		switch {
		case !diagL && !diagR:
			s = Slice{Range{a, b}, k, Full}
		case !diagL && diagR:
			s = Slice{Range{a, b}, Range{k.Start, b + hi}, Causal}
		case diagL && !diagR:
			s = Slice{Range{a, b}, Range{a + lo, k.End}, InvCausal}
		default:
			s = Slice{Range{a, b}, Range{a + lo, b + hi}, BiCausal}
		}
		emit(s)
	}
}

// nonEmpty narrows [a, b) to the rows whose key span is non-empty.
func nonEmpty(a, b int, k Range, lo, hi int) (int, int) {
	width := func(q int) int { l, r := rowSpan(q, k, lo, hi); return r - l }
	wa, wb := width(a), width(b-1)
	switch {
	case wa >= 0 && wb >= 0:
		return a, b
	case wa < 0 && wb < 0:
		return a, a
	case wa < 0: // grows: find the first non-negative row
		lo, hi := a, b-1
		for lo < hi {
			m := (lo + hi) / 2
			if width(m) >= 0 {
				hi = m
			} else {
				lo = m + 1
			}
		}
		return lo, b
	default: // shrinks: find the first negative row
		lo, hi := a, b-1
		for lo < hi {
			m := (lo + hi) / 2
			if width(m) < 0 {
				hi = m
			} else {
				lo = m + 1
			}
		}
		return a, lo
	}
}

// Canonical returns the slice as canonical pieces with no empty rows (an empty list for
// an empty slice).
func (s Slice) Canonical() []Slice {
	lo, hi := s.Band()
	var out []Slice
	pieces(s.Q, s.K, lo, hi, func(p Slice) { out = append(out, p) })
	return out
}

// Area is the number of allowed pairs, in closed form (no loop over queries).
func (s Slice) Area() int64 {
	lo, hi := s.Band()
	var a int64
	pieces(s.Q, s.K, lo, hi, func(p Slice) {
		// In a canonical piece every row is non-empty and its width is linear in q.
		plo, phi := p.Band()
		l0, r0 := rowSpan(p.Q.Start, p.K, plo, phi)
		l1, r1 := rowSpan(p.Q.End-1, p.K, plo, phi)
		// n rows of widths w0 .. w1 (linear): n (w0 + w1) / 2, an integer, so that one of n
		// and w0 + w1 is even; halved first, the product stays within int64 (n and the
		// widths up to 2^31: n (w0 + w1) is 2^63).
		n, w := int64(p.Q.Len()), int64(r0-l0+1)+int64(r1-l1+1)
		if w%2 == 0 {
			a += n * (w / 2)
		} else {
			a += n / 2 * w
		}
	})
	return a
}

// Area is the number of allowed pairs of the mask (slices never overlap).
func (m Mask) Area() int64 {
	var a int64
	for _, s := range m.Slices {
		a += s.Area()
	}
	return a
}

// Density is the allowed fraction of the SeqQ x SeqK matrix.
func (m Mask) Density() float64 {
	if m.SeqQ == 0 || m.SeqK == 0 {
		return 0
	}
	return float64(m.Area()) / float64(m.SeqQ) / float64(m.SeqK)
}

// Window returns the part of m inside the q x k window, in the window's local
// coordinates, as canonical slices. Every context-parallel sub-step is built from it.
func (m Mask) Window(q, k Range) Mask {
	return Mask{SeqQ: q.Len(), SeqK: k.Len(), Slices: m.AppendWindow(nil, q, k, 0, 0)}
}

// AppendWindow appends the slices of m.Window(q, k) to dst with the window's origin
// placed at (atQ, atK): a context-parallel sub-mask assembles many windows into one mask
// without a mask per window.
func (m Mask) AppendWindow(dst []Slice, q, k Range, atQ, atK int) []Slice {
	for _, s := range m.Slices {
		qq, kk := s.Q.Intersect(q), s.K.Intersect(k)
		if qq.Len() == 0 || kk.Len() == 0 {
			continue
		}
		lo, hi := s.Band()
		pieces(qq, kk, lo, hi, func(p Slice) {
			p.Q.Start += atQ - q.Start
			p.Q.End += atQ - q.Start
			p.K.Start += atK - k.Start
			p.K.End += atK - k.Start
			dst = append(dst, p)
		})
	}
	return dst
}

// Empty says whether no pair is allowed.
func (m Mask) Empty() bool {
	for _, s := range m.Slices {
		if len(s.Canonical()) > 0 {
			return false
		}
	}
	return true
}

// Validate checks that every slice lies inside the matrix and none overlap.
func (m Mask) Validate() error {
	for i, s := range m.Slices {
		if s.Q.Start < 0 || s.Q.End > m.SeqQ || s.K.Start < 0 || s.K.End > m.SeqK || s.Q.Len() == 0 || s.K.Len() == 0 {
			return fmt.Errorf("mask: slice %d (q %v, k %v) is empty or outside %d x %d", i, s.Q, s.K, m.SeqQ, m.SeqK)
		}
		if s.Kind > BiCausal {
			return fmt.Errorf("mask: slice %d has unknown kind %d", i, s.Kind)
		}
	}
	return nil
}

// jsonSlice is one slice in the JSON form of MASKS.md.
type jsonSlice struct {
	Q    [2]int `json:"q"`
	K    [2]int `json:"k"`
	Kind string `json:"kind"`
}

// Spec is a named mask with its provenance, in the JSON form that
// peers/torch_attention.py --slices reads.
type Spec struct {
	Name   string
	Seed   uint64
	Params map[string]string
	Mask   Mask
}

// MarshalJSON writes {"name", "seqlen", "seed", "area", "params", "slices"}.
func (s Spec) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := s.WriteJSON(&b, false); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// WriteJSON writes MarshalJSON's form (json.MarshalIndent's with indent, two spaces) and
// a newline to w a slice at a time: a packed sequence of 2^24 documents held 10 GB in
// json.Marshal's buffers for its 1 GB of text.
func (s Spec) WriteJSON(w io.Writer, indent bool) error {
	head := struct {
		Name   string            `json:"name"`
		SeqLen int               `json:"seqlen"`
		SeqK   int               `json:"seqlen_k,omitempty"`
		Seed   uint64            `json:"seed"`
		Area   int64             `json:"area"`
		Params map[string]string `json:"params,omitempty"`
		Slices []jsonSlice       `json:"slices"`
	}{s.Name, s.Mask.SeqQ, seqK(s.Mask), s.Seed, s.Mask.Area(), s.Params, []jsonSlice{}}
	marshal := func(v any, prefix string) ([]byte, error) {
		if indent {
			return json.MarshalIndent(v, prefix, "  ")
		}
		return json.Marshal(v)
	}
	b, err := marshal(head, "")
	if err != nil {
		return err
	}
	// the head ends with the empty slice list, "[]" then "}" (or "\n}"): the slices go between
	at := bytes.LastIndex(b, []byte("[]"))
	bw := bufio.NewWriterSize(w, 1<<16)
	bw.Write(b[:at+1])
	for i, sl := range s.Mask.Slices {
		if i > 0 {
			bw.WriteByte(',')
		}
		if indent {
			bw.WriteString("\n    ")
		}
		e, err := marshal(jsonSlice{[2]int{sl.Q.Start, sl.Q.End}, [2]int{sl.K.Start, sl.K.End}, sl.Kind.String()}, "    ")
		if err != nil {
			return err
		}
		bw.Write(e)
	}
	if indent && len(s.Mask.Slices) > 0 {
		bw.WriteString("\n  ")
	}
	bw.Write(b[at+1:])
	bw.WriteByte('\n')
	return bw.Flush()
}

func seqK(m Mask) int {
	if m.SeqK == m.SeqQ {
		return 0
	}
	return m.SeqK
}

// UnmarshalJSON reads the form MarshalJSON writes.
func (s *Spec) UnmarshalJSON(b []byte) error {
	var v struct {
		Name   string            `json:"name"`
		SeqLen int               `json:"seqlen"`
		SeqK   int               `json:"seqlen_k"`
		Seed   uint64            `json:"seed"`
		Params map[string]string `json:"params"`
		Slices []jsonSlice       `json:"slices"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	m := Mask{SeqQ: v.SeqLen, SeqK: v.SeqLen}
	if v.SeqK != 0 {
		m.SeqK = v.SeqK
	}
	for _, js := range v.Slices {
		k, err := ParseKind(js.Kind)
		if err != nil {
			return err
		}
		m.Slices = append(m.Slices, Slice{Range{js.Q[0], js.Q[1]}, Range{js.K[0], js.K[1]}, k})
	}
	*s = Spec{Name: v.Name, Seed: v.Seed, Params: v.Params, Mask: m}
	return m.Validate()
}

// RowSpans returns, for every query row, the allowed key intervals [Start, End) in
// ascending order: what a kernel that visits only allowed pairs iterates over.
func (m Mask) RowSpans() [][]Range {
	rows := make([][]Range, m.SeqQ)
	for _, s := range m.Slices {
		lo, hi := s.Band()
		for q := max(s.Q.Start, 0); q < min(s.Q.End, m.SeqQ); q++ {
			l, r := rowSpan(q, s.K, lo, hi)
			if l <= r {
				rows[q] = append(rows[q], Range{l, r + 1})
			}
		}
	}
	for _, r := range rows {
		sort.Slice(r, func(i, j int) bool { return r[i].Start < r[j].Start })
	}
	return rows
}
