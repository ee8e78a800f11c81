package nccl

/*
#include <stdint.h>
static int nccl_cu_stream_query(void* f, uintptr_t stream) { return ((int (*)(void*))f)((void*)stream); }
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/internal/dl"
)

// cudaNotReady is CUDA_ERROR_NOT_READY: the stream still has work.
const cudaNotReady = 600

var (
	cuOnce  sync.Once
	cuQuery unsafe.Pointer
	cuErr   error
)

// streamQuery resolves cuStreamQuery from the driver (libcuda.so.1) once.
func streamQuery() (unsafe.Pointer, error) {
	cuOnce.Do(func() {
		l, err := dl.Open("libcuda.so.1", "libcuda.so")
		if err != nil {
			cuErr = fmt.Errorf("nccl: %w", err)
			return
		}
		cuQuery, cuErr = l.Sym("cuStreamQuery")
	})
	return cuQuery, cuErr
}

// deviceStream is an internal/cuda device's stream as an OrderedStream.
type deviceStream struct {
	FuncStream
	g *cuda.Device
	s cuda.Stream
}

// WaitEvent implements OrderedStream.
func (d deviceStream) WaitEvent(ev uintptr) error { return d.g.StreamWait(d.s, cuda.Event(ev)) }

// RecordEvent implements OrderedStream.
func (d deviceStream) RecordEvent() (uintptr, error) {
	ev, err := d.g.Record(d.s)
	return uintptr(ev), err
}

// DeviceStream is the stream of an internal/cuda device as an OrderedStream: NCCL work
// goes on that stream, ordered with the device's kernels and copies there, and with
// other streams by events (Comm.GroupAfter). Query runs cuStreamQuery with the device's
// context current.
func DeviceStream(g *cuda.Device) (OrderedStream, error) {
	f, err := streamQuery()
	if err != nil {
		return nil, err
	}
	s := uintptr(g.Stream())
	return deviceStream{g: g, s: g.Stream(), FuncStream: FuncStream{Ptr: s, QueryFn: func() (bool, error) {
		var code C.int
		if err := g.Do(func() error { code = C.nccl_cu_stream_query(f, C.uintptr_t(s)); return nil }); err != nil {
			return false, err
		}
		switch code {
		case 0:
			return true, nil
		case cudaNotReady:
			return false, nil
		}
		return false, fmt.Errorf("cuStreamQuery: CUDA error %d", int(code))
	}}}, nil
}

// DeviceThread is the WithThreadSetup function for an internal/cuda device: it makes
// the device's primary context current on the communicator's thread.
func DeviceThread(g *cuda.Device) func() error {
	return func() error { return g.Do(func() error { return nil }) }
}
