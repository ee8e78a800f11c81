package nccl

import (
	"errors"
	"fmt"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// Stager moves host tensors to and from device memory: a tensor.Device such as
// internal/cuda's Device.
type Stager interface {
	Alloc(dt tensor.DType, shape ...int) (tensor.Tensor, error)
	Free(t tensor.Tensor)
	CopyIn(dst tensor.Tensor, src *tensor.Host) error
	CopyOut(dst *tensor.Host, src tensor.Tensor) error
}

// Staged is a communicator that also takes host tensors (*tensor.Host), copying them
// through device memory of dev around each operation; device tensors pass straight
// through. It lets tables written for host memory (comm/commtest, `longca selftest
// comm`) run over NCCL; the CP methods hand device tensors and pay nothing.
type Staged struct {
	*Comm
	dev Stager

	inGroup bool
	after   []func(copyOut bool) error // copy-outs and frees once the open group completes
}

var _ comm.Comm = (*Staged)(nil)

// NewStaged wraps c so that it takes host tensors too, staged through dev.
func NewStaged(c *Comm, dev Stager) *Staged { return &Staged{Comm: c, dev: dev} }

// stage returns a device tensor for t: t itself when it is one already, else a device
// copy (of t's contents when in is set). done(true) copies the device tensor back into
// t (when out is set); done(false) does not; both free it.
func (s *Staged) stage(t tensor.Tensor, in, out bool) (d tensor.Tensor, done func(copyOut bool) error, err error) {
	h, ok := t.(*tensor.Host)
	if !ok {
		return t, func(bool) error { return nil }, nil
	}
	d, err = s.dev.Alloc(h.DType(), h.Shape()...)
	if err != nil {
		return nil, nil, fmt.Errorf("nccl: staging %v%v: %w", h.DType(), h.Shape(), err)
	}
	if in {
		if err := s.dev.CopyIn(d, h); err != nil {
			s.dev.Free(d)
			return nil, nil, fmt.Errorf("nccl: staging in: %w", err)
		}
	}
	return d, func(copyOut bool) error {
		defer s.dev.Free(d)
		if out && copyOut {
			if err := s.dev.CopyOut(h, d); err != nil {
				return fmt.Errorf("nccl: staging out: %w", err)
			}
		}
		return nil
	}, nil
}

// finish runs done now (copying out only if the operation succeeded), or after the
// open group completes.
func (s *Staged) finish(opErr error, done func(bool) error) error {
	if s.inGroup && opErr == nil {
		s.after = append(s.after, done)
		return nil
	}
	return errors.Join(opErr, done(opErr == nil))
}

// Group runs fn as one NCCL group; staged receives are copied back once it completes.
func (s *Staged) Group(fn func() error) error {
	if s.inGroup {
		return fn()
	}
	s.inGroup, s.after = true, nil
	err := s.Comm.Group(fn)
	s.inGroup = false
	after := s.after
	s.after = nil
	for _, done := range after {
		// On failure only free the staging buffers: the data are void anyway.
		if derr := done(err == nil); err == nil {
			err = derr
		}
	}
	return err
}

// Send sends buf (host or device) to peer.
func (s *Staged) Send(buf tensor.Tensor, peer int) error {
	d, done, err := s.stage(buf, true, false)
	if err != nil {
		return err
	}
	return s.finish(s.Comm.Send(d, peer), done)
}

// Recv receives into buf (host or device) from peer.
func (s *Staged) Recv(buf tensor.Tensor, peer int) error {
	d, done, err := s.stage(buf, false, true)
	if err != nil {
		return err
	}
	return s.finish(s.Comm.Recv(d, peer), done)
}

// pairOp stages send in and recv out around op.
func (s *Staged) pairOp(send, recv tensor.Tensor, op func(a, b tensor.Tensor) error) error {
	if send == nil || recv == nil {
		return op(send, recv) // let the communicator name the nil
	}
	ds, sdone, err := s.stage(send, true, false)
	if err != nil {
		return err
	}
	dr, rdone, err := s.stage(recv, false, true)
	if err != nil {
		sdone(false)
		return err
	}
	err = op(ds, dr)
	if s.inGroup && err == nil {
		s.after = append(s.after, sdone, rdone)
		return nil
	}
	return errors.Join(err, sdone(false), rdone(err == nil))
}

// AllToAll is Comm.AllToAll on host or device tensors.
func (s *Staged) AllToAll(send, recv tensor.Tensor) error {
	return s.pairOp(send, recv, s.Comm.AllToAll)
}

// AllGather is Comm.AllGather on host or device tensors.
func (s *Staged) AllGather(send, recv tensor.Tensor) error {
	return s.pairOp(send, recv, s.Comm.AllGather)
}

// ReduceScatter is Comm.ReduceScatter on host or device tensors.
func (s *Staged) ReduceScatter(send, recv tensor.Tensor) error {
	return s.pairOp(send, recv, s.Comm.ReduceScatter)
}

// AllReduce is Comm.AllReduce on a host or device tensor.
func (s *Staged) AllReduce(buf tensor.Tensor, op comm.Op) error {
	d, done, err := s.stage(buf, true, true)
	if err != nil {
		return err
	}
	return s.finish(s.Comm.AllReduce(d, op), done)
}

// Split splits the communicator; the parts stage through the same device.
func (s *Staged) Split(color, key int) (comm.Comm, error) {
	sub, err := s.Comm.Split(color, key)
	if err != nil {
		return nil, err
	}
	return NewStaged(sub.(*Comm), s.dev), nil
}
