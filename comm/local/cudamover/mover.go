// Package cudamover is a comm/local Mover for ranks that share one GPU: a message is a
// device buffer, staging and delivery are device-to-device copies on the mover's own
// streams, and sums run as a device kernel. Host tensors (a check's verdict, gathered
// outputs) still go through local.HostMover, so one communicator carries both.
//
// With it every CP method runs on one GPU with N simulated ranks, each rank a goroutine
// with its own device stream: the correctness of the device path and the compute side of
// the timing (transfers are copies through HBM, not NVLink or the network).
package cudamover

import (
	"fmt"
	"sync"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/local"
	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/internal/cuda/devops"
	"github.com/longca/longca/tensor"
)

// Mover implements local.Mover on one GPU, and local.OrderedMover: a lane per rank and
// group enqueues its copies on a stream of its own, ordered by events.
type Mover struct {
	g       *cuda.Device
	pool    *devops.Pool
	streams chan cuda.Stream // a stream per copy in flight, taken and given back
	all     []cuda.Stream
	host    local.HostMover

	redMu sync.Mutex
	red   *devops.Ops // the reduction kernels, on their own stream

	relMu   sync.Mutex
	pending []release // message buffers a lane's copy still reads
}

// release is a message buffer to give back to the pool once ev has completed.
type release struct {
	b  *cuda.Buffer
	ev cuda.Event
}

var _ local.OrderedMover = (*Mover)(nil)

// New makes a mover on g (the device the ranks' buffers live on, or another handle of
// the same GPU: the primary context is shared) with streams copy streams.
func New(g *cuda.Device, streams int) (*Mover, error) {
	m := &Mover{g: g, pool: devops.NewPool(g), streams: make(chan cuda.Stream, max(streams, 1))}
	for range max(streams, 1) {
		s, err := g.NewStream()
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("cudamover: %w", err)
		}
		m.all = append(m.all, s)
		m.streams <- s
	}
	rs, err := g.NewStream()
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("cudamover: %w", err)
	}
	m.all = append(m.all, rs)
	if m.red, err = devops.New(g, rs); err != nil {
		m.Close()
		return nil, fmt.Errorf("cudamover: %w", err)
	}
	return m, nil
}

// Close destroys the streams and frees the pooled message buffers.
func (m *Mover) Close() {
	for _, s := range m.all {
		_ = m.g.DestroyStream(s)
	}
	m.all = nil
	_ = m.g.Sync()
	m.relMu.Lock()
	for _, r := range m.pending {
		_ = m.g.DestroyEvent(r.ev)
		_ = m.pool.Put(r.b)
	}
	m.pending = nil
	m.relMu.Unlock()
	m.pool.Release()
}

// msg is a message in device memory; ready, when set, marks the end of the lane copy
// that filled it.
type msg struct {
	b     *cuda.Buffer
	ready cuda.Event
}

func (x msg) Len() int64 { return x.b.Bytes() }

// copyOn runs one copy on a free stream (after ready, when set) and waits for it.
func (m *Mover) copyOn(dst tensor.Tensor, dstOff int64, src tensor.Tensor, srcOff, n int64, ready cuda.Event) error {
	s := <-m.streams
	defer func() { m.streams <- s }()
	if ready != 0 {
		if err := m.g.StreamWait(s, ready); err != nil {
			return fmt.Errorf("cudamover: %w", err)
		}
	}
	if err := m.g.CopyOn(s, dst, dstOff, src, srcOff, n); err != nil {
		return fmt.Errorf("cudamover: %w", err)
	}
	if err := m.g.SyncStream(s); err != nil {
		return fmt.Errorf("cudamover: %w", err)
	}
	return nil
}

func isHost(t tensor.Tensor) bool { _, ok := t.(*tensor.Host); return ok }

// Stage implements local.Mover: n bytes of src from off into a new device message.
func (m *Mover) Stage(src tensor.Tensor, off, n int64) (local.Message, error) {
	if isHost(src) {
		return m.host.Stage(src, off, n)
	}
	b, err := m.messageFor(src, off, n)
	if err != nil {
		return nil, err
	}
	if err := m.copyOn(b, 0, src, off, n, 0); err != nil {
		_ = m.pool.Put(b)
		return nil, err
	}
	return msg{b: b}, nil
}

// messageFor takes a pooled message buffer for n bytes of src from off, which must be
// whole elements.
func (m *Mover) messageFor(src tensor.Tensor, off, n int64) (*cuda.Buffer, error) {
	es := int64(src.DType().Size())
	if n%es != 0 || off%es != 0 {
		return nil, fmt.Errorf("cudamover: %d bytes at %d are not whole %s elements", n, off, src.DType())
	}
	b, err := m.get(src.DType(), int(n/es))
	if err != nil {
		return nil, fmt.Errorf("cudamover: message of %d bytes: %w", n, err)
	}
	return b, nil
}

// get takes a message buffer from the pool, first giving back those whose lane copies
// have finished (asked, not waited for).
func (m *Mover) get(dt tensor.DType, n int) (*cuda.Buffer, error) {
	m.reclaim()
	return m.pool.Get(dt, n)
}

// reclaim gives the message buffers whose lane copies have finished back to the pool.
func (m *Mover) reclaim() {
	m.relMu.Lock()
	keep := m.pending[:0]
	for _, r := range m.pending {
		done, err := m.g.EventDone(r.ev)
		if err != nil || !done {
			keep = append(keep, r)
			continue
		}
		_ = m.g.DestroyEvent(r.ev)
		_ = m.pool.Put(r.b)
	}
	m.pending = keep
	m.relMu.Unlock()
}

// Put implements local.Mover: the message into dst at off; a device message is
// delivered once and its buffer goes back to the pool.
func (m *Mover) Put(dst tensor.Tensor, off int64, x local.Message) error {
	dm, ok := x.(msg)
	if !ok {
		if isHost(dst) {
			return m.host.Put(dst, off, x)
		}
		return fmt.Errorf("cudamover: a host message into device tensor %v", dst.Shape())
	}
	if isHost(dst) {
		return fmt.Errorf("cudamover: a device message into host tensor %v", dst.Shape())
	}
	err := m.copyOn(dst, off, dm.b, 0, dm.b.Bytes(), dm.ready)
	if dm.ready != 0 {
		_ = m.g.DestroyEvent(dm.ready)
	}
	if perr := m.pool.Put(dm.b); err == nil {
		err = perr
	}
	return err
}

// lane is one rank's transfer stream in one group.
type lane struct {
	m *Mover
	s cuda.Stream
}

// NewLane implements local.OrderedMover: a stream of its own.
func (m *Mover) NewLane() (local.Lane, error) {
	s, err := m.g.NewStream()
	if err != nil {
		return nil, fmt.Errorf("cudamover: lane: %w", err)
	}
	return &lane{m: m, s: s}, nil
}

// Wait implements local.Lane.
func (l *lane) Wait(ev comm.Event) error {
	if ev == 0 {
		return nil
	}
	return l.m.g.StreamWait(l.s, cuda.Event(ev))
}

// Stage implements local.Lane: the copy is enqueued on the lane, and the message
// carries the event that marks its end.
func (l *lane) Stage(src tensor.Tensor, off, n int64) (local.Message, error) {
	m := l.m
	if isHost(src) {
		return m.host.Stage(src, off, n)
	}
	b, err := m.messageFor(src, off, n)
	if err != nil {
		return nil, err
	}
	if err := m.g.CopyOn(l.s, b, 0, src, off, n); err != nil {
		_ = m.pool.Put(b)
		return nil, fmt.Errorf("cudamover: %w", err)
	}
	ev, err := m.g.Record(l.s)
	if err != nil {
		return nil, fmt.Errorf("cudamover: %w", err) // the buffer stays out of the pool: the copy may still run
	}
	return msg{b: b, ready: ev}, nil
}

// Put implements local.Lane: the lane waits for the message's copy, copies it into dst,
// and the message buffer goes back to the pool once that copy has finished.
func (l *lane) Put(dst tensor.Tensor, off int64, x local.Message) error {
	m := l.m
	dm, ok := x.(msg)
	if !ok {
		if isHost(dst) {
			return m.host.Put(dst, off, x)
		}
		return fmt.Errorf("cudamover: a host message into device tensor %v", dst.Shape())
	}
	if isHost(dst) {
		return fmt.Errorf("cudamover: a device message into host tensor %v", dst.Shape())
	}
	if dm.ready != 0 {
		if err := m.g.StreamWait(l.s, dm.ready); err != nil {
			return fmt.Errorf("cudamover: %w", err)
		}
		_ = m.g.DestroyEvent(dm.ready) // the wait is enqueued: the event may go
	}
	if err := m.g.CopyOn(l.s, dst, off, dm.b, 0, dm.b.Bytes()); err != nil {
		return fmt.Errorf("cudamover: %w", err)
	}
	ev, err := m.g.Record(l.s)
	if err != nil {
		return fmt.Errorf("cudamover: %w", err)
	}
	m.relMu.Lock()
	m.pending = append(m.pending, release{dm.b, ev})
	m.relMu.Unlock()
	return nil
}

// Mark implements local.Lane.
func (l *lane) Mark() (comm.Event, error) {
	ev, err := l.m.g.Record(l.s)
	return comm.Event(ev), err
}

// Close implements local.Lane: the stream is destroyed once its work is done (CUDA
// destroys a stream with pending work after it finishes).
func (l *lane) Close() error { return l.m.g.DestroyStream(l.s) }

// Reduce implements local.Mover: fp32 sums and maxima run on the device in rank order
// (fp32 arithmetic); other dtypes are reduced on the host (float64, rounded once).
func (m *Mover) Reduce(dst tensor.Tensor, off int64, ms []local.Message, op comm.Op) error {
	if len(ms) == 0 {
		return nil
	}
	if isHost(dst) {
		return m.host.Reduce(dst, off, ms, op)
	}
	db, ok := dst.(*cuda.Buffer)
	if !ok {
		return fmt.Errorf("cudamover: reduce into %T", dst)
	}
	dms := make([]msg, len(ms))
	for i, x := range ms {
		dm, ok := x.(msg)
		if !ok || dm.b.Bytes() != ms[0].Len() {
			return fmt.Errorf("cudamover: reduce of mixed or unequal messages")
		}
		dms[i] = dm
	}
	defer func() {
		for _, dm := range dms {
			_ = m.pool.Put(dm.b)
		}
	}()
	es := int64(db.DType().Size())
	view, err := db.View(int(off/es), int(ms[0].Len()/es))
	if err != nil {
		return fmt.Errorf("cudamover: %w", err)
	}
	if db.DType() != tensor.FP32 {
		return m.reduceOnHost(view, dms, op)
	}
	m.redMu.Lock()
	defer m.redMu.Unlock()
	st := m.red.Stream()
	for _, dm := range dms {
		if dm.ready != 0 {
			if err := m.g.StreamWait(st, dm.ready); err != nil {
				return fmt.Errorf("cudamover: %w", err)
			}
			_ = m.g.DestroyEvent(dm.ready)
		}
	}
	if err := m.g.CopyOn(st, view, 0, dms[0].b, 0, view.Bytes()); err != nil {
		return fmt.Errorf("cudamover: %w", err)
	}
	for _, dm := range dms[1:] {
		if op == comm.Max {
			err = m.red.Max(view, dm.b)
		} else {
			err = m.red.Accumulate(view, dm.b)
		}
		if err != nil {
			return fmt.Errorf("cudamover: %w", err)
		}
	}
	if err := m.g.SyncStream(st); err != nil {
		return fmt.Errorf("cudamover: %w", err)
	}
	return nil
}

// reduceOnHost copies the messages out, reduces them as HostMover does, and copies the
// result back (dtypes without a device reduction; the CP methods reduce fp32 only).
func (m *Mover) reduceOnHost(dst *cuda.Buffer, ms []msg, op comm.Op) error {
	hs := make([]local.Message, len(ms))
	for i, dm := range ms {
		h := tensor.NewHost(dm.b.DType(), dm.b.Shape()...)
		if err := m.g.CopyOut(h, dm.b); err != nil {
			return fmt.Errorf("cudamover: %w", err)
		}
		x, err := m.host.Stage(h, 0, h.Bytes())
		if err != nil {
			return err
		}
		hs[i] = x
	}
	out := tensor.NewHost(dst.DType(), dst.Shape()...)
	if err := m.host.Reduce(out, 0, hs, op); err != nil {
		return err
	}
	return m.g.CopyIn(dst, out)
}
