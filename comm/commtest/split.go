package commtest

import (
	"errors"
	"fmt"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

func splitCases() []Case {
	return []Case{
		{"split-even-odd-reversed", splitEvenOdd},
		{"split-one-color", splitWhole},
	}
}

// splitEvenOdd splits into even and odd world ranks, ordered by descending rank, and
// runs an all-gather, an all-reduce and a ring on each half.
func splitEvenOdd(c comm.Comm) error {
	r, n := c.Rank(), c.Size()
	sub, err := c.Split(r%2, n-r)
	if err != nil {
		return call("split", err)
	}
	defer sub.Close()
	// The members of this half, in the new order.
	var members []int
	for q := n - 1; q >= 0; q-- {
		if q%2 == r%2 {
			members = append(members, q)
		}
	}
	var errs []error
	if sub.Size() != len(members) {
		return &commError{fmt.Errorf("split: size %d, want %d", sub.Size(), len(members))}
	}
	me := sub.Rank()
	if members[me] != r {
		errs = append(errs, fmt.Errorf("split: world rank %d got sub rank %d, want %d", r, me, indexOf(members, r)))
	}
	send := fill(tensor.FP32, 1, func(_, i int) float64 { return a2aValue(r, 0, i) })
	gathered := tensor.NewHost(tensor.FP32, len(members)*rows, cols)
	if err := sub.AllGather(send, gathered); err != nil {
		return call("split all-gather", err)
	}
	errs = append(errs, check("split all-gather", gathered, len(members), func(p, i int) float64 { return a2aValue(members[p], 0, i) }))
	sum := fill(tensor.FP64, 1, func(_, i int) float64 { return sumValue(r, i) })
	if err := sub.AllReduce(sum, comm.Sum); err != nil {
		return call("split all-reduce", err)
	}
	errs = append(errs, check("split all-reduce", sum, 1, func(_, i int) float64 {
		s := 0.0
		for _, q := range members {
			s += sumValue(q, i)
		}
		return s
	}))
	k := len(members)
	next, prev := (me+1)%k, (me-1+k)%k
	ring := tensor.NewHost(tensor.FP32, rows, cols)
	if err := sub.Group(func() error { return errors.Join(sub.Send(send, next), sub.Recv(ring, prev)) }); err != nil {
		return call("split ring", err)
	}
	errs = append(errs, check("split ring", ring, 1, func(_, i int) float64 { return a2aValue(members[prev], 0, i) }))
	return errors.Join(errs...)
}

// splitWhole splits with one color and key 0: the same group in the same order, on
// which an all-to-all must agree with the world's.
func splitWhole(c comm.Comm) error {
	r, n := c.Rank(), c.Size()
	sub, err := c.Split(7, 0)
	if err != nil {
		return call("split", err)
	}
	defer sub.Close()
	if sub.Size() != n || sub.Rank() != r {
		return &commError{fmt.Errorf("split with one color: rank %d of %d, want %d of %d", sub.Rank(), sub.Size(), r, n)}
	}
	send := fill(tensor.BF16, n, func(p, i int) float64 { return a2aValue(r, p, i) })
	recv := tensor.NewHost(tensor.BF16, n*rows, cols)
	if err := sub.AllToAll(send, recv); err != nil {
		return call("split all-to-all", err)
	}
	return check("split all-to-all", recv, n, func(p, i int) float64 { return a2aValue(p, r, i) })
}

func indexOf(xs []int, x int) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}
