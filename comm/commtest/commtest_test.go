package commtest_test

import (
	"fmt"
	"github.com/longca/longca/tensor"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/commtest"
	"github.com/longca/longca/comm/local"
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

// faulty corrupts one element of every all-reduce result on rank 0, or makes a split
// put ranks in the wrong order: the table must notice.
type faulty struct {
	comm.Comm
	badReduce bool
}

func (f faulty) AllReduce(buf tensor.Tensor, op comm.Op) error {
	if err := f.Comm.AllReduce(buf, op); err != nil {
		return err
	}
	if h := buf.(*tensor.Host); f.badReduce && f.Rank() == 0 {
		h.Set(0, h.At(0)+1)
	}
	return nil
}

func TestTableCatchesFaults(t *testing.T) {
	const n = 2
	comms := local.New(n, local.WithTimeout(20*time.Second))
	failedCases := make([]map[string]bool, n)
	var wg sync.WaitGroup
	for r, c := range comms {
		failedCases[r] = map[string]bool{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			commtest.RunRank(faulty{c, true}, func(name string, err error) {
				if err != nil {
					failedCases[r][name] = true
				}
			})
		}()
	}
	wg.Wait()
	for _, want := range []string{"all-reduce-sum", "all-reduce-max"} {
		if !failedCases[0][want] {
			t.Errorf("rank 0: a corrupt all-reduce passed %s", want)
		}
	}
	if failedCases[0]["all-to-all"] || len(failedCases[1]) > 0 {
		t.Errorf("correct cases failed: rank 0 %v, rank 1 %v", failedCases[0], failedCases[1])
	}
}
