package cuda

/*
#include <stdint.h>
typedef const char *(*nvmlstrfn)(int);
static const char *nvmlstr(void *f, int code) { return ((nvmlstrfn)f)(code); }
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"
)

// NVML, the driver's management library, read while a case is timed: the SM clock, the
// board's power and the temperature say whether a rate was measured at the clock the card
// can hold (the H200 meets its 700 W cap within a second or two of a long loop, and its SM
// clock falls to 1550-1750 MHz: docs/perf.md, call 12).
var nvmlNames = []string{"libnvidia-ml.so.1", "libnvidia-ml.so"}

var nvmlLib = lazyLib{names: nvmlNames, name: "nvml", what: "NVML", init: func(l *lib) error { return l.call("nvmlInit_v2") }}

// nvml opens libnvidia-ml and calls nvmlInit_v2 once (never shut down: the process ends it).
func nvml() (*lib, error) { return nvmlLib.get() }

// nvmlErrorName is NVML's own string for a status (nvmlErrorString).
func nvmlErrorName(l *lib, code int) string {
	f, err := l.l.Sym("nvmlErrorString")
	if err != nil {
		return ""
	}
	if p := C.nvmlstr(f, C.int(code)); p != nil {
		return C.GoString(p)
	}
	return ""
}

// NVML's constants (nvml.h): NVML_CLOCK_SM and NVML_TEMPERATURE_GPU.
const (
	nvmlClockSM        = 1
	nvmlTemperatureGPU = 0
)

// GPUState is one reading of a GPU's state by NVML.
type GPUState struct {
	SMClockMHz uint32 // the SM clock now
	PowerMW    uint32 // the board's power draw, milliwatts (the driver's running average); 0: none given
	TempC      uint32 // the GPU's temperature; 0: none given
	// Reasons is NVML's bit mask of why the clocks are below their maximum now
	// (nvmlClocksEventReason*: 0x4 the software power cap, 0x20 / 0x40 thermal, ...); zero
	// where the driver has neither nvmlDeviceGetCurrentClocksEventReasons nor the older
	// ...ThrottleReasons.
	Reasons uint64
}

// Monitor reads one GPU's state through NVML. Safe for concurrent use.
type Monitor struct {
	l       *lib
	mu      sync.Mutex
	s       scratch // out-parameters: slot 0 the handle, 1-4 the readings
	reasons string  // the reasons' entry point this driver has ("" none)
}

// NewMonitor opens NVML on the device of CUDA ordinal `ordinal` of this process, matched by
// PCI bus id (NVML's indices ignore CUDA_VISIBLE_DEVICES). An error names what is missing:
// no NVML, no driver, an ordinal the driver does not have.
func NewMonitor(ordinal int) (*Monitor, error) {
	bus, err := PCIBusID(ordinal)
	if err != nil {
		return nil, err
	}
	l, err := nvml()
	if err != nil {
		return nil, err
	}
	m := &Monitor{l: l, s: newScratch()}
	p, free := cstr(bus)
	defer free()
	if err := m.l.call("nvmlDeviceGetHandleByPciBusId_v2", p, m.s.ptr(0)); err != nil {
		m.s.free()
		return nil, fmt.Errorf("NVML has no device at PCI %s (CUDA device %d): %w", bus, ordinal, err)
	}
	for _, f := range []string{"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"} {
		if l.l.Has(f) {
			m.reasons = f
			break
		}
	}
	return m, nil
}

// Sample reads the device's SM clock, power, temperature and clock event reasons now.
func (m *Monitor) Sample() (GPUState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.s.p == nil {
		return GPUState{}, fmt.Errorf("nvml: the monitor is closed")
	}
	h := m.s.u64(0)
	for i := 1; i <= 4; i++ {
		m.s.p[i] = 0
	}
	if err := m.l.call("nvmlDeviceGetClockInfo", h, nvmlClockSM, m.s.ptr(1)); err != nil {
		return GPUState{}, err
	}
	// power and temperature where the board gives them (0 otherwise: some boards and
	// virtual GPUs answer NOT_SUPPORTED); the clock is the reading's point
	if m.l.call("nvmlDeviceGetPowerUsage", h, m.s.ptr(2)) != nil {
		m.s.p[2] = 0
	}
	if m.l.call("nvmlDeviceGetTemperature", h, nvmlTemperatureGPU, m.s.ptr(3)) != nil {
		m.s.p[3] = 0
	}
	st := GPUState{SMClockMHz: uint32(m.s.u64(1)), PowerMW: uint32(m.s.u64(2)), TempC: uint32(m.s.u64(3))}
	if m.reasons != "" && m.l.call(m.reasons, h, m.s.ptr(4)) == nil {
		st.Reasons = m.s.u64(4)
	}
	return st, nil
}

// PCIBusID is the PCI bus id ("0000:1b:00.0") of CUDA device `ordinal` of this process.
func PCIBusID(ordinal int) (string, error) {
	d, err := driver()
	if err != nil {
		return "", err
	}
	s := newScratch()
	defer s.free()
	if err := d.call("cuDeviceGet", s.ptr(0), uint64(ordinal)); err != nil {
		return "", fmt.Errorf("CUDA device %d: %w", ordinal, err)
	}
	dev := uint64(s.i32(0))
	// the id into slots 1-7 (56 bytes; the driver writes at most 13 with its terminator)
	if err := d.call("cuDeviceGetPCIBusId", s.ptr(1), 56, dev); err != nil {
		return "", err
	}
	return C.GoString((*C.char)(unsafe.Pointer(&s.p[1]))), nil
}

// Close frees the monitor's C memory; it must not be sampled after.
func (m *Monitor) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.s.p != nil {
		m.s.free()
		m.s.p = nil
	}
}
