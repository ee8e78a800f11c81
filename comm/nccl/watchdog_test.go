package nccl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/longca/longca/comm"
)

// fakeTarget completes after doneAt polls (never when < 0) and reports asyncAt's
// error from that poll on (never when < 0).
type fakeTarget struct {
	doneAt, asyncAt int
	async           Result
	queryErr        error
	polls           atomic.Int32
}

func (f *fakeTarget) done() (bool, error) {
	n := int(f.polls.Add(1))
	if f.queryErr != nil {
		return false, f.queryErr
	}
	return f.doneAt >= 0 && n >= f.doneAt, nil
}

func (f *fakeTarget) asyncError() (Result, error) {
	if f.asyncAt >= 0 && int(f.polls.Load()) >= f.asyncAt {
		return f.async, nil
	}
	return InProgress, nil
}

func (f *fakeTarget) describe(r Result) error {
	return &Error{Op: "ncclCommGetAsyncError", Code: r, Msg: fmt.Sprintf("fake says %d", r), Last: "peer 3 closed its socket"}
}

// countingGuard counts aborts.
func countingGuard(aborts *atomic.Int32) *guard {
	return &guard{abort: func() error { aborts.Add(1); return nil }}
}

func TestWatchdogTimeoutAbortsOnce(t *testing.T) {
	for _, timeout := range []time.Duration{5 * time.Millisecond, 40 * time.Millisecond} {
		var aborts atomic.Int32
		w := watchdog{timeout: timeout, maxPoll: time.Millisecond, g: countingGuard(&aborts)}
		f := &fakeTarget{doneAt: -1, asyncAt: -1}
		start := time.Now()
		err := w.wait(context.Background(), "ncclAllGather", f)
		took := time.Since(start)
		if err == nil {
			t.Fatalf("timeout %v: an operation that never completes returned nil", timeout)
		}
		if !errors.Is(err, comm.ErrTimeout) {
			t.Errorf("timeout %v: error does not wrap comm.ErrTimeout: %v", timeout, err)
		}
		for _, want := range []string{"ncclAllGather", timeout.String(), "aborted"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("timeout %v: %q lacks %q", timeout, err, want)
			}
		}
		if took < timeout || took > timeout+2*time.Second {
			t.Errorf("timeout %v: gave up after %v", timeout, took)
		}
		if f.polls.Load() < spinPolls {
			t.Errorf("timeout %v: only %d polls", timeout, f.polls.Load())
		}
		// Later operations fail at once, naming the first failure, without aborting again.
		f2 := &fakeTarget{doneAt: 1, asyncAt: -1}
		err2 := w.wait(context.Background(), "ncclSend", f2)
		if err2 == nil || !strings.Contains(err2.Error(), "ncclSend on an aborted communicator") || !strings.Contains(err2.Error(), "ncclAllGather") {
			t.Errorf("after abort: %v", err2)
		}
		if f2.polls.Load() != 0 {
			t.Errorf("after abort the watchdog still polled %d times", f2.polls.Load())
		}
		if n := aborts.Load(); n != 1 {
			t.Errorf("timeout %v: abort called %d times, want 1", timeout, n)
		}
	}
}

func TestWatchdogAsyncError(t *testing.T) {
	for _, code := range []Result{SystemError, RemoteError, InternalError, UnhandledCudaError} {
		var aborts atomic.Int32
		w := watchdog{timeout: time.Minute, g: countingGuard(&aborts)}
		f := &fakeTarget{doneAt: -1, asyncAt: 100, async: code}
		start := time.Now()
		err := w.wait(context.Background(), "ncclReduceScatter", f)
		if time.Since(start) > 10*time.Second {
			t.Errorf("%v: took %v with a one-minute timeout", code, time.Since(start))
		}
		var ne *Error
		if !errors.As(err, &ne) || ne.Code != code {
			t.Fatalf("%v: error %v does not carry the code", code, err)
		}
		for _, want := range []string{"ncclReduceScatter", code.Name(), fmt.Sprintf("fake says %d", code), "peer 3 closed its socket", "aborted"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%v: %q lacks %q", code, err, want)
			}
		}
		if errors.Is(err, comm.ErrTimeout) {
			t.Errorf("%v: an asynchronous error reads as a timeout", code)
		}
		if got := f.polls.Load(); got != 100 {
			t.Errorf("%v: stopped after %d polls, want 100 (the first with the error)", code, got)
		}
		if aborts.Load() != 1 {
			t.Errorf("%v: %d aborts", code, aborts.Load())
		}
	}
}

func TestWatchdogCompletes(t *testing.T) {
	for _, doneAt := range []int{1, 2, spinPolls, spinPolls + 20} {
		var aborts atomic.Int32
		w := watchdog{timeout: 10 * time.Second, g: countingGuard(&aborts)}
		// InProgress is the normal state of a busy communicator, not an error.
		f := &fakeTarget{doneAt: doneAt, asyncAt: 1, async: InProgress}
		if err := w.wait(context.Background(), "ncclAllReduce", f); err != nil {
			t.Fatalf("doneAt %d: %v", doneAt, err)
		}
		if got := int(f.polls.Load()); got != doneAt {
			t.Errorf("doneAt %d: %d polls", doneAt, got)
		}
		if aborts.Load() != 0 {
			t.Errorf("doneAt %d: aborted a healthy communicator", doneAt)
		}
	}
}

func TestWatchdogCancelAndQueryError(t *testing.T) {
	var aborts atomic.Int32
	w := watchdog{g: countingGuard(&aborts)} // no deadline: only the context stops it
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	err := w.wait(ctx, "ncclRecv of 64 B from rank 1", &fakeTarget{doneAt: -1, asyncAt: -1})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "ncclRecv of 64 B from rank 1") {
		t.Errorf("cancel: %v", err)
	}
	if aborts.Load() != 1 {
		t.Errorf("cancel: %d aborts", aborts.Load())
	}

	var aborts2 atomic.Int32
	w2 := watchdog{timeout: time.Minute, g: countingGuard(&aborts2)}
	qerr := errors.New("cuStreamQuery: CUDA_ERROR_ILLEGAL_ADDRESS")
	err = w2.wait(context.Background(), "ncclAllGather", &fakeTarget{doneAt: -1, asyncAt: -1, queryErr: qerr})
	if !errors.Is(err, qerr) || !strings.Contains(err.Error(), "ncclAllGather") {
		t.Errorf("query error: %v", err)
	}
	if aborts2.Load() != 1 {
		t.Errorf("query error: %d aborts", aborts2.Load())
	}
}

func TestGuardAbortFailure(t *testing.T) {
	g := &guard{abort: func() error { return errors.New("abort refused") }}
	first := errors.New("first failure")
	if err := g.fail(first); err != first {
		t.Errorf("fail returned %v", err)
	}
	g.fail(errors.New("second failure"))
	err := g.check("ncclSend")
	if err == nil || !strings.Contains(err.Error(), "first failure") || !strings.Contains(err.Error(), "abort refused") || strings.Contains(err.Error(), "second") {
		t.Errorf("check = %v", err)
	}
	if !errors.Is(err, first) {
		t.Error("check does not wrap the first failure")
	}
}
