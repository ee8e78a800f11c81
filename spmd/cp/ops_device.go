package cp

import (
	"fmt"
	"math"
	"sync"

	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/spmd/cp/devops"
	"github.com/longca/longca/tensor"
)

// cudaKernel is a kernel that runs on an internal/cuda device, launching on the
// device's stream (kernels/cuda).
type cudaKernel interface {
	kernels.Kernel
	CUDADevice() *cuda.Device
}

// deviceOps are the ops on one GPU: every buffer is device memory, the helper kernels
// (spmd/cp/devops) launch on the device's stream, the one the attention kernel uses, so
// they are ordered with it without synchronisation.
type deviceOps struct {
	g *cuda.Device
	k *devops.Ops
}

var (
	devOpsMu sync.Mutex
	devOps   = map[*cuda.Device]*devops.Ops{} // helper modules, loaded once per device
)

func newDeviceOps(k cudaKernel) (ops, error) {
	g := k.CUDADevice()
	devOpsMu.Lock()
	defer devOpsMu.Unlock()
	o, ok := devOps[g]
	if !ok {
		var err error
		if o, err = devops.New(g, g.Stream()); err != nil {
			return nil, err
		}
		devOps[g] = o
	}
	return deviceOps{g: g, k: o}, nil
}

func (d deviceOps) alloc(dt tensor.DType, shape ...int) (tensor.Tensor, error) {
	b, err := d.g.AllocBuffer(dt, shape...)
	if err != nil {
		return nil, err
	}
	if err := d.g.MemsetOn(d.g.Stream(), b, 1, 0); err != nil {
		d.g.Free(b)
		return nil, err
	}
	return b, nil
}

// free waits for the stream first: the work enqueued may still use the buffers.
func (d deviceOps) free(ts ...tensor.Tensor) {
	if len(ts) == 0 {
		return
	}
	_ = d.g.Sync() // an asynchronous error shows at the next call that checks
	for _, t := range ts {
		if t != nil {
			d.g.Free(t)
		}
	}
}

func (deviceOps) partDType(dt tensor.DType) tensor.DType { return dt }
func (deviceOps) accDType() tensor.DType                 { return tensor.FP32 }
func (d deviceOps) device() tensor.Device                { return d.g }
func (d deviceOps) fence() error                         { return d.g.Sync() }

// mark records an event on the compute stream; the wait is for the transfer's goroutine.
func (d deviceOps) mark() (func() error, error) {
	ev, err := d.g.Record(d.g.Stream())
	if err != nil {
		return nil, err
	}
	return func() error {
		err := d.g.EventSync(ev)
		if derr := d.g.DestroyEvent(ev); err == nil {
			err = derr
		}
		return err
	}, nil
}

func (d deviceOps) upload(h *tensor.Host) (tensor.Tensor, error) {
	b, err := d.g.AllocBuffer(h.DType(), h.Shape()...)
	if err != nil {
		return nil, err
	}
	if err := d.g.CopyIn(b, h); err != nil {
		d.g.Free(b)
		return nil, err
	}
	return b, nil
}

func (d deviceOps) download(dst *tensor.Host, t tensor.Tensor) error { return d.g.CopyOut(dst, t) }

func shape3(t tensor.Tensor) (int, int, int, error) {
	sh := t.Shape()
	if len(sh) != 3 {
		return 0, 0, 0, fmt.Errorf("cp: tensor of shape %v, want [tokens, heads, dim]", sh)
	}
	return sh[0], sh[1], sh[2], nil
}

func (d deviceOps) headsOut(x tensor.Tensor, u int, replicate bool) (tensor.Tensor, error) {
	t, h, dim, err := shape3(x)
	if err != nil {
		return nil, err
	}
	hu := h / u
	if replicate {
		hu = 1
	}
	es := int64(x.DType().Size())
	out, err := d.alloc(x.DType(), u*t, hu, dim)
	if err != nil {
		return nil, err
	}
	row := int64(hu*dim) * es
	for j := range u {
		h0 := j * hu
		if replicate {
			h0 = j * h / u
		}
		if err := d.k.CopyRows(out, x, t, row, int64(j*t)*row, row, int64(h0*dim)*es, int64(h*dim)*es); err != nil {
			d.free(out)
			return nil, err
		}
	}
	return out, nil
}

func (d deviceOps) headsIn(in, x tensor.Tensor, u int, replicate bool) error {
	t, h, dim, err := shape3(x)
	if err != nil {
		return err
	}
	if replicate {
		return d.k.HeadsSum(x, in, u)
	}
	hu := h / u
	es := int64(x.DType().Size())
	row := int64(hu*dim) * es
	for j := range u {
		if err := d.k.CopyRows(x, in, t, row, int64(j*hu*dim)*es, int64(h*dim)*es, int64(j*t)*row, row); err != nil {
			return err
		}
	}
	return nil
}

func (d deviceOps) lseOut(l tensor.Tensor, u int) (tensor.Tensor, error) {
	sh := l.Shape()
	if len(sh) != 2 {
		return nil, fmt.Errorf("cp: lse of shape %v, want [heads, tokens]", sh)
	}
	hu, n := sh[0], sh[1]
	t := n / u
	es := int64(l.DType().Size())
	out, err := d.alloc(l.DType(), u*hu, t)
	if err != nil {
		return nil, err
	}
	row := int64(t) * es
	for s := range u {
		if err := d.k.CopyRows(out, l, hu, row, int64(s*hu)*row, row, int64(s*t)*es, int64(n)*es); err != nil {
			d.free(out)
			return nil, err
		}
	}
	return out, nil
}

func (d deviceOps) accumulate(dst, src tensor.Tensor) error { return d.k.Accumulate(dst, src) }
func (d deviceOps) convert(dst, src tensor.Tensor) error    { return d.k.Convert(dst, src) }
func (d deviceOps) fill(t tensor.Tensor, v float64) error   { return d.k.Fill(t, v) }

func (d deviceOps) merger(tokens, heads, dim int) (merger, error) {
	acc, err := d.alloc(tensor.FP32, tokens, heads, dim)
	if err != nil {
		return nil, err
	}
	lacc, err := d.alloc(tensor.FP32, heads, tokens)
	if err != nil {
		d.free(acc)
		return nil, err
	}
	if err := d.k.Fill(lacc, math.Inf(-1)); err != nil {
		d.free(acc, lacc)
		return nil, err
	}
	return &deviceMerger{d: d, acc: acc, lacc: lacc}, nil
}

// deviceMerger is the log-sum-exp merge as a kernel, into fp32 accumulators.
type deviceMerger struct {
	d         deviceOps
	acc, lacc tensor.Tensor
}

func (m *deviceMerger) add(out, lse tensor.Tensor) error { return m.d.k.Merge(m.acc, m.lacc, out, lse) }

func (m *deviceMerger) write(out, lse tensor.Tensor) error {
	if err := m.d.k.Convert(out, m.acc); err != nil {
		return err
	}
	return m.d.k.Convert(lse, m.lacc)
}

func (m *deviceMerger) close() { m.d.free(m.acc, m.lacc) }
