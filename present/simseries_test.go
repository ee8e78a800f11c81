package present

import (
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

// simRow is a predicted row of simulate: method on mesh u x ring, one mask sample, its
// per-GPU TFLOP/s.
func simRow(method string, u, ring int64, sample int64, tflops float64) results.Row {
	r := results.Row{Bench: "simulate", Method: method, Kernel: "fa3-h100", Ulysses: results.Ptr(u), Ring: results.Ptr(ring),
		Mask: "causal_document_long", WorldSize: 8, SeqLen: 65536, HeadsQ: 64, HeadsKV: 8, HeadDim: 128, DType: "bf16", Batch: 1,
		Pass: "bwd", Status: results.StatusPredicted, Seed: 42 + uint64(sample), Sample: sample, Bottleneck: "intra"}
	r.TFLOPs, r.MedianMs, r.ExposedCommShare = results.Ptr(tflops), results.Ptr(1e5/tflops), results.Ptr(0.1)
	return r
}

// probeRows are the probe's case (causal_document_long bwd, 64:8, 8 GPUs, 5 samples):
// balanced with --cp-ulysses 0 took 1x8 on samples 0, 2, 3, 4 and 2x4 on sample 1;
// ulysses beside it.
func probeRows() []results.Row {
	var rows []results.Row
	for s, v := range []float64{416.6, 423.6, 420.5, 363.8, 420.3} {
		u, ring := int64(1), int64(8)
		if s == 1 {
			u, ring = 2, 4
		}
		rows = append(rows, simRow("balanced", u, ring, int64(s), v))
	}
	for s, v := range []float64{443.3, 405.9, 454.8, 440.0, 450.0} {
		rows = append(rows, simRow("ulysses", 8, 1, int64(s), v))
	}
	return rows
}

// TestSimTableMeshChosenPerSample: a mesh balanced's plan chose per sample is one series,
// its median and range over all 5 samples (420.3, 363.8-423.6) with the meshes it took
// listed (1x8 x4, 2x4 x1); the table showed "423.6", the 2x4 of one sample, as
// balanced's best mesh by median.
func TestSimTableMeshChosenPerSample(t *testing.T) {
	rows := probeRows()
	best, keys, _ := bestCells(rows)
	c := best[keys[0]]["balanced"]
	if c.n != 5 || FormatRate(c.tflops) != "420.3" || FormatRate(c.lo) != "363.8" || FormatRate(c.hi) != "423.6" {
		t.Fatalf("balanced: %d samples, median %v (%v-%v); want the 5 samples' 420.3 (363.8-423.6)", c.n, c.tflops, c.lo, c.hi)
	}
	var b strings.Builder
	if err := WriteSimTable(&b, SimHeader{Samples: 5, Exact: 16}, rows); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"420.3 (363.8-423.6)", "1x8 x4, 2x4 x1 10% intra", "a mesh its plan chose per sample"} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, " 423.6 ") || strings.Contains(out, "2x4 10%") {
		t.Errorf("the table shows the 2x4 of one sample as balanced's series:\n%s", out)
	}
}

// TestSimSeries: a mesh given for every sample is its own series beside the mesh chosen
// per sample (--cp-ulysses 0,2), also where the plan chose the given mesh in a sample
// (two 2x4 rows there: one each); a method of one mesh is one series; rows of one sample
// only (a mask the seed does not change) are each mesh's own.
func TestSimSeries(t *testing.T) {
	rows := probeRows()[:5]
	for s, v := range []float64{436.2, 423.6, 419.8, 377.3, 418.0} { // --cp-ulysses 2
		rows = append(rows, simRow("balanced", 2, 4, int64(s), v))
	}
	got := SimSeries(rows)
	chosen := "balanced" + chosenPerSample
	want := []string{chosen, chosen, chosen, chosen, chosen, "balanced-2x4", "balanced-2x4", "balanced-2x4", "balanced-2x4", "balanced-2x4"}
	for i := range rows {
		// sample 1 has two 2x4 rows: either may be the given mesh's (the same computation)
		if i == 1 || i == 6 {
			if (got[1] == chosen) == (got[6] == chosen) {
				t.Fatalf("sample 1's two 2x4 rows: series %q and %q, want one each", got[1], got[6])
			}
			continue
		}
		if got[i] != want[i] {
			t.Fatalf("row %d (sample %d, mesh %dx%d): series %q, want %q", i, rows[i].Sample, *rows[i].Ulysses, *rows[i].Ring, got[i], want[i])
		}
	}
	// the best of the two series by median: the chosen one's 420.3 over the given 2x4's 419.8
	best, keys, _ := bestCells(rows)
	if c := best[keys[0]]["balanced"]; c.label != "balanced-1x8 x4, 2x4 x1" || c.n != 5 || FormatRate(c.tflops) != "420.3" {
		t.Fatalf("best balanced %s over %d samples at %v; want the mesh chosen per sample, 420.3 over 5", c.label, c.n, c.tflops)
	}
	rows[7].TFLOPs = results.Ptr(430.0) // the given 2x4's median now 423.6
	best, keys, _ = bestCells(rows)
	if c := best[keys[0]]["balanced"]; c.label != "balanced-2x4" || c.n != 5 || FormatRate(c.tflops) != "423.6" {
		t.Fatalf("best balanced %s over %d samples at %v; want the given 2x4, 423.6 over 5", c.label, c.n, c.tflops)
	}
	one := []results.Row{simRow("balanced", 1, 8, 0, 10), simRow("balanced", 8, 1, 0, 20), simRow("ulysses", 8, 1, 0, 30)}
	if got := strings.Join(SimSeries(one), ","); got != "balanced-1x8,balanced-8x1,ulysses-8x1" {
		t.Fatalf("one sample: series %s", got)
	}
}
