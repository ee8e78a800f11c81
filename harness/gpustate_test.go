package harness

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// fakeGPU hands out readings (the i-th: SM clock 1900 - 10 i MHz, power 600 + i W, 40 + i
// C; reasons idle on the first, the power cap after, thermal too on the third) and records
// them; reached is closed once `until` readings were taken.
type fakeGPU struct {
	mu      sync.Mutex
	got     []GPUState
	until   int
	reached chan struct{}
	err     error
}

func newFakeGPU(until int) *fakeGPU { return &fakeGPU{until: until, reached: make(chan struct{})} }

func (f *fakeGPU) read() (GPUState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return GPUState{}, f.err
	}
	i := len(f.got)
	s := GPUState{SMClockMHz: uint32(1900 - 10*i), PowerMW: uint32(600000 + 1000*i), TempC: uint32(40 + i), Reasons: 0x4}
	switch i {
	case 0:
		s.Reasons = 0x1
	case 2:
		s.Reasons = 0x24
	}
	f.got = append(f.got, s)
	if len(f.got) == f.until {
		close(f.reached)
	}
	return s, nil
}

// waitingTimer times itself (as an external worker does) and returns only once the GPU
// has been read `until` times, so that the readings taken while a case is timed are known.
type waitingTimer struct {
	*selfTimed
	gpu *fakeGPU
}

func (w *waitingTimer) TimePass(ctx context.Context, p kernels.Problem, pass kernels.Pass, spec kernels.TimeSpec) (kernels.Timing, error) {
	select {
	case <-w.gpu.reached:
	case <-time.After(10 * time.Second):
		return kernels.Timing{}, errors.New("the GPU was not read while the case was timed")
	}
	return w.selfTimed.TimePass(ctx, p, pass, spec)
}

// The GPU's state is read while a case on a GPU is timed and summarised into its row: the
// clock's mean and minimum, the mean power, the hottest reading, the reasons but idle.
func TestGPUStateInRows(t *testing.T) {
	gpu := newFakeGPU(4) // the reading before the timing (opens the sampler; not kept), three while timed
	k := &waitingTimer{selfTimed: &selfTimed{fakeKernel: newFake()}, gpu: gpu}
	r := runnerFor(k)
	r.GPU = gpu.read
	r.DeviceUUID = func() string { return "GPU-5b7ea7b3-9a6c-1f84-0d3a-6e2c42f1b7a0" }
	row := r.Run(context.Background(), small)
	if row.Status != results.StatusOK {
		t.Fatalf("status %s: %s", row.Status, row.Reason)
	}
	if row.DeviceUUID != "GPU-5b7ea7b3-9a6c-1f84-0d3a-6e2c42f1b7a0" {
		t.Errorf("device_uuid %q, want the device's", row.DeviceUUID)
	}
	gpu.mu.Lock()
	got := gpu.got
	gpu.mu.Unlock()
	if len(got) < 5 { // one before, three while timed, one as it ended
		t.Fatalf("%d readings, want at least 5", len(got))
	}
	var clk, pw float64
	for _, s := range got[1:] {
		clk += float64(s.SMClockMHz)
		pw += float64(s.PowerMW) / 1000
	}
	n := len(got) - 1
	if row.GPUSamples == nil || *row.GPUSamples != int64(n) {
		t.Errorf("gpu_samples %v, want %d", row.GPUSamples, n)
	}
	if row.SMClockMHz == nil || *row.SMClockMHz != clk/float64(n) || row.SMClockMinMHz == nil || *row.SMClockMinMHz != int64(1900-10*n) {
		t.Errorf("clock mean %v min %v, want %v and %d", row.SMClockMHz, row.SMClockMinMHz, clk/float64(n), 1900-10*n)
	}
	if row.PowerW == nil || *row.PowerW != pw/float64(n) || row.TempC == nil || *row.TempC != int64(40+n) {
		t.Errorf("power %v temp %v, want %v and %d", row.PowerW, row.TempC, pw/float64(n), 40+n)
	}
	if row.ClockEvents != "sw_power_cap,sw_thermal" {
		t.Errorf("clock_events %q, want sw_power_cap,sw_thermal", row.ClockEvents)
	}
}

// The figures are the busy readings' (an idle GPU's clock, read during the case's setup,
// is not the case's), all readings' where none was busy; a board without power or
// temperature (0) gives those columns null, not a mean with zeros in it.
func TestSummariseGPU(t *testing.T) {
	var row results.Row
	summariseGPU([]GPUState{{1980, 70000, 30, 0x1}, {1700, 650000, 50, 0x4}, {1650, 0, 52, 0x4 | 0x20}}, &row)
	if *row.SMClockMHz != 1675 || *row.SMClockMinMHz != 1650 || *row.PowerW != 650 || *row.TempC != 52 || *row.GPUSamples != 2 || row.ClockEvents != "sw_power_cap,sw_thermal" {
		t.Errorf("busy readings: clock %v min %v power %v temp %v samples %v events %q", *row.SMClockMHz, *row.SMClockMinMHz, *row.PowerW, *row.TempC, *row.GPUSamples, row.ClockEvents)
	}
	row = results.Row{}
	summariseGPU([]GPUState{{1980, 0, 0, 0x1}, {1960, 0, 0, 0x1}}, &row)
	if *row.SMClockMHz != 1970 || *row.GPUSamples != 2 || row.PowerW != nil || row.TempC != nil || row.ClockEvents != "" {
		t.Errorf("idle readings only: clock %v samples %v power %v temp %v events %q", *row.SMClockMHz, *row.GPUSamples, row.PowerW, row.TempC, row.ClockEvents)
	}
	clearTimes(&row) // a CP row whose timing was discarded (the transfer-free loop failed)
	if row.SMClockMHz != nil || row.SMClockMinMHz != nil || row.GPUSamples != nil {
		t.Errorf("clearTimes left the GPU's state: %+v", row)
	}
}

// No readings, no figures: a sampler that fails (no NVML), a case that fails, and a case on
// the CPU (never read) leave the columns null.
func TestGPUStateNullWithoutReadings(t *testing.T) {
	gpu := newFakeGPU(0)
	gpu.err = errors.New("no NVML")
	r := runnerFor(&selfTimed{fakeKernel: newFake()})
	r.GPU = gpu.read
	if row := r.Run(context.Background(), small); row.Status != results.StatusOK || row.SMClockMHz != nil || row.GPUSamples != nil || row.ClockEvents != "" {
		t.Errorf("failing sampler: status %s, clock %v, samples %v, events %q", row.Status, row.SMClockMHz, row.GPUSamples, row.ClockEvents)
	}

	fails := newFakeGPU(3) // read before and twice while timed, then the case fails
	r = runnerFor(&waitingTimer{selfTimed: &selfTimed{fakeKernel: newFake(), err: errors.New("worker exited with status 3")}, gpu: fails})
	r.GPU = fails.read
	if row := r.Run(context.Background(), small); row.Status != results.StatusError || row.SMClockMHz != nil || row.TempC != nil || len(fails.got) < 3 {
		t.Errorf("failed case: status %s, clock %v, temp %v, %d readings", row.Status, row.SMClockMHz, row.TempC, len(fails.got))
	}

	cpu := newFakeGPU(0)
	r = runnerFor(newFake()) // the reference on the CPU: no device index
	r.GPU = cpu.read
	if row := r.Run(context.Background(), small); row.Status != results.StatusOK || row.SMClockMHz != nil || len(cpu.got) != 0 {
		t.Errorf("CPU case: status %s %q, clock %v, %d readings", row.Status, row.Reason, row.SMClockMHz, len(cpu.got))
	}
}

func TestClockEventNames(t *testing.T) {
	for _, c := range []struct {
		mask uint64
		want string
	}{{0, ""}, {0x4, "sw_power_cap"}, {0x1 | 0x4 | 0x20, "gpu_idle,sw_power_cap,sw_thermal"}, {0x8 | 0x1000, "hw_slowdown,0x1000"}} {
		if got := ClockEventNames(c.mask); got != c.want {
			t.Errorf("ClockEventNames(%#x) = %q, want %q", c.mask, got, c.want)
		}
	}
}

// gpuRef is the reference kernel on a GPU-named device, so that CP rows record the device
// index and read the GPU's state.
type gpuRef struct {
	*ref.Kernel
	dev tensor.Device
}

func (g gpuRef) Device() tensor.Device { return g.dev }

// Each rank of a CP run reads the GPU's state while a pass is timed and records it in its
// row (one sampler shared by the in-process ranks, as the session shares it).
func TestGPUStateInCPRows(t *testing.T) {
	const n = 2
	sw, cases := fakeGPUSweep(t, n)
	gpu := newFakeGPU(-1)
	rows, err := cpRowsOnFakeGPU(context.Background(), n, sw, cases, func(r *CPRunner) {
		r.GPU = gpu.read
		r.DeviceUUID = func() string { return fmt.Sprintf("GPU-rank%d", r.Comm.Rank()) }
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != n {
		t.Fatalf("%d rows, want %d", len(rows), n)
	}
	for _, row := range rows {
		if row.Status != results.StatusOK || row.GPUSamples == nil || *row.GPUSamples < 1 || row.SMClockMHz == nil || row.TempC == nil {
			t.Errorf("rank %d: status %s %q, samples %v, clock %v", row.Rank, row.Status, row.Reason, row.GPUSamples, row.SMClockMHz)
		}
		if want := fmt.Sprintf("GPU-rank%d", row.Rank); row.DeviceUUID != want {
			t.Errorf("rank %d: device_uuid %q, want its own GPU's %s", row.Rank, row.DeviceUUID, want)
		}
	}
}

// --settle: a case timed on a GPU waits that long first and its row says so; a CPU case
// (the reference kernel) does not wait and its settle_ms stays null; an interrupt during
// the wait ends it at once, and the case is not timed.
func TestSettleBeforeTiming(t *testing.T) {
	k := &selfTimed{fakeKernel: newFake()}
	r := runnerFor(k)
	r.Settle = 60 * time.Millisecond
	start := time.Now()
	row := r.Run(context.Background(), small)
	if row.Status != results.StatusOK {
		t.Fatalf("status %s: %s", row.Status, row.Reason)
	}
	if el := time.Since(start); el < r.Settle {
		t.Errorf("the case took %s, less than its settle %s", el, r.Settle)
	}
	if row.SettleMs == nil || *row.SettleMs != 60 {
		t.Errorf("settle_ms %v, want 60", row.SettleMs)
	}

	cpu := runnerFor(ref.New(ref.Options{}))
	cpu.Settle = time.Hour // would hang the test if the CPU case waited
	c := small
	c.Kernel = "ref"
	if row := cpu.Run(context.Background(), c); row.Status != results.StatusOK || row.SettleMs != nil {
		t.Errorf("CPU case: status %s settle_ms %v, want ok and null", row.Status, row.SettleMs)
	}

	// a GPU case that is not timed (the kernel refuses it) does not wait
	refusing := &selfTimed{fakeKernel: newFake()}
	refusing.unsupported = errors.New("not this mask")
	rr := runnerFor(refusing)
	rr.Settle = time.Hour
	if row := rr.Run(context.Background(), small); row.Status != results.StatusUnsupported || row.SettleMs != nil {
		t.Errorf("refused case: status %s settle_ms %v, want unsupported at once and null", row.Status, row.SettleMs)
	}

	// timing that fails after the idle: an error row, settle_ms null like the GPU's columns
	failing := &selfTimed{fakeKernel: newFake(), err: errors.New("launch failed")}
	rf := runnerFor(failing)
	rf.Settle = time.Millisecond
	if row := rf.Run(context.Background(), small); row.Status == results.StatusOK || row.SettleMs != nil {
		t.Errorf("failed timing: status %s settle_ms %v, want not ok and null", row.Status, row.SettleMs)
	}

	// an interrupt during the idle: the sweep stops at once, the case is neither timed nor
	// written, and the rows before it are kept
	ctx, cancel := context.WithCancel(context.Background())
	k2 := &selfTimed{fakeKernel: newFake()}
	r2 := runnerFor(k2)
	r2.Settle = 50 * time.Millisecond
	var written []results.Row
	start = time.Now()
	err := r2.RunAll(ctx, []Case{small, small}, func(i int, row results.Row) error {
		written = append(written, row)
		if i == 0 {
			r2.Settle = time.Hour
			go func() { time.Sleep(20 * time.Millisecond); cancel() }()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Fatalf("RunAll: %v after %s, want canceled at once", err, time.Since(start))
	}
	if len(written) != 1 || written[0].Status != results.StatusOK || k2.calls != 1 {
		t.Errorf("%d rows written, %d timings: want the first case's alone", len(written), k2.calls)
	}
}

// --settle in a CP run: every rank on a GPU idles before each pass it times and its row
// says so; an interrupt during the idle ends every rank's wait (they agree on it), and no
// rank hangs or writes an ok row.
func TestSettleInCPRows(t *testing.T) {
	const n = 2
	sw, cases := fakeGPUSweep(t, n)
	run := func(ctx context.Context, settle time.Duration) ([]results.Row, error) {
		return cpRowsOnFakeGPU(ctx, n, sw, cases, func(r *CPRunner) { r.Settle = settle })
	}
	start := time.Now()
	rows, err := run(context.Background(), 80*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 80*time.Millisecond {
		t.Errorf("the run took %s, less than its settle", el)
	}
	if len(rows) != n {
		t.Fatalf("%d rows, want %d", len(rows), n)
	}
	for _, row := range rows {
		if row.Status != results.StatusOK || row.SettleMs == nil || *row.SettleMs != 80 {
			t.Errorf("rank %d: status %s %q, settle_ms %v, want ok and 80", row.Rank, row.Status, row.Reason, row.SettleMs)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(30 * time.Millisecond); cancel() }()
	start = time.Now()
	rows, err = run(ctx, time.Hour)
	if el := time.Since(start); el > 20*time.Second || err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("an interrupted settle took %s and said %v; want the run stopped at once, naming the interrupt", el, err)
	}
	for _, row := range rows {
		if row.Status == results.StatusOK || row.TFLOPs != nil {
			t.Errorf("rank %d: an interrupted settle gave status %s tflops %v", row.Rank, row.Status, row.TFLOPs)
		}
	}
}

// cpRowsOnFakeGPU runs cases on n in-process ranks, each with the reference kernel on a
// GPU-named fake device (so rows carry a device index), set as configure says; the rows
// every rank wrote.
func cpRowsOnFakeGPU(ctx context.Context, n int, sw CPSweep, cases []CPCase, configure func(*CPRunner)) ([]results.Row, error) {
	var mu sync.Mutex
	var rows []results.Row
	err := local.Run(n, func(c comm.Comm) error {
		dev := gpuNamed{&fakeDevice{times: []time.Duration{time.Millisecond}}}
		r := &CPRunner{Sweep: sw, Comm: c, Kernel: gpuRef{ref.New(ref.Options{}), dev}, Warmup: 0, Iters: 2,
			Base: results.Row{Host: "test"}}
		configure(r)
		return RunCP(ctx, r, cases, func(_ int, row results.Row) error {
			mu.Lock()
			rows = append(rows, row)
			mu.Unlock()
			return nil
		})
	}, local.WithTimeout(time.Minute))
	return rows, err
}

// fakeGPUSweep is one ring-p2p causal forward case on n ranks, small, for cpRowsOnFakeGPU.
func fakeGPUSweep(t *testing.T, n int) (CPSweep, []CPCase) {
	t.Helper()
	sw := CPSweep{Methods: []string{"ring-p2p"}, Masks: []string{"causal"}, SeqLen: 128, Heads: []Heads{{4, 2}}, HeadDim: 8,
		DType: tensor.BF16, Passes: []kernels.Pass{kernels.Fwd}, Samples: 1, Seed: 1, Kernel: "ref", Build: cpTestMasks}
	cases, err := sw.Cases(n)
	if err != nil {
		t.Fatal(err)
	}
	return sw, cases
}
