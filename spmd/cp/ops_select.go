package cp

import (
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// opsFor picks the ops for a kernel's device: the GPU's (device-resident methods) when
// the kernel runs on an internal/cuda device, the host's otherwise (the CPU reference,
// or a device kernel behind Staged).
func opsFor(k kernels.Kernel) (ops, error) {
	if dk, ok := k.(DeviceKernel); ok {
		return newDeviceOps(dk)
	}
	return hostOps{cpu: &tensor.CPU{}}, nil
}
