package nccl

import (
	"fmt"
	"sync"

	"github.com/longca/longca/comm"
)

// guard remembers the first failure of a communicator and aborts it exactly once: after
// a failure every later call fails at once with the first error, instead of enqueueing
// more work on a broken communicator.
//
// NCCL frees a communicator in ncclCommAbort and in ncclCommDestroy, so nothing may ask
// it anything (ncclCommGetAsyncError from the watchdog) during or after either: query
// runs such questions under a read lock that the abort takes for writing, and refuses
// them once the communicator has failed or is being destroyed (closing).
type guard struct {
	abort func() error // ncclCommAbort, or a fake; nil once disarmed

	once sync.Once
	mu   sync.Mutex
	err  error

	use     sync.RWMutex // held for reading by query, for writing by the abort
	closing bool         // set (under use) when the communicator is being destroyed
}

// fail records err as the communicator's failure (if it is the first), aborts the
// communicator the first time (unless it is being destroyed), and returns err.
func (g *guard) fail(err error) error {
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.mu.Unlock()
	g.once.Do(func() {
		g.use.Lock()
		defer g.use.Unlock()
		if g.abort == nil || g.closing {
			return
		}
		if aerr := g.abort(); aerr != nil {
			g.mu.Lock()
			g.err = fmt.Errorf("%w (and the abort failed: %v)", g.err, aerr)
			g.mu.Unlock()
		}
	})
	return err
}

// query runs fn (a question to the live communicator) and returns its answer, or
// asked false without running it when the communicator has failed (it was aborted,
// hence freed) or is being destroyed.
func (g *guard) query(fn func() (Result, error)) (r Result, err error, asked bool) {
	g.use.RLock()
	defer g.use.RUnlock()
	if g.closing || g.failed() {
		return Success, nil, false
	}
	r, err = fn()
	return r, err, true
}

// startClose marks the communicator as being destroyed: from now on no query reaches
// it and a failure (a destroy past the timeout) aborts nothing. It waits for a query in
// flight to return.
func (g *guard) startClose() {
	g.use.Lock()
	g.closing = true
	g.use.Unlock()
}

// check returns nil while the communicator is healthy, else an error naming the
// failure that broke it.
func (g *guard) check(op string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		return nil
	}
	return fmt.Errorf("nccl: %s on an aborted communicator (%w): %w", op, comm.ErrAborted, g.err)
}

// failed says whether the communicator has failed.
func (g *guard) failed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err != nil
}
