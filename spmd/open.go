package spmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

func (o Options) timeout() time.Duration { return clampTimeout(o.Timeout, DefaultTimeout) }

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

// Bootstrap connects this rank to the TCP store that rank 0 starts, and waits until
// every rank has joined. Close the store (and, on rank 0, the server) once the ranks
// need it no more. Ranks that do not join within the timeout are named in the error.
//
// The store admits only ranks of this job (World.Job) that hold its secret: World.Token
// when the environment gives one, else, under an MPI launcher with MPI built in, a
// secret rank 0 draws and MPI_Bcast carries; with neither, the job id alone separates
// jobs. When every rank is on this node the store listens on the loopback only;
// otherwise on the interface MASTER_ADDR names (every interface only when MASTER_ADDR
// is not an address of this host).
//
// Under a context of HoldStore, the rank's first Bootstrap opens the store and later ones
// return it (without a server to shut down: the hold's release closes both).
func Bootstrap(ctx context.Context, w World, timeout time.Duration) (*Store, *StoreServer, error) {
	if h, ok := ctx.Value(holdKey{}).(*storeHold); ok {
		return h.bootstrap(ctx, w, timeout)
	}
	return bootstrap(ctx, w, timeout)
}

func bootstrap(ctx context.Context, w World, timeout time.Duration) (*Store, *StoreServer, error) {
	listen, dial, err := storeAddrs(ctx, w)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := storeConfig(w, timeout)
	if err != nil {
		return nil, nil, err
	}
	var srv *StoreServer
	if w.Rank == 0 {
		if srv, err = ServeStore(listen, cfg); err != nil {
			var be *bindError
			if errors.As(err, &be) {
				// Another process holds the port. If it is the store of another launch
				// with this job's key, claim rank 0 there, which ends that job too: this
				// job's other ranks may have joined it (docs/cluster.md, Security).
				claimRankZero(ctx, dial, cfg)
			}
			return nil, nil, err
		}
		dial = srv.Addr()
		if _, warned := warnedNoSecret.LoadOrStore(dial, true); !warned && len(cfg.Secret) == 0 {
			Warn(fmt.Sprintf("spmd: no shared secret for this job (%s unset, no MPI to share one): any process that can reach port %d and knows the job id %q can join as a rank; set %s (or %s) in every rank's environment, see docs/cluster.md#security", EnvToken, w.MasterPort, cfg.Job, EnvToken, EnvTokenFile))
		}
	}
	st, err := DialStore(ctx, dial, w.Rank, cfg)
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
		return nil, nil, fmt.Errorf("spmd: bootstrap via %s: %w", dial, err)
	}
	return st, srv, nil
}

// Warn prints a warning of the runtime (the CLI points it at its logger); by default
// one line on stderr.
var Warn = func(msg string) { fmt.Fprintln(os.Stderr, msg) }

// warnedNoSecret keeps the stores (by address) whose missing secret was warned of: a
// process that bootstraps twice (Share, then the backend) warns once.
var warnedNoSecret sync.Map

// bindError is a store that could not listen on its address.
type bindError struct {
	addr string
	err  error
}

func (e *bindError) Error() string {
	if errors.Is(e.err, syscall.EADDRINUSE) {
		return fmt.Sprintf("spmd: store: listen on %s: %v: another process holds the port (another job on it? choose another with MASTER_PORT); this job ends here rather than let its ranks join another job's store", e.addr, e.err)
	}
	// (EADDRNOTAVAIL, EINVAL, EACCES: the address, or a port below 1024)
	return fmt.Sprintf("spmd: store: listen on %s: %v: rank 0 cannot serve there: set MASTER_ADDR to an address of rank 0's host (or unset it on one node), and MASTER_PORT to a free port of 1024 or more", e.addr, e.err)
}

func (e *bindError) Unwrap() error { return e.err }

// Is makes a store that cannot bind a launch error (exit status 2, as the other launch
// settings): the fix is MASTER_PORT's or MASTER_ADDR's, not the run's.
func (e *bindError) Is(target error) bool { return target == ErrLaunch }

// claimRankZero says hello as rank 0 to whatever holds addr, for at most a few seconds.
// A store of another launch with this job's key takes a second rank 0 as two jobs on one
// port and ends its job; any other store refuses it, and nothing else is touched.
func claimRankZero(ctx context.Context, addr string, cfg StoreConfig) {
	cfg.Timeout = min(cfg.timeout(), 2*time.Second)
	cfg.launches = &launchCache{} // show no launch: this one never had a store
	if st, err := DialStore(ctx, addr, 0, cfg); err == nil {
		st.Close()
	}
}

// storeConfig is the store's configuration for this job: its id, its secret, the bound
// on every wait.
func storeConfig(w World, timeout time.Duration) (StoreConfig, error) {
	cfg := StoreConfig{Size: w.Size, Job: w.Job, Secret: w.Token, Timeout: timeout, launches: w.launches}
	if cfg.Job == "" {
		cfg.Job = "unnamed"
	}
	if len(cfg.Secret) == 0 {
		s, ok, err := mpiSecret(w, timeout)
		if err != nil {
			return cfg, err
		}
		if ok {
			cfg.Secret = s
		}
	}
	return cfg, nil
}

// storeAddrs are where rank 0's store listens and where the ranks dial it: the loopback
// when every rank is on this node (and MASTER_ADDR's interface too when it is one of
// this host's, for a rank that dials it); otherwise MASTER_ADDR's interface.
func storeAddrs(ctx context.Context, w World) (listen []string, dial string, err error) {
	port := strconv.Itoa(w.MasterPort)
	loop := net.JoinHostPort("127.0.0.1", port)
	if w.LocalSize >= w.Size {
		listen = []string{loop}
		for _, ip := range localIPs(ctx, w.MasterAddr) {
			if !ip.IsLoopback() {
				listen = append(listen, net.JoinHostPort(ip.String(), port))
			}
		}
		return listen, loop, nil
	}
	if w.MasterAddr == "" {
		return nil, "", LaunchError(fmt.Errorf("spmd: MASTER_ADDR is not set and the %d ranks span several nodes (%d on this one): set it to rank 0's host (mpirun -x MASTER_ADDR=<host>)", w.Size, w.LocalSize))
	}
	host, err := masterHost(w.MasterAddr)
	if err != nil {
		return nil, "", LaunchError(err)
	}
	// each host's own loopback, where the job's node list names several hosts: the ranks
	// on the others would dial themselves and wait out the timeout (a world that only
	// counts as several nodes, on one host, may still use it)
	if hosts, err := ExpandNodeList(w.NodeList); err == nil && len(hosts) > 1 && loopback(host) {
		return nil, "", LaunchError(fmt.Errorf("spmd: MASTER_ADDR=%s is each host's own loopback, but the job's nodes are %d hosts (%s): set it to rank 0's host name or address", w.MasterAddr, len(hosts), w.NodeList))
	}
	dial = net.JoinHostPort(host, port)
	for _, ip := range localIPs(ctx, host) {
		listen = append(listen, net.JoinHostPort(ip.String(), port))
	}
	if len(listen) == 0 {
		// MASTER_ADDR does not resolve to an address of this host (NAT, a DNS alias): the
		// store must listen everywhere, and only its handshake keeps strangers out.
		listen = []string{":" + port}
	}
	return listen, dial, nil
}

// masterHost checks MASTER_ADDR as a host name or an IP address where the ranks span
// several nodes and dial it, before any dial: a value that can name no host ("node1:29500",
// "bad host!") had every rank but rank 0 wait out --timeout and then name the dial, not the
// variable. Brackets around an address ("[::1]") are taken off. An IPv6 address with a zone
// (fe80::1%eth0) is refused: the zone names an interface of one host, and rank 0's store
// cannot listen on the address it resolves to. (On one node the store listens on the
// loopback, and MASTER_ADDR is not checked.)
func masterHost(v string) (string, error) {
	s := strings.TrimSpace(v)
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if _, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			s = s[1 : len(s)-1]
		}
	}
	if ip, err := netip.ParseAddr(s); err == nil {
		if ip.Zone() != "" {
			return "", fmt.Errorf("spmd: MASTER_ADDR=%q is an IPv6 address with a zone, which names an interface of one host: give rank 0's global address or its host name", v)
		}
		return s, nil
	}
	if h, p, err := net.SplitHostPort(s); err == nil && p != "" && strings.Trim(p, "0123456789") == "" {
		return "", fmt.Errorf("spmd: MASTER_ADDR=%q holds a port: set MASTER_ADDR=%s and MASTER_PORT=%s", v, h, p)
	}
	if !hostName(s) {
		return "", fmt.Errorf("spmd: MASTER_ADDR=%q is not a host name or an IP address: set it to rank 0's host (letters, digits, '-', '_' and '.', at most 253 characters)", v)
	}
	return s, nil
}

// loopback says whether host is this host's loopback: localhost (or a name under it) or
// a loopback address.
func loopback(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.IsLoopback()
}

// hostName says whether s can be a DNS host name: dot-separated labels of letters, digits,
// '-' and '_' (clusters name nodes with it), 1-63 characters each, 253 in all (a final dot
// aside).
func hostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// localIPs are the addresses host resolves to that belong to this machine.
func localIPs(ctx context.Context, host string) []net.IP {
	if host == "" {
		return nil
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return nil
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []net.IP
	seen := map[string]bool{}
	for _, ip := range ips {
		for _, a := range ifaddrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) && !seen[ip.String()] {
				seen[ip.String()] = true
				out = append(out, ip)
			}
		}
	}
	return out
}

// ErrLaunch marks an error of the launch's settings (its environment), found when the
// world opens rather than when it is discovered: bad input, which a command reports in one
// line with exit status 2, as Discover's errors.
var ErrLaunch = errors.New("launch settings")

// LaunchError marks err as ErrLaunch (errors.Is), its message unchanged.
func LaunchError(err error) error { return launchError{err} }

type launchError struct{ error }

func (e launchError) Unwrap() error        { return e.error }
func (e launchError) Is(target error) bool { return target == ErrLaunch }
