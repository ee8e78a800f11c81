//go:build mpi

package mpi

/*
#include "lc_mpi.h"
*/
import "C"

import (
	"fmt"
	"math"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// collective issues one non-blocking collective through start and waits for it,
// counting bytes and messages as its usual algorithm sends them.
func (c *Comm) collective(what string, bytes int64, start func(r *reqs) C.int) error {
	r := newReqs(1)
	mu.Lock()
	rc := start(r)
	mu.Unlock()
	if err := check(what, rc); err != nil {
		r.free()
		return err
	}
	if c.size > 1 {
		c.count(bytes, int64(c.size-1))
	}
	return c.wait(what, r, nil)
}

func (c *Comm) pair(what string, a, b tensor.Tensor) (*tensor.Host, *tensor.Host, error) {
	ha, hb, err := comm.HostPair(a, b)
	if err != nil {
		return nil, nil, fmt.Errorf("mpi: %s: %w", what, err)
	}
	return ha, hb, nil
}

// blockBytes checks that h splits into size row blocks and that a block fits MPI's int.
func (c *Comm) blockBytes(what string, h *tensor.Host) (int, error) {
	sh := h.Shape()
	if len(sh) == 0 || sh[0]%c.size != 0 {
		return 0, fmt.Errorf("mpi: %s: first dimension of shape %v does not split over %d ranks", what, sh, c.size)
	}
	bs := len(h.Data) / c.size
	if bs > math.MaxInt32 {
		return 0, fmt.Errorf("mpi: %s: a block of %d bytes is over MPI's 2 GiB count limit", what, bs)
	}
	return bs, nil
}

// AllToAll sends the p-th row block of send to rank p (MPI_Ialltoall).
func (c *Comm) AllToAll(send, recv tensor.Tensor) error {
	hs, hr, err := c.pair("all-to-all", send, recv)
	if err != nil {
		return err
	}
	bs, err := c.blockBytes("all-to-all", hs)
	if err != nil {
		return err
	}
	if len(hr.Data) != len(hs.Data) {
		return fmt.Errorf("mpi: all-to-all: recv holds %d bytes, send %d", len(hr.Data), len(hs.Data))
	}
	return c.collective("all-to-all", int64(bs)*int64(c.size-1), func(r *reqs) C.int {
		return C.MPI_Ialltoall(r.buf(hs.Data), C.int(bs), C.lc_type(0), r.buf(hr.Data), C.int(bs), C.lc_type(0), c.c, r.next())
	})
}

// AllGather puts rank p's send into the p-th row block of recv (MPI_Iallgather).
func (c *Comm) AllGather(send, recv tensor.Tensor) error {
	hs, hr, err := c.pair("all-gather", send, recv)
	if err != nil {
		return err
	}
	if len(hr.Data) != len(hs.Data)*c.size {
		return fmt.Errorf("mpi: all-gather: recv holds %d bytes, not %d ranks x %d", len(hr.Data), c.size, len(hs.Data))
	}
	if len(hs.Data) > math.MaxInt32 {
		return fmt.Errorf("mpi: all-gather: %d bytes are over MPI's 2 GiB count limit", len(hs.Data))
	}
	n := C.int(len(hs.Data))
	return c.collective("all-gather", int64(len(hs.Data))*int64(c.size-1), func(r *reqs) C.int {
		return C.MPI_Iallgather(r.buf(hs.Data), n, C.lc_type(0), r.buf(hr.Data), n, C.lc_type(0), c.c, r.next())
	})
}

// reducible returns h itself for fp32 and fp64, or an fp32 copy of a bf16 or fp16
// tensor (MPI has no sum for them), and the function that writes a result back.
func reducible(h *tensor.Host) (*tensor.Host, func(res *tensor.Host, dst *tensor.Host)) {
	if h.DType() == tensor.FP32 || h.DType() == tensor.FP64 {
		return h, func(res, dst *tensor.Host) {
			if res != dst {
				copy(dst.Data, res.Data)
			}
		}
	}
	f := tensor.NewHost(tensor.FP32, h.Numel())
	for i := range h.Numel() {
		f.Set(i, h.At(i))
	}
	return f, func(res, dst *tensor.Host) {
		for i := range dst.Numel() {
			dst.Set(i, res.At(i))
		}
	}
}

// ReduceScatter sums send over ranks; rank p keeps the p-th row block
// (MPI_Ireduce_scatter_block).
func (c *Comm) ReduceScatter(send, recv tensor.Tensor) error {
	hs, hr, err := c.pair("reduce-scatter", send, recv)
	if err != nil {
		return err
	}
	bs, err := c.blockBytes("reduce-scatter", hs)
	if err != nil {
		return err
	}
	if len(hr.Data) != bs {
		return fmt.Errorf("mpi: reduce-scatter: recv holds %d bytes, not one of %d row blocks of send (%d)", len(hr.Data), c.size, bs)
	}
	in, _ := reducible(hs)
	out, back := reducible(hr)
	if out == hr {
		out = tensor.NewHost(in.DType(), hr.Numel())
	}
	count := C.int(out.Numel())
	err = c.collective("reduce-scatter", int64(bs)*int64(c.size-1), func(r *reqs) C.int {
		return C.MPI_Ireduce_scatter_block(r.buf(in.Data), r.buf(out.Data), count, C.lc_type(mpiType(in.DType())), C.lc_op(0), c.c, r.next())
	})
	if err == nil {
		back(out, hr)
	}
	return err
}

// AllReduce reduces buf over ranks with op (MPI_Iallreduce); every rank gets the result.
func (c *Comm) AllReduce(buf tensor.Tensor, op comm.Op) error {
	h, err := asHost(buf, "all-reduce")
	if err != nil {
		return err
	}
	in, back := reducible(h)
	if in == h {
		in = tensor.NewHost(h.DType(), h.Numel())
		copy(in.Data, h.Data)
	}
	out := tensor.NewHost(in.DType(), in.Numel())
	code := C.int(0)
	if op == comm.Max {
		code = 1
	}
	ringBytes := 2 * h.Bytes() * int64(c.size-1) / int64(c.size)
	err = c.collective("all-reduce "+op.String(), ringBytes, func(r *reqs) C.int {
		return C.MPI_Iallreduce(r.buf(in.Data), r.buf(out.Data), C.int(out.Numel()), C.lc_type(mpiType(in.DType())), C.lc_op(code), c.c, r.next())
	})
	if err == nil {
		back(out, h)
	}
	return err
}

// Barrier returns once every rank has called it (MPI_Ibarrier).
func (c *Comm) Barrier() error {
	return c.collective("barrier", 0, func(r *reqs) C.int {
		return C.MPI_Ibarrier(c.c, r.next())
	})
}

// Bcast copies root's b into every rank's b (MPI_Ibcast), all ranks passing buffers of
// one size: the MPI way to share rank 0's bytes (an NCCL unique id) at bootstrap.
func (c *Comm) Bcast(b []byte, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf("mpi: bcast: root %d is outside the group of %d", root, c.size)
	}
	if len(b) > math.MaxInt32 {
		return fmt.Errorf("mpi: bcast: %d bytes are over MPI's 2 GiB count limit", len(b))
	}
	bytes := int64(0)
	if c.rank == root {
		bytes = int64(len(b)) * int64(c.size-1)
	}
	return c.collective("bcast", bytes, func(r *reqs) C.int {
		return C.MPI_Ibcast(r.buf(b), C.int(len(b)), C.lc_type(0), C.int(root), c.c, r.next())
	})
}
