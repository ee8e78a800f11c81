package present

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

func ratioRows() []results.Row {
	mk := func(kernel string, seqlen int64, st results.Status, tf float64) results.Row {
		r := results.Row{Kernel: kernel, Mask: "causal", SeqLen: seqlen, HeadsQ: 64, HeadsKV: 8, Pass: "fwd", Status: st}
		if st == results.StatusOK {
			r.TFLOPs = results.Ptr(tf)
		}
		return r
	}
	return []results.Row{
		mk("cuda", 8192, results.StatusOK, 250), mk("torch:flex", 8192, results.StatusOK, 400), mk("torch:cudnn", 8192, results.StatusOK, 500),
		mk("cuda", 16384, results.StatusOK, 300), mk("torch:flex", 16384, results.StatusWrong, 0), mk("torch:cudnn", 16384, results.StatusUnsupported, 0),
	}
}

func TestRatioTable(t *testing.T) {
	s := Summarize(ratioRows(), "")
	if k, r := s.Fastest(s.Cases[0]); k != "torch:cudnn" || r != 500 {
		t.Fatalf("fastest %s %g", k, r)
	}
	var b strings.Builder
	if err := WriteRatioTable(&b, "t", s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		" causal                    8192    64:8     fwd          0.50          0.80          1.00  torch:cudnn 500.0",
		" causal                   16384    64:8     fwd          1.00         wrong   unsupported  cuda 300.0",
		"cuda 0.71 (2) 1; torch:flex 0.80 (1) 0; torch:cudnn 1.00 (1) 1;",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("ratio table lacks %q:\n%s", want, out)
		}
	}
}

func TestBarCharts(t *testing.T) {
	dir := t.TempDir()
	files, err := WriteBarCharts(dir, Summarize(ratioRows(), ""))
	if err != nil || len(files) != 1 || filepath.Base(files[0]) != "bars_causal_fwd_64-8.png" {
		t.Fatalf("%v %v", files, err)
	}
	if st, err := os.Stat(files[0]); err != nil || st.Size() < 2000 {
		t.Fatalf("%v %v", st, err)
	}
	one := Summarize(ratioRows()[:1], "")
	if files, err := WriteBarCharts(dir, one); err != nil || len(files) != 0 {
		t.Fatalf("one kernel: %v %v", files, err)
	}
}
