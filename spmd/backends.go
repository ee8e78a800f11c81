package spmd

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/comm/tcp"
)

func init() {
	RegisterBackend("local", openLocal)
	RegisterBackend("tcp", openTCP)
}

// The store's key makes the TCP backend's peer connections prove themselves too.
var _ tcp.Keyed = (*Store)(nil)

// openLocal is the one-rank communicator.
func openLocal(_ context.Context, w World, o Options) (comm.Comm, error) {
	if w.Size != 1 {
		return nil, fmt.Errorf("the local backend runs one rank per process, and this world has %d: use --backend tcp or mpi", w.Size)
	}
	return local.New(1, local.WithTimeout(o.timeout()))[0], nil
}

// openTCP bootstraps through the store, builds the socket mesh, and lets the store go.
func openTCP(ctx context.Context, w World, o Options) (comm.Comm, error) {
	st, srv, err := Bootstrap(ctx, w, o.timeout())
	if err != nil {
		return nil, err
	}
	defer func() {
		st.Close()
		if srv != nil {
			// Rank 0 returns once the others have their last reply and hung up.
			srv.Shutdown(min(o.timeout(), 10*time.Second))
		}
	}()
	host := "127.0.0.1"
	if a, ok := st.LocalAddr().(*net.TCPAddr); ok {
		host = a.IP.String()
	}
	c, err := tcp.New(ctx, w.Rank, w.Size, st, host, o.timeout())
	if err != nil {
		return nil, err
	}
	// Rank 0 closes the store on return: wait until every rank is done with it.
	if err := st.Barrier("tcp/done"); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// LocalTCP opens n TCP communicators in this process over 127.0.0.1 (a store on an
// ephemeral port, one goroutine per rank): real sockets, for tests.
func LocalTCP(ctx context.Context, n int, timeout time.Duration) ([]comm.Comm, error) {
	cfg := StoreConfig{Size: n, Job: "local-tcp", Secret: randomBytes(32), Timeout: timeout}
	srv, err := ServeStore([]string{"127.0.0.1:0"}, cfg)
	if err != nil {
		return nil, err
	}
	defer srv.Shutdown(timeout)
	out := make([]comm.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := DialStore(ctx, srv.Addr(), r, cfg)
			if err != nil {
				errs[r] = err
				return
			}
			defer st.Close()
			c, err := tcp.New(ctx, r, n, st, "127.0.0.1", timeout)
			if err == nil {
				err = st.Barrier("tcp/done")
			}
			if err != nil {
				if c != nil {
					c.Close()
				}
				errs[r] = err
				return
			}
			out[r] = c
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			for _, c := range out {
				if c != nil {
					c.Close()
				}
			}
			return nil, fmt.Errorf("spmd: local tcp rank %d: %w", r, err)
		}
	}
	return out, nil
}
