package spmd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/tcp"
	"github.com/longca/longca/tensor"
)

// stranger connects to the store and reads its greeting, as any process could.
func stranger(t *testing.T, srv *StoreServer) (net.Conn, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	greet := make([]byte, len(storeMagic)+nonceBytes)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, greet); err != nil {
		t.Fatal(err)
	}
	return c, greet[len(storeMagic):]
}

// closedSoon says whether the server closes c within d (a read returns EOF or an error
// other than our own deadline).
func closedSoon(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return err == nil || !(errors.As(err, &ne) && ne.Timeout())
}

// TestStoreRefusesRequestsBeforeHello: a set sent before any hello is not stored (the
// issue: it was), the connection is dropped without an answer, and the ranks join as
// usual afterwards.
func TestStoreRefusesRequestsBeforeHello(t *testing.T) {
	srv := serveTest(t, testConfig(2, 5*time.Second))
	c, _ := stranger(t, srv)
	var b bytes.Buffer
	q := request{op: opSet, key: "tcp/addr/1", val: []byte("6.6.6.6:666")}
	q.write(&b)
	c.Write(b.Bytes()) // the store may drop the connection before it has all of it
	if !closedSoon(c, 2*time.Second) {
		t.Error("the store kept a connection that sent a set before its hello")
	}
	if srv.Held() != 0 {
		t.Errorf("the store holds %d bytes after an unauthenticated set", srv.Held())
	}
	sts := dialAll(t, srv, []int{0, 1}, 2, 5*time.Second)
	go sts[1].Set("k", []byte("v"))
	if v, err := sts[0].Get("k", 1); err != nil || string(v) != "v" {
		t.Errorf("ranks after the stranger: %q, %v", v, err)
	}
}

// TestStoreRefusesStrangersHello: a hello as rank 1 without the job's secret is refused
// (the issue: it was accepted as rank 1, passing barriers), and does not take rank 1;
// a rank of another job is refused with a line saying so, at once.
func TestStoreRefusesStrangersHello(t *testing.T) {
	cfg := testConfig(2, 5*time.Second)
	srv := serveTest(t, cfg)
	c, nonce := stranger(t, srv)
	// The stranger knows the job id and the protocol, not the secret.
	guess := storeKey(cfg.Job, nil)
	cn := randomBytes(nonceBytes)
	q := request{op: opHello, key: cfg.Job, rank: 1, arg: 2, val: append(cn, handshakeMAC(guess, "client", nonce, cn, cfg.Job, 1, 2, nil)...)}
	q.write(c)
	p, err := readReply(bufio.NewReader(c), 2)
	if err != nil || p.status != stErr || !strings.Contains(string(p.payload), "authentication failed") {
		t.Errorf("stranger's hello: status %d %q, %v", p.status, p.payload, err)
	}
	if !closedSoon(c, 2*time.Second) {
		t.Error("the store kept the stranger's connection")
	}
	// Rank 1 is still free, and the job runs.
	sts := dialAll(t, srv, []int{0, 1}, 2, 5*time.Second)
	if errs := parallel(sts, func(_ int, s *Store) error { return s.Barrier("b") }); errs[0] != nil || errs[1] != nil {
		t.Errorf("barrier after the stranger: %v", errs)
	}
	// A rank of another job (same port, same size) is told at once.
	other := cfg
	other.Job = "another-job"
	start := time.Now()
	_, err = DialStore(context.Background(), srv.Addr(), 1, other)
	if err == nil || !strings.Contains(err.Error(), "another job") || time.Since(start) > 2*time.Second {
		t.Errorf("rank of another job: %v after %s", err, time.Since(start))
	}
	// A rank with another secret too.
	other = cfg
	other.Secret = Secret("guess")
	if _, err := DialStore(context.Background(), srv.Addr(), 1, other); err == nil || !strings.Contains(err.Error(), "authentication failed") {
		t.Errorf("rank with another secret: %v", err)
	}
	for end := time.Now().Add(2 * time.Second); srv.Refused() < 3 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond) // the store counts a refusal once it has closed the connection
	}
	if srv.Refused() < 3 {
		t.Errorf("refused %d connections, want at least 3", srv.Refused())
	}
}

// TestStoreClientChecksTheStore: a client refuses a fake store that does not know the
// job's key, instead of trusting what it says.
func TestStoreClientChecksTheStore(t *testing.T) {
	fake, err := ServeStore([]string{"127.0.0.1:0"}, StoreConfig{Size: 2, Job: "test", Secret: Secret("not-it"), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	_, err = DialStore(context.Background(), fake.Addr(), 1, testConfig(2, time.Second))
	var pe *comm.PeerError
	if err == nil || !errors.As(err, &pe) || pe.Rank != 0 {
		t.Errorf("dial of a store without the secret: %v", err)
	}
	// Something that is not a store at all.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n" + strings.Repeat("x", 64)))
			time.Sleep(time.Second)
			c.Close()
		}
	}()
	if _, err := DialStore(context.Background(), ln.Addr().String(), 1, testConfig(2, time.Second)); err == nil || !strings.Contains(err.Error(), "does not speak") {
		t.Errorf("dial of another service: %v", err)
	}
}

// TestStoreBoundsSizes: a frame claiming 4 GB before the hello is refused before
// anything is allocated; an authenticated rank cannot grow the store past its bound.
func TestStoreBoundsSizes(t *testing.T) {
	cfg := testConfig(2, 5*time.Second)
	cfg.MaxBytes = 1 << 20
	srv := serveTest(t, cfg)
	c, _ := stranger(t, srv)
	var hdr [5]byte
	hdr[0] = opHello
	binary.LittleEndian.PutUint32(hdr[1:], 0xffffffff)
	c.Write(hdr[:])
	if !closedSoon(c, 2*time.Second) {
		t.Error("the store kept a connection announcing a 4 GB key")
	}
	sts := dialAll(t, srv, []int{0}, 2, 5*time.Second)
	big := make([]byte, 300<<10)
	var err error
	n := 0
	for ; n < 10 && err == nil; n++ {
		err = sts[0].Set("k"+string(rune('a'+n)), big)
	}
	if err == nil || !strings.Contains(err.Error(), "store full") || n != 4 {
		t.Errorf("after %d sets of 300 KiB into a 1 MiB store: %v", n, err)
	}
	if srv.Held() > cfg.MaxBytes {
		t.Errorf("store holds %d bytes, over its %d", srv.Held(), cfg.MaxBytes)
	}
	if err := sts[0].Set("huge", make([]byte, maxValue+1)); err == nil {
		t.Error("a value over the frame limit was sent")
	}
}

// TestStoreCapsClientTimeouts: a rank asking to wait 100 years is answered within the
// store's timeout (the issue: it hung rank 0 for ever), and Close does not wait on it.
func TestStoreCapsClientTimeouts(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv := serveTest(t, testConfig(2, timeout))
	st := dialAll(t, srv, []int{1}, 2, timeout)[0]
	st.timeout = 100 * 365 * 24 * time.Hour // what the client asks the server for
	st.conn.SetDeadline(time.Now().Add(5 * time.Second))
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		st.mu.Lock()
		defer st.mu.Unlock()
		q := request{op: opGet, key: "never", arg: int64(st.timeout)}
		q.write(st.w)
		st.w.Flush()
		p, err := readReply(st.r, 2)
		if err == nil && p.status != stTimeout {
			err = errors.New("not a timeout")
		}
		done <- err
	}()
	if err := <-done; err != nil || time.Since(start) > timeout+2*time.Second {
		t.Errorf("wait of 100 years: %v after %s", err, time.Since(start))
	}
	// A wait in flight when the store closes ends with the close.
	st2 := dialAll(t, srv, []int{0}, 2, time.Hour)[0]
	go st2.Barrier("never")
	time.Sleep(50 * time.Millisecond)
	start = time.Now()
	srv.Close()
	if el := time.Since(start); el > closeGrace+time.Second {
		t.Errorf("Close took %s with a rank waiting", el)
	}
}

// TestStoreIdleConnectionDoesNotDelay: an idle connection that never says hello does
// not hold up Shutdown (the issue: the job's start waited 10 s on it).
func TestStoreIdleConnectionDoesNotDelay(t *testing.T) {
	srv := serveTest(t, testConfig(2, 5*time.Second))
	stranger(t, srv) // connects, says nothing
	sts := dialAll(t, srv, []int{0, 1}, 2, 5*time.Second)
	parallel(sts, func(_ int, s *Store) error { return s.Barrier("done") })
	sts[0].Close()
	sts[1].Close()
	start := time.Now()
	srv.Shutdown(10 * time.Second)
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("Shutdown waited %s on an idle stranger", el)
	}
}

// TestBootstrapBlamesTheMissingRank: ranks 0, 1, 3 of 4 bootstrap, rank 0 first, the
// others later; rank 2 never comes. Every rank's error names rank 2 (the issue: ranks
// 1 and 3 blamed rank 0, which closed the store on its own timeout).
func TestBootstrapBlamesTheMissingRank(t *testing.T) {
	port := freePort(t)
	var wg sync.WaitGroup
	errs := map[int]error{}
	var mu sync.Mutex
	for _, r := range []int{0, 1, 3} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r != 0 {
				time.Sleep(200 * time.Millisecond)
			}
			w := World{Launcher: "torchrun", Rank: r, Size: 4, LocalSize: 4, LocalRank: r, MasterAddr: "127.0.0.1", MasterPort: port, Job: "j"}
			st, srv, err := Bootstrap(context.Background(), w, time.Second)
			if err == nil {
				st.Close()
				if srv != nil {
					srv.Close()
				}
			}
			mu.Lock()
			errs[r] = err
			mu.Unlock()
		}()
	}
	wg.Wait()
	for r, err := range errs {
		var pe *comm.PeerError
		if !errors.As(err, &pe) || pe.Rank != 2 {
			t.Errorf("rank %d: %v; want an error naming rank 2", r, err)
		}
	}
}

// TestBootstrapSeparatesJobs: two jobs of two ranks on one port (the second started
// while the first is bootstrapping) do not pair up: the second job's ranks fail at once
// saying so, and the first job completes.
func TestBootstrapSeparatesJobs(t *testing.T) {
	port := freePort(t)
	world := func(job string, r int) World {
		return World{Launcher: "slurm", Rank: r, Size: 2, LocalSize: 2, LocalRank: r, MasterPort: port, Job: job}
	}
	first := make(chan error, 1)
	go func() {
		st, srv, err := Bootstrap(context.Background(), world("job-a", 0), 5*time.Second)
		if err == nil {
			err = st.Barrier("end")
			st.Close()
			srv.Shutdown(time.Second)
		}
		first <- err
	}()
	time.Sleep(100 * time.Millisecond)
	_, _, err := Bootstrap(context.Background(), world("job-b", 1), 5*time.Second)
	// Refused, naming its own job but not the store's (item 6 of issue 23: a caller that
	// proved nothing learns nothing of the job).
	if err == nil || !strings.Contains(err.Error(), "another job") || strings.Contains(err.Error(), "job-a") {
		t.Errorf("job-b's rank 1: %v", err)
	}
	st, _, err := Bootstrap(context.Background(), world("job-a", 1), 5*time.Second)
	if err != nil {
		t.Fatalf("job-a's rank 1: %v", err)
	}
	if err := st.Barrier("end"); err != nil {
		t.Error(err)
	}
	st.Close()
	if err := <-first; err != nil {
		t.Errorf("job-a's rank 0: %v", err)
	}
}

// TestStoreListensNarrowly: with every rank on this node the store listens on the
// loopback only; across nodes on MASTER_ADDR's interface; everywhere only when
// MASTER_ADDR is not this host's.
func TestStoreListensNarrowly(t *testing.T) {
	ctx := context.Background()
	listen, dial, err := storeAddrs(ctx, World{Rank: 0, Size: 4, LocalSize: 4, MasterPort: 4000})
	if err != nil || len(listen) != 1 || listen[0] != "127.0.0.1:4000" || dial != "127.0.0.1:4000" {
		t.Errorf("one node: listen %v dial %s, %v", listen, dial, err)
	}
	listen, dial, err = storeAddrs(ctx, World{Rank: 0, Size: 16, LocalSize: 8, MasterAddr: "127.0.0.1", MasterPort: 4000})
	if err != nil || len(listen) != 1 || listen[0] != "127.0.0.1:4000" || dial != "127.0.0.1:4000" {
		t.Errorf("MASTER_ADDR of this host: listen %v dial %s, %v", listen, dial, err)
	}
	listen, _, err = storeAddrs(ctx, World{Rank: 0, Size: 16, LocalSize: 8, MasterAddr: "192.0.2.7", MasterPort: 4000})
	if err != nil || len(listen) != 1 || listen[0] != ":4000" {
		t.Errorf("MASTER_ADDR of another host: listen %v, %v", listen, err)
	}
	port := freePort(t)
	st, srv, err := Bootstrap(ctx, World{Rank: 0, Size: 1, LocalSize: 1, MasterPort: port, Job: "one"}, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	defer st.Close()
	for _, a := range srv.Addrs() {
		if h, _, _ := net.SplitHostPort(a); !net.ParseIP(h).IsLoopback() {
			t.Errorf("a one-node store listens on %s", a)
		}
	}
}

// TestJobIdentityAndToken: the job id comes from the launcher; the token from the
// environment or a file that only its owner can read.
func TestJobIdentityAndToken(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "3"}, "slurm:77.3"},
		{map[string]string{"PMIX_NAMESPACE": "prterun-h-1@1"}, "pmix_namespace:prterun-h-1@1"},
		{map[string]string{"OMPI_MCA_ess_base_jobid": "123"}, "ompi_mca_ess_base_jobid:123"},
		{map[string]string{"LONGCA_JOB_ID": "mine", "SLURM_JOB_ID": "77"}, "mine"},
		{map[string]string{}, ""},
	} {
		if got := jobID(envOf(c.env)); got != c.want {
			t.Errorf("%v: job %q, want %q", c.env, got, c.want)
		}
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "token")
	os.WriteFile(f, []byte("  abc123\n"), 0o644)
	if _, err := readToken(envOf(map[string]string{EnvTokenFile: f})); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("world-readable token file: %v", err)
	}
	os.Chmod(f, 0o600)
	if tok, err := readToken(envOf(map[string]string{EnvTokenFile: f})); err != nil || string(tok) != "abc123" {
		t.Errorf("token file: %q, %v", tok, err)
	}
	if _, err := readToken(envOf(map[string]string{EnvTokenFile: f, EnvToken: "x"})); err == nil {
		t.Error("both token variables: no error")
	}
	w, err := Discover(envOf(map[string]string{EnvToken: "sekrit", "SLURM_STEP_ID": "0", "SLURM_PROCID": "0", "SLURM_NTASKS": "1"}))
	if err != nil || string(w.Token) != "sekrit" {
		t.Fatalf("discover token: %v", err)
	}
	if s := fmt.Sprintf("%v %+v %#v %s", w, w, w, w.Token); strings.Contains(s, "sekrit") || strings.Contains(s, "115 101 107") {
		t.Errorf("the token prints: %s", s)
	}
}

// TestMeshRefusesStrangers: a stranger who connects to rank 0's peer socket during the
// bootstrap, claiming rank 1 without the job's key, and another who connects and stays
// silent, neither take rank 1 nor stall the job.
func TestMeshRefusesStrangers(t *testing.T) {
	cfg := testConfig(2, 5*time.Second)
	srv := serveTest(t, cfg)
	sts := dialAll(t, srv, []int{0, 1}, 2, 5*time.Second)
	type result struct {
		c   comm.Comm
		err error
	}
	res0 := make(chan result, 1)
	go func() {
		c, err := tcp.New(context.Background(), 0, 2, sts[0], "127.0.0.1", 5*time.Second)
		res0 <- result{c, err}
	}()
	addr, err := sts[1].Get("tcp/addr/0", 0)
	if err != nil {
		t.Fatal(err)
	}
	silent, err := net.Dial("tcp", string(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	liar, err := net.Dial("tcp", string(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer liar.Close()
	nonce := make([]byte, 32)
	io.ReadFull(liar, nonce)
	claim := make([]byte, 8+32)
	binary.LittleEndian.PutUint64(claim, 1)
	liar.Write(claim)
	start := time.Now()
	c1, err := tcp.New(context.Background(), 1, 2, sts[1], "127.0.0.1", 5*time.Second)
	if err != nil {
		t.Fatalf("rank 1: %v", err)
	}
	defer c1.Close()
	r0 := <-res0
	if r0.err != nil {
		t.Fatalf("rank 0: %v", r0.err)
	}
	defer r0.c.Close()
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("the mesh took %s with strangers on rank 0's socket", el)
	}
	h0, h1 := tensor.NewHost(tensor.FP64, 1), tensor.NewHost(tensor.FP64, 1)
	h0.Set(0, 1)
	h1.Set(0, 2)
	errs := make(chan error, 2)
	go func() { errs <- r0.c.AllReduce(h0, comm.Sum) }()
	go func() { errs <- c1.AllReduce(h1, comm.Sum) }()
	if e1, e2 := <-errs, <-errs; e1 != nil || e2 != nil || h0.At(0) != 3 || h1.At(0) != 3 {
		t.Errorf("all-reduce after the strangers: %v %v %v %v", e1, e2, h0.At(0), h1.At(0))
	}
}

// FuzzStoreConnection: whatever a connection sends, the store neither panics nor stores
// anything before a good hello, and still admits the job's ranks afterwards. It talks
// over in-memory pipes (a long fuzz over TCP would use up the host's ephemeral ports).
// Seeds: a set before the hello, a hello with a bad MAC, a 4 GB frame, garbage.
func FuzzStoreConnection(f *testing.F) {
	var set, hello bytes.Buffer
	(request{op: opSet, key: "k", val: []byte("v")}).write(&set)
	(request{op: opHello, key: "test", rank: 1, arg: 2, val: make([]byte, 64)}).write(&hello)
	f.Add(set.Bytes())
	f.Add(hello.Bytes())
	f.Add([]byte{opHello, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	cfg := testConfig(2, 2*time.Second)
	f.Fuzz(func(t *testing.T, data []byte) {
		srv, err := ServeStore(nil, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		c, server := net.Pipe()
		srv.take(server)
		c.SetDeadline(time.Now().Add(time.Second))
		io.ReadFull(c, make([]byte, len(storeMagic)+nonceBytes))
		c.Write(data) // the store may stop reading at any byte
		c.Close()
		if srv.Held() != 0 {
			t.Fatalf("the store holds %d bytes from a connection without the key", srv.Held())
		}
		rank, server := net.Pipe()
		srv.take(server)
		st := &Store{rank: 1, size: 2, timeout: cfg.Timeout, addr: "pipe", conn: rank, r: bufio.NewReader(rank), w: bufio.NewWriter(rank)}
		if err := st.hello(cfg); err != nil {
			t.Fatalf("rank 1 after the fuzz input: %v", err)
		}
		st.Close()
	})
}

// TestMasterAddrChecked: where the ranks span nodes and dial MASTER_ADDR, a value that can
// name no host is a launch error at once, naming the variable (the eleventh pass: every rank
// but rank 0 waited out --timeout, then named the dial); brackets are taken off; on one node
// (the store on the loopback) MASTER_ADDR is not checked, so a stale value in the shell
// does not stop a run that never dials it.
func TestMasterAddrChecked(t *testing.T) {
	ctx := context.Background()
	across := func(addr string) World {
		return World{Rank: 1, Size: 16, LocalSize: 8, LocalRank: 1, MasterAddr: addr, MasterPort: 4000}
	}
	for addr, want := range map[string]string{
		"node1:29500":                  "holds a port: set MASTER_ADDR=node1 and MASTER_PORT=29500",
		"[::1]:29500":                  "holds a port",
		"bad host!":                    "is not a host name or an IP address",
		"tcp://node1":                  "is not a host name or an IP address",
		"node1:abc":                    "is not a host name or an IP address",
		"fe80::1%eth0":                 "with a zone",
		strings.Repeat("a", 64) + ".x": "is not a host name",
	} {
		_, _, err := storeAddrs(ctx, across(addr))
		if err == nil || !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), "MASTER_ADDR") || !strings.Contains(err.Error(), want) {
			t.Errorf("MASTER_ADDR=%q: %v, want a launch error saying %q", addr, err, want)
		}
	}
	for addr, dial := range map[string]string{
		"[2001:db8::7]": "[2001:db8::7]:4000", "[10.0.0.1]": "10.0.0.1:4000", " node_01.cluster ": "node_01.cluster:4000",
		strings.Repeat("a.", 126) + "b.": strings.Repeat("a.", 126) + "b.:4000", // 253 characters and a final dot
	} {
		if _, got, err := storeAddrs(ctx, across(addr)); err != nil || got != dial {
			t.Errorf("MASTER_ADDR=%q: dial %q, %v; want %q", addr, got, err, dial)
		}
	}
	// each host's own loopback where the job's node list names several hosts (the ranks
	// elsewhere waited out --timeout dialling themselves); taken where it names one or
	// none (a world of several "nodes" on one host)
	for _, addr := range []string{"localhost", "LOCALHOST.", "127.0.0.1", "[::1]"} {
		w := across(addr)
		w.NodeList = "gpu[01-02]"
		if _, _, err := storeAddrs(ctx, w); err == nil || !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), "each host's own loopback") {
			t.Errorf("MASTER_ADDR=%q on nodes gpu[01-02]: %v, want a launch error naming the loopback", addr, err)
		}
		if w.NodeList = "gpu01"; addr == "127.0.0.1" {
			if _, _, err := storeAddrs(ctx, w); err != nil {
				t.Errorf("MASTER_ADDR=%q on one node: %v", addr, err)
			}
		}
	}
	if _, dial, err := storeAddrs(ctx, World{Rank: 1, Size: 2, LocalSize: 2, LocalRank: 1, MasterAddr: "bad host!", MasterPort: 4000}); err != nil || dial != "127.0.0.1:4000" {
		t.Errorf("one node, a stale MASTER_ADDR: dial %q, %v; want the loopback", dial, err)
	}
}
