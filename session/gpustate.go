package session

import (
	"errors"
	"sync"

	"github.com/longca/longca/harness"
	"github.com/longca/longca/internal/cuda"
	"github.com/rs/zerolog"
)

// gpuSampler reads the state of CUDA device `ordinal` through NVML for a sweep's rows
// (harness.Runner.GPU), opening NVML at the first row timed on a GPU. Where it cannot (no
// NVML, no driver), one warning says so and the rows' GPU-state columns stay null; the
// sweep goes on. The returned close frees the monitor once the sweep is done. Off
// (--gpu-state=false): no sampler, and a close that does nothing.
func gpuSampler(on bool, ordinal int, log *zerolog.Logger) (harness.GPUSampler, func()) {
	if !on {
		return nil, func() {}
	}
	var (
		once sync.Once
		m    *cuda.Monitor
		err  error
	)
	read := func() (harness.GPUState, error) {
		once.Do(func() {
			if m, err = cuda.NewMonitor(ordinal); err != nil {
				log.Warn().Err(err).Int("device", ordinal).Msg("the GPU's clock, power and temperature are not read: their columns stay null")
			} else {
				log.Debug().Int("device", ordinal).Bool("power_instant", m.Instant).Msg("the GPU's state read through NVML while each case is timed")
			}
		})
		if err != nil {
			return harness.GPUState{}, err
		}
		s, e := m.Sample()
		return harness.GPUState{SMClockMHz: s.SMClockMHz, PowerMW: s.PowerMW, TempC: s.TempC, Reasons: s.Reasons}, e
	}
	closeFn := func() {
		once.Do(func() { err = errGPUClosed }) // never opened: nothing to free, and no opening after
		if m != nil {
			m.Close()
		}
	}
	return read, closeFn
}

// deviceUUID is the UUID of CUDA device `ordinal` (cuda.DeviceUUID) for a sweep's rows on a
// GPU, asked of the driver at the first such row and kept; "" where the driver cannot say
// (one debug line says why).
func deviceUUID(ordinal int, log *zerolog.Logger) func() string {
	var (
		once sync.Once
		uuid string
	)
	return func() string {
		once.Do(func() {
			var err error
			if uuid, err = cuda.DeviceUUID(ordinal); err != nil {
				log.Debug().Err(err).Int("device", ordinal).Msg("the GPU's UUID is not known: device_uuid stays empty")
			}
		})
		return uuid
	}
}

var errGPUClosed = errors.New("session: the GPU's sampler is closed")
