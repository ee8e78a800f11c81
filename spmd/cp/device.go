package cp

import (
	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/kernels"
)

// DeviceKernel is a kernel that runs on an internal/cuda device, launching on that
// device's stream (CUDADevice().Stream()). With one, the CP methods keep every buffer on
// the device and run their rearrangements, merges and transfers there, ordered with the
// kernel on the same stream. kernels/cuda and kernels/cudnn implement it.
//
// Such a kernel may also have the method FP32Partials() bool (FP32Partials): when it
// returns true, the methods hand it fp32 outputs for a bf16 or fp16 problem.
//
// A device kernel that is not a DeviceKernel can only run the methods behind Staged,
// which copies through the host at every step; the CP harness refuses that unless asked
// (`longca cp --staged`).
type DeviceKernel interface {
	kernels.Kernel
	CUDADevice() *cuda.Device
}

// FP32Partials is the optional method of a DeviceKernel that writes fp32 outputs (out,
// dq, dk, dv) for a bf16 or fp16 problem when it returns true. The methods then keep each
// step's partial results in fp32: rounding per-step partial gradients to bf16 costs
// precision (TestDeviceOpsBF16Partials).
type FP32Partials interface {
	FP32Partials() bool
}

// DeviceResident says whether the methods run k with every buffer on its device (k is a
// DeviceKernel); a kernel on another device then needs Staged.
func DeviceResident(k kernels.Kernel) bool {
	_, ok := k.(DeviceKernel)
	return ok
}
