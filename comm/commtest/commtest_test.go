package commtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/commtest"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/spmd"
)

func TestLocal(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 8} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			comms := local.New(n, local.WithTimeout(20*time.Second))
			commtest.Run(t, comms)
			closeAll(t, comms)
		})
	}
}

func TestTCP(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			comms, err := spmd.LocalTCP(context.Background(), n, 20*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			commtest.Run(t, comms)
			closeAll(t, comms)
		})
	}
}

// TestRunRank runs the per-process entry point on in-process ranks: every case reported,
// none failed.
func TestRunRank(t *testing.T) {
	const n = 3
	comms := local.New(n, local.WithTimeout(20*time.Second))
	failed := make([]int, n)
	reported := make([]int, n)
	done := make(chan int)
	for r, c := range comms {
		go func() {
			failed[r] = commtest.RunRank(c, func(name string, err error) {
				reported[r]++
				if err != nil {
					t.Errorf("rank %d: %s: %v", r, name, err)
				}
			})
			done <- r
		}()
	}
	for range comms {
		<-done
	}
	for r := range comms {
		if failed[r] != 0 || reported[r] != len(commtest.Cases()) {
			t.Errorf("rank %d: %d failed, %d of %d reported", r, failed[r], reported[r], len(commtest.Cases()))
		}
	}
}

func closeAll(t *testing.T, comms []comm.Comm) {
	for r, c := range comms {
		if err := c.Close(); err != nil {
			t.Errorf("rank %d close: %v", r, err)
		}
	}
}
