package harness

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// buffers are the timing tensors of one shape on one device, kept across the cases
// (masks, passes) that share the shape.
type buffers struct {
	dev                  tensor.Device
	qShape, kvShape      []int
	dt                   tensor.DType
	q, k, v, dout        tensor.Tensor
	out, lse, dq, dk, dv tensor.Tensor
	all                  []tensor.Tensor
}

func (b *buffers) fits(dev tensor.Device, p kernels.Problem) bool {
	qs, kvs, _ := p.Shapes()
	return b != nil && b.dev == dev && b.dt == p.DType && slices.Equal(b.qShape, qs) && slices.Equal(b.kvShape, kvs)
}

func (b *buffers) free() {
	for _, t := range b.all {
		b.dev.Free(t)
	}
	b.all = nil
}

// normalFiller is implemented by devices that fill random tensors themselves.
type normalFiller interface {
	FillNormal(t tensor.Tensor, seed uint64, std float32) error
}

// fillRandom fills t with standard normal values: on the device when it can, otherwise
// a 64K-element random block tiled over a host tensor and copied in (timing does not
// depend on the values, and tiling keeps long sequences fast to set up).
func fillRandom(dev tensor.Device, t tensor.Tensor, seed uint64) error {
	if f, ok := dev.(normalFiller); ok {
		return f.FillNormal(t, seed, 1)
	}
	h := tensor.NewHost(t.DType(), t.Shape()...)
	n := min(h.Numel(), 1<<16)
	block := tensor.NewHost(t.DType(), n)
	block.FillNormal(rand.New(rand.NewPCG(seed, 0x6c6f6e67)), 1)
	for off := 0; off < len(h.Data); off += len(block.Data) {
		copy(h.Data[off:], block.Data)
	}
	return dev.CopyIn(t, h)
}

func newBuffers(dev tensor.Device, p kernels.Problem, seed uint64) (*buffers, error) {
	qs, kvs, ls := p.Shapes()
	b := &buffers{dev: dev, qShape: qs, kvShape: kvs, dt: p.DType}
	for _, a := range []struct {
		dt    tensor.DType
		shape []int
		dst   *tensor.Tensor
	}{
		{p.DType, qs, &b.q}, {p.DType, kvs, &b.k}, {p.DType, kvs, &b.v}, {p.DType, qs, &b.dout},
		{p.DType, qs, &b.out}, {tensor.FP32, ls, &b.lse},
		{p.DType, qs, &b.dq}, {p.DType, kvs, &b.dk}, {p.DType, kvs, &b.dv},
	} {
		t, err := dev.Alloc(a.dt, a.shape...)
		if err != nil {
			b.free()
			return nil, fmt.Errorf("allocating %s%v on %s: %w", a.dt, a.shape, dev.Name(), err)
		}
		*a.dst = t
		b.all = append(b.all, t)
	}
	for i, t := range []tensor.Tensor{b.q, b.k, b.v, b.dout} {
		if err := fillRandom(dev, t, seed+uint64(i)); err != nil {
			b.free()
			return nil, fmt.Errorf("filling inputs: %w", err)
		}
	}
	return b, nil
}

// Close frees the timing buffers the runner holds.
func (r *Runner) Close() {
	if r.bufs != nil {
		r.bufs.free()
		r.bufs = nil
	}
}

// FlushBytes is the cache-flush size handed to self-timing kernels: what
// tensor.Device.FlushCache writes on an H200-class GPU (256 MB, over four times its L2).
const FlushBytes = 256 << 20

// time times the case (the kernel's own loop where it has one, else Time's) with the GPU's
// state read alongside (watchGPU), after the GPU's settle (Runner.Settle) where it has one.
func (r *Runner) time(ctx context.Context, k kernels.Kernel, c Case, p kernels.Problem, row *results.Row) error {
	settled, err := r.settle(ctx, row)
	if err != nil {
		return err
	}
	w := watchGPU(r.GPU, row)
	err = r.timeCase(ctx, k, c, p, row)
	w.finish(row, err == nil)
	if err == nil && settled {
		row.SettleMs = settleMs(r.Settle)
	}
	return err
}

// settle leaves the GPU idle for Runner.Settle before a case timed on it (a row with a
// device index), saying whether it did; an interrupt ends the wait at once. The row
// records it (settle_ms) once the case was timed.
func (r *Runner) settle(ctx context.Context, row *results.Row) (bool, error) {
	if r.Settle <= 0 || row.DeviceIndex == nil {
		return false, nil
	}
	return true, idle(ctx, r.Settle)
}

// settleMs is settle_ms's value for an idle of d.
func settleMs(d time.Duration) *float64 { return results.Ptr(float64(d) / float64(time.Millisecond)) }

// idle waits d, or until ctx ends (its error).
func idle(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (r *Runner) timeCase(ctx context.Context, k kernels.Kernel, c Case, p kernels.Problem, row *results.Row) error {
	if st, ok := k.(kernels.SelfTimer); ok {
		t, err := st.TimePass(ctx, p, c.Pass, kernels.TimeSpec{Warmup: r.Warmup, Iters: r.Iters, FlushBytes: FlushBytes, Seed: c.Seed})
		if err != nil {
			return err
		}
		if t.PeakMemBytes > 0 {
			row.PeakMemBytes = results.Ptr(t.PeakMemBytes)
		}
		if t.Variant != "" {
			row.KernelVariant = t.Variant
		}
		row.SetTimes(t.Median, t.Min, t.Max, t.Mean)
		return nil
	}
	dev := k.Device()
	if !r.bufs.fits(dev, p) {
		r.Close()
		b, err := newBuffers(dev, p, c.Seed)
		if err != nil {
			return err
		}
		r.bufs = b
	}
	b := r.bufs
	fwd := func() error { return k.Forward(ctx, p, b.q, b.k, b.v, b.out, b.lse) }
	bwd := func() error { return k.Backward(ctx, p, b.q, b.k, b.v, b.out, b.lse, b.dout, b.dq, b.dk, b.dv) }
	fn := fwd
	switch c.Pass {
	case kernels.Bwd:
		if err := fwd(); err != nil { // the backward needs the forward's out and lse
			return fmt.Errorf("forward before backward: %w", err)
		}
		fn = bwd
	case kernels.FwdBwd:
		fn = func() error {
			if err := fwd(); err != nil {
				return err
			}
			return bwd()
		}
	}
	dev.ResetPeak()
	st, err := Time(dev, r.Warmup, r.Iters, fn)
	if err != nil {
		return err
	}
	row.PeakMemBytes = results.Ptr(dev.PeakMemory())
	row.SetTimes(st.Median, st.Min, st.Max, st.Mean)
	return nil
}
