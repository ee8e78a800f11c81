//go:build mpi

package spmd

import (
	"context"
	"fmt"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/mpi"
)

func init() { RegisterBackend("mpi", openMPI) }

// openMPI initialises MPI and checks that MPI's world is the launcher's.
func openMPI(_ context.Context, w World, o Options) (comm.Comm, error) {
	c, err := mpi.World(o.timeout())
	if err != nil {
		return nil, err
	}
	if c.Rank() != w.Rank || c.Size() != w.Size {
		return nil, LaunchError(fmt.Errorf("MPI says rank %d of %d but the %s environment says %d of %d: start longca with the mpirun of the MPI it was built against, or give --backend tcp", c.Rank(), c.Size(), w.Launcher, w.Rank, w.Size))
	}
	return c, nil
}

func init() {
	mpiFinalize = mpi.Finalize
	mpiShare = func(data []byte, n int, timeout time.Duration) ([]byte, error) {
		c, err := mpi.World(timeout)
		if err != nil {
			return nil, err
		}
		b := make([]byte, n)
		copy(b, data)
		if err := c.Bcast(b, 0); err != nil {
			return nil, err
		}
		return b, nil
	}
}
