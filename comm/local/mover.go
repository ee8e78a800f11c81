package local

import (
	"fmt"
	"math"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// Message is a private copy of bytes in flight between two ranks.
type Message interface {
	Len() int64
}

// Mover copies bytes between a rank's tensors and messages. Offsets and lengths are in
// bytes and always whole elements.
type Mover interface {
	// Stage copies n bytes of src from off into a new message.
	Stage(src tensor.Tensor, off, n int64) (Message, error)
	// Put copies a message into dst at off.
	Put(dst tensor.Tensor, off int64, m Message) error
	// Reduce writes op over the messages (in order, computed in float64, rounded once)
	// into dst at off.
	Reduce(dst tensor.Tensor, off int64, ms []Message, op comm.Op) error
}

// OrderedMover is a Mover that can also move data on device streams ordered by events
// (comm.Ordered): a Lane per communicator and rank enqueues its copies and returns at
// once.
type OrderedMover interface {
	Mover
	// NewLane makes a transfer lane: a stream of its own.
	NewLane() (Lane, error)
}

// Lane is one rank's transfer stream in one group: what GroupAfter enqueues on.
type Lane interface {
	// Wait makes the lane wait, on the device, for the work ev marks.
	Wait(ev comm.Event) error
	// Stage enqueues the copy of n bytes of src from off into a new message, which
	// carries the mark of the copy's end.
	Stage(src tensor.Tensor, off, n int64) (Message, error)
	// Put enqueues, after the message's copy has finished (device side), its copy into
	// dst at off; the message's memory is reused only once that copy has finished.
	Put(dst tensor.Tensor, off int64, m Message) error
	// Mark returns a new event marking everything enqueued on the lane so far.
	Mark() (comm.Event, error)
	// Close releases the lane's stream (after its work).
	Close() error
}

// HostMover moves *tensor.Host data.
type HostMover struct{}

type hostMsg []byte

func (m hostMsg) Len() int64 { return int64(len(m)) }

func asHost(t tensor.Tensor) (*tensor.Host, error) {
	h, err := tensor.AsHost(t)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	return h, nil
}

func span(h *tensor.Host, off, n int64) ([]byte, error) {
	if off < 0 || n < 0 || off+n > int64(len(h.Data)) {
		return nil, fmt.Errorf("local: bytes [%d, %d) outside a %d-byte tensor", off, off+n, len(h.Data))
	}
	return h.Data[off : off+n], nil
}

// Stage implements Mover.
func (HostMover) Stage(src tensor.Tensor, off, n int64) (Message, error) {
	h, err := asHost(src)
	if err != nil {
		return nil, err
	}
	b, err := span(h, off, n)
	if err != nil {
		return nil, err
	}
	return hostMsg(append([]byte(nil), b...)), nil
}

// Put implements Mover.
func (HostMover) Put(dst tensor.Tensor, off int64, m Message) error {
	h, err := asHost(dst)
	if err != nil {
		return err
	}
	b, err := span(h, off, m.Len())
	if err != nil {
		return err
	}
	copy(b, m.(hostMsg))
	return nil
}

// Reduce implements Mover.
func (HostMover) Reduce(dst tensor.Tensor, off int64, ms []Message, op comm.Op) error {
	h, err := asHost(dst)
	if err != nil {
		return err
	}
	if len(ms) == 0 {
		return nil
	}
	n := ms[0].Len()
	b, err := span(h, off, n)
	if err != nil {
		return err
	}
	es := int64(h.DType().Size())
	view := tensor.NewHost(h.DType(), int(n/es))
	acc := make([]float64, n/es)
	for j, m := range ms {
		if m.Len() != n {
			return fmt.Errorf("local: reduce of %d-byte and %d-byte messages", n, m.Len())
		}
		view.Data = m.(hostMsg)
		for i := range acc {
			v := view.At(i)
			switch {
			case j == 0:
				acc[i] = v
			case op == comm.Max:
				acc[i] = math.Max(acc[i], v)
			default:
				acc[i] += v
			}
		}
	}
	view.Data = b
	view.SetFloat64s(acc)
	return nil
}
