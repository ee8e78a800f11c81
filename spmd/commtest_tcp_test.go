package spmd_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/commtest"
	"github.com/longca/longca/spmd"
)

// TestTCP runs the shared comm test table over real sockets (spmd.LocalTCP: the store
// bootstrap and the TCP mesh), in the package that bootstraps them.
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

func closeAll(t *testing.T, comms []comm.Comm) {
	for r, c := range comms {
		if err := c.Close(); err != nil {
			t.Errorf("rank %d close: %v", r, err)
		}
	}
}
