package nccl

import (
	"fmt"
	"sync"
)

// guard remembers the first failure of a communicator and aborts it exactly once: after
// a failure every later call fails at once with the first error, instead of enqueueing
// more work on a broken communicator.
type guard struct {
	abort func() error // ncclCommAbort, or a fake

	once sync.Once
	mu   sync.Mutex
	err  error
}

// fail records err as the communicator's failure (if it is the first), aborts the
// communicator the first time, and returns err.
func (g *guard) fail(err error) error {
	g.mu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.mu.Unlock()
	g.once.Do(func() {
		if g.abort == nil {
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

// check returns nil while the communicator is healthy, else an error naming the
// failure that broke it.
func (g *guard) check(op string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		return nil
	}
	return fmt.Errorf("nccl: %s on an aborted communicator: %w", op, g.err)
}

// failed says whether the communicator has failed.
func (g *guard) failed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err != nil
}
