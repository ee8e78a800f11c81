package commtest

import (
	"errors"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

func p2pCases() []Case {
	return []Case{
		{"ring-group", ringGroup},
		{"ring-both-ways-group", ringBothWays},
		{"self-send-recv-group", selfSendRecv},
		{"pairs-outside-group", pairs},
	}
}

// ringGroup sends to the next rank and receives from the previous one, in a Group.
func ringGroup(c comm.Comm) error {
	r, n := c.Rank(), c.Size()
	next, prev := (r+1)%n, (r-1+n)%n
	var errs []error
	for _, dt := range dtypes {
		send := fill(dt, 1, func(_, i int) float64 { return a2aValue(r, next, i) })
		recv := tensor.NewHost(dt, rows, cols)
		err := c.Group(func() error {
			if err := c.Send(send, next); err != nil {
				return err
			}
			return c.Recv(recv, prev)
		})
		if err != nil {
			return call("ring "+dt.String(), err)
		}
		errs = append(errs, check("ring "+dt.String(), recv, 1, func(_, i int) float64 { return a2aValue(prev, r, i) }))
	}
	return errors.Join(errs...)
}

// ringBothWays sends to both neighbours and receives from both in one Group, receives
// posted before sends.
func ringBothWays(c comm.Comm) error {
	r, n := c.Rank(), c.Size()
	next, prev := (r+1)%n, (r-1+n)%n
	toNext := fill(tensor.FP32, 1, func(_, i int) float64 { return a2aValue(r, next, i) })
	toPrev := fill(tensor.FP32, 1, func(_, i int) float64 { return -a2aValue(r, prev, i) })
	fromPrev, fromNext := tensor.NewHost(tensor.FP32, rows, cols), tensor.NewHost(tensor.FP32, rows, cols)
	err := c.Group(func() error {
		return errors.Join(c.Recv(fromPrev, prev), c.Recv(fromNext, next), c.Send(toNext, next), c.Send(toPrev, prev))
	})
	if err != nil {
		return call("ring both ways", err)
	}
	return errors.Join(
		check("from previous", fromPrev, 1, func(_, i int) float64 { return a2aValue(prev, r, i) }),
		check("from next", fromNext, 1, func(_, i int) float64 { return -a2aValue(next, r, i) }))
}

// selfSendRecv sends to this rank itself.
func selfSendRecv(c comm.Comm) error {
	r := c.Rank()
	send := fill(tensor.BF16, 1, func(_, i int) float64 { return a2aValue(r, r, i) })
	recv := tensor.NewHost(tensor.BF16, rows, cols)
	if err := c.Group(func() error { return errors.Join(c.Send(send, r), c.Recv(recv, r)) }); err != nil {
		return call("self send/recv", err)
	}
	return check("self send/recv", recv, 1, func(_, i int) float64 { return a2aValue(r, r, i) })
}

// pairs exchanges between ranks 2k and 2k+1 with plain Send and Recv, ordered so that
// blocking sends cannot deadlock; a last odd rank sits out.
func pairs(c comm.Comm) error {
	r, n := c.Rank(), c.Size()
	p := r ^ 1
	if p >= n {
		return nil
	}
	send := fill(tensor.FP64, 1, func(_, i int) float64 { return a2aValue(r, p, i) + 0.5 })
	recv := tensor.NewHost(tensor.FP64, rows, cols)
	var err error
	if r%2 == 0 {
		if err = c.Send(send, p); err == nil {
			err = c.Recv(recv, p)
		}
	} else {
		if err = c.Recv(recv, p); err == nil {
			err = c.Send(send, p)
		}
	}
	if err != nil {
		return call("pair send/recv", err)
	}
	return check("pair send/recv", recv, 1, func(_, i int) float64 { return a2aValue(p, r, i) + 0.5 })
}
