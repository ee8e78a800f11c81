package tcp

import (
	"fmt"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// rowBlocks checks that t's bytes split into n equal row blocks and returns their size.
func rowBlocks(what string, h *tensor.Host, n int) (int, error) {
	sh := h.Shape()
	if len(sh) == 0 || sh[0]%n != 0 {
		return 0, fmt.Errorf("tcp: %s: first dimension of shape %v does not split over %d ranks", what, sh, n)
	}
	return len(h.Data) / n, nil
}

// exchange sends out[p] to every rank p and receives in[p] from it (self by copy).
func (c *Comm) exchange(what string, out, in [][]byte) error {
	for p := range out {
		if out[p] != nil {
			if err := c.sendBytes(what, tagColl, p, out[p]); err != nil {
				return err
			}
		}
	}
	for p := range in {
		if in[p] != nil {
			if err := c.recvBytes(what, tagColl, p, in[p]); err != nil {
				return err
			}
		}
	}
	return nil
}

// gatherBytes puts every rank's mine into its slot of all.
func (c *Comm) gatherBytes(what string, mine, all []byte) error {
	n := len(c.members)
	out, in := make([][]byte, n), make([][]byte, n)
	for p := range n {
		out[p] = mine
		in[p] = all[p*len(mine) : (p+1)*len(mine)]
	}
	return c.exchange(what, out, in)
}

func (c *Comm) hosts(what string, a, b tensor.Tensor) (*tensor.Host, *tensor.Host, error) {
	if c.closed {
		return nil, nil, fmt.Errorf("tcp: %s: communicator is closed", what)
	}
	ha, hb, err := comm.HostPair(a, b)
	if err != nil {
		return nil, nil, fmt.Errorf("tcp: %s: %w", what, err)
	}
	return ha, hb, nil
}

// AllToAll sends the p-th row block of send to rank p and receives rank p's block into
// the p-th row block of recv.
func (c *Comm) AllToAll(send, recv tensor.Tensor) error {
	hs, hr, err := c.hosts("all-to-all", send, recv)
	if err != nil {
		return err
	}
	n := len(c.members)
	bs, err := rowBlocks("all-to-all", hs, n)
	if err != nil {
		return err
	}
	if len(hr.Data) != len(hs.Data) {
		return fmt.Errorf("tcp: all-to-all: recv holds %d bytes, send %d", len(hr.Data), len(hs.Data))
	}
	out, in := make([][]byte, n), make([][]byte, n)
	for p := range n {
		out[p] = hs.Data[p*bs : (p+1)*bs]
		in[p] = hr.Data[p*bs : (p+1)*bs]
	}
	return c.exchange("all-to-all", out, in)
}

// AllGather puts rank p's send into the p-th row block of recv.
func (c *Comm) AllGather(send, recv tensor.Tensor) error {
	hs, hr, err := c.hosts("all-gather", send, recv)
	if err != nil {
		return err
	}
	if len(hr.Data) != len(hs.Data)*len(c.members) {
		return fmt.Errorf("tcp: all-gather: recv holds %d bytes, not %d ranks x %d", len(hr.Data), len(c.members), len(hs.Data))
	}
	return c.gatherBytes("all-gather", hs.Data, hr.Data)
}

// ReduceScatter sums send over ranks; rank p keeps the p-th row block. The sum runs in
// float64 in rank order and is rounded once, so every backend's exact inputs give
// exact outputs.
func (c *Comm) ReduceScatter(send, recv tensor.Tensor) error {
	hs, hr, err := c.hosts("reduce-scatter", send, recv)
	if err != nil {
		return err
	}
	n := len(c.members)
	bs, err := rowBlocks("reduce-scatter", hs, n)
	if err != nil {
		return err
	}
	if len(hr.Data) != bs {
		return fmt.Errorf("tcp: reduce-scatter: recv holds %d bytes, not one of %d row blocks of send (%d)", len(hr.Data), n, bs)
	}
	out, in := make([][]byte, n), make([][]byte, n)
	parts := make([]*tensor.Host, n)
	for p := range n {
		out[p] = hs.Data[p*bs : (p+1)*bs]
		parts[p] = tensor.NewHost(hs.DType(), hr.Numel())
		in[p] = parts[p].Data
	}
	if err := c.exchange("reduce-scatter", out, in); err != nil {
		return err
	}
	reduce(hr, parts, comm.Sum)
	return nil
}

// AllReduce reduces buf over ranks with op; every rank gets the same result.
func (c *Comm) AllReduce(buf tensor.Tensor, op comm.Op) error {
	h, _, err := c.hosts("all-reduce", buf, buf)
	if err != nil {
		return err
	}
	n := len(c.members)
	all := tensor.NewHost(h.DType(), n*h.Numel())
	if err := c.gatherBytes("all-reduce", h.Data, all.Data); err != nil {
		return err
	}
	parts := make([]*tensor.Host, n)
	for p := range n {
		parts[p] = tensor.NewHost(h.DType(), h.Numel())
		copy(parts[p].Data, all.Data[p*len(h.Data):])
	}
	reduce(h, parts, op)
	return nil
}

// Barrier returns once every rank of the group has called it.
func (c *Comm) Barrier() error {
	if c.closed {
		return fmt.Errorf("tcp: barrier: communicator is closed")
	}
	n := len(c.members)
	out, in := make([][]byte, n), make([][]byte, n)
	for p := range n {
		out[p], in[p] = []byte{}, []byte{}
	}
	return c.exchange("barrier", out, in)
}

// reduce writes op over parts, in order, into dst.
func reduce(dst *tensor.Host, parts []*tensor.Host, op comm.Op) {
	for i := range dst.Numel() {
		acc := parts[0].At(i)
		for _, p := range parts[1:] {
			v := p.At(i)
			if op == comm.Max {
				if v > acc || v != v {
					acc = v
				}
			} else {
				acc += v
			}
		}
		dst.Set(i, acc)
	}
}
