package nccl

import (
	"runtime"
	"sync/atomic"
)

// worker runs a communicator's NCCL host calls on one locked OS thread: NCCL keeps
// group state per thread (ncclGroupStart ... ncclGroupEnd), and CUDA keeps the current
// context per thread, so both must stay put while goroutines move between threads.
type worker struct {
	jobs chan func()
	quit chan struct{}
}

// newWorker starts the thread and runs bind on it first (to make the rank's CUDA
// context current); bind's error stops the worker.
func newWorker(bind func() error) (*worker, error) {
	w := &worker{jobs: make(chan func()), quit: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if bind != nil {
			if err := bind(); err != nil {
				ready <- err
				return
			}
		}
		ready <- nil
		for {
			select {
			case fn := <-w.jobs:
				fn()
			case <-w.quit:
				return
			}
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return w, nil
}

// call is a host call submitted to the worker; done reports whether it returned.
type call struct {
	finished atomic.Bool
	err      error
}

func (c *call) done() (bool, error) { return c.finished.Load(), nil }

// submit queues fn on the worker thread and returns at once.
func (w *worker) submit(fn func() error) *call {
	c := &call{}
	w.jobs <- func() {
		c.err = fn()
		c.finished.Store(true)
	}
	return c
}

// stop ends the worker thread once it is idle. A worker stuck in a host call (after a
// timeout) is left behind: the process is failing anyway.
func (w *worker) stop() { close(w.quit) }
