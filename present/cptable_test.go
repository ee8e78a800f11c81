package present

import (
	"strings"
	"testing"

	"github.com/longca/longca/results"
)

// TestCPTable: one line per method, mesh, mask, length, heads and pass (samples averaged, only
// the lowest rank's rows), a units row, the status word of a case that did not run, the
// efficiency and overlap columns, the summary, and the shared-device line.
func TestCPTable(t *testing.T) {
	var rows []results.Row
	for rank := int64(0); rank < 2; rank++ {
		for sample := int64(0); sample < 2; sample++ {
			r := results.Row{Rank: rank, Bench: "cp", Method: "ring-p2p", Ulysses: results.Ptr(int64(1)), Ring: results.Ptr(int64(8)), Windows: results.Ptr(int64(1)),
				Mask: "causal", SeqLen: 65536, HeadsQ: 64, HeadsKV: 8, Pass: "fwd", Sample: sample, Status: results.StatusOK, FLOPs: 8e12,
				RanksPerDevice: results.Ptr(int64(8)), CheckPass: results.Ptr(true), CheckWorst: "out", CheckErr: results.Ptr(1.0), CheckTol: results.Ptr(2.0)}
			r.MedianMs, r.TFLOPs = results.Ptr(100+10*float64(sample)), results.Ptr(10.0+float64(sample))
			r.DeviceTFLOPs, r.KernelTFLOPs, r.CPEfficiency = results.Ptr(8**r.TFLOPs), results.Ptr(200.0), results.Ptr(8**r.TFLOPs/200)
			r.NoCommMs = results.Ptr(80.0)
			rows = append(rows, r)
		}
		rows = append(rows, results.Row{Rank: rank, Bench: "cp", Method: "ulysses", Mask: "causal", SeqLen: 65536, HeadsQ: 64, HeadsKV: 8, Pass: "fwd",
			Status: results.StatusUnsupported, Reason: "heads", RanksPerDevice: results.Ptr(int64(8))})
	}
	var b strings.Builder
	if err := WriteCPTable(&b, "cp test", rows); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	var data []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if !strings.HasPrefix(l, "#") {
			data = append(data, l)
		}
	}
	if len(data) != 2 {
		t.Fatalf("%d data lines, want 2:\n%s", len(data), out)
	}
	f := strings.Fields(data[0])
	// method mesh mask seqlen heads pass samples time TFLOPs/rank min-max ranks/dev device kernel eff no-comm xfer bw check err/tol peak
	if f[0] != "ring-p2p" || f[1] != "1x8" || f[3] != "65536" || f[6] != "2" || f[7] != "105.000" || f[8] != "10.50" || f[9] != "10.00-11.00" || f[10] != "8" || f[11] != "84.00" ||
		f[12] != "200.0" || f[13] != "0.42" || f[14] != "80.000" || f[15] != "24" {
		t.Fatalf("ring-p2p line %q", data[0])
	}
	if g := strings.Fields(data[1]); g[0] != "ulysses" || g[1] != "-" || g[7] != "unsupported" {
		t.Fatalf("ulysses line %q", data[1])
	}
	for _, want := range []string{"(TFLOP/s)", "(ms)", "# Cases: 2  Rows: 3  ok: 2  unsupported: 1", "Avg efficiency: 0.42", "8 ranks share one device"} {
		if !strings.Contains(out, want) {
			t.Fatalf("no %q in\n%s", want, out)
		}
	}
}
