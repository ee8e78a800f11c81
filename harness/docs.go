package harness

import (
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
	row.SamplesN = results.Ptr(int64(len(rates)))
	row.SamplesTFLOPsMedian, row.SamplesTFLOPsMin, row.SamplesTFLOPsMax = results.Ptr(med), results.Ptr(lo), results.Ptr(hi)
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
