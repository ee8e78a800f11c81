package ref

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
)

// minWork is the least work (multiply-adds) worth a goroutine of its own: about 0.1 ms,
// well above the cost of starting and joining one, so that the small problems the
// context-parallel tests run by the thousand do not pay for idle cores.
const minWork = 1 << 18

// parallelFor runs tasks 0..n-1 on up to GOMAXPROCS goroutines, fewer when the total
// work (multiply-adds) is small. Each goroutine calls newWorker once, so that its
// scratch buffers are allocated once and never shared. It stops early, returning
// ctx's error, when ctx is done.
func parallelFor(ctx context.Context, n int, work int64, newWorker func() func(task int)) error {
	workers := int(min(int64(runtime.GOMAXPROCS(0)), int64(n), max(1, work/minWork)))
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
