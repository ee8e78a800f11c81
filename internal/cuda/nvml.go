package cuda

/*
#include <stdint.h>
#include <stdlib.h>
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
	// nvmlFieldPowerInstant is NVML_FI_DEV_POWER_INSTANT, the board's power now: on Ampere
	// (but GA100) and newer, nvmlDeviceGetPowerUsage is an average over the last second
	// (call 90 read 116-145 W for a case timed in 0.15 s at 1,980 MHz)
	nvmlFieldPowerInstant = 186
)

// nvmlFieldValue is the layout of nvmlFieldValue_t (nvml.h), in 8-byte words: fieldId and
// scopeId (uint32 each), timestamp, latencyUsec, valueType and nvmlReturn (uint32 each),
// then the value (a union of 8 bytes).
type nvmlFieldValue [5]C.uint64_t

// powerInstant reads NVML_FI_DEV_POWER_INSTANT into milliwatts; ok false where the driver does not
// give it (the call or the field's own status failed, or a value type not expected).
func (m *Monitor) powerInstant(h uint64) (uint32, bool) {
	fv := m.fv
	for i := range fv {
		fv[i] = 0
	}
	*(*uint32)(unsafe.Pointer(&fv[0])) = nvmlFieldPowerInstant
	if m.l.call("nvmlDeviceGetFieldValues", h, 1, uint64(uintptr(unsafe.Pointer(&fv[0])))) != nil {
		return 0, false
	}
	return fv.milliwatts()
}

// milliwatts reads a filled power field: its value as milliwatts by its value type, ok
// false where the field's own status failed or the type is not a number NVML gives power in.
func (fv *nvmlFieldValue) milliwatts() (uint32, bool) {
	typ, ret := *(*uint32)(unsafe.Pointer(&fv[3])), *(*uint32)(unsafe.Add(unsafe.Pointer(&fv[3]), 4))
	if ret != 0 {
		return 0, false
	}
	v := unsafe.Pointer(&fv[4])
	switch typ { // nvmlValueType_t
	case 0: // double
		return uint32(*(*float64)(v)), true
	case 1, 5: // unsigned int, signed int
		return *(*uint32)(v), true
	case 2, 3, 4: // unsigned long, unsigned long long, signed long long
		return uint32(*(*uint64)(v)), true
	}
	return 0, false
}

// GPUState is one reading of a GPU's state by NVML.
type GPUState struct {
	SMClockMHz uint32 // the SM clock now
	PowerMW    uint32 // the board's power draw, milliwatts (now, or the last second's average: Monitor.Instant); 0: none given
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
	s       scratch         // out-parameters: slot 0 the handle, 1-4 the readings
	fv      *nvmlFieldValue // C memory for the instant power's field
	reasons string          // the reasons' entry point this driver has ("" none)
	// Instant says the power is the board's now (NVML_FI_DEV_POWER_INSTANT), not the
	// driver's average over the last second (nvmlDeviceGetPowerUsage): whether this driver
	// gave the field when the monitor opened.
	Instant bool
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
	m := &Monitor{l: l, s: newScratch(), fv: (*nvmlFieldValue)(C.calloc(1, C.size_t(unsafe.Sizeof(nvmlFieldValue{}))))}
	if m.s.p == nil || m.fv == nil {
		m.Close()
		return nil, fmt.Errorf("nvml: no memory for the monitor's readings")
	}
	p, free := cstr(bus)
	defer free()
	if err := m.l.call("nvmlDeviceGetHandleByPciBusId_v2", p, m.s.ptr(0)); err != nil {
		m.Close()
		return nil, fmt.Errorf("NVML has no device at PCI %s (CUDA device %d): %w", bus, ordinal, err)
	}
	_, m.Instant = m.powerInstant(m.s.u64(0))
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
	if m.Instant { // the instant field alone (a failed one reads 0, left out of the mean), never mixed with the average
		mw, _ := m.powerInstant(h)
		m.s.p[2] = C.uint64_t(mw)
	} else if m.l.call("nvmlDeviceGetPowerUsage", h, m.s.ptr(2)) != nil {
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
func PCIBusID(ordinal int) (bus string, err error) {
	err = onDevice(ordinal, func(d *lib, s scratch, dev uint64) error {
		// the id into slots 1-7 (56 bytes; the driver writes at most 13 with its terminator)
		if err := d.call("cuDeviceGetPCIBusId", s.ptr(1), 56, dev); err != nil {
			return err
		}
		bus = C.GoString((*C.char)(unsafe.Pointer(&s.p[1])))
		return nil
	})
	return bus, err
}

// Close frees the monitor's C memory; it must not be sampled after.
func (m *Monitor) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.s.p != nil {
		m.s.free()
		m.s.p = nil
	}
	if m.fv != nil {
		C.free(unsafe.Pointer(m.fv))
		m.fv = nil
	}
}
