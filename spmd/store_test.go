package spmd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// testConfig is a store configuration of n ranks of job "test" with a secret.
func testConfig(n int, timeout time.Duration) StoreConfig {
	return StoreConfig{Size: n, Job: "test", Secret: Secret("s3cret"), Timeout: timeout}
}

// serveTest starts a store of cfg on the loopback, closed at the end of the test.
func serveTest(t *testing.T, cfg StoreConfig) *StoreServer {
	t.Helper()
	srv, err := ServeStore([]string{"127.0.0.1:0"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func dialAll(t *testing.T, srv *StoreServer, ranks []int, size int, timeout time.Duration) []*Store {
	t.Helper()
	out := make([]*Store, len(ranks))
	for i, r := range ranks {
		s, err := DialStore(context.Background(), srv.Addr(), r, testConfig(size, timeout))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		out[i] = s
	}
	return out
}

// parallel runs f on every store at once and returns the errors.
func parallel(sts []*Store, f func(i int, s *Store) error) []error {
	errs := make([]error, len(sts))
	var wg sync.WaitGroup
	for i, s := range sts {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(i, s) }()
	}
	wg.Wait()
	return errs
}

func TestStoreSetGetBroadcastBarrier(t *testing.T) {
	srv := serveTest(t, testConfig(4, 5*time.Second))
	sts := dialAll(t, srv, []int{0, 1, 2, 3}, 4, 5*time.Second)
	id := []byte("the 128-byte unique id, say")
	got := make([][]byte, 4)
	errs := parallel(sts, func(i int, s *Store) error {
		// Non-root ranks ask before the root sets: Get must wait, not fail.
		b, err := s.Broadcast("id", 0, map[bool][]byte{true: id}[i == 0])
		got[i] = b
		if err != nil {
			return err
		}
		if err := s.Set("v/"+strconv.Itoa(i), []byte{byte(10 * i)}); err != nil {
			return err
		}
		for p := range 4 {
			v, err := s.Get("v/"+strconv.Itoa(p), p)
			if err != nil || len(v) != 1 || v[0] != byte(10*p) {
				return fmt.Errorf("rank %d read %v, %v from rank %d", i, v, err, p)
			}
		}
		for k := range 3 {
			if err := s.Barrier("b" + strconv.Itoa(k)); err != nil {
				return err
			}
		}
		return nil
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", i, err)
		}
		if string(got[i]) != string(id) {
			t.Errorf("rank %d got %q", i, got[i])
		}
	}
}

// TestStoreMissingRank: ranks 0, 1, 3 of 4 arrive; each fails within the timeout with a
// PeerError naming rank 2 and wrapping ErrTimeout.
func TestStoreMissingRank(t *testing.T) {
	const timeout = 300 * time.Millisecond
	srv := serveTest(t, testConfig(4, timeout))
	sts := dialAll(t, srv, []int{0, 1, 3}, 4, timeout)
	start := time.Now()
	errs := parallel(sts, func(_ int, s *Store) error { return s.Barrier("join") })
	if el := time.Since(start); el > timeout+2*time.Second {
		t.Errorf("barrier took %s with a %s timeout", el, timeout)
	}
	for i, err := range errs {
		var pe *comm.PeerError
		if !errors.As(err, &pe) || pe.Rank != 2 || !errors.Is(err, comm.ErrTimeout) || !strings.Contains(err.Error(), "[2]") {
			t.Errorf("store %d: %v; want a timeout naming rank 2", i, err)
		}
	}
	// A value nobody sets: the error names its owner.
	_, err := sts[1].Get("never", 0)
	var pe *comm.PeerError
	if !errors.As(err, &pe) || pe.Rank != 0 || !errors.Is(err, comm.ErrTimeout) {
		t.Errorf("get of an unset key: %v", err)
	}
}

// TestStoreRankLeaves: rank 1 closes its connection while the others wait; they fail at
// once (well before the timeout), naming rank 1.
func TestStoreRankLeaves(t *testing.T) {
	srv := serveTest(t, testConfig(3, 30*time.Second))
	sts := dialAll(t, srv, []int{0, 1, 2}, 3, 30*time.Second)
	go func() {
		time.Sleep(100 * time.Millisecond)
		sts[1].Close()
	}()
	start := time.Now()
	errs := parallel([]*Store{sts[0], sts[2]}, func(_ int, s *Store) error { return s.Barrier("x") })
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("waited %s for a rank that left", el)
	}
	for i, err := range errs {
		var pe *comm.PeerError
		if !errors.As(err, &pe) || pe.Rank != 1 || !strings.Contains(err.Error(), "left") {
			t.Errorf("store %d: %v; want rank 1 named as gone", i, err)
		}
	}
}

func TestStoreNoServerAndDuplicate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens here now
	_, err = DialStore(context.Background(), addr, 1, testConfig(2, 200*time.Millisecond))
	var pe *comm.PeerError
	if !errors.As(err, &pe) || pe.Rank != 0 || !errors.Is(err, comm.ErrTimeout) {
		t.Errorf("dial without rank 0: %v", err)
	}
	srv := serveTest(t, testConfig(2, time.Second))
	dialAll(t, srv, []int{1}, 2, time.Second)
	if _, err := DialStore(context.Background(), srv.Addr(), 1, testConfig(2, time.Second)); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("second rank 1: %v", err)
	}
	if _, err := DialStore(context.Background(), srv.Addr(), 2, testConfig(2, time.Second)); err == nil || !strings.Contains(err.Error(), "outside") {
		t.Errorf("rank 2 of 2: %v", err)
	}
}

// freePort finds a TCP port nobody listens on now.
func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestOpenTCP opens the world through Open as separate ranks would (Bootstrap on a real
// port), checks an all-reduce, then has rank 2 close early: the others' next collective
// fails naming rank 2.
func TestOpenTCP(t *testing.T) {
	const n = 3
	port := freePort(t)
	comms := make([]comm.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := World{Launcher: "slurm", Rank: r, Size: n, LocalRank: r, LocalSize: n, MasterAddr: "127.0.0.1", MasterPort: port}
			comms[r], errs[r] = Open(context.Background(), w, Options{Timeout: 5 * time.Second})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	if Choose(World{Size: n}, Options{}) != "tcp" {
		t.Errorf("choose for %d ranks without MPI: %s", n, Choose(World{Size: n}, Options{}))
	}
	sums := make([]*tensor.Host, n)
	errs = make([]error, n)
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sums[r] = tensor.NewHost(tensor.FP64, 2)
			sums[r].Set(0, float64(r))
			sums[r].Set(1, 1)
			errs[r] = comms[r].AllReduce(sums[r], comm.Sum)
		}()
	}
	wg.Wait()
	for r := range n {
		if errs[r] != nil || sums[r].At(0) != 3 || sums[r].At(1) != 3 {
			t.Fatalf("rank %d: all-reduce %v, %v", r, errs[r], sums[r].Data)
		}
	}
	comms[2].Close()
	start := time.Now()
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = comms[r].Barrier()
		}()
	}
	wg.Wait()
	for r := range 2 {
		var pe *comm.PeerError
		if !errors.As(errs[r], &pe) || pe.Rank != 2 {
			t.Errorf("rank %d after rank 2 left: %v", r, errs[r])
		}
		comms[r].Close()
	}
	if el := time.Since(start); el > 4*time.Second {
		t.Errorf("noticing a closed rank took %s", el)
	}
}

// TestTCPHungRank: rank 1 never calls the collective; rank 0 fails within the timeout,
// naming rank 1.
func TestTCPHungRank(t *testing.T) {
	comms, err := LocalTCP(context.Background(), 2, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer comms[1].Close()
	defer comms[0].Close()
	buf := tensor.NewHost(tensor.FP32, 2)
	start := time.Now()
	err = comms[0].AllReduce(buf, comm.Max)
	var pe *comm.PeerError
	if !errors.As(err, &pe) || pe.Rank != 1 || !errors.Is(err, comm.ErrTimeout) {
		t.Errorf("all-reduce without rank 1: %v", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("took %s", el)
	}
}

// TestBootstrapNeedsMasterAcrossNodes: with ranks on several nodes and no MASTER_ADDR,
// Bootstrap says what to set instead of waiting for a store nobody can find.
func TestBootstrapNeedsMasterAcrossNodes(t *testing.T) {
	w := World{Launcher: "ompi", Rank: 1, Size: 16, LocalRank: 1, LocalSize: 8, MasterPort: freePort(t)}
	_, _, err := Bootstrap(context.Background(), w, time.Second)
	if err == nil || !strings.Contains(err.Error(), "MASTER_ADDR") {
		t.Errorf("multi-node without MASTER_ADDR: %v", err)
	}
}

func TestOpenUnknownBackend(t *testing.T) {
	_, err := Open(context.Background(), World{Size: 1, LocalSize: 1}, Options{Backend: "carrier-pigeon"})
	if err == nil || !strings.Contains(err.Error(), "carrier-pigeon") || !strings.Contains(err.Error(), "tcp") {
		t.Errorf("unknown backend: %v", err)
	}
	c, err := Open(context.Background(), World{Size: 1, LocalSize: 1}, Options{})
	if err != nil || c.Size() != 1 {
		t.Fatalf("one rank: %v", err)
	}
	c.Close()
}

// TestStoreCloseAfterLastBarrier: rank 0 closes the store as soon as its own barrier
// returns; every other rank must still get its reply (the race seen under srun).
func TestStoreCloseAfterLastBarrier(t *testing.T) {
	for i := range 30 {
		srv := serveTest(t, testConfig(4, 5*time.Second))
		sts := dialAll(t, srv, []int{0, 1, 2, 3}, 4, 5*time.Second)
		errs := parallel(sts, func(r int, s *Store) error {
			err := s.Barrier("done")
			if r == 0 {
				srv.Close()
			}
			return err
		})
		for r, err := range errs {
			if err != nil {
				t.Fatalf("round %d rank %d: %v", i, r, err)
			}
		}
	}
}

// TestShare: rank 0's bytes reach every rank through the store (no MPI launcher).
func TestShare(t *testing.T) {
	const n = 3
	port := freePort(t)
	id := []byte(strings.Repeat("id", 64))
	got := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := World{Launcher: "torchrun", Rank: r, Size: n, LocalSize: 1, MasterAddr: "127.0.0.1", MasterPort: port}
			var data []byte
			if r == 0 {
				data = id
			}
			got[r], errs[r] = Share(context.Background(), w, Options{Timeout: 5 * time.Second}, "nccl/id", data, len(id))
		}()
	}
	wg.Wait()
	for r := range n {
		if errs[r] != nil || string(got[r]) != string(id) {
			t.Errorf("rank %d: %v, %d bytes", r, errs[r], len(got[r]))
		}
	}
	w := World{Rank: 0, Size: 1, LocalSize: 1, MasterAddr: "127.0.0.1", MasterPort: port}
	if _, err := Share(context.Background(), w, Options{}, "k", []byte{1}, 2); err == nil || !strings.Contains(err.Error(), "not 2") {
		t.Errorf("rank 0 with the wrong byte count: %v", err)
	}
}
