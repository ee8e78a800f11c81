package session

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/spmd"
)

// racingOut is rank 0's stdout under --verbose: at the first case's line (the
// communicator is open, the comm cases are under way, the share test is still to come)
// another process tries to bind the store's port, and keeps it when it can.
type racingOut struct {
	bytes.Buffer
	addr  string
	tried bool
	taken net.Listener
}

func (o *racingOut) Write(p []byte) (int, error) {
	if !o.tried {
		o.tried = true
		if ln, err := net.Listen("tcp", o.addr); err == nil {
			o.taken = ln
		}
	}
	return o.Buffer.Write(p)
}

// TestSelftestCommBindsTheStoreOnce: a 2-rank `selftest comm --verbose` over TCP, and
// another process that tries to bind the store's port after the first comm case, before
// the share test. The job opens its store once (the backend's, which the share test uses
// again), so the port is still rank 0's and every case passes. When the share test opened
// the store a second time, the port was free there: the other process took it, rank 0's
// share failed naming the port, and rank 1 waited out --timeout calling it crowded
// (docs/hardening.md, twelfth pass).
func TestSelftestCommBindsTheStoreOnce(t *testing.T) {
	var warnMu sync.Mutex
	var warns []string
	old := spmd.Warn
	spmd.Warn = func(m string) { warnMu.Lock(); warns = append(warns, m); warnMu.Unlock() }
	t.Cleanup(func() { spmd.Warn = old })

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	racer := &racingOut{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
	outs := []interface {
		Write([]byte) (int, error)
		String() string
	}{racer, &bytes.Buffer{}}

	o := spmd.Options{Backend: "tcp", Timeout: 5 * time.Second}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := spmd.World{Launcher: "torchrun", Rank: r, Size: 2, LocalRank: r, LocalSize: 2,
				MasterAddr: "127.0.0.1", MasterPort: port, Job: "selftest-once", Token: spmd.Secret("t")}
			s := &Session{Bench: "selftest", World: w, Stdout: outs[r], Stderr: &bytes.Buffer{}}
			errs[r] = s.SelftestComm(context.Background(), o, -1, true)
		}()
	}
	wg.Wait()
	if !racer.tried {
		t.Fatal("rank 0 printed no case: the other process never tried the port")
	}
	if racer.taken != nil {
		racer.taken.Close()
		t.Errorf("another process bound port %d during the job: rank 0 had let it go", port)
	}
	for r := range 2 {
		out := outs[r].String()
		if errs[r] != nil || !strings.Contains(out, " 0 failed, 0 not run") { // (the share test counted among the cases)
			t.Errorf("rank %d: %v; printed %q", r, errs[r], out)
		}
	}
	warnMu.Lock()
	defer warnMu.Unlock()
	if len(warns) != 0 {
		t.Errorf("warnings: %q", warns)
	}
}
