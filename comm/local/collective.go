package local

import (
	"fmt"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// blocks checks that t splits into Size equal row blocks and returns the block size in
// bytes.
func (c *Comm) blocks(op string, t tensor.Tensor) (int64, error) {
	sh := t.Shape()
	n := c.Size()
	if len(sh) == 0 || sh[0]%n != 0 {
		return 0, fmt.Errorf("local: %s: first dimension of shape %v does not split over %d ranks", op, sh, n)
	}
	return t.Bytes() / int64(n), nil
}

func sameDType(op string, a, b tensor.Tensor) error {
	if a.DType() != b.DType() {
		return fmt.Errorf("local: %s of %s into %s", op, a.DType(), b.DType())
	}
	return nil
}

// exchange sends part(r) of send to every rank r (itself included) and hands every
// rank's message to got, in rank order.
func (c *Comm) exchange(op string, send tensor.Tensor, part func(r int) (off, n int64), got func(r int, m Message) error) error {
	if err := c.usable("local " + op); err != nil {
		return err
	}
	n := c.Size()
	for i := range n {
		r := (c.rank + i) % n // start with the next rank so no one is everyone's first
		off, l := part(r)
		if err := c.post(tagColl, send, off, l, r); err != nil {
			return fmt.Errorf("local: %s: %w", op, err)
		}
	}
	deadline := c.deadline()
	for r := range n {
		m, err := c.fetch(op, tagColl, r, deadline)
		if err != nil {
			return err
		}
		if err := got(r, m); err != nil {
			return fmt.Errorf("local: %s: %w", op, err)
		}
	}
	return nil
}

// AllToAll sends row block r of send to rank r and puts rank r's block in row block r
// of recv.
func (c *Comm) AllToAll(send, recv tensor.Tensor) error {
	bs, err := c.blocks("alltoall", send)
	if err != nil {
		return err
	}
	if send.Bytes() != recv.Bytes() {
		return fmt.Errorf("local: alltoall of %d bytes into %d", send.Bytes(), recv.Bytes())
	}
	if err := sameDType("alltoall", send, recv); err != nil {
		return err
	}
	return c.exchange("alltoall", send,
		func(r int) (int64, int64) { return int64(r) * bs, bs },
		func(r int, m Message) error { return c.w.cfg.mover.Put(recv, int64(r)*bs, m) })
}

// AllGather puts rank r's send into row block r of recv.
func (c *Comm) AllGather(send, recv tensor.Tensor) error {
	if send.Bytes()*int64(c.Size()) != recv.Bytes() {
		return fmt.Errorf("local: allgather of %d bytes from %d ranks into %d", send.Bytes(), c.Size(), recv.Bytes())
	}
	if err := sameDType("allgather", send, recv); err != nil {
		return err
	}
	bs := send.Bytes()
	return c.exchange("allgather", send,
		func(int) (int64, int64) { return 0, bs },
		func(r int, m Message) error { return c.w.cfg.mover.Put(recv, int64(r)*bs, m) })
}

// ReduceScatter sums send over ranks; rank r keeps row block r (summed in rank order).
func (c *Comm) ReduceScatter(send, recv tensor.Tensor) error {
	bs, err := c.blocks("reducescatter", send)
	if err != nil {
		return err
	}
	if recv.Bytes() != bs {
		return fmt.Errorf("local: reducescatter of %d-byte blocks into %d bytes", bs, recv.Bytes())
	}
	if err := sameDType("reducescatter", send, recv); err != nil {
		return err
	}
	ms := make([]Message, c.Size())
	err = c.exchange("reducescatter", send,
		func(r int) (int64, int64) { return int64(r) * bs, bs },
		func(r int, m Message) error { ms[r] = m; return nil })
	if err != nil {
		return err
	}
	return c.w.cfg.mover.Reduce(recv, 0, ms, comm.Sum)
}

// AllReduce reduces buf over ranks in place (every rank gets the same result).
func (c *Comm) AllReduce(buf tensor.Tensor, op comm.Op) error {
	ms := make([]Message, c.Size())
	n := buf.Bytes()
	err := c.exchange("allreduce", buf,
		func(int) (int64, int64) { return 0, n },
		func(r int, m Message) error { ms[r] = m; return nil })
	if err != nil {
		return err
	}
	return c.w.cfg.mover.Reduce(buf, 0, ms, op)
}

// Barrier returns once every rank of the group has entered it.
func (c *Comm) Barrier() error {
	return c.exchange("barrier", nil,
		func(int) (int64, int64) { return 0, 0 },
		func(int, Message) error { return nil })
}
