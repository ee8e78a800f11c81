package cuda

import (
	"fmt"

	"github.com/longca/longca/tensor"
)

// Streams and events beyond the device's one stream: what the context-parallel methods
// need to move data on a stream of their own and order it against the compute stream
// with events rather than host synchronisation.

// eventDisableTiming is CU_EVENT_DISABLE_TIMING: ordering-only events are cheaper.
const eventDisableTiming = 2

// streamNonBlocking is CU_STREAM_NON_BLOCKING: no implicit sync with the legacy stream.
const streamNonBlocking = 1

// NewStream creates another stream on the device (non-blocking); DestroyStream frees it.
func (g *Device) NewStream() (Stream, error) {
	var st Stream
	err := g.with(func() error {
		s := newScratch()
		defer s.free()
		if err := g.dv.call("cuStreamCreate", s.ptr(0), streamNonBlocking); err != nil {
			return err
		}
		st = Stream(s.u64(0))
		return nil
	})
	return st, err
}

// DestroyStream destroys a stream from NewStream.
func (g *Device) DestroyStream(st Stream) error {
	return g.with(func() error { return g.dv.call("cuStreamDestroy_v2", uint64(st)) })
}

// SyncStream waits on the host for st's work and reports any asynchronous error.
func (g *Device) SyncStream(st Stream) error {
	return g.with(func() error { return g.dv.call("cuStreamSynchronize", uint64(st)) })
}

// Record creates an event and records it on st: it completes when st's work enqueued so
// far has finished. Destroy it with DestroyEvent.
func (g *Device) Record(st Stream) (Event, error) {
	var ev Event
	err := g.with(func() error {
		s := newScratch()
		defer s.free()
		if err := g.dv.call("cuEventCreate", s.ptr(0), eventDisableTiming); err != nil {
			return err
		}
		ev = Event(s.u64(0))
		if err := g.dv.call("cuEventRecord", uint64(ev), uint64(st)); err != nil {
			_ = g.dv.call("cuEventDestroy_v2", uint64(ev))
			return err
		}
		return nil
	})
	return ev, err
}

// StreamWait makes st wait on the device for ev (no host synchronisation).
func (g *Device) StreamWait(st Stream, ev Event) error {
	return g.with(func() error { return g.dv.call("cuStreamWaitEvent", uint64(st), uint64(ev), 0) })
}

// EventSync waits on the host for ev.
func (g *Device) EventSync(ev Event) error {
	return g.with(func() error { return g.dv.call("cuEventSynchronize", uint64(ev)) })
}

// EventDone says, without waiting, whether the work ev marks has finished
// (cuEventQuery: CUDA_SUCCESS is true, CUDA_ERROR_NOT_READY false, else an error).
func (g *Device) EventDone(ev Event) (bool, error) { return g.query("cuEventQuery", uint64(ev)) }

// StreamDone says, without waiting, whether every piece of work queued on st has
// finished (cuStreamQuery, as EventDone).
func (g *Device) StreamDone(st Stream) (bool, error) { return g.query("cuStreamQuery", uint64(st)) }

// query calls a cu*Query function on handle with the device's context current.
func (g *Device) query(fn string, handle uint64) (bool, error) {
	var done bool
	err := g.with(func() error {
		code, err := g.dv.raw(fn, handle)
		switch {
		case err != nil:
			return err
		case code == 0:
			done = true
		case code != errNotReady:
			return g.dv.errorFor(fn, code)
		}
		return nil
	})
	return done, err
}

// errNotReady is CUDA_ERROR_NOT_READY.
const errNotReady = 600

// DestroyEvent destroys an event from Record (work it guards is unaffected).
func (g *Device) DestroyEvent(ev Event) error {
	return g.with(func() error { return g.dv.call("cuEventDestroy_v2", uint64(ev)) })
}

// CopyOn copies n bytes from src at byte offset srcOff to dst at dstOff on stream st
// (device to device, asynchronous). Both must be device tensors of this context.
func (g *Device) CopyOn(st Stream, dst tensor.Tensor, dstOff int64, src tensor.Tensor, srcOff, n int64) error {
	d, err := buffer(dst)
	if err != nil {
		return err
	}
	s, err := buffer(src)
	if err != nil {
		return err
	}
	if dstOff < 0 || srcOff < 0 || n < 0 || dstOff+n > d.bytes || srcOff+n > s.bytes {
		return fmt.Errorf("cuda: copy of %d bytes from [%d) of %d bytes to [%d) of %d bytes", n, srcOff, s.bytes, dstOff, d.bytes)
	}
	if n == 0 {
		return nil
	}
	return g.with(func() error {
		return g.dv.call("cuMemcpyDtoDAsync_v2", d.ptr+uint64(dstOff), s.ptr+uint64(srcOff), uint64(n), uint64(st))
	})
}

// MemsetOn is Memset on stream st.
func (g *Device) MemsetOn(st Stream, t tensor.Tensor, width int, pattern uint32) error {
	b, err := buffer(t)
	if err != nil {
		return err
	}
	fn := map[int]string{1: "cuMemsetD8Async", 2: "cuMemsetD16Async", 4: "cuMemsetD32Async"}[width]
	if fn == "" || b.bytes%int64(width) != 0 {
		return fmt.Errorf("cuda: memset of %d bytes in %d-byte words", b.bytes, width)
	}
	if b.bytes == 0 {
		return nil
	}
	return g.with(func() error {
		return g.dv.call(fn, b.ptr, uint64(pattern), uint64(b.bytes/int64(width)), uint64(st))
	})
}
