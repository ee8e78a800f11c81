package nccl

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/spmd"
)

func init() { spmd.RegisterBackend("nccl", openBackend) }

// openBackend is spmd's "nccl" backend: it opens this rank's GPU (the local rank's, see
// spmd.DeviceIndex) with a stream of its own and joins the world's communicator. The
// communicator it returns also takes host tensors (Staged), so the host-memory comm test
// table (`longca selftest comm --backend nccl`) runs over NCCL.
func openBackend(ctx context.Context, w spmd.World, o spmd.Options) (comm.Comm, error) {
	idx, err := spmd.DeviceIndex(w, os.Getenv)
	if err != nil {
		return nil, err
	}
	g, err := cuda.Open(idx)
	if err != nil {
		return nil, fmt.Errorf("nccl: rank %d: GPU %s: %w", w.Rank, spmd.VisibleDevice(idx, os.Getenv), err)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = spmd.DefaultTimeout
	}
	c, err := NewSPMD(ctx, w, g, timeout)
	if err != nil {
		return nil, err
	}
	return NewStaged(c, g), nil
}

// NewSPMD joins the world's NCCL communicator on device g, enqueueing on g's stream (so
// NCCL is ordered with g's kernels and copies): the spmd TCP store shares rank 0's id.
func NewSPMD(ctx context.Context, w spmd.World, g *cuda.Device, timeout time.Duration) (*Comm, error) {
	s, err := DeviceStream(g)
	if err != nil {
		return nil, err
	}
	st, srv, err := spmd.Bootstrap(ctx, w, timeout)
	if err != nil {
		return nil, err
	}
	defer func() {
		st.Close()
		if srv != nil {
			srv.Close()
		}
	}()
	exchange := func(id []byte) ([]byte, error) { return st.Broadcast("nccl/id", 0, id) }
	c, err := New(ctx, w.Rank, w.Size, exchange, s, timeout, WithThreadSetup(DeviceThread(g)))
	if err != nil {
		return nil, err
	}
	// Rank 0 closes the store on return: wait until every rank is done with it.
	if err := st.Barrier("nccl/done"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}
