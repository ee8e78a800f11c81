package cp

import (
	"fmt"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/tensor"
)

// The grouped transfer of balanced: any sends and receives (body, run inside c.Group),
// ordered after the compute enqueued so far, overlapping what follows until its wait,
// exactly as startExchange orders a ring exchange, on every ops.

func (o hostOps) startGroup(c comm.Comm, body func() error) (func() error, error) {
	return hostGroup(o, c, body)
}

// hostGroup runs the group in a goroutine after a host wait (in that goroutine) for the
// compute enqueued so far; the returned wait joins it.
func hostGroup(o ops, c comm.Comm, body func() error) (func() error, error) {
	ready, err := o.mark()
	if err != nil {
		return nil, fmt.Errorf("cp: marking the compute: %w", err)
	}
	ch := async(func() error {
		if err := ready(); err != nil {
			return err
		}
		return c.Group(body)
	})
	return func() error { return <-ch }, nil
}

// startGroup on a stream-ordered communicator enqueues the group after an event of the
// compute stream, and the compute stream waits for its done event; otherwise hostGroup.
func (d deviceOps) startGroup(c comm.Comm, body func() error) (func() error, error) {
	oc, ok := c.(comm.Ordered)
	if !ok || !oc.StreamOrdered() {
		return hostGroup(d, c, body)
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
	return func() error {
		if done == 0 {
			return nil
		}
		err := d.p.WaitEvent(done)
		d.p.DestroyEvent(done)
		return err
	}, nil
}

// startGroup of a traced run runs the group at once, as the overlapped transfer it is.
func (o traceOps) startGroup(c comm.Comm, body func() error) (func() error, error) {
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
