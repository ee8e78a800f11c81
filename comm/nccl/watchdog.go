package nccl

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/longca/longca/comm"
)

// target is what the watchdog polls while one operation is outstanding.
type target interface {
	// done says whether the operation has completed (a host call returned, or the
	// stream it was enqueued on is idle).
	done() (bool, error)
	// asyncError is the communicator's asynchronous state (ncclCommGetAsyncError).
	asyncError() (Result, error)
	// describe turns an asynchronous error code into an error saying what NCCL said.
	describe(r Result) error
}

// watchdog waits for operations with a deadline, aborting the communicator (through
// its guard) when NCCL reports an asynchronous error, when the deadline passes, or when
// the context is cancelled.
type watchdog struct {
	timeout time.Duration // how long one operation may take; <= 0 means no deadline
	maxPoll time.Duration // the longest sleep between polls
	spin    time.Duration // how long to poll without sleeping first
	g       *guard
}

// spinPolls are the fewest polls that only yield, however short the spin time.
const spinPolls = 64

// defaultSpin is how long the watchdog polls without sleeping: a benchmark's
// communication must be seen done within microseconds, not a sleep later.
const defaultSpin = 2 * time.Millisecond

// wait polls t until it completes or fails. op names the operation in the error.
func (w *watchdog) wait(ctx context.Context, op string, t target) error {
	if err := w.g.check(op); err != nil {
		return err
	}
	start := time.Now()
	sleep := 5 * time.Microsecond
	maxPoll := w.maxPoll
	if maxPoll <= 0 {
		maxPoll = 200 * time.Microsecond
	}
	spin := w.spin
	if spin == 0 {
		spin = defaultSpin
	}
	for i := 0; ; i++ {
		ok, err := t.done()
		if err != nil {
			return w.g.fail(fmt.Errorf("nccl: %s: waiting for completion: %w; communicator aborted", op, err))
		}
		if ok {
			return nil
		}
		// The communicator is asked only while it lives: after an abort (another
		// goroutine's Abort, or a peer failure seen there) it is freed, and while it is
		// being destroyed only completion and the deadline count.
		r, err, asked := w.g.query(t.asyncError)
		if !asked {
			if err := w.g.check(op); err != nil {
				return err
			}
		} else if err != nil {
			return w.g.fail(fmt.Errorf("nccl: %s: %w; communicator aborted", op, err))
		} else if r != Success && r != InProgress {
			return w.g.fail(fmt.Errorf("nccl: %s failed asynchronously: %w; communicator aborted", op, t.describe(r)))
		}
		if w.timeout > 0 && time.Since(start) >= w.timeout {
			return w.g.fail(fmt.Errorf("nccl: %s not complete after %v (a peer rank died, hangs, or called a different operation): %w; communicator aborted", op, w.timeout, comm.ErrTimeout))
		}
		if err := ctx.Err(); err != nil {
			return w.g.fail(fmt.Errorf("nccl: %s: %w; communicator aborted", op, err))
		}
		if i < spinPolls || time.Since(start) < spin {
			runtime.Gosched()
			continue
		}
		if w.timeout > 0 {
			if left := w.timeout - time.Since(start); left < sleep {
				sleep = max(left, time.Microsecond)
			}
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, maxPoll)
	}
}
