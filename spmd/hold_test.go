package spmd

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestHoldStoreBindsOnce: two ranks open the TCP backend and then share rank 0's bytes,
// as `selftest comm` does, under HoldStore. Between the two, another process tries to
// bind the port (deterministically, in the window where rank 0 used to have let it go):
// the port is still rank 0's store, and the share goes through the same store. Without
// the hold the bind succeeded and rank 0's share failed naming the port, while rank 1
// waited out the timeout calling the port crowded (docs/hardening.md, twelfth pass).
func TestHoldStoreBindsOnce(t *testing.T) {
	warned := captureWarn(t)
	port := freePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	o := Options{Backend: "tcp", Timeout: 5 * time.Second}
	want := []byte("from rank 0")
	var (
		opened  sync.WaitGroup // both ranks have their communicator
		racerMu sync.Mutex
		racer   net.Listener // the other process, when it got the port
		raceErr error
	)
	opened.Add(2)
	errs := make([]error, 2)
	got := make([][]byte, 2)
	again := make([]*Store, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := envWorld(r, 2, port, "hold", Secret("t"))
			ctx, release := HoldStore(context.Background())
			defer func() { release(errs[r] == nil) }()
			cm, err := Open(ctx, w, o)
			opened.Done()
			if err != nil {
				errs[r] = err
				return
			}
			defer cm.Close()
			opened.Wait()
			if r == 0 {
				// Another process races for the port: the backend's store has done its work.
				ln, err := net.Listen("tcp", addr)
				racerMu.Lock()
				racer, raceErr = ln, err
				racerMu.Unlock()
			}
			var data []byte
			if r == 0 {
				data = want
			}
			if got[r], errs[r] = Share(ctx, w, o, "hold/share", data, len(want)); errs[r] != nil {
				return
			}
			st, srv, err := Bootstrap(ctx, w, o.timeout())
			if err != nil || srv != nil {
				t.Errorf("rank %d: a third bootstrap under the hold: %v, server %v", r, err, srv != nil)
			}
			again[r] = st
			if errs[r] == nil {
				errs[r] = cm.Barrier()
			}
		}()
	}
	wg.Wait()
	if racer != nil {
		racer.Close()
		t.Errorf("another process bound %s between the backend's bootstrap and the share: rank 0 let the port go", addr)
	} else if raceErr == nil {
		t.Errorf("the racer neither bound nor failed")
	}
	for r := range 2 {
		if errs[r] != nil || string(got[r]) != string(want) {
			t.Errorf("rank %d: %v, got %q", r, errs[r], got[r])
		}
		if again[r] == nil {
			t.Errorf("rank %d: no store from the third bootstrap", r)
		}
	}
	// Released: the port is free again, and no stranger was refused.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Errorf("after the hold's release the port is still taken: %v", err)
	} else {
		ln.Close()
	}
	if w := warned(); len(w) != 0 {
		t.Errorf("warnings: %q", w)
	}
}

// TestHoldStoreReleaseAlone: a hold under which nothing bootstrapped releases nothing, and
// twice is once; a world other than the held one gets a store of its own.
func TestHoldStoreReleaseAlone(t *testing.T) {
	_, release := HoldStore(context.Background())
	release(true)
	release(false)

	captureWarn(t)
	port, other := freePort(t), freePort(t)
	ctx, release := HoldStore(context.Background())
	w := envWorld(0, 1, port, "hold", Secret("t"))
	first, srv, err := Bootstrap(ctx, w, 5*time.Second)
	if err != nil || srv != nil {
		t.Fatalf("first bootstrap under the hold: %v, server %v", err, srv != nil)
	}
	w2 := envWorld(0, 1, other, "hold", Secret("t"))
	st, srv, err := Bootstrap(ctx, w2, 5*time.Second)
	if err != nil || st == first || srv == nil {
		t.Fatalf("another world under the hold: %v, same store %v, server %v", err, st == first, srv != nil)
	}
	st.Close()
	srv.Shutdown(time.Second)
	release(false)
	// The held store is closed: a request on it fails at once rather than hang.
	errc := make(chan error, 1)
	go func() { errc <- first.Barrier("after") }()
	select {
	case err := <-errc:
		if err == nil {
			t.Errorf("a barrier on a released store passed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a barrier on a released store hung")
	}
	// A bootstrap after release opens its own store again.
	st, srv, err = Bootstrap(ctx, w, 5*time.Second)
	if err != nil || srv == nil || st == first {
		t.Fatalf("after release: %v, server %v, same store %v", err, srv != nil, st == first)
	}
	st.Close()
	srv.Shutdown(time.Second)
}
