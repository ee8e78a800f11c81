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
	"github.com/longca/longca/kernels/kerneltest"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/results"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/tensor"
)

// A rank interrupted in the middle of a case (its context cancelled inside a method's
// exchange, its peer's not, or later) does not leave the exchange its peer is inside: it
// finishes the iteration and every rank stops at the agreement after it, promptly, each
// returning the interrupt (ErrInterrupted and context.Canceled, the signalled rank or
// not) with only finished rows written. Over TCP the interrupted rank left the exchange
// (its kernel saw the cancelled context), its peer waited there for the whole --timeout,
// and both failed with a timeout (the probe of pass 13, finding 3).
func TestCPInterruptMidCaseStopsEveryRank(t *testing.T) {
	const n = 2
	const timeout = 20 * time.Second
	sw := CPSweep{Methods: []string{"ring-p2p", "ulysses"}, Masks: []string{"causal"}, SeqLen: 128, Heads: []Heads{{4, 2}}, HeadDim: 8,
		DType: tensor.FP32, Passes: []kernels.Pass{kernels.Fwd, kernels.Bwd}, Samples: 3, Seed: 1, Kernel: "ref"}
	cases, err := sw.Cases(n)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		backend string
		check   bool
		at      [n]int64 // the kernel call each rank is signalled at (0: never)
		kept    int      // at least this many rows written before the stop, on every rank
	}{
		// In a backward (its dK/dV travel after each step: the interrupted rank used to
		// leave its peer waiting for them); the forward's row of the sample is kept.
		{"tcp/rank 0 in a backward", "tcp", false, [n]int64{12, 0}, 1},
		{"tcp/rank 1 in a backward", "tcp", false, [n]int64{0, 14}, 1},
		{"tcp/both, apart", "tcp", false, [n]int64{16, 12}, 1},
		{"tcp/rank 1 in the check", "tcp", true, [n]int64{0, 1}, 0},
		{"tcp/rank 0 in a later sample", "tcp", false, [n]int64{30, 0}, 2},
		{"tcp/rank 1 in a forward", "tcp", false, [n]int64{0, 7}, 0},
		{"local/rank 1 alone", "local", false, [n]int64{0, 14}, 1},
		{"local/both, apart", "local", true, [n]int64{9, 4}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			rows := make([][]results.Row, n)
			errs := make([]error, n)
			signalled := make([]bool, n)
			rank := func(c comm.Comm) error {
				me := c.Rank()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				k := &kerneltest.CancelAt{Kernel: ref.New(ref.Options{}), At: tc.at[me], Cancel: cancel}
				r := &CPRunner{Sweep: sw, Comm: c, Kernel: k, Check: tc.check, Warmup: 1, Iters: 3, Base: results.Row{Host: "test"}}
				errs[me] = RunCP(ctx, r, cases, func(_ int, row results.Row) error {
					mu.Lock()
					defer mu.Unlock()
					rows[me] = append(rows[me], row)
					return nil
				})
				signalled[me] = ctx.Err() != nil
				return errs[me]
			}
			start := time.Now()
			switch tc.backend {
			case "tcp":
				cs, err := spmd.LocalTCP(context.Background(), n, timeout)
				if err != nil {
					t.Fatal(err)
				}
				var wg sync.WaitGroup
				for _, c := range cs {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_ = rank(c)
					}()
				}
				wg.Wait()
				for _, c := range cs {
					_ = c.Close()
				}
			case "local":
				_ = local.Run(n, rank, local.WithTimeout(timeout))
			}
			took := time.Since(start)
			// Unsignalled, the sweep takes well under a second; a rank left in an exchange
			// waits the whole timeout.
			if took > timeout/2 {
				t.Errorf("the ranks returned after %v (the timeout is %v): a rank waited for its interrupted peer", took.Round(time.Millisecond), timeout)
			}
			for me, err := range errs {
				if !errors.Is(err, ErrInterrupted) || !errors.Is(err, context.Canceled) {
					t.Errorf("rank %d (signalled: %v): RunCP returned %v, want the agreed interrupt (ErrInterrupted, context.Canceled)", me, signalled[me], err)
				}
			}
			for me, rs := range rows {
				for _, row := range rs {
					if row.Status != results.StatusOK {
						t.Errorf("rank %d: a %s row (%s) was written: %s", me, row.Status, row.Pass, row.Reason)
					}
				}
				if len(rs) != len(rows[0]) {
					t.Errorf("rank %d wrote %d rows, rank 0 %d: every rank writes the agreed rows", me, len(rs), len(rows[0]))
				}
			}
			if len(rows[0]) >= len(cases)*sw.Samples*len(sw.Passes) {
				t.Errorf("%d rows: the sweep ran to its end, not stopped", len(rows[0]))
			}
			if len(rows[0]) < tc.kept {
				t.Errorf("%d rows kept, want at least %d: the rows finished before the stop are written", len(rows[0]), tc.kept)
			}
		})
	}
}
