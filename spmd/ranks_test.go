package spmd

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/longca/longca/comm"
)

// RunRanks with in-process ranks runs fn once per rank, each seeing itself as rank r of n
// on this host and able to talk to the others; one process alone (no InProcess) is rank 0
// of 1 over the local backend; an error of a rank is returned.
func TestRunRanks(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]World{}
	err := RunRanks(context.Background(), World{Size: 1, Host: "h"}, Options{}, &InProcess{Ranks: 3}, func(_ context.Context, cm comm.Comm, w World) error {
		mu.Lock()
		seen[w.Rank] = w
		mu.Unlock()
		if cm.Size() != 3 || cm.Rank() != w.Rank {
			t.Errorf("rank %d: communicator says rank %d of %d", w.Rank, cm.Rank(), cm.Size())
		}
		return cm.Barrier()
	})
	if err != nil {
		t.Fatal(err)
	}
	for r := range 3 {
		if w, ok := seen[r]; !ok || w.Size != 3 || w.LocalRank != r || w.LocalSize != 3 || w.Host != "h" {
			t.Errorf("rank %d saw %+v", r, w)
		}
	}
	ran := 0
	if err := RunRanks(context.Background(), World{Size: 1}, Options{}, nil, func(_ context.Context, cm comm.Comm, w World) error {
		ran++
		if w.Rank != 0 || cm.Size() != 1 {
			t.Errorf("alone: rank %d of %d", w.Rank, cm.Size())
		}
		return nil
	}); err != nil || ran != 1 {
		t.Errorf("alone: ran %d times, err %v", ran, err)
	}
	boom := errors.New("boom")
	if err := RunRanks(context.Background(), World{Size: 1}, Options{}, &InProcess{Ranks: 2}, func(context.Context, comm.Comm, World) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("a rank's error: got %v", err)
	}
}
