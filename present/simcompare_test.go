package present

import (
	"fmt"
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

// cmpRow is a row of the probe's small CPU case (ring-p2p, 4 ranks of 256 tokens, 8:2,
// d32, bwd): measured (status ok) or predicted; params are the mask's drawn parameters.
func cmpRow(st results.Status, mask, params string, area int64, sample int64, ms float64) results.Row {
	r := results.Row{Bench: "cp", Method: "ring-p2p", Kernel: "ref", Ulysses: results.Ptr(int64(1)), Ring: results.Ptr(int64(4)), Mask: mask,
		MaskParams: params, MaskArea: area, WorldSize: 4, SeqLen: 1024, HeadsQ: 8, HeadsKV: 2, HeadDim: 32, DType: "bf16", Pass: "bwd",
		Status: st, Seed: 42 + uint64(sample), Sample: sample, CPSharding: "zigzag", InnerDim: "ring"}
	if params != "{}" {
		r.DocSource = "pile"
	}
	if st == results.StatusPredicted {
		r.Bench = "simulate"
	}
	r.MedianMs, r.TFLOPs = results.Ptr(ms), results.Ptr(1000/ms)
	return r
}

// dataLines are the comparison's lines that are not comments.
func dataLines(out string) []string {
	var d []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if !strings.HasPrefix(l, "#") {
			d = append(d, l)
		}
	}
	return d
}

// TestComparisonMatchesEverySample: the probe's run of 3 samples on causal (a mask the
// seed does not change, simulated once) is one line, the median of the 3 samples measured
// (1097.9 ms) against the prediction; it compared sample 0 alone (1801.8 ms) and called
// samples 1 and 2 "measured cases with no prediction" of other flags. The header says
// which statistic each side is, and longca cp's (the mean).
func TestComparisonMatchesEverySample(t *testing.T) {
	var measured []results.Row
	for s, ms := range []float64{1801.8, 1097.9, 877.0} {
		measured = append(measured, cmpRow(results.StatusOK, "causal", "{}", 524800, int64(s), ms))
	}
	predicted := []results.Row{cmpRow(results.StatusPredicted, "causal", "{}", 524800, 0, 350.0)}
	var b strings.Builder
	if err := WriteComparison(&b, "cp4", measured, predicted); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	d := dataLines(out)
	if len(d) != 1 {
		t.Fatalf("%d lines, want 1 (the 3 samples of one mask):\n%s", len(d), out)
	}
	if f := strings.Fields(d[0]); len(f) != 11 || f[5] != "1097.900" || f[6] != "350.000" || f[10] != "0-2" {
		t.Fatalf("line %q: want measured 1097.900 (the median of the 3 samples), predicted 350.000, samples 0-2", d[0])
	}
	if strings.Contains(out, "no prediction here") {
		t.Errorf("samples of a compared case called unmatched:\n%s", out)
	}
	for _, want := range []string{"# compared 1 cases in 1 lines (3 measured samples)", "the median over a line's measured samples", "longca cp's table shows their mean"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q:\n%s", want, out)
		}
	}
}

// TestComparisonDocumentsPerSample: a document mask is one line a sample, the sample
// shown (they read as duplicates); a measured sample whose documents were not simulated
// (simulate drew fewer samples) is named as such, with the flags that give it, not as a
// case of other flags.
func TestComparisonDocumentsPerSample(t *testing.T) {
	docs := []string{`{"dist":"pile","doc_count":"2","doc_lengths":"889,135"}`, `{"dist":"pile","doc_count":"2","doc_lengths":"359,665"}`,
		`{"dist":"pile","doc_count":"2","doc_lengths":"199,825"}`}
	areas := []int64{404785, 286065, 360625}
	var measured, predicted []results.Row
	for s := range 3 {
		measured = append(measured, cmpRow(results.StatusOK, "causal_document", docs[s], areas[s], int64(s), float64(900+100*s)))
		if s < 2 {
			predicted = append(predicted, cmpRow(results.StatusPredicted, "causal_document", docs[s], areas[s], int64(s), float64(300+10*s)))
		}
	}
	var b strings.Builder
	if err := WriteComparison(&b, "cp4", measured, predicted); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	d := dataLines(out)
	if len(d) != 2 {
		t.Fatalf("%d lines, want 2 (one a sample simulated):\n%s", len(d), out)
	}
	for s, l := range d {
		f := strings.Fields(l)
		if len(f) != 11 || f[5] != fmt.Sprintf("%.3f", float64(900+100*s)) || f[6] != fmt.Sprintf("%.3f", float64(300+10*s)) || f[10] != fmt.Sprint(s) {
			t.Fatalf("line %q: want sample %d's own times and the sample shown", l, s)
		}
	}
	for _, want := range []string{"# 1 measured mask samples have no prediction here (ring-p2p 1): their masks were not simulated (measured: samples 2 of --seed 42; this simulation: samples 0-1 of --seed 42)",
		"# compared 1 cases in 2 lines (2 measured samples)"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "differ from this simulation's flags") {
		t.Errorf("a sample not simulated blamed on the flags:\n%s", out)
	}
}

// TestComparisonNamesTheFlagsThatDiffer: measured rows no prediction matches (the
// probe's CPU run of 256 tokens a rank, 8:2, d32 beside simulate's defaults) are said to
// differ in those flags, each side's values given; it said only "no case matches".
func TestComparisonNamesTheFlagsThatDiffer(t *testing.T) {
	measured := []results.Row{cmpRow(results.StatusOK, "causal", "{}", 524800, 0, 1800)}
	p := cmpRow(results.StatusPredicted, "causal", "{}", 536887296, 0, 300)
	p.SeqLen, p.HeadsQ, p.HeadsKV, p.HeadDim = 32768, 64, 8, 128
	var b strings.Builder
	if err := WriteComparison(&b, "cp4", measured, []results.Row{p}); err != nil {
		t.Fatal(err)
	}
	want := "; measured: --tokens-per-rank 256 --heads 8:2 --head-dim 32; this simulation: --tokens-per-rank 8K --heads 64:8 --head-dim 128\n"
	if out := b.String(); !strings.Contains(out, "# no case of cp4 matches a prediction") || !strings.Contains(out, want) {
		t.Fatalf("want the differing flags named, %q:\n%s", want, out)
	}
}
