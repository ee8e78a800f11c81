package cuda

import "fmt"

// Error is a failed call into the CUDA driver, NVRTC or NVML, with the library's own name
// and message for the status (cuGetErrorName/cuGetErrorString, nvrtcGetErrorString,
// nvmlErrorString).
type Error struct {
	Lib  string // "cuda", "nvrtc" or "nvml"
	Func string // the entry point that failed
	Code int    // CUresult, nvrtcResult or nvmlReturn_t
	Name string // e.g. CUDA_ERROR_OUT_OF_MEMORY
	Msg  string // e.g. "out of memory"
}

func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = fmt.Sprintf("status %d", e.Code)
	}
	if e.Msg != "" && e.Msg != e.Name {
		return fmt.Sprintf("%s: %s failed: %s (%s)", e.Lib, e.Func, name, e.Msg)
	}
	return fmt.Sprintf("%s: %s failed: %s", e.Lib, e.Func, name)
}

// OutOfMemory says whether the error is the driver's CUDA_ERROR_OUT_OF_MEMORY (status 2),
// which a benchmark records as status "oom" rather than a failure.
func (e *Error) OutOfMemory() bool { return e.Lib == "cuda" && e.Code == 2 }
