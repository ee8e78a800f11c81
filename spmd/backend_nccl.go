package spmd

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/nccl"
	"github.com/longca/longca/internal/cuda"
)

// The NCCL backend registers here, as the others do: comm/nccl is a communicator over a
// library and knows nothing of worlds, launchers or bootstrap stores.
func init() { RegisterBackend("nccl", openNCCL) }

// openNCCL is the "nccl" backend: it opens this rank's GPU (the local rank's, see
// DeviceIndex) with a stream of its own and joins the world's communicator. The
// communicator it returns also takes host tensors (nccl.Staged), so the host-memory comm
// test table (`longca selftest comm --backend nccl`) runs over NCCL.
func openNCCL(ctx context.Context, w World, o Options) (comm.Comm, error) {
	// A machine where NCCL cannot run at all (no CUDA driver or GPU, no libnccl) is the
	// wrong place for this backend: bad input, one line naming the flag and the others (it
	// exited 1 naming neither).
	if err := NCCLUnavailable(); err != nil {
		return nil, LaunchError(err)
	}
	idx, err := DeviceIndex(w, os.Getenv)
	if err != nil {
		return nil, err
	}
	g, err := cuda.Open(idx)
	if err != nil {
		return nil, fmt.Errorf("nccl: rank %d: GPU %s: %w", w.Rank, VisibleDevice(idx, os.Getenv), err)
	}
	c, err := NewNCCL(ctx, w, g, o.timeout())
	if err != nil {
		return nil, err
	}
	return nccl.NewStaged(c, g), nil
}

// NCCLUnavailable is the refusal of --backend nccl on a machine where NCCL cannot run (no
// CUDA driver or device, no libnccl with the symbols longca needs), one line naming the
// flag and the fix, or nil: the backend's own, and a dry run's (cp --dry-run says it).
func NCCLUnavailable() error {
	if err := ncclRunsHere(); err != nil {
		return fmt.Errorf("--backend nccl cannot run here: %v: give --backend tcp (or mpi under mpirun), or run where longca env finds libcuda and libnccl", err)
	}
	return nil
}

// ncclRunsHere says why NCCL cannot run on this machine (no CUDA driver or device, no
// libnccl with the symbols longca needs), or nil.
func ncclRunsHere() error {
	if err := cuda.Available(); err != nil {
		return err
	}
	if p := nccl.Probe(); !p.Found {
		return fmt.Errorf("libnccl: %s", p.Error)
	}
	return nil
}

// NewNCCL joins the world's NCCL communicator on device g, enqueueing on g's stream (so
// NCCL is ordered with g's kernels and copies): the TCP store of Bootstrap shares rank
// 0's id.
func NewNCCL(ctx context.Context, w World, g *cuda.Device, timeout time.Duration) (*nccl.Comm, error) {
	s, err := nccl.DeviceStream(g)
	if err != nil {
		return nil, err
	}
	st, srv, err := Bootstrap(ctx, w, timeout)
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
	c, err := nccl.New(ctx, w.Rank, w.Size, exchange, s, timeout, nccl.WithThreadSetup(nccl.DeviceThread(g)))
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
