package spmd

import (
	"context"
	"fmt"
	"time"
)

// mpiShare is set by the MPI backend (build tag mpi): MPI_Bcast of n bytes from rank 0.
var mpiShare func(data []byte, n int, timeout time.Duration) ([]byte, error)

// Share gives every rank rank 0's n bytes (an NCCL unique id, say): data on rank 0,
// ignored elsewhere. When the chosen backend is MPI (an MPI launcher, MPI built in, o not
// forcing another) it is MPI_Bcast, on the MPI that the backend's Close finalizes;
// otherwise the TCP store at MasterAddr:MasterPort carries it under key, so a backend
// that is not MPI never starts MPI. Under a context of HoldStore it is the store the job
// already holds (the TCP backend's), not a second one on the same port. Every rank must
// call it.
func Share(ctx context.Context, w World, o Options, key string, data []byte, n int) ([]byte, error) {
	if w.Rank == 0 && len(data) != n {
		return nil, fmt.Errorf("spmd: share %s: rank 0 has %d bytes, not %d", key, len(data), n)
	}
	if w.Size == 1 {
		return append([]byte(nil), data...), nil
	}
	if Choose(w, o) == "mpi" && mpiShare != nil {
		b, err := mpiShare(data, n, o.timeout())
		if err != nil {
			return nil, fmt.Errorf("spmd: share %s over MPI: %w", key, err)
		}
		return b, nil
	}
	st, srv, err := Bootstrap(ctx, w, o.timeout())
	if err != nil {
		return nil, err
	}
	defer func() {
		st.Close()
		if srv != nil {
			srv.Shutdown(min(o.timeout(), 10*time.Second))
		}
	}()
	b, err := st.Broadcast(key, 0, data)
	if err == nil {
		err = st.Barrier(key + "/done") // rank 0 closes the store on return
	}
	if err == nil && len(b) != n {
		err = fmt.Errorf("got %d bytes, want %d", len(b), n)
	}
	if err != nil {
		return nil, fmt.Errorf("spmd: share %s: %w", key, err)
	}
	return b, nil
}
