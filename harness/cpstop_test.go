package harness

import (
	"context"
	"errors"
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

// Ctrl-C in the middle of a case (the context cancelled once its first sample's rows are
// out) stops every rank before the next sample: the case's other samples are not run
// into error rows one by one.
func TestCPStopsAtTheNextSample(t *testing.T) {
	const n = 2
	sw := CPSweep{Methods: []string{"ring-p2p"}, Masks: []string{"causal", "full"}, SeqLen: 64, Heads: []Heads{{2, 1}}, HeadDim: 8,
		DType: tensor.FP32, Passes: []kernels.Pass{kernels.Fwd}, Samples: 4, Seed: 1, Kernel: "ref"}
	cases, err := sw.Cases(n)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	rows := make([][]results.Row, n)
	err = local.Run(n, func(c comm.Comm) error {
		r := &CPRunner{Sweep: sw, Comm: c, Kernel: ref.New(ref.Options{}), Warmup: 0, Iters: 1, Base: results.Row{Host: "test"}}
		return RunCP(ctx, r, cases, func(_ int, row results.Row) error {
			mu.Lock()
			defer mu.Unlock()
			rows[c.Rank()] = append(rows[c.Rank()], row)
			if c.Rank() == 0 {
				cancel()
			}
			return nil
		})
	}, local.WithTimeout(30*time.Second))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RunCP after a cancel: %v, want context.Canceled", err)
	}
	for rank, rs := range rows {
		if len(rs) != 1 || rs[0].Status != results.StatusOK {
			t.Errorf("rank %d: %d rows (%v), want the first sample's one ok row", rank, len(rs), rs)
		}
	}
}

// cancelKernel is the reference that stops the sweep (as Ctrl-C does) inside its first
// forward.
type cancelKernel struct {
	*ref.Kernel
	cancel func()
}

func (k cancelKernel) Forward(ctx context.Context, p kernels.Problem, q, kk, v, out, lse tensor.Tensor) error {
	k.cancel()
	return k.Kernel.Forward(ctx, p, q, kk, v, out, lse)
}

// A pass that Ctrl-C cuts short measured nothing: no rank writes it as the method's error
// (it was an error row reading "context canceled"), as kernel sweeps drop theirs.
func TestCPInterruptedPassIsNotARow(t *testing.T) {
	const n = 2
	sw := CPSweep{Methods: []string{"ring-p2p"}, Masks: []string{"causal"}, SeqLen: 64, Heads: []Heads{{2, 1}}, HeadDim: 8,
		DType: tensor.FP32, Passes: []kernels.Pass{kernels.Fwd}, Samples: 2, Seed: 1, Kernel: "ref"}
	cases, err := sw.Cases(n)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	var rows []results.Row
	err = local.Run(n, func(c comm.Comm) error {
		r := &CPRunner{Sweep: sw, Comm: c, Kernel: cancelKernel{ref.New(ref.Options{}), cancel}, Warmup: 0, Iters: 1, Base: results.Row{Host: "test"}}
		return RunCP(ctx, r, cases, func(_ int, row results.Row) error {
			mu.Lock()
			defer mu.Unlock()
			rows = append(rows, row)
			return nil
		})
	}, local.WithTimeout(30*time.Second))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("RunCP after a cancel: %v, want context.Canceled", err)
	}
	if len(rows) != 0 {
		t.Errorf("%d rows written (%s: %s), want none: the only pass was cut short", len(rows), rows[0].Status, rows[0].Reason)
	}
}
