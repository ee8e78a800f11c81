package nccl

import (
	"fmt"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// devBuf checks that t is a device tensor of a type NCCL moves and returns its address
// and NCCL type.
func devBuf(op, what string, t tensor.Tensor) (uintptr, DataType, error) {
	if t == nil {
		return 0, 0, fmt.Errorf("nccl: %s: %s is nil", op, what)
	}
	d, ok := t.(tensor.DeviceBuffer)
	if !ok {
		return 0, 0, fmt.Errorf("nccl: %s: %s is a %T, not a device tensor (tensor.DeviceBuffer)", op, what, t)
	}
	dt, err := DataTypeOf(t.DType())
	if err != nil {
		return 0, 0, fmt.Errorf("nccl: %s: %s: %w", op, what, err)
	}
	return d.DevicePtr(), dt, nil
}

// pair checks a (send, recv) pair: both device tensors of one type.
func pair(op string, send, recv tensor.Tensor) (s, r uintptr, dt DataType, err error) {
	if s, dt, err = devBuf(op, "send", send); err != nil {
		return
	}
	if r, _, err = devBuf(op, "recv", recv); err != nil {
		return
	}
	if send.DType() != recv.DType() {
		err = fmt.Errorf("nccl: %s of %s into %s: types differ", op, send.DType(), recv.DType())
	}
	return
}

func (c *Comm) checkPeer(op string, peer int) error {
	if peer < 0 || peer >= c.size {
		return fmt.Errorf("nccl: %s: peer %d is not a rank of this communicator of %d", op, peer, c.size)
	}
	return nil
}

// Send sends buf to peer (ncclSend). Outside a Group it returns once the peer has
// received it, so a send to itself, or a ring exchange, must be inside a Group.
func (c *Comm) Send(buf tensor.Tensor, peer int) error {
	p, dt, err := devBuf("send", "buf", buf)
	if err != nil {
		return err
	}
	if err := c.checkPeer("send", peer); err != nil {
		return err
	}
	op := fmt.Sprintf("ncclSend of %d B to rank %d", buf.Bytes(), peer)
	if err := c.run(op, func() error { return c.lib.Send(p, buf.Numel(), dt, peer, c.handle, c.stream.Handle()) }); err != nil {
		return err
	}
	if peer != c.rank {
		c.count(buf.Bytes(), 1)
	}
	return nil
}

// Recv receives into buf from peer (ncclRecv).
func (c *Comm) Recv(buf tensor.Tensor, peer int) error {
	p, dt, err := devBuf("recv", "buf", buf)
	if err != nil {
		return err
	}
	if err := c.checkPeer("recv", peer); err != nil {
		return err
	}
	op := fmt.Sprintf("ncclRecv of %d B from rank %d", buf.Bytes(), peer)
	return c.run(op, func() error { return c.lib.Recv(p, buf.Numel(), dt, peer, c.handle, c.stream.Handle()) })
}

// rowBlocks checks that t's first dimension splits over the ranks.
func (c *Comm) rowBlocks(op string, t tensor.Tensor) error {
	sh := t.Shape()
	if len(sh) == 0 || sh[0]%c.size != 0 {
		return fmt.Errorf("nccl: %s: first dimension of shape %v does not split over %d ranks", op, sh, c.size)
	}
	return nil
}

// AllToAll sends row block r of send to rank r and receives rank r's block into row
// block r of recv: ncclAlltoAll where the library has it (2.28.3), else a group of
// sends and receives.
func (c *Comm) AllToAll(send, recv tensor.Tensor) error {
	s, r, dt, err := pair("alltoall", send, recv)
	if err != nil {
		return err
	}
	if err := c.rowBlocks("alltoall", send); err != nil {
		return err
	}
	if send.Numel() != recv.Numel() {
		return fmt.Errorf("nccl: alltoall of %d elements into %d", send.Numel(), recv.Numel())
	}
	if s == r {
		if c.size == 1 {
			return c.usable("alltoall") // a world of one: nothing moves
		}
		return fmt.Errorf("nccl: alltoall: send and recv are the same buffer; NCCL needs them apart")
	}
	n := send.Numel() / c.size
	bs := uintptr(int64(n) * int64(send.DType().Size()))
	var op string
	var enqueue func() error
	if c.lib.alltoAll != nil && !c.opts.p2pA2A {
		op = "ncclAlltoAll"
		enqueue = func() error { return c.lib.AlltoAll(s, r, n, dt, c.handle, c.stream.Handle()) }
	} else {
		op = "alltoall (ncclSend/ncclRecv group)"
		enqueue = func() error { return c.alltoallP2P(s, r, bs, n, dt) }
	}
	if err := c.run(op, enqueue); err != nil {
		return err
	}
	c.count(int64(c.size-1)*int64(bs), int64(c.size-1))
	return nil
}

// alltoallP2P is AllToAll for NCCL before 2.28.3: one group of a send and a receive per
// rank (run on the worker thread, as one host call).
func (c *Comm) alltoallP2P(s, r, bs uintptr, n int, dt DataType) error {
	if err := c.lib.GroupStart(); err != nil {
		return err
	}
	var first error
	for i := range c.size {
		peer := (c.rank + i) % c.size
		if err := c.lib.Send(s+uintptr(peer)*bs, n, dt, peer, c.handle, c.stream.Handle()); err != nil && first == nil {
			first = err
		}
		if err := c.lib.Recv(r+uintptr(peer)*bs, n, dt, peer, c.handle, c.stream.Handle()); err != nil && first == nil {
			first = err
		}
	}
	if err := c.lib.GroupEnd(); err != nil && first == nil {
		first = err
	}
	return first
}

// AllGather puts rank r's send into row block r of recv (ncclAllGather).
func (c *Comm) AllGather(send, recv tensor.Tensor) error {
	s, r, dt, err := pair("allgather", send, recv)
	if err != nil {
		return err
	}
	if int64(send.Numel())*int64(c.size) != int64(recv.Numel()) {
		return fmt.Errorf("nccl: allgather of %d elements from %d ranks into %d", send.Numel(), c.size, recv.Numel())
	}
	if err := c.run("ncclAllGather", func() error { return c.lib.AllGather(s, r, send.Numel(), dt, c.handle, c.stream.Handle()) }); err != nil {
		return err
	}
	c.count(int64(c.size-1)*send.Bytes(), int64(c.size-1))
	return nil
}

// ReduceScatter sums send over ranks; rank r keeps row block r in recv
// (ncclReduceScatter).
func (c *Comm) ReduceScatter(send, recv tensor.Tensor) error {
	s, r, dt, err := pair("reducescatter", send, recv)
	if err != nil {
		return err
	}
	if err := c.rowBlocks("reducescatter", send); err != nil {
		return err
	}
	if int64(recv.Numel())*int64(c.size) != int64(send.Numel()) {
		return fmt.Errorf("nccl: reducescatter of %d elements over %d ranks into %d", send.Numel(), c.size, recv.Numel())
	}
	if err := c.run("ncclReduceScatter", func() error {
		return c.lib.ReduceScatter(s, r, recv.Numel(), dt, OpSum, c.handle, c.stream.Handle())
	}); err != nil {
		return err
	}
	c.count(int64(c.size-1)*recv.Bytes(), int64(c.size-1))
	return nil
}

// AllReduce reduces buf over ranks in place (ncclAllReduce).
func (c *Comm) AllReduce(buf tensor.Tensor, o comm.Op) error {
	p, dt, err := devBuf("allreduce", "buf", buf)
	if err != nil {
		return err
	}
	rop, err := RedOpOf(o)
	if err != nil {
		return err
	}
	op := "ncclAllReduce (" + o.String() + ")"
	if err := c.run(op, func() error { return c.lib.AllReduce(p, p, buf.Numel(), dt, rop, c.handle, c.stream.Handle()) }); err != nil {
		return err
	}
	c.count(2*int64(c.size-1)*buf.Bytes()/int64(c.size), 2*int64(c.size-1))
	return nil
}

// Barrier returns once every rank has entered it: a one-element all-reduce on a
// scratch buffer, since NCCL has no barrier of its own.
func (c *Comm) Barrier() error {
	if err := c.usable("barrier"); err != nil {
		return err
	}
	if c.size == 1 {
		return nil
	}
	if c.scratch == 0 {
		return fmt.Errorf("nccl: barrier needs a device buffer: NCCL %s lacks ncclMemAlloc (2.19); pass WithBarrierBuffer", c.lib.VersionString())
	}
	return c.run("barrier (ncclAllReduce of 1 element)", func() error {
		return c.lib.AllReduce(c.scratch, c.scratch, 1, Float32, OpSum, c.handle, c.stream.Handle())
	})
}
