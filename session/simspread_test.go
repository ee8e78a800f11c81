package session

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/results"
)

// TestSimSpreadIsLinear: setSimSpread over one case of n samples allocates O(n), not a
// copy of every row's samples so far (O(n^2): sorted for each row, --samples 100000
// spent about 9.5 minutes there after the last case, saying nothing), and each row's
// spread is harness.Spread of its case's rates up to its own.
func TestSimSpreadIsLinear(t *testing.T) {
	const n = 5000
	rows := make([]results.Row, n)
	rates := make([]float64, n)
	for i := range rows {
		rates[i] = 100 + float64((i*7919)%1000)/3
		rows[i] = results.Row{WorldSize: 8, Mask: "causal_document_long", HeadsQ: 64, HeadsKV: 8, Pass: "fwd", TFLOPs: results.Ptr(rates[i])}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	setSimSpread(rows)
	runtime.ReadMemStats(&after)
	// Copying each prefix is 8 n^2 / 2 bytes (100 MB); the rows' own columns and the heaps
	// are some hundred bytes a row.
	if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(2000*n); got > limit {
		t.Errorf("setSimSpread of %d samples allocated %d bytes; want at most %d (linear in the samples)", n, got, limit)
	}
	for _, i := range []int{0, 1, 2, 3, 100, 999, 1000, n - 2, n - 1} {
		m, lo, hi := harness.Spread(rates[:i+1])
		r := rows[i]
		if r.SamplesN == nil || *r.SamplesN != int64(i+1) || math.Float64bits(*r.SamplesTFLOPsMedian) != math.Float64bits(m) ||
			*r.SamplesTFLOPsMin != lo || *r.SamplesTFLOPsMax != hi {
			t.Errorf("row %d: spread %v; want n=%d median %v min %v max %v", i, r, i+1, m, lo, hi)
		}
	}
}

// TestFitSweepRefusesHugeSweeps: --gpus 8,64,512 --samples 100000 (8.4M cases, at_most
// 2982 hours, 7 GB after 100 s) is refused before any work in one line naming --samples
// and --gpus and the fix, as is a sweep whose rows would not fit; the probe's single case
// of 100000 samples (at_most 6m40s, 2.4 GB) and the default 5 samples run.
func TestFitSweepRefusesHugeSweeps(t *testing.T) {
	const avail = 19 << 30
	big := simulation("ulysses", "causal_document_long", 8, 0, 0)
	big.Sweep.Methods = []string{"ulysses", "ring-p2p", "usp", "balanced"}
	big.Sweep.Masks = []string{"causal", "causal_document_long", "full_document_long"}
	big.GPUs = []int{8, 64, 512}
	big.Sweep.Samples = 100000
	one := simulation("ulysses", "causal_document_long", 8, 0, 0)
	one.Sweep.Samples = 100000
	small := simulation("ulysses", "causal_document_long", 8, 0, 0)
	small.Sweep.Samples = 5
	for _, c := range []struct {
		name  string
		o     *Simulation
		avail float64
		want  string // "": runs
	}{
		{"8,64,512 x 100000", big, avail, "the limit is 24h0m0s"},
		{"one case x 100000", one, avail, ""},
		{"one case x 100000 in 1 GiB", one, 1 << 30, "keep about 1.9 GiB of rows and masks (1.0 GiB available)"},
		{"one case x 5", small, avail, ""},
	} {
		err := fitSimulationIn(c.o, maskCache(c.o), c.avail, 2)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		var ue *UsageError
		flags := fmt.Sprintf("--samples 100000 --gpus %s:", strings.Trim(strings.ReplaceAll(fmt.Sprint(c.o.GPUs), " ", ","), "[]"))
		if err == nil || !errors.As(err, &ue) || ue.ExitCode() != 2 || !strings.Contains(err.Error(), c.want) ||
			strings.Contains(err.Error(), "\n") || !strings.HasPrefix(err.Error(), "longca: "+flags) ||
			!strings.Contains(err.Error(), "give fewer --samples or --gpus") {
			t.Errorf("%s: %v; want one usage line naming --samples and --gpus, saying %q", c.name, err, c.want)
		}
	}
}
