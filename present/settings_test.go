package present

import (
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

// settingRow is an ok kernel row of causal 1K, 8:2, fwd, d128 bf16 batch 1 at rate tf.
func settingRow(kernel string, tf float64) results.Row {
	return results.Row{Bench: "kernel", Kernel: kernel, Mask: "causal", MaskParams: "{}", SeqLen: 1024, HeadsQ: 8, HeadsKV: 2, HeadDim: 128,
		DType: "bf16", Batch: 1, Pass: "fwd", Status: results.StatusOK, TFLOPs: results.Ptr(tf), FLOPs: 1e9}
}

func caseMasks(s Summary) []string {
	var m []string
	for _, c := range s.Cases {
		m = append(m, c.Mask)
	}
	return m
}

// TestSummarizeKeepsProblemsApart: rows of one mask, length, heads and pass but another
// head dim, dtype, batch, window or document source are other cases, labelled by what
// differs, each with its own rate; never one cell of their mean.
func TestSummarizeKeepsProblemsApart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		other func(*results.Row)
		want  []string
	}{
		{"head dim", func(r *results.Row) { r.HeadDim = 64 }, []string{"causal_d128", "causal_d64"}},
		{"dtype", func(r *results.Row) { r.DType = "fp16" }, []string{"causal_bf16", "causal_fp16"}},
		{"batch", func(r *results.Row) { r.Batch = 4 }, []string{"causal_batch1", "causal_batch4"}},
		{"window", func(r *results.Row) { r.MaskParams = `{"window":"512"}` }, []string{"causal_none", "causal_window512"}},
		{"documents", func(r *results.Row) { r.DocSource = "file:my.txt@0123456789ab" }, []string{"causal_none", "causal_file-my.txt-0123456789ab"}},
		{"head dim and dtype", func(r *results.Row) { r.HeadDim, r.DType = 64, "fp16" }, []string{"causal_d128_bf16", "causal_d64_fp16"}},
	} {
		a, b := settingRow("cuda", 100), settingRow("cuda", 300)
		tc.other(&b)
		s := Summarize([]results.Row{a, b}, "")
		if got := caseMasks(s); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Fatalf("%s: cases %v, want %v", tc.name, got, tc.want)
		}
		for i, want := range []float64{100, 300} {
			if c := s.Cells[s.Cases[i]]["cuda"]; c.TFLOPs != want || c.N != 1 {
				t.Fatalf("%s: case %s cell %+v, want its own rate %g", tc.name, s.Cases[i].Mask, c, want)
			}
		}
	}
}

// TestSummarizeOneProblemUnchanged: a file of one problem keeps its plain mask labels; the
// document samples of a case (other lengths drawn) are averaged as before, and a window
// sized by the length differs only between lengths, which are cases already.
func TestSummarizeOneProblemUnchanged(t *testing.T) {
	var rows []results.Row
	for i, lens := range []string{`"100,924"`, `"512,512"`} {
		r := settingRow("cuda", 100+100*float64(i))
		r.Mask, r.Sample, r.DocSource = "causal_document", int64(i), "pile"
		r.MaskParams = `{"dist":"pile","doc_count":"2","doc_lengths":` + lens + `}`
		rows = append(rows, r)
	}
	for _, n := range []int64{1024, 2048} {
		r := settingRow("cuda", 50)
		r.Mask, r.SeqLen, r.MaskParams = "sliding_window", n, `{"window":"`+map[int64]string{1024: "128", 2048: "256"}[n]+`"}`
		rows = append(rows, r)
	}
	s := Summarize(rows, "")
	if got := strings.Join(caseMasks(s), ","); got != "causal_document,sliding_window,sliding_window" {
		t.Fatalf("cases %s", got)
	}
	if c := s.Cells[s.Cases[0]]["cuda"]; c.N != 2 || c.TFLOPs != 150 {
		t.Fatalf("document samples: %+v, want the mean of 2 samples, 150", c)
	}
}

// TestCPTableKeepsLengthsApart: two runs of one method, mesh and mask at other lengths
// (a merged folder of 8K and 16K tokens a rank) are two lines, each with its own time.
func TestCPTableKeepsLengthsApart(t *testing.T) {
	var rows []results.Row
	for _, n := range []int64{65536, 131072} {
		r := results.Row{Bench: "cp", Method: "ring-p2p", Ulysses: results.Ptr(int64(1)), Ring: results.Ptr(int64(8)), Mask: "causal",
			SeqLen: n, HeadsQ: 64, HeadsKV: 8, HeadDim: 128, DType: "bf16", Batch: 1, Pass: "fwd", Status: results.StatusOK}
		r.MedianMs, r.TFLOPs = results.Ptr(float64(n)/1000), results.Ptr(float64(n)/10000)
		rows = append(rows, r)
	}
	var b strings.Builder
	if err := WriteCPTable(&b, "cp", rows); err != nil {
		t.Fatal(err)
	}
	var data []string
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		if !strings.HasPrefix(l, "#") {
			data = append(data, l)
		}
	}
	if len(data) != 2 {
		t.Fatalf("%d lines, want 2:\n%s", len(data), b.String())
	}
	for i, want := range [][2]string{{"65536", "65.536"}, {"131072", "131.072"}} {
		if f := strings.Fields(data[i]); f[3] != want[0] || f[7] != want[1] {
			t.Fatalf("line %d %q: want seqlen %s and time %s", i, data[i], want[0], want[1])
		}
	}
}

// TestComparisonKeepsHeadDimsApart: measured CP rows at two head dims beside a prediction
// at one: the prediction is compared with its own head dim's time only (200 ms, error 0),
// never with the mean of both (150 ms).
func TestComparisonKeepsHeadDimsApart(t *testing.T) {
	row := func(d int64, ms float64, st results.Status) results.Row {
		r := results.Row{Bench: "cp", Method: "ring-p2p", Ulysses: results.Ptr(int64(1)), Ring: results.Ptr(int64(8)), Mask: "causal", WorldSize: 8,
			SeqLen: 65536, HeadsQ: 64, HeadsKV: 8, HeadDim: d, DType: "bf16", Pass: "fwd", Status: st}
		r.MedianMs, r.TFLOPs = results.Ptr(ms), results.Ptr(100.0)
		return r
	}
	var b strings.Builder
	measured := []results.Row{row(64, 100, results.StatusOK), row(128, 200, results.StatusOK)}
	if err := WriteComparison(&b, "m", measured, []results.Row{row(128, 200, results.StatusPredicted)}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "200.000      200.000    +0.0%") || !strings.Contains(out, "# compared 1 cases") {
		t.Fatalf("want the d128 prediction against the d128 measurement alone:\n%s", out)
	}
}
