package session

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/commtest"
	"github.com/longca/longca/spmd"
)

// SelftestComm runs every collective of the comm test table on this rank of a launched
// world (and rank 0's bytes shared to every rank), printing a line per failure (and per
// case when verbose) and a summary; exitRank (when >= 0) leaves before the tests, so the
// others must fail naming it. A failure exits 1 without closing the communicator (a
// peer may be gone).
func (s *Session) SelftestComm(ctx context.Context, o spmd.Options, exitRank int, verbose bool) error {
	if ctx == nil {
		ctx = context.Background()
	}
	w := s.World
	s.TagRank(w.Rank, w.Size)
	// One store for the job, as cp's: the backend's bootstrap opens it and the share test
	// uses it again, so rank 0 binds MASTER_PORT once and no other process can take the
	// port between the two (it did: rank 0 failed naming the port, the others waited out
	// --timeout calling it crowded).
	ctx, release := spmd.HoldStore(ctx)
	err := spmd.RunRanks(ctx, w, o, nil, func(ctx context.Context, cm comm.Comm, w spmd.World) error {
		out := s.Stdout
		who := fmt.Sprintf("rank %d of %d (%s)", w.Rank, w.Size, spmd.Choose(w, spmd.Options{Backend: o.Backend}))
		if w.Rank == exitRank {
			fmt.Fprintf(out, "selftest comm: %s leaves early on purpose\n", who)
			return nil
		}
		start := time.Now()
		ran := 0
		failed := commtest.RunRank(cm, func(name string, err error) {
			ran++
			if err != nil {
				fmt.Fprintf(os.Stderr, "selftest comm: %s: %s: FAIL: %v\n", who, name, err)
			} else if verbose {
				fmt.Fprintf(out, "selftest comm: %s: %s: ok\n", who, name)
			}
		})
		total := len(commtest.Cases()) + 1
		if failed == 0 {
			// Rank 0's bytes to every rank: MPI_Bcast under MPI, else the TCP store.
			ran++
			want := []byte(fmt.Sprintf("from rank 0 of %d", w.Size))
			data := []byte(nil)
			if w.Rank == 0 {
				data = want
			}
			got, err := spmd.Share(ctx, w, o, "selftest/share", data, len(want))
			if err == nil && string(got) != string(want) {
				err = fmt.Errorf("got %q, want %q", got, want)
			}
			if err != nil {
				failed++
				fmt.Fprintf(os.Stderr, "selftest comm: %s: share-from-rank-0: FAIL: %v\n", who, err)
			}
		}
		fmt.Fprintf(out, "selftest comm: %s: %d passed, %d failed, %d not run (%.2fs)\n", who, ran-failed, failed, total-ran, time.Since(start).Seconds())
		if failed > 0 {
			return &ExitError{1, ""} // the communicator may be stuck (a peer is gone): no close
		}
		return nil
	})
	release(err == nil)
	return err
}
