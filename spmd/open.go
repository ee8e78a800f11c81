package spmd

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/longca/longca/comm"
)

// DefaultTimeout bounds every rendezvous and collective unless Options says otherwise.
const DefaultTimeout = 5 * time.Minute

// Options configures Open.
type Options struct {
	// Backend forces a communicator backend by name ("mpi", "tcp", "local", or one
	// registered later such as "nccl"); empty or "auto" picks one from the world.
	Backend string
	// Timeout bounds every rendezvous and collective; zero means DefaultTimeout.
	Timeout time.Duration
}

func (o Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return DefaultTimeout
	}
	return o.Timeout
}

// BackendFunc opens one rank's communicator of a backend.
type BackendFunc func(ctx context.Context, w World, o Options) (comm.Comm, error)

var (
	backendsMu sync.Mutex
	backends   = map[string]BackendFunc{}
)

// RegisterBackend adds a communicator backend under name, for Open to pick when
// Options.Backend names it. A GPU backend (NCCL) registers itself from its own package's
// init, bootstrapping its unique id with Bootstrap and Store.Broadcast.
func RegisterBackend(name string, f BackendFunc) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	backends[name] = f
}

// Backends lists the registered backend names, sorted.
func Backends() []string {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	var out []string
	for n := range backends {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Choose names the backend Open would use: o.Backend when set, else "mpi" under an MPI
// launcher when this binary has MPI, else "local" for one rank, else "tcp".
func Choose(w World, o Options) string {
	if o.Backend != "" && o.Backend != "auto" {
		return o.Backend
	}
	backendsMu.Lock()
	_, haveMPI := backends["mpi"]
	backendsMu.Unlock()
	switch {
	case w.MPI() && haveMPI:
		return "mpi"
	case w.Size == 1:
		return "local"
	}
	return "tcp"
}

// Open returns this rank's communicator over the whole world, from the backend Choose
// picks.
func Open(ctx context.Context, w World, o Options) (comm.Comm, error) {
	name := Choose(w, o)
	backendsMu.Lock()
	f, ok := backends[name]
	backendsMu.Unlock()
	if !ok {
		why := ""
		if name == "mpi" {
			why = " (this binary was built without MPI: rebuild with -tags mpi, i.e. make build on a machine with mpicc)"
		}
		return nil, fmt.Errorf("spmd: no communicator backend %q%s; have %s", name, why, strings.Join(Backends(), ", "))
	}
	c, err := f(ctx, w, o)
	if err != nil {
		return nil, fmt.Errorf("spmd: open %s backend for rank %d of %d: %w", name, w.Rank, w.Size, err)
	}
	return c, nil
}

// Bootstrap connects this rank to the TCP store at MasterAddr:MasterPort, which rank 0
// starts, and waits until every rank has joined. Close the store (and, on rank 0, the
// server) once the ranks need it no more. Ranks that do not join within the timeout are
// named in the error.
func Bootstrap(ctx context.Context, w World, timeout time.Duration) (*Store, *StoreServer, error) {
	host := w.MasterAddr
	if host == "" {
		if w.LocalSize < w.Size {
			return nil, nil, fmt.Errorf("spmd: MASTER_ADDR is not set and the %d ranks span several nodes (%d on this one): set it to rank 0's host (mpirun -x MASTER_ADDR=<host>)", w.Size, w.LocalSize)
		}
		host = "127.0.0.1" // every rank is on this node
	}
	addr := net.JoinHostPort(host, strconv.Itoa(w.MasterPort))
	var srv *StoreServer
	if w.Rank == 0 {
		var err error
		if srv, err = ServeStore(":"+strconv.Itoa(w.MasterPort), w.Size); err != nil {
			return nil, nil, err
		}
		addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(w.MasterPort))
	}
	st, err := DialStore(ctx, addr, w.Rank, w.Size, timeout)
	if err == nil {
		err = st.Barrier("join")
		if err != nil {
			st.Close()
		}
	}
	if err != nil {
		if srv != nil {
			srv.Close()
		}
		return nil, nil, fmt.Errorf("spmd: bootstrap via %s: %w", addr, err)
	}
	return st, srv, nil
}
