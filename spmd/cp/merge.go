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
