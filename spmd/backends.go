package spmd

import (
	"context"
	"fmt"
	"net"
	"sync"
	"syscall"
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
	if err := checkOpenFiles(w.Size); err != nil {
		return nil, err
	}
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

// tcpFiles bounds the files a rank of an n-rank TCP world holds open at once: rank 0,
// while the mesh is built, a socket to every peer and the store's to every rank, beside
// the process's own (standard streams, the poller, listeners, its results file: about 12
// measured, and room for a library's).
func tcpFiles(n int) uint64 { return 2*uint64(n) + 32 }

// checkOpenFiles refuses a TCP world this process cannot hold the sockets of (Go raised
// the soft limit to the hard one at start): under `ulimit -n 16` a 4-rank job's rank 0
// could not accept its peers, and every rank failed after --timeout, "did not connect".
// Each rank checks rank 0's need, so that all of them say it at once.
func checkOpenFiles(n int) error {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur >= tcpFiles(n) {
		return nil
	}
	return LaunchError(fmt.Errorf("spmd: a %d-rank world over TCP holds up to %d files open on rank 0 (a socket to every rank, twice), over this process's limit of %d: raise it (ulimit -n %d) or use --backend mpi",
		n, tcpFiles(n), rl.Cur, tcpFiles(n)))
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
