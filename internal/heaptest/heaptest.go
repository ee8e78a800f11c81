// Package heaptest measures the memory a function takes, and the CPU time a process has
// spent, for tests that hold an estimate to what is measured.
package heaptest

import (
	"runtime"
	"runtime/debug"
	"sync"
	"syscall"
	"testing"
	"time"
)

// CPUTime is the CPU time this process has spent (user and system): what a test holds a
// time estimate to, or a benchmark reports, on a host shared with other work, where the
// wall time follows the load.
func CPUTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

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

// PeakAtLeast runs fn up to tries times and returns the most memory any run held (Peak),
// stopping once that is want or more. Peak samples every millisecond, so on a loaded host
// it can miss the top; a test that also holds an estimate to within some times the peak
// reads such a miss as a loose estimate, and measures again before saying so (the most of
// several runs is still a peak that was held).
func PeakAtLeast(fn func(), want float64, tries int) float64 {
	top := 0.0
	for range max(tries, 1) {
		p, _ := Peak(fn)
		if top = max(top, p); top >= want {
			break
		}
	}
	return top
}
