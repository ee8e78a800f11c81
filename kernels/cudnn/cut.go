package cudnn

import (
	"fmt"
	"math"
	"sort"

	"github.com/longca/longca/mask"
)

// Cutting a mask into what cuDNN's fused attention accepts. cuDNN computes attention on
// a batch of rectangles (one per batch entry, laid out packed with ragged offsets), each
// masked by the same diagonal bounds: none (full), a right bound (causal, bottom-right
// or top-left aligned, optionally shifted), a left bound (a sliding window), or both.
// A mask (a kernel case, or a context-parallel step's sub-mask) is cut into pieces —
// rectangles with a band — merged where two pieces form one, and the pieces are grouped
// into calls: the pieces of one call share their bounds and neither their query rows
// nor their key rows overlap (so no call writes the same output row twice, forward or
// backward). Rows no piece covers get out = 0 and lse = -inf; queries several calls
// share are merged by log-sum-exp, and gradients several calls share are summed.

// MaxCalls is the most cuDNN calls one mask may need; a mask that cuts into more is
// unsupported (it would be slow, and each call is a plan to build).
const MaxCalls = 32

// piece is a rectangle Q x K of a mask with a band: (q, k) is allowed when
// Lo <= k - q <= Hi. Pieces are tight: every row and column of the rectangle has an
// allowed pair, and Lo and Hi lie within the rectangle's extreme diagonals.
type piece struct {
	Q, K   mask.Range
	Lo, Hi int
}

func (p piece) String() string {
	return fmt.Sprintf("q[%d,%d) k[%d,%d) band [%d,%d]", p.Q.Start, p.Q.End, p.K.Start, p.K.End, p.Lo, p.Hi)
}

// tighten is the tight piece of the pairs q in Q, k in K with lo <= k-q <= hi (bounds
// may be mask's unbounded sentinels), or false when there are none.
func tighten(q, k mask.Range, lo, hi int) (piece, bool) {
	if q.Len() == 0 || k.Len() == 0 || lo > hi {
		return piece{}, false
	}
	// A row is non-empty when q+hi >= k.Start and q+lo <= k.End-1.
	qs, qe := max(q.Start, k.Start-hi), min(q.End, k.End-lo)
	if qs >= qe {
		return piece{}, false
	}
	// A column is used when some row of [qs, qe) reaches it.
	ks, ke := max(k.Start, qs+lo), min(k.End, qe+hi)
	if ks >= ke {
		return piece{}, false
	}
	return piece{Q: mask.Range{Start: qs, End: qe}, K: mask.Range{Start: ks, End: ke},
		Lo: max(lo, ks-(qe-1)), Hi: min(hi, (ke-1)-qs)}, true
}

// span is row q's allowed keys [l, r] (l > r: none).
func (p piece) span(q int) (int, int) { return max(p.K.Start, q+p.Lo), min(p.K.End-1, q+p.Hi) }

// allows says whether the piece allows (q, k).
func (p piece) allows(q, k int) bool {
	return p.Q.Contains(q) && p.K.Contains(k) && k-q >= p.Lo && k-q <= p.Hi
}

// area counts the allowed pairs: within each run of rows between the points where an
// end of the row's span changes from a constant to the diagonal, the width is linear.
func (p piece) area() int64 {
	cuts := []int{p.Q.Start, p.Q.End}
	for _, c := range []int{p.K.Start - p.Lo, p.K.End - p.Hi} {
		if c > p.Q.Start && c < p.Q.End {
			cuts = append(cuts, c)
		}
	}
	sort.Ints(cuts)
	var a int64
	for i := 0; i+1 < len(cuts); i++ {
		s, e := cuts[i], cuts[i+1]
		if s >= e {
			continue
		}
		l0, r0 := p.span(s)
		l1, r1 := p.span(e - 1)
		a += int64(e-s) * (int64(r0-l0+1) + int64(r1-l1+1)) / 2
	}
	return a
}

// rightBinding and leftBinding say whether a bound cuts into the rectangle.
func (p piece) rightBinding() bool { return p.Hi < (p.K.End-1)-p.Q.Start }
func (p piece) leftBinding() bool  { return p.Lo > p.K.Start-(p.Q.End-1) }

// merge is the one piece a and b form together, if they do (they must be disjoint, as
// the slices of a mask are).
func merge(a, b piece) (piece, bool) {
	touch := func(x, y mask.Range) bool { return x.Start <= y.End && y.Start <= x.End }
	if !touch(a.Q, b.Q) || !touch(a.K, b.K) {
		return piece{}, false // the union would have an empty row or column
	}
	q := mask.Range{Start: min(a.Q.Start, b.Q.Start), End: max(a.Q.End, b.Q.End)}
	k := mask.Range{Start: min(a.K.Start, b.K.Start), End: max(a.K.End, b.K.End)}
	c, ok := tighten(q, k, min(a.Lo, b.Lo), max(a.Hi, b.Hi))
	if !ok || c.area() != a.area()+b.area() {
		return piece{}, false
	}
	return c, true
}

// naturalBounds are the piece's bounds in cuDNN's terms, bottom-right aligned: with
// i, j the row and column in the rectangle and delta = sk - sq, the right bound keeps
// j - i <= delta + R and the left bound keeps j - i > delta - L. A left bound alone gets
// a right bound that cuts nothing (cuDNN 9.14.0 is wrong on a sliding window without
// one).
func (p piece) naturalBounds() bounds {
	sq, sk := int64(p.Q.Len()), int64(p.K.Len())
	delta := sk - sq
	off := int64(p.K.Start - p.Q.Start)
	b := bounds{Align: bottomRight}
	if p.rightBinding() {
		b.Right, b.R = true, int64(p.Hi)-off-delta
	}
	if p.leftBinding() {
		b.Left, b.L = true, delta+1-(int64(p.Lo)-off)
		if !b.Right {
			b.Right, b.R = true, sq-1
		}
	}
	return b
}

// localBand is the range of j - i that bounds b keep on an sq x sk rectangle, clamped to
// the rectangle's diagonals.
func localBand(b bounds, sq, sk int64) (lo, hi int64) {
	lo, hi = -(sq - 1), sk-1
	shift := int64(0)
	if b.Align == bottomRight {
		shift = sk - sq
	}
	if b.Right {
		hi = min(hi, shift+b.R)
	}
	if b.Left {
		lo = max(lo, shift+1-b.L)
	}
	return lo, hi
}

// fits says whether bounds b, applied to the piece's rectangle, keep exactly its pairs.
func (p piece) fits(b bounds) bool {
	sq, sk := int64(p.Q.Len()), int64(p.K.Len())
	lo, hi := localBand(b, sq, sk)
	off := int64(p.K.Start - p.Q.Start)
	return lo == int64(p.Lo)-off && hi == int64(p.Hi)-off && lo <= hi
}

// call is one execution of cuDNN's attention: its pieces (in query order, their key
// ranges in the same order) and their shared bounds.
type call struct {
	pieces []piece
	bounds bounds
}

// cut is a mask cut into calls.
type cut struct {
	seqQ, seqK int
	calls      []call
	// coveredQ and coveredK say whether every query row and every key row is in some
	// piece (otherwise the uncovered outputs are written by longca).
	coveredQ, coveredK bool
	// pieces counts the pieces before they were grouped.
	pieces int
}

// dense says whether call i is a single piece over the whole problem (the dense layout,
// no ragged offsets).
func (c *cut) dense(i int) bool {
	cl := c.calls[i]
	return len(cl.pieces) == 1 && cl.pieces[0].Q == (mask.Range{Start: 0, End: c.seqQ}) && cl.pieces[0].K == (mask.Range{Start: 0, End: c.seqK})
}

func (c *cut) String() string {
	s := fmt.Sprintf("%d pieces in %d calls", c.pieces, len(c.calls))
	for i, cl := range c.calls {
		s += fmt.Sprintf("; call %d: %d pieces, %s", i, len(cl.pieces), cl.bounds)
	}
	return s
}

// cutMask cuts m into calls, or says why it cannot.
func cutMask(m mask.Mask) (*cut, error) { return cutWithin(m, MaxCalls) }

// Calls is how many calls of cuDNN's attention the kernel cuts mask m into (pure Go: no
// GPU, no library). A count above MaxCalls is a mask the kernel refuses; the error is
// only for an invalid mask. A context-parallel method asks it to lay out a rank's keys so
// that its sub-mask runs in few calls (kernels.CallCounter).
func Calls(m mask.Mask) (int, error) {
	c, err := cutWithin(m, math.MaxInt)
	if err != nil {
		return 0, err
	}
	return len(c.calls), nil
}

// cutWithin is cutMask with the most calls allowed.
func cutWithin(m mask.Mask, most int) (*cut, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	var ps []piece
	for _, s := range m.Slices {
		lo, hi := s.Band()
		if p, ok := tighten(s.Q, s.K, lo, hi); ok {
			ps = append(ps, p)
		}
	}
	ps = mergeAll(ps)
	c := &cut{seqQ: m.SeqQ, seqK: m.SeqK, pieces: len(ps)}
	// Pieces with binding bounds first: a piece with none often fits their calls too.
	sort.SliceStable(ps, func(i, j int) bool {
		bi := btoi(ps[i].rightBinding()) + btoi(ps[i].leftBinding())
		bj := btoi(ps[j].rightBinding()) + btoi(ps[j].leftBinding())
		if bi != bj {
			return bi > bj
		}
		if ps[i].Q.Start != ps[j].Q.Start {
			return ps[i].Q.Start < ps[j].Q.Start
		}
		return ps[i].K.Start < ps[j].K.Start
	})
	for _, p := range ps {
		placed := false
		for i := range c.calls {
			if p.fits(c.calls[i].bounds) && c.calls[i].place(p) {
				placed = true
				break
			}
		}
		if !placed {
			c.calls = append(c.calls, call{pieces: []piece{p}, bounds: p.naturalBounds()})
		}
		if len(c.calls) > most {
			return nil, fmt.Errorf("the mask cuts into more than %d calls of cuDNN's attention (%d pieces)", most, len(ps))
		}
	}
	for i := range c.calls {
		cl := &c.calls[i]
		square := true
		for _, p := range cl.pieces {
			square = square && p.Q.Len() == p.K.Len()
		}
		if square { // top-left and bottom-right agree; top-left needs no lengths
			cl.bounds.Align = topLeft
		}
	}
	c.coveredQ = covers(ps, m.SeqQ, func(p piece) mask.Range { return p.Q })
	c.coveredK = covers(ps, m.SeqK, func(p piece) mask.Range { return p.K })
	return c, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// place adds p to the call when its rows and columns overlap no piece's and the query
// and key orders agree; it reports whether it did.
func (cl *call) place(p piece) bool {
	at := len(cl.pieces)
	for i, o := range cl.pieces {
		if p.Q.Intersect(o.Q).Len() > 0 || p.K.Intersect(o.K).Len() > 0 {
			return false
		}
		if (p.Q.Start < o.Q.Start) != (p.K.Start < o.K.Start) {
			return false
		}
		if p.Q.Start < o.Q.Start && i < at {
			at = i
		}
	}
	cl.pieces = append(cl.pieces, piece{})
	copy(cl.pieces[at+1:], cl.pieces[at:])
	cl.pieces[at] = p
	return true
}

// mergeAll merges pieces until no two form one.
func mergeAll(ps []piece) []piece {
	for changed := true; changed; {
		changed = false
		for i := 0; i < len(ps); i++ {
			for j := i + 1; j < len(ps); j++ {
				if m, ok := merge(ps[i], ps[j]); ok {
					ps[i] = m
					ps = append(ps[:j], ps[j+1:]...)
					changed = true
					j = i
				}
			}
		}
	}
	return ps
}

// covers says whether the ranges rng(p) cover [0, n).
func covers(ps []piece, n int, rng func(piece) mask.Range) bool {
	rs := make([]mask.Range, 0, len(ps))
	for _, p := range ps {
		rs = append(rs, rng(p))
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].Start < rs[j].Start })
	next := 0
	for _, r := range rs {
		if r.Start > next {
			return false
		}
		next = max(next, r.End)
	}
	return next >= n
}
