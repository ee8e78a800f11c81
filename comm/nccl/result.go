// Package nccl is a comm.Comm over NCCL, loaded at run time with dlopen: longca builds
// without NCCL headers or libraries, and only a rank that asks for the "nccl" backend
// needs libnccl.so.2. Every operation is enqueued on the communicator's CUDA stream;
// a watchdog polls the stream, ncclCommGetAsyncError and a deadline, and aborts the
// communicator (ncclCommAbort) instead of hanging when a peer dies or an operation
// never completes.
package nccl

import "fmt"

// Result is NCCL's ncclResult_t.
type Result int32

// The ncclResult_t values of nccl.h (2.x; Timeout is newer than 2.28 and harmless).
const (
	Success            Result = 0
	UnhandledCudaError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6
	InProgress         Result = 7
	Timeout            Result = 8
)

// resultNames are the C names, so an error can be searched for in NCCL's documentation.
var resultNames = [...]string{
	Success:            "ncclSuccess",
	UnhandledCudaError: "ncclUnhandledCudaError",
	SystemError:        "ncclSystemError",
	InternalError:      "ncclInternalError",
	InvalidArgument:    "ncclInvalidArgument",
	InvalidUsage:       "ncclInvalidUsage",
	RemoteError:        "ncclRemoteError",
	InProgress:         "ncclInProgress",
	Timeout:            "ncclTimeout",
}

// resultHints say what a code usually means, for when the library cannot be asked
// (ncclGetErrorString) or says little.
var resultHints = [...]string{
	Success:            "no error",
	UnhandledCudaError: "a CUDA call inside NCCL failed",
	SystemError:        "a system call failed (network, shared memory, or a peer process)",
	InternalError:      "NCCL internal error",
	InvalidArgument:    "an argument was invalid (a bad pointer, count, type or rank)",
	InvalidUsage:       "NCCL was used wrongly (mismatched calls across ranks, or two ranks on one GPU)",
	RemoteError:        "a remote rank exited or the network failed",
	InProgress:         "operation still in progress",
	Timeout:            "NCCL timed out",
}

// Name is the C name of the code ("ncclSystemError").
func (r Result) Name() string {
	if r >= 0 && int(r) < len(resultNames) {
		return resultNames[r]
	}
	return fmt.Sprintf("ncclResult(%d)", int32(r))
}

// Hint says in a few words what the code usually means.
func (r Result) Hint() string {
	if r >= 0 && int(r) < len(resultHints) {
		return resultHints[r]
	}
	return "unknown NCCL result"
}

// String is the code's C name and what it usually means.
func (r Result) String() string { return r.Name() + " (" + r.Hint() + ")" }

// Error is a failed NCCL call: which call, the code, and what the library said about it
// (ncclGetErrorString and, where there is one, ncclGetLastError).
type Error struct {
	Op   string // the NCCL call or comm operation, e.g. "ncclAllReduce"
	Code Result
	Msg  string // ncclGetErrorString(Code); empty when the library could not be asked
	Last string // ncclGetLastError: NCCL's own last message, often the useful one
}

func (e *Error) Error() string {
	s := fmt.Sprintf("nccl: %s: %s", e.Op, e.Code.Name())
	if e.Msg != "" {
		s += ": " + e.Msg
	} else {
		s += ": " + e.Code.Hint()
	}
	if e.Last != "" && e.Last != e.Msg {
		s += ": " + e.Last
	}
	return s
}
