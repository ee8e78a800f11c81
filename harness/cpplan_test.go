package harness

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// CPPlannedRows, the plan a cp rank file records (results.MetaPlannedRows), is the rows
// RunCP emits on every rank of a sweep run whole: a row a pass of every sample, one
// sample of a skipped case. A plan above the rows would call a whole run incomplete.
func TestCPPlannedRowsAreAWholeSweepsRows(t *testing.T) {
	const n = 2
	sw := CPSweep{Methods: []string{"ring-p2p", "usp"}, Masks: []string{"causal", "full"}, SeqLen: 64,
		Heads: []Heads{{2, 1}}, HeadDim: 8, DType: tensor.FP32, Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd},
		Samples: 2, Seed: 1, Kernel: "ref"}
	cases, err := sw.Cases(n)
	if err != nil {
		t.Fatal(err)
	}
	skipped := 0
	for _, c := range cases {
		if c.Skip != nil {
			skipped++
		}
	}
	if skipped == 0 || skipped == len(cases) {
		t.Fatalf("%d of %d cases skipped: the test wants some of each", skipped, len(cases))
	}
	var mu sync.Mutex
	rows := make([]int, n)
	err = local.Run(n, func(c comm.Comm) error {
		r := &CPRunner{Sweep: sw, Comm: c, Kernel: ref.New(ref.Options{}), Warmup: 0, Iters: 1, Base: results.Row{Host: "test"}}
		return RunCP(context.Background(), r, cases, func(_ int, row results.Row) error {
			mu.Lock()
			defer mu.Unlock()
			rows[c.Rank()]++
			return nil
		})
	}, local.WithTimeout(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	want := CPPlannedRows(sw, cases)
	for rank, got := range rows {
		if got != want {
			t.Errorf("rank %d: %d rows, CPPlannedRows %d", rank, got, want)
		}
	}
	if w := (len(cases)-skipped)*sw.Samples*len(sw.Passes) + skipped*len(sw.Passes); want != w {
		t.Errorf("CPPlannedRows %d, want %d", want, w)
	}
}
