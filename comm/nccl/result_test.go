package nccl

import (
	"errors"
	"strings"
	"testing"
)

func TestResultNames(t *testing.T) {
	cases := []struct {
		r    Result
		name string
		hint string
	}{
		{Success, "ncclSuccess", "no error"},
		{UnhandledCudaError, "ncclUnhandledCudaError", "CUDA call"},
		{SystemError, "ncclSystemError", "system call"},
		{InternalError, "ncclInternalError", "internal"},
		{InvalidArgument, "ncclInvalidArgument", "argument"},
		{InvalidUsage, "ncclInvalidUsage", "two ranks on one GPU"},
		{RemoteError, "ncclRemoteError", "remote rank"},
		{InProgress, "ncclInProgress", "in progress"},
		{Timeout, "ncclTimeout", "timed out"},
		{Result(42), "ncclResult(42)", "unknown"},
		{Result(-1), "ncclResult(-1)", "unknown"},
	}
	for _, c := range cases {
		if got := c.r.Name(); got != c.name {
			t.Errorf("Result(%d).Name() = %q, want %q", int32(c.r), got, c.name)
		}
		if got := c.r.Hint(); !strings.Contains(got, c.hint) {
			t.Errorf("Result(%d).Hint() = %q, want it to contain %q", int32(c.r), got, c.hint)
		}
		if s := c.r.String(); !strings.HasPrefix(s, c.name) || !strings.Contains(s, c.r.Hint()) {
			t.Errorf("Result(%d).String() = %q lacks name or hint", int32(c.r), s)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	cases := []struct {
		e    Error
		want string
	}{
		{Error{Op: "ncclAllReduce", Code: SystemError, Msg: "unhandled system error", Last: "socket closed by peer"},
			"nccl: ncclAllReduce: ncclSystemError: unhandled system error: socket closed by peer"},
		{Error{Op: "ncclSend", Code: RemoteError},
			"nccl: ncclSend: ncclRemoteError: " + RemoteError.Hint()},
		{Error{Op: "ncclGroupEnd", Code: InvalidUsage, Msg: "invalid usage", Last: "invalid usage"},
			"nccl: ncclGroupEnd: ncclInvalidUsage: invalid usage"},
	}
	for _, c := range cases {
		if got := c.e.Error(); got != c.want {
			t.Errorf("Error() = %q\nwant      %q", got, c.want)
		}
		var target *Error
		wrapped := errors.Join(errors.New("context"), &c.e)
		if !errors.As(wrapped, &target) || target.Code != c.e.Code {
			t.Errorf("errors.As lost the code %v", c.e.Code)
		}
	}
}
