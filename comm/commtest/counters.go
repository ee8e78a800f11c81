package commtest

import (
	"errors"
	"fmt"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

func counterCases() []Case {
	return []Case{{"counters", counters}}
}

// counters checks that a send to another rank counts exactly its bytes and at least one
// message, that a receive counts nothing, and that a collective over more than one rank
// counts something.
func counters(c comm.Comm) error {
	r, n := c.Rank(), c.Size()
	if n == 1 {
		before := c.Counters()
		buf := fill(tensor.FP32, 1, func(_, i int) float64 { return float64(i) })
		if err := c.AllReduce(buf, comm.Sum); err != nil {
			return call("all-reduce", err)
		}
		if d := c.Counters().BytesSent - before.BytesSent; d != 0 {
			return fmt.Errorf("counters: one rank sent %d bytes to nobody", d)
		}
		return nil
	}
	send := fill(tensor.FP32, 1, func(_, i int) float64 { return float64(i) })
	recv := tensor.NewHost(tensor.FP32, rows, cols)
	before := c.Counters()
	// Rank 0 sends to rank 1 only.
	var err error
	switch r {
	case 0:
		err = c.Send(send, 1)
	case 1:
		err = c.Recv(recv, 0)
	}
	if err != nil {
		return call("send/recv", err)
	}
	mid := c.Counters()
	buf := fill(tensor.FP32, 1, func(_, i int) float64 { return float64(i) })
	if err := c.AllReduce(buf, comm.Sum); err != nil {
		return call("all-reduce", err)
	}
	after := c.Counters()
	var errs []error
	wantBytes, wantMin := int64(0), int64(0)
	if r == 0 {
		wantBytes, wantMin = send.Bytes(), 1
	}
	if d := mid.BytesSent - before.BytesSent; d != wantBytes {
		errs = append(errs, fmt.Errorf("counters: a send of %d bytes counted %d bytes on rank %d", wantBytes, d, r))
	}
	if d := mid.Messages - before.Messages; d < wantMin || (wantMin == 0 && d != 0) {
		errs = append(errs, fmt.Errorf("counters: %d messages counted on rank %d for %d sends", d, r, wantMin))
	}
	if after.BytesSent <= mid.BytesSent || after.Messages <= mid.Messages {
		errs = append(errs, fmt.Errorf("counters: an all-reduce over %d ranks counted no bytes or messages on rank %d", n, r))
	}
	return errors.Join(errs...)
}
