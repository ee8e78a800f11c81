//go:build mpi

package mpi

import (
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/commtest"
	"github.com/longca/longca/tensor"
)

// TestSingleton runs the comm table on MPI's world of one process (no mpirun needed);
// the four-rank run is `longca selftest comm` under mpirun in scripts/test.sh.
func TestSingleton(t *testing.T) {
	c, err := World(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if c.Size() != 1 || c.Rank() != 0 {
		t.Fatalf("singleton world is rank %d of %d", c.Rank(), c.Size())
	}
	commtest.Run(t, []comm.Comm{c})
	// Wrong shapes are refused with the operation named, before MPI sees them.
	odd := tensor.NewHost(tensor.FP32, 3, 2)
	if err := c.AllGather(odd, tensor.NewHost(tensor.FP32, 4, 2)); err == nil {
		t.Error("all-gather into a buffer of the wrong size: no error")
	}
	if err := c.Send(odd, 1); err == nil {
		t.Error("send to rank 1 of 1: no error")
	}
	b := []byte("rank zero's bytes")
	if err := c.Bcast(b, 0); err != nil || string(b) != "rank zero's bytes" {
		t.Errorf("bcast: %v, %q", err, b)
	}
	if err := c.Bcast(b, 1); err == nil {
		t.Error("bcast from rank 1 of 1: no error")
	}
	if LibraryVersion() == "" {
		t.Error("no library version")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}
