package nccl

import "fmt"

// Stream is the CUDA stream a communicator enqueues on. internal/cuda's streams
// satisfy it through an adapter; tests use fakes.
type Stream interface {
	// Handle is the CUstream (cudaStream_t) to hand NCCL; 0 is the legacy default stream.
	Handle() uintptr
	// Query says, without blocking, whether everything enqueued so far has finished
	// (cuStreamQuery: CUDA_SUCCESS is true, CUDA_ERROR_NOT_READY is false, else an error).
	Query() (bool, error)
}

// FuncStream is a Stream made of a handle and a query function, for callers that
// hold a raw CUstream.
type FuncStream struct {
	Ptr     uintptr
	QueryFn func() (bool, error)
}

// Handle is the raw stream.
func (s FuncStream) Handle() uintptr { return s.Ptr }

// Query calls QueryFn.
func (s FuncStream) Query() (bool, error) {
	if s.QueryFn == nil {
		return false, fmt.Errorf("nccl: stream %#x has no query function", s.Ptr)
	}
	return s.QueryFn()
}

// OrderedStream is a Stream that can also wait for and record events (CUDA events of
// the ranks' context): what Comm.GroupAfter needs to order transfers on the device.
type OrderedStream interface {
	Stream
	// WaitEvent makes the stream wait, on the device, for ev (cuStreamWaitEvent).
	WaitEvent(ev uintptr) error
	// RecordEvent creates an event marking the stream's work so far.
	RecordEvent() (uintptr, error)
}
