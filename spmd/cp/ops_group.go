package cp

import (
	"fmt"
	"sync"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/tensor"
)

// The grouped transfers of balanced: any sends and receives (body, run inside c.Group),
// ordered after the compute enqueued so far, overlapping what follows until their wait,
// as startExchange orders a ring exchange, on every ops. Several may be in flight on one
// communicator: a stream-ordered one runs them in the order they were started, the host
// path chains each after the one before (prev).

func (o hostOps) startGroup(c comm.Comm, prev, body func() error) (func() error, error) {
	return hostGroup(o, c, prev, body)
}

// hostGroup runs the group in a goroutine, after prev and a host wait (both in that
// goroutine) for the compute enqueued so far; the returned wait joins it (any number of
// times).
func hostGroup(o ops, c comm.Comm, prev, body func() error) (func() error, error) {
	ready, err := o.mark()
	if err != nil {
		return nil, fmt.Errorf("cp: marking the compute: %w", err)
	}
	done := make(chan struct{})
	var gerr error
	go func() {
		defer close(done)
		if prev != nil {
			if gerr = prev(); gerr != nil {
				return
			}
		}
		if gerr = ready(); gerr != nil {
			return
		}
		gerr = c.Group(body)
	}()
	return func() error { <-done; return gerr }, nil
}

// startGroup on a stream-ordered communicator enqueues the group after an event of the
// compute stream, and the compute stream waits for its done event; otherwise hostGroup.
func (d deviceOps) startGroup(c comm.Comm, prev, body func() error) (func() error, error) {
	oc, ok := c.(comm.Ordered)
	if !ok || !oc.StreamOrdered() {
		return hostGroup(d, c, prev, body)
	}
	after, err := d.p.Record()
	if err != nil {
		return nil, fmt.Errorf("cp: marking the compute: %w", err)
	}
	done, err := oc.GroupAfter(after, body)
	d.p.DestroyEvent(after)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	var werr error
	return func() error {
		once.Do(func() {
			if done != 0 {
				werr = d.p.WaitEvent(done)
				d.p.DestroyEvent(done)
			}
		})
		return werr
	}, nil
}

// startGroup of a traced run runs the group at once, as the overlapped transfer it is
// (the tracer orders it after the compute so far and the communicator's last event).
func (o traceOps) startGroup(c comm.Comm, _, body func() error) (func() error, error) {
	err := o.t.Transfer(func() error { return c.Group(body) })
	return func() error { return nil }, err
}

// RowViewer is a tensor that can stand for a run of its rows without a copy (a traced
// run's placeholders).
type RowViewer interface {
	// View is the tensor of shape sharing t's elements from element offset off.
	View(off int, shape ...int) (tensor.Tensor, error)
}

// rowsOf is rows [start, end) of t along its first dimension, sharing t's memory: a
// host slice, a device buffer's view, or a RowViewer's.
func rowsOf(t tensor.Tensor, start, end int) (tensor.Tensor, error) {
	sh := t.Shape()
	if len(sh) == 0 || start < 0 || end < start || end > sh[0] {
		return nil, fmt.Errorf("cp: rows [%d, %d) of a tensor of shape %v", start, end, sh)
	}
	if start == 0 && end == sh[0] {
		return t, nil
	}
	row := tensor.Numel(sh[1:])
	shape := append([]int{end - start}, sh[1:]...)
	switch x := t.(type) {
	case *tensor.Host:
		return x.Rows(start, end), nil
	case *cuda.Buffer:
		return x.View(start*row, shape...)
	case RowViewer:
		return x.View(start*row, shape...)
	}
	return nil, fmt.Errorf("cp: no view of rows of a %T", t)
}
