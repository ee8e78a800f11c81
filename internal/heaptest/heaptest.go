// Package heaptest measures the memory a function takes, for tests that hold an estimate
// to what is measured.
package heaptest

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"
)

// Peak runs fn and returns the most memory it held in use above what was in use before
// (the heap in use, garbage not yet collected included, and the goroutine stacks, sampled
// every millisecond and once after fn), and what it left live once collected.
func Peak(fn func()) (peak, live float64) {
	inUse := func(m *runtime.MemStats) uint64 { return m.HeapInuse + m.StackInuse }
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := inUse(&ms)
	top := base
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			top = max(top, inUse(&m))
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	close(done)
	wg.Wait()
	runtime.ReadMemStats(&ms)
	top = max(top, inUse(&ms))
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return float64(top - base), float64(inUse(&ms)) - float64(base)
}
