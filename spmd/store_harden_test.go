package spmd

// Tests of issue 23, items 1 to 6: the store under a second adversarial pass.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// captureWarn collects spmd.Warn's lines during the test.
func captureWarn(t *testing.T) func() []string {
	t.Helper()
	var mu sync.Mutex
	var lines []string
	old := Warn
	Warn = func(m string) { mu.Lock(); lines = append(lines, m); mu.Unlock() }
	t.Cleanup(func() { Warn = old })
	return func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), lines...) }
}

// envWorld is rank r of an env launch (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) of
// size ranks, as its own process: with its own launch cache.
func envWorld(r, size, port int, job string, tok Secret) World {
	return World{Launcher: "torchrun", Rank: r, Size: size, LocalSize: size, LocalRank: r,
		MasterAddr: "127.0.0.1", MasterPort: port, Job: job, Token: tok, launches: &launchCache{}}
}

// bootstrapAll bootstraps worlds at once (rank 0 first, given a head start), runs then
// on each joined rank, and returns each rank's error.
func bootstrapAll(ws []World, timeout time.Duration, then func(i int, st *Store) error) []error {
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if w.Rank != 0 {
				time.Sleep(50 * time.Millisecond)
			}
			st, srv, err := Bootstrap(context.Background(), w, timeout)
			if err == nil && then != nil {
				err = then(i, st)
			}
			if st != nil {
				st.Close()
			}
			if srv != nil {
				srv.Shutdown(time.Second)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return errs
}

// TestStoreWarnsWithoutSecret (item 1): rank 0 of a launch without a secret warns once
// (however often it bootstraps), naming who can join and LONGCA_JOB_TOKEN; with a token,
// nothing is said.
func TestStoreWarnsWithoutSecret(t *testing.T) {
	lines := captureWarn(t)
	port := freePort(t)
	ws := []World{envWorld(0, 2, port, "", nil), envWorld(1, 2, port, "", nil)}
	for range 2 { // a process bootstraps twice (Share without a held store, then the backend): one warning
		if errs := bootstrapAll(ws, 5*time.Second, nil); errs[0] != nil || errs[1] != nil {
			t.Fatal(errs)
		}
	}
	got := lines()
	if len(got) != 1 || !strings.Contains(got[0], "any process that can reach port") || !strings.Contains(got[0], EnvToken+" ") || strings.Contains(got[0], "\n") {
		t.Errorf("warnings without a secret: %q; want one line naming who can join and %s", got, EnvToken)
	}
	port = freePort(t)
	errs := bootstrapAll([]World{envWorld(0, 2, port, "", Secret("t")), envWorld(1, 2, port, "", Secret("t"))}, 5*time.Second, nil)
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	if got := lines(); len(got) != 1 {
		t.Errorf("a launch with a token warned: %q", got[1:])
	}
}

// TestTwoLaunchesNeverMix (item 2): two env launches without a token or job id on one
// port. A duplicate rank ends both; a different world size ends both; a rank 0 that
// cannot bind ends its own job and the job that holds the port; and in a later bootstrap
// (Share, then the backend) a rank of launch A never joins launch B's store.
func TestTwoLaunchesNeverMix(t *testing.T) {
	captureWarn(t)
	t.Run("duplicate rank", func(t *testing.T) {
		port := freePort(t)
		a0, a1, b1 := envWorld(0, 2, port, "", nil), envWorld(1, 2, port, "", nil), envWorld(1, 2, port, "", nil)
		errs := bootstrapAll([]World{a0, a1}, 5*time.Second, func(i int, st *Store) error {
			if i == 1 {
				// B's rank 1 arrives while A still holds the store.
				_, _, err := Bootstrap(context.Background(), b1, 5*time.Second)
				if err == nil || !strings.Contains(err.Error(), "joined twice") {
					t.Errorf("B's rank 1: %v; want it refused as a second rank 1", err)
				}
			}
			return st.Barrier("after")
		})
		for i, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "joined twice") {
				t.Errorf("A's rank %d: %v; want the job ended (a second rank 1)", i, err)
			}
		}
	})
	t.Run("world size", func(t *testing.T) {
		port := freePort(t)
		errs := bootstrapAll([]World{envWorld(0, 3, port, "", nil), envWorld(1, 3, port, "", nil), envWorld(1, 2, port, "", nil)}, 3*time.Second, nil)
		// Rank 0 and the stranger's rank are told why; the 3-rank job's rank 1 is told
		// so too, or, when it comes after rank 0 has ended the job and left, finds no
		// store: either way no rank runs.
		for i, err := range errs {
			if err == nil || i != 1 && !strings.Contains(err.Error(), "2-rank job") {
				t.Errorf("process %d: %v; want every rank refused (a 2-rank job's rank reached a 3-rank job)", i, err)
			}
		}
	})
	t.Run("rank 0 cannot bind", func(t *testing.T) {
		port := freePort(t)
		errs := bootstrapAll([]World{envWorld(0, 2, port, "", nil), envWorld(1, 2, port, "", nil)}, 5*time.Second, func(i int, st *Store) error {
			if i == 1 {
				_, _, err := Bootstrap(context.Background(), envWorld(0, 2, port, "", nil), 5*time.Second)
				if err == nil || !strings.Contains(err.Error(), "this job ends here") {
					t.Errorf("B's rank 0: %v; want it to end its job", err)
				}
			}
			return st.Barrier("after")
		})
		for i, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "rank 0 joined twice") {
				t.Errorf("A's rank %d: %v; want the job ended by B's rank 0", i, err)
			}
		}
	})
	t.Run("later bootstrap", func(t *testing.T) {
		// Each launch bootstraps once on its own (one after the other), then B's rank 0
		// serves a second store that A's rank 1 reaches first.
		port := freePort(t)
		a := []World{envWorld(0, 2, port, "", nil), envWorld(1, 2, port, "", nil)}
		b := []World{envWorld(0, 2, port, "", nil), envWorld(1, 2, port, "", nil)}
		for _, ws := range [][]World{a, b} {
			if errs := bootstrapAll(ws, 5*time.Second, nil); errs[0] != nil || errs[1] != nil {
				t.Fatal(errs)
			}
		}
		errs := bootstrapAll([]World{b[0], a[1]}, 2*time.Second, func(_ int, st *Store) error {
			_, err := st.Broadcast("who", 0, []byte("B"))
			return err
		})
		if errs[1] == nil || !strings.Contains(errs[1].Error(), "another launch") {
			t.Errorf("A's rank 1 at B's store: %v; want it refused as another launch", errs[1])
		}
		if errs[0] == nil {
			t.Errorf("B's rank 0 ran with A's rank 1")
		}
	})
}

// TestStoreFloodDoesNotStarveRanks (item 3): 300 connections that never say hello do
// not keep the ranks out (the issue: past 72 every rank failed, blaming rank 0), and a
// rank that never comes is reported with the flood named as what else happened.
func TestStoreFloodDoesNotStarveRanks(t *testing.T) {
	cfg := testConfig(2, 5*time.Second)
	srv := serveTest(t, cfg)
	flood := func(n int) {
		for range n {
			c, err := net.Dial("tcp", srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
		}
	}
	flood(300)
	start := time.Now()
	sts := make([]*Store, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sts[r], errs[r] = DialStore(context.Background(), srv.Addr(), r, cfg)
			if errs[r] == nil {
				errs[r] = sts[r].Barrier("join")
				sts[r].Close()
			}
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("ranks behind a flood of 300 silent connections: %v", errs)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("the ranks took %s to join behind the flood", el)
	}

	// A rank that never comes while the port is flooded: rank 0's error says both.
	cfg = testConfig(2, 500*time.Millisecond)
	srv = serveTest(t, cfg)
	flood(100)
	st, err := DialStore(context.Background(), srv.Addr(), 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.Barrier("join")
	var pe *comm.PeerError
	if !errors.As(err, &pe) || pe.Rank != 1 || !strings.Contains(err.Error(), "connections that did not say hello") {
		t.Errorf("rank 0 waiting behind a flood: %v; want rank 1 named and the flood said", err)
	}
}

// TestStoreHugeTimeout (item 4): --timeout 2562047h47m16s (the largest Duration) on a
// two-rank store works (the issue: rank 0 failed at once with an i/o timeout, its
// deadline arithmetic overflowed).
func TestStoreHugeTimeout(t *testing.T) {
	captureWarn(t)
	huge := time.Duration(1<<63 - 1)
	port := freePort(t)
	errs := bootstrapAll([]World{envWorld(0, 2, port, "j", nil), envWorld(1, 2, port, "j", nil)}, huge, func(_ int, st *Store) error {
		b, err := st.Broadcast("k", 0, []byte("v"))
		if err == nil && string(b) != "v" {
			t.Errorf("broadcast gave %q", b)
		}
		if err == nil {
			err = st.Barrier("end")
		}
		return err
	})
	if errs[0] != nil || errs[1] != nil {
		t.Errorf("a store under --timeout %s: %v", huge, errs)
	}
	if got := (Options{Timeout: huge}).timeout(); got != MaxTimeout {
		t.Errorf("Options timeout %s, want it clamped to %s", got, MaxTimeout)
	}
}

// TestStoreMissingListBounded (item 5): WORLD_SIZE=200000 with only rank 0 there: the
// error lists the first ranks and a count (the issue: one 1.29 MB line).
func TestStoreMissingListBounded(t *testing.T) {
	cfg := testConfig(200000, 300*time.Millisecond)
	srv := serveTest(t, cfg)
	st, err := DialStore(context.Background(), srv.Addr(), 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	err = st.Barrier("join")
	var pe *comm.PeerError
	if !errors.As(err, &pe) || pe.Rank != 1 || len(err.Error()) > 400 || !strings.Contains(err.Error(), "(199999 in all)") {
		t.Errorf("%d-byte error: %.500v; want rank 1 named, the count, under 400 bytes", len(err.Error()), err)
	}
}

// TestStoreMessages (item 6): a refusal tells a caller that proved nothing no job id; a
// rank 0 whose rank 1 holds another token says the hello was refused, not only that
// rank 1 did not arrive; a rank whose peer relays the death of another blames the dead
// rank, not the relay.
func TestStoreMessages(t *testing.T) {
	cfg := testConfig(2, time.Second)
	cfg.Job = "secret-job-name"
	srv := serveTest(t, cfg)
	other := cfg
	other.Job, other.Secret = "guess", nil
	_, err := DialStore(context.Background(), srv.Addr(), 1, other)
	if err == nil || strings.Contains(err.Error(), "secret-job-name") {
		t.Errorf("refusal to a stranger: %v; want no job id in it", err)
	}
	st0, err := DialStore(context.Background(), srv.Addr(), 0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st0.Close()
	wrong := cfg
	wrong.Secret = Secret("another token")
	if _, err := DialStore(context.Background(), srv.Addr(), 1, wrong); err == nil || !strings.Contains(err.Error(), "hello refused") {
		t.Errorf("rank 1 with another token: %v", err)
	}
	err = st0.Barrier("join")
	if err == nil || !strings.Contains(err.Error(), "claiming rank 1 was refused") {
		t.Errorf("rank 0 when rank 1's hello was refused: %v; want the refusal said", err)
	}

	// Rank 2 of 3 dies; rank 0 sees it and gives up; rank 1, waiting on rank 0, blames
	// rank 2.
	comms, err := LocalTCP(context.Background(), 3, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer comms[0].Close()
	defer comms[1].Close()
	comms[2].Close()
	buf := tensor.NewHost(tensor.FP32, 4)
	var pe *comm.PeerError
	if err := comms[0].Recv(buf, 2); !errors.As(err, &pe) || pe.Rank != 2 {
		t.Fatalf("rank 0 receiving from the closed rank 2: %v", err)
	}
	err = comms[1].Recv(buf, 0)
	if !errors.As(err, &pe) || pe.Rank != 2 || !strings.Contains(err.Error(), "rank 0 gave up after it lost rank 2") {
		t.Errorf("rank 1 after rank 0 gave up on rank 2: %v; want rank 2 blamed", err)
	}
}

// TestStoreSaysItRefusedStrangers: connections refused while the job went on are said in
// one line when the store shuts down (they were said nowhere, the twelfth pass); a job
// without strangers says nothing.
func TestStoreSaysItRefusedStrangers(t *testing.T) {
	for _, strangers := range []int{0, 3} {
		lines := captureWarn(t)
		srv := serveTest(t, testConfig(2, 5*time.Second))
		for range strangers {
			c, err := net.Dial("tcp", srv.Addr())
			if err != nil {
				t.Fatal(err)
			}
			c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
			io.Copy(io.Discard, c) // until the store drops it
			c.Close()
		}
		for _, s := range dialAll(t, srv, []int{0, 1}, 2, 5*time.Second) {
			s.Close()
		}
		srv.Shutdown(time.Second)
		var said []string
		for _, l := range lines() {
			if strings.Contains(l, "did not say this job's hello") {
				said = append(said, l)
			}
		}
		switch {
		case strangers == 0 && len(said) > 0:
			t.Errorf("no strangers, yet: %q", said)
		case strangers > 0 && (len(said) != 1 || !strings.Contains(said[0], fmt.Sprintf("refused %d connections", strangers))):
			t.Errorf("%d strangers: %q; want one line saying so", strangers, said)
		}
	}
}
