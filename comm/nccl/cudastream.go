package nccl

import (
	"github.com/longca/longca/internal/cuda"
)

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
// context current (internal/cuda owns the driver).
func DeviceStream(g *cuda.Device) (OrderedStream, error) {
	st := g.Stream()
	return deviceStream{g: g, s: st, FuncStream: FuncStream{Ptr: uintptr(st), QueryFn: func() (bool, error) {
		return g.StreamDone(st)
	}}}, nil
}

// DeviceThread is the WithThreadSetup function for an internal/cuda device: it makes
// the device's primary context current on the communicator's thread.
func DeviceThread(g *cuda.Device) func() error {
	return func() error { return g.Do(func() error { return nil }) }
}
