package cp

import (
	"context"
	"fmt"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// Staged runs a device kernel (a GPU's) on host tensors: every call copies its inputs
// to the device and its outputs back, converting to the dtypes the kernel takes (q, k, v,
// out and the gradients in the problem's dtype, lse in fp32) and back to the host
// tensors' own. The CP methods rearrange and merge on the host, so this is how they use
// a device kernel: the results are the kernel's, but times include the copies.
func Staged(k kernels.Kernel) kernels.Kernel {
	return &staged{k: k, host: &tensor.CPU{}}
}

var fwdNames = []string{"q", "k", "v", "out", "lse"}
var bwdNames = []string{"q", "k", "v", "out", "lse", "dout", "dq", "dk", "dv"}

type staged struct {
	k    kernels.Kernel
	host *tensor.CPU
}

// Name is the kernel's name with "+staged".
func (s *staged) Name() string { return s.k.Name() + "+staged" }

// Device is the host: the tensors the methods hand over live there.
func (s *staged) Device() tensor.Device { return s.host }

// Unwrap is the device kernel that computes.
func (s *staged) Unwrap() kernels.Kernel { return s.k }

// Supports is the device kernel's.
func (s *staged) Supports(p kernels.Problem) error { return s.k.Supports(p) }

// io is one tensor of a call: the host tensor, the device copy, the dtype it takes.
type io struct {
	host   *tensor.Host
	dev    tensor.Tensor
	dt     tensor.DType
	in     bool // copied to the device before the call
	shape  []int
	output bool // copied back after the call
}

func (s *staged) call(ts []*io, fn func(dev []tensor.Tensor) error) error {
	d := s.k.Device()
	defer func() {
		for _, t := range ts {
			if t.dev != nil {
				d.Free(t.dev)
			}
		}
	}()
	devs := make([]tensor.Tensor, len(ts))
	for i, t := range ts {
		var err error
		if t.dev, err = d.Alloc(t.dt, t.shape...); err != nil {
			return fmt.Errorf("staged %s: allocating %s%v: %w", s.k.Name(), t.dt, t.shape, err)
		}
		devs[i] = t.dev
		if !t.in {
			continue
		}
		src := t.host
		if src.DType() != t.dt {
			src = tensor.NewHost(t.dt, t.shape...)
			if err := convert(src, t.host); err != nil {
				return err
			}
		}
		if err := d.CopyIn(t.dev, src); err != nil {
			return fmt.Errorf("staged %s: copy in: %w", s.k.Name(), err)
		}
	}
	if err := fn(devs); err != nil {
		return err
	}
	for _, t := range ts {
		if !t.output {
			continue
		}
		dst := t.host
		if dst.DType() != t.dt {
			dst = tensor.NewHost(t.dt, t.shape...)
		}
		if err := d.CopyOut(dst, t.dev); err != nil {
			return fmt.Errorf("staged %s: copy out: %w", s.k.Name(), err)
		}
		if dst != t.host {
			if err := convert(t.host, dst); err != nil {
				return err
			}
		}
	}
	return nil
}

// Forward implements kernels.Kernel.
func (s *staged) Forward(ctx context.Context, p kernels.Problem, q, k, v, out, lse tensor.Tensor) error {
	hs, err := hosts(fwdNames, q, k, v, out, lse)
	if err != nil {
		return err
	}
	qs, kvs, ls := p.Shapes()
	ts := []*io{
		{host: hs[0], dt: p.DType, in: true, shape: qs}, {host: hs[1], dt: p.DType, in: true, shape: kvs},
		{host: hs[2], dt: p.DType, in: true, shape: kvs},
		{host: hs[3], dt: p.DType, shape: qs, output: true}, {host: hs[4], dt: tensor.FP32, shape: ls, output: true},
	}
	return s.call(ts, func(d []tensor.Tensor) error { return s.k.Forward(ctx, p, d[0], d[1], d[2], d[3], d[4]) })
}

// Backward implements kernels.Kernel.
func (s *staged) Backward(ctx context.Context, p kernels.Problem, q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	hs, err := hosts(bwdNames, q, k, v, out, lse, dout, dq, dk, dv)
	if err != nil {
		return err
	}
	qs, kvs, ls := p.Shapes()
	ts := []*io{
		{host: hs[0], dt: p.DType, in: true, shape: qs}, {host: hs[1], dt: p.DType, in: true, shape: kvs},
		{host: hs[2], dt: p.DType, in: true, shape: kvs}, {host: hs[3], dt: p.DType, in: true, shape: qs},
		{host: hs[4], dt: tensor.FP32, in: true, shape: ls}, {host: hs[5], dt: p.DType, in: true, shape: qs},
		{host: hs[6], dt: p.DType, shape: qs, output: true}, {host: hs[7], dt: p.DType, shape: kvs, output: true},
		{host: hs[8], dt: p.DType, shape: kvs, output: true},
	}
	return s.call(ts, func(d []tensor.Tensor) error {
		return s.k.Backward(ctx, p, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8])
	})
}
