package ref

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// parallelFor runs tasks 0..n-1 on up to GOMAXPROCS goroutines. Each goroutine calls
// newWorker once, so that its scratch buffers are allocated once and never shared.
// It stops early, returning ctx's error, when ctx is done.
func parallelFor(ctx context.Context, n int, newWorker func() func(task int)) error {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		run := newWorker()
		for t := 0; t < n; t++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			run(t)
		}
		return nil
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := newWorker()
			for {
				t := int(next.Add(1) - 1)
				if t >= n || ctx.Err() != nil {
					return
				}
				run(t)
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// blockRows is the number of rows (or key columns) one task covers: small enough that
// masks with uneven rows still balance over the cores.
const blockRows = 16
