package cp

import (
	"fmt"
	"math"

	"github.com/longca/longca/tensor"
)

// LSEMerger accumulates partial attention results of the same queries over disjoint key
// sets, by log-sum-exp, in float64. A row no partial saw (or only with lse = -inf)
// ends with out = 0 and lse = -inf, never NaN.
type LSEMerger struct {
	tokens, heads, dim int
	out, lse           []float64
}

// NewLSEMerger starts an empty merge of [tokens, heads, dim] outputs.
func NewLSEMerger(tokens, heads, dim int) *LSEMerger {
	m := &LSEMerger{tokens: tokens, heads: heads, dim: dim, out: make([]float64, tokens*heads*dim), lse: make([]float64, heads*tokens)}
	for i := range m.lse {
		m.lse[i] = math.Inf(-1)
	}
	return m
}

func (m *LSEMerger) check(out, lse *tensor.Host) error {
	if out.Numel() != len(m.out) || lse.Numel() != len(m.lse) {
		return fmt.Errorf("cp: merge of out %v, lse %v into [%d %d %d]", out.Shape(), lse.Shape(), m.tokens, m.heads, m.dim)
	}
	return nil
}

// Add merges one partial (out [tokens, heads, dim], lse [heads, tokens]).
func (m *LSEMerger) Add(out, lse *tensor.Host) error {
	if err := m.check(out, lse); err != nil {
		return err
	}
	d := m.dim
	for h := range m.heads {
		for t := range m.tokens {
			b := lse.At(h*m.tokens + t)
			if math.IsInf(b, -1) {
				continue // this partial saw no key for the row
			}
			i := h*m.tokens + t
			a := m.lse[i]
			o := (t*m.heads + h) * d
			if math.IsInf(a, -1) {
				m.lse[i] = b
				for x := range d {
					m.out[o+x] = out.At(o + x)
				}
				continue
			}
			hi := math.Max(a, b)
			l := hi + math.Log(math.Exp(a-hi)+math.Exp(b-hi))
			wa, wb := math.Exp(a-l), math.Exp(b-l)
			m.lse[i] = l
			for x := range d {
				m.out[o+x] = wa*m.out[o+x] + wb*out.At(o+x)
			}
		}
	}
	return nil
}

// Write stores the merged result, rounded to each tensor's dtype.
func (m *LSEMerger) Write(out, lse *tensor.Host) error {
	if err := m.check(out, lse); err != nil {
		return err
	}
	out.SetFloat64s(m.out)
	lse.SetFloat64s(m.lse)
	return nil
}

// MergeLSE merges partial results (outs[i] with lses[i], each over a disjoint set of
// keys for the same queries) into out and lse.
func MergeLSE(outs, lses []*tensor.Host, out, lse *tensor.Host) error {
	if len(outs) != len(lses) {
		return fmt.Errorf("cp: merge of %d outputs with %d lse", len(outs), len(lses))
	}
	sh := out.Shape()
	if len(sh) != 3 {
		return fmt.Errorf("cp: merge into out of shape %v, want [tokens, heads, dim]", sh)
	}
	m := NewLSEMerger(sh[0], sh[1], sh[2])
	for i := range outs {
		if err := m.Add(outs[i], lses[i]); err != nil {
			return err
		}
	}
	return m.Write(out, lse)
}

// mergePair writes into dst [tokens, heads, dim] and ldst [heads, tokens] the
// log-sum-exp merge, in float64, of the partials a (lse la) and b (lse lb) of the same
// queries over disjoint keys: a side with lse -inf saw no key and is left out (its out
// is not read); a row empty on both sides is out 0, lse -inf. dst may be a; ldst must
// not be la or lb. It is what the device's merge kernel computes, in fp32 there.
func mergePair(dst, ldst, a, la, b, lb *tensor.Host) error {
	sh := dst.Shape()
	if len(sh) != 3 || a.Numel() != dst.Numel() || b.Numel() != dst.Numel() ||
		ldst.Numel() != sh[0]*sh[1] || la.Numel() != ldst.Numel() || lb.Numel() != ldst.Numel() {
		return fmt.Errorf("cp: merge of out %v (lse %v) and %v (lse %v) into %v (lse %v)", a.Shape(), la.Shape(), b.Shape(), lb.Shape(), sh, ldst.Shape())
	}
	if ldst == la || ldst == lb {
		return fmt.Errorf("cp: merge whose lse output is an input lse")
	}
	t, h, d := sh[0], sh[1], sh[2]
	for row := range t * h {
		li := (row%h)*t + row/h
		x, y := la.At(li), lb.At(li)
		wa, wb, l := 0.0, 0.0, math.Inf(-1)
		switch {
		case !math.IsInf(x, -1) && !math.IsInf(y, -1):
			hi := math.Max(x, y)
			l = hi + math.Log(math.Exp(x-hi)+math.Exp(y-hi))
			wa, wb = math.Exp(x-l), math.Exp(y-l)
		case !math.IsInf(x, -1):
			wa, l = 1, x
		case !math.IsInf(y, -1):
			wb, l = 1, y
		}
		ldst.Set(li, l)
		for e := row * d; e < (row+1)*d; e++ {
			v := 0.0
			if wa != 0 {
				v = wa * a.At(e)
			}
			if wb != 0 {
				v += wb * b.At(e)
			}
			dst.Set(e, v)
		}
	}
	return nil
}

// stepMerge merges the n >= 2 partial results of a ring rank's steps with keys into out
// and lse by log-sum-exp, in as few passes over memory as the dtypes allow. The first
// partial is written by the kernel straight into out when the partials are in out's
// dtype (else into a partial buffer of its own); the second is merged with it into the
// accumulator (accDType), the middle ones into the accumulator in place, and the last
// with the accumulator straight into out and lse (no conversion pass). With n = 2 the
// second merges with the first in place in out. Each merge writes its lse into the
// buffer the previous one did not (the kernel's lse output may not alias an input):
// after partial k it is in lbuf[(n-k)%2], so the last lands in lbuf[0], which is lse.
//
// Per element of out (bf16 partials and out, fp32 accumulator), the passes move 2 + 4
// (second merge, reading the first partial from out) + 10 per middle merge + 8 (last)
// bytes beside the kernel's writes: 10n - 14 for n > 2, and 6 for n = 2; the
// accumulator-then-convert way moved 6 + 10(n-1) + 6 = 10n + 2.
type stepMerge struct {
	o          ops
	out        tensor.Tensor
	n, k       int              // partials in all, added so far
	first      tensor.Tensor    // where partial 1 is written
	acc        tensor.Tensor    // the merge of partials 1..k, for n > 2
	part, plse tensor.Tensor    // partials 2..n
	lbuf       [2]tensor.Tensor // the running lse; lbuf[0] is lse
}

// newStepMerge allocates in a what a merge of n partials of [tokens, heads, dim] into
// out and lse needs.
func newStepMerge(o ops, a *arena, out, lse tensor.Tensor, n int, part tensor.DType) (*stepMerge, error) {
	t, h, d, err := shape3(out)
	if err != nil {
		return nil, err
	}
	if n < 2 {
		return nil, fmt.Errorf("cp: a merge of %d partials", n)
	}
	m := &stepMerge{o: o, out: out, n: n, first: out}
	m.lbuf[0] = lse
	// Every buffer here is written whole (by the kernel or a merge) before it is read.
	if m.lbuf[1], err = a.scratch(tensor.FP32, h, t); err != nil {
		return nil, err
	}
	if part != out.DType() {
		if m.first, err = a.scratch(part, t, h, d); err != nil {
			return nil, err
		}
	}
	if n > 2 {
		if m.acc, err = a.scratch(o.accDType(), t, h, d); err != nil {
			return nil, err
		}
	}
	if m.part, err = a.scratch(part, t, h, d); err != nil {
		return nil, err
	}
	if m.plse, err = a.scratch(tensor.FP32, h, t); err != nil {
		return nil, err
	}
	return m, nil
}

// next is the out and lse buffers the kernel writes the next partial into.
func (m *stepMerge) next() (out, lse tensor.Tensor) {
	if m.k == 0 {
		return m.first, m.lbuf[(m.n-1)%2]
	}
	return m.part, m.plse
}

// add merges the partial the kernel has written into next's buffers.
func (m *stepMerge) add() error {
	if m.k == m.n {
		return fmt.Errorf("cp: a merge of %d partials got another", m.n)
	}
	m.k++
	if m.k == 1 {
		return nil
	}
	src, dst := m.acc, m.acc
	if m.k == 2 {
		src = m.first
	}
	if m.k == m.n {
		dst = m.out
	}
	return m.o.merge(dst, m.lbuf[(m.n-m.k)%2], src, m.lbuf[(m.n-m.k+1)%2], m.part, m.plse)
}

// done says whether all n partials were added (out and lse hold the merge).
func (m *stepMerge) done() error {
	if m.k != m.n {
		return fmt.Errorf("cp: merged %d of %d partials", m.k, m.n)
	}
	return nil
}

// stepSum is stepMerge for a sum (dq over a rank's steps): the first partial written
// straight into dst when in its dtype, the second added to it into the accumulator,
// the middle ones in place, and the last with the accumulator straight into dst.
type stepSum struct {
	o                ops
	dst              tensor.Tensor
	n, k             int
	first, acc, part tensor.Tensor
}

// newStepSum allocates in a what a sum of n partials into dst needs.
func newStepSum(o ops, a *arena, dst tensor.Tensor, n int, part tensor.DType) (*stepSum, error) {
	if n < 2 {
		return nil, fmt.Errorf("cp: a sum of %d partials", n)
	}
	s := &stepSum{o: o, dst: dst, n: n, first: dst}
	sh := dst.Shape()
	var err error
	if part != dst.DType() {
		if s.first, err = a.scratch(part, sh...); err != nil {
			return nil, err
		}
	}
	if n > 2 {
		if s.acc, err = a.scratch(o.accDType(), sh...); err != nil {
			return nil, err
		}
	}
	if s.part, err = a.scratch(part, sh...); err != nil {
		return nil, err
	}
	return s, nil
}

// next is the buffer the kernel writes the next partial into.
func (s *stepSum) next() tensor.Tensor {
	if s.k == 0 {
		return s.first
	}
	return s.part
}

// add adds the partial the kernel has written into next's buffer.
func (s *stepSum) add() error {
	if s.k == s.n {
		return fmt.Errorf("cp: a sum of %d partials got another", s.n)
	}
	s.k++
	if s.k == 1 {
		return nil
	}
	src, dst := s.acc, s.acc
	if s.k == 2 {
		src = s.first
	}
	if s.k == s.n {
		dst = s.dst
	}
	return s.o.add(dst, src, s.part)
}

// done says whether all n partials were added (dst holds the sum).
func (s *stepSum) done() error {
	if s.k != s.n {
		return fmt.Errorf("cp: summed %d of %d partials", s.k, s.n)
	}
	return nil
}
