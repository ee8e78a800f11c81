package harness

import (
	"fmt"
	"math/bits"
	"strings"
	"sync"
	"time"

	"github.com/longca/longca/results"
)

// GPUState is one reading of the GPU a case is timed on (NVML's, internal/cuda.Monitor):
// its SM clock, the board's power, its temperature and NVML's clock event reasons.
type GPUState struct {
	SMClockMHz, PowerMW, TempC uint32
	Reasons                    uint64
}

// GPUSampler reads the state of the GPU the runner times on; nil (or one that fails)
// leaves the rows' GPU-state columns null.
type GPUSampler func() (GPUState, error)

// GPUSampleEvery is how often a case's GPU state is read while it is timed; one more
// reading is taken as the timing ends, so that a loop shorter than this has one.
const GPUSampleEvery = 5 * time.Millisecond

// gpuWatch reads a GPU's state in the background while a case is timed.
type gpuWatch struct {
	read    GPUSampler
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples []GPUState
}

// watchGPU starts reading the GPU every GPUSampleEvery for a case timed on one (the row's
// device index set); nil where there is nothing to read.
func watchGPU(read GPUSampler, row *results.Row) *gpuWatch {
	if read == nil || row.DeviceIndex == nil {
		return nil
	}
	// one reading before the timing starts, not kept: the sampler opens NVML at its first
	// (cuInit, dlopen, nvmlInit: up to seconds), which must not fall inside a timed loop
	if _, err := read(); err != nil {
		return nil
	}
	w := &gpuWatch{read: read, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(GPUSampleEvery)
		defer t.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
				w.take()
			}
		}
	}()
	return w
}

func (w *gpuWatch) take() {
	if s, err := w.read(); err == nil {
		w.mu.Lock()
		w.samples = append(w.samples, s)
		w.mu.Unlock()
	}
}

// finish stops the readings, takes the last and, when the case was timed (ok), writes their
// summary into the row (summariseGPU). Safe on nil.
func (w *gpuWatch) finish(row *results.Row, ok bool) {
	if w == nil {
		return
	}
	close(w.stop)
	<-w.done
	if !ok {
		return
	}
	w.take()
	summariseGPU(w.samples, row)
}

// summariseGPU writes the readings taken while a case was timed into its row: the SM
// clock's mean and minimum over the readings the GPU was busy for (NVML's idle reason
// unset: the window also covers the case's setup, where an idle GPU's clock would read as
// the case's; every reading where none was busy), the mean of the power readings the
// board gave, the highest temperature and the clock event reasons seen (but the idle one).
// No readings: the columns stay null.
func summariseGPU(ss []GPUState, row *results.Row) {
	busy := make([]GPUState, 0, len(ss))
	for _, s := range ss {
		if s.Reasons&clockEventIdle == 0 {
			busy = append(busy, s)
		}
	}
	if len(busy) == 0 {
		busy = ss
	}
	if len(busy) == 0 {
		return
	}
	var clk, pw float64
	var hot uint32
	npw, lo, why := 0, busy[0].SMClockMHz, uint64(0)
	for _, s := range busy {
		clk += float64(s.SMClockMHz)
		if s.PowerMW > 0 { // 0: the board gives none
			pw += float64(s.PowerMW) / 1000
			npw++
		}
		lo, hot, why = min(lo, s.SMClockMHz), max(hot, s.TempC), why|s.Reasons
	}
	row.SMClockMHz = results.Ptr(clk / float64(len(busy)))
	row.SMClockMinMHz = results.Ptr(int64(lo))
	if npw > 0 {
		row.PowerW = results.Ptr(pw / float64(npw))
	}
	if hot > 0 {
		row.TempC = results.Ptr(int64(hot))
	}
	row.ClockEvents = ClockEventNames(why &^ clockEventIdle)
	row.GPUSamples = results.Ptr(int64(len(busy)))
}

// clearGPU empties the GPU-state columns (a row whose timing was then discarded).
func clearGPU(row *results.Row) {
	row.SMClockMHz, row.SMClockMinMHz, row.PowerW, row.TempC, row.GPUSamples = nil, nil, nil, nil, nil
	row.ClockEvents = ""
}

// NVML's clock event reasons (nvmlClocksEventReason*, formerly ...ThrottleReason*).
const clockEventIdle = 0x1

var clockEventNames = map[uint64]string{
	0x2: "applications_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
	0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clocks",
	clockEventIdle: "gpu_idle",
}

// ClockEventNames names the bits of an NVML clock event mask, comma-separated in bit order
// (an unnamed bit as its hex value); "" for none.
func ClockEventNames(mask uint64) string {
	var out []string
	for mask != 0 {
		b := uint64(1) << bits.TrailingZeros64(mask)
		mask &^= b
		if n, ok := clockEventNames[b]; ok {
			out = append(out, n)
		} else {
			out = append(out, fmt.Sprintf("%#x", b))
		}
	}
	return strings.Join(out, ",")
}
