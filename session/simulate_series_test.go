package session

import (
	"testing"

	"github.com/longca/longca/results"
)

// TestSimSpreadOfMeshChosenPerSample: balanced's rows with --cp-ulysses 0, its plan
// taking 1x8 on samples 0, 2, 3, 4 and 2x4 on sample 1 (the probe's causal_document_long
// bwd at 8 GPUs), are one case: samples_n is each row's sample index + 1
// (docs/results-format.md) and the last row's spread is the 5 samples' (median 420.3);
// keyed by mesh, sample 1 had null and samples 2-4 said 2, 3, 4.
func TestSimSpreadOfMeshChosenPerSample(t *testing.T) {
	var rows []results.Row
	for s, v := range []float64{416.6, 423.6, 420.5, 363.8, 420.3} {
		u, ring := int64(1), int64(8)
		if s == 1 {
			u, ring = 2, 4
		}
		rows = append(rows, results.Row{Bench: "simulate", Method: "balanced", Ulysses: results.Ptr(u), Ring: results.Ptr(ring), WorldSize: 8,
			Mask: "causal_document_long", HeadsQ: 64, HeadsKV: 8, Pass: "bwd", Status: results.StatusPredicted, Sample: int64(s), TFLOPs: results.Ptr(v)})
	}
	setSimSpread(rows)
	for i, r := range rows {
		if r.SamplesN == nil || *r.SamplesN != int64(i+1) {
			t.Fatalf("sample %d: samples_n %v, want %d", i, r.SamplesN, i+1)
		}
	}
	last := rows[4]
	if *last.SamplesTFLOPsMedian != 420.3 || *last.SamplesTFLOPsMin != 363.8 || *last.SamplesTFLOPsMax != 423.6 {
		t.Fatalf("the last sample's spread %v (%v-%v), want the 5 samples' 420.3 (363.8-423.6)", *last.SamplesTFLOPsMedian, *last.SamplesTFLOPsMin, *last.SamplesTFLOPsMax)
	}
}
