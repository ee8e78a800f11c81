package harness

import (
	"math"
	"sort"
	"strconv"

	"github.com/longca/longca/dataset"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/results"
)

// Docs is where document masks take their lengths from: a source (nil: MASKS.md's rule
// for the purpose) and a cap (zero: the source's own, the magiattention preset's S/4;
// else none). The zero Docs is MASKS.md's rule.
type Docs struct {
	Source dataset.Source
	MaxDoc dataset.Cap
}

// IsDefault says whether d is MASKS.md's rule with no cap.
func (d Docs) IsDefault() bool { return d.Source == nil && d.MaxDoc.IsZero() }

// options are the mask options of d with a seed and a purpose.
func (d Docs) options(seed uint64, p mask.Purpose) mask.Options {
	return mask.Options{Seed: seed, Purpose: p, Source: d.Source, MaxDoc: d.MaxDoc}
}

// KernelBuilder is the MaskBuilder of kernel runs on these documents (BuildMask when d
// is the default).
func (d Docs) KernelBuilder() MaskBuilder {
	return func(name string, seqlen int, seed uint64) (mask.Spec, error) {
		return mask.Build(name, seqlen, d.options(seed, mask.PurposeDefault))
	}
}

// CPBuilder is the MaskBuilder of CP runs on these documents (BuildCPMask when d is the
// default).
func (d Docs) CPBuilder() MaskBuilder {
	return func(name string, seqlen int, seed uint64) (mask.Spec, error) {
		return mask.Build(name, seqlen, d.options(seed, mask.PurposeCP))
	}
}

// SetDocColumns fills a row's doc_source and max_doc from a mask's parameters (empty
// and null for a mask without documents).
func SetDocColumns(row *results.Row, params map[string]string) {
	row.DocSource, row.MaxDoc = params["dist"], nil
	if v, err := strconv.ParseInt(params["max_doc"], 10, 64); err == nil && v > 0 {
		row.MaxDoc = results.Ptr(v)
	}
}

// SetSpread fills a row's sample-spread columns from rates, the TFLOP/s of its case's
// samples so far, its own included (rows without a rate are left out of rates). With
// fewer than one rate, or for a case of one sample (of 1), they are null.
func SetSpread(row *results.Row, rates []float64, of int) {
	row.SamplesN, row.SamplesTFLOPsMedian, row.SamplesTFLOPsMin, row.SamplesTFLOPsMax = nil, nil, nil, nil
	if of < 2 || len(rates) == 0 {
		return
	}
	med, lo, hi := Spread(rates)
	setSpread(row, len(rates), med, lo, hi)
}

// SetRunningSpread is SetSpread with the rates so far kept in r (each rate Added to r
// before its row): O(log n) a row where SetSpread sorts every rate so far.
func SetRunningSpread(row *results.Row, r *RunningSpread, of int) {
	row.SamplesN, row.SamplesTFLOPsMedian, row.SamplesTFLOPsMin, row.SamplesTFLOPsMax = nil, nil, nil, nil
	if of < 2 || r.Len() == 0 {
		return
	}
	med, lo, hi := r.Spread()
	setSpread(row, r.Len(), med, lo, hi)
}

func setSpread(row *results.Row, n int, med, lo, hi float64) {
	row.SamplesN = results.Ptr(int64(n))
	row.SamplesTFLOPsMedian, row.SamplesTFLOPsMin, row.SamplesTFLOPsMax = results.Ptr(med), results.Ptr(lo), results.Ptr(hi)
}

// RunningSpread is Spread of the values Added so far, each Add O(log n): the lower half
// in a max-heap, the upper half in a min-heap (the lower one the larger for an odd
// count). With a NaN among them it is Spread of the heaps' values and the NaNs
// (sort.Float64s's order; a -0 and a 0 may come out either way, as from the sort). The
// zero RunningSpread is empty.
type RunningSpread struct {
	low, high []float64 // low: a max-heap; high: a min-heap; len(low) - len(high) is 0 or 1
	lo, hi    float64   // of the values that are not NaN
	nans      int
}

// Len is how many values were added.
func (r *RunningSpread) Len() int { return len(r.low) + len(r.high) + r.nans }

// Add adds v.
func (r *RunningSpread) Add(v float64) {
	if v != v {
		r.nans++
		return
	}
	first := len(r.low) == 0
	if first || v < r.lo {
		r.lo = v
	}
	if first || v > r.hi {
		r.hi = v
	}
	if first || v <= r.low[0] {
		r.low = heapPush(r.low, v, true)
	} else {
		r.high = heapPush(r.high, v, false)
	}
	switch {
	case len(r.low) > len(r.high)+1:
		var x float64
		r.low, x = heapPop(r.low, true)
		r.high = heapPush(r.high, x, false)
	case len(r.high) > len(r.low):
		var x float64
		r.high, x = heapPop(r.high, false)
		r.low = heapPush(r.low, x, true)
	}
}

// Spread is Spread of the values added so far.
func (r *RunningSpread) Spread() (median, lo, hi float64) {
	if r.nans > 0 {
		all := append(append(make([]float64, 0, r.Len()), r.low...), r.high...)
		for range r.nans {
			all = append(all, math.NaN())
		}
		return Spread(all)
	}
	if len(r.low) == 0 {
		return 0, 0, 0
	}
	median = r.low[0]
	if len(r.low) == len(r.high) {
		median = (r.low[0] + r.high[0]) / 2
	}
	return median, r.lo, r.hi
}

// above says whether a sits above b in a max-heap (max) or a min-heap.
func above(a, b float64, max bool) bool {
	if max {
		return a > b
	}
	return a < b
}

func heapPush(h []float64, v float64, max bool) []float64 {
	h = append(h, v)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !above(h[i], h[p], max) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

func heapPop(h []float64, max bool) ([]float64, float64) {
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		c := 2*i + 1
		if c >= n {
			break
		}
		if c+1 < n && above(h[c+1], h[c], max) {
			c++
		}
		if !above(h[c], h[i], max) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	return h, top
}

// Spread is the median (the mean of the middle two for an even count), minimum and
// maximum of v (zeros for none).
func Spread(v []float64) (median, lo, hi float64) {
	if len(v) == 0 {
		return 0, 0, 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	median = s[n/2]
	if n%2 == 0 {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	return median, s[0], s[n-1]
}
