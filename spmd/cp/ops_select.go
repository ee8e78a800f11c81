package cp

import (
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// opsFor picks the ops for a kernel's device: a Tracer's (a traced run), the GPU's
// (device-resident methods) when the kernel runs on an internal/cuda device, the host's
// otherwise (the CPU reference, or a device kernel behind Staged).
func opsFor(k kernels.Kernel) (ops, error) {
	if t, ok := k.(Tracer); ok {
		return traceOps{t}, nil
	}
	if dk, ok := k.(DeviceKernel); ok {
		return newDeviceOps(dk)
	}
	return hostOps{cpu: &tensor.CPU{}}, nil
}
