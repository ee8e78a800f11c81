package cp

import (
	"fmt"

	"github.com/longca/longca/comm"

	"github.com/longca/longca/tensor"
)

// ops are the few operations of the CP methods besides attention and communication:
// allocation, the head rearrangements of the Ulysses all-to-all, accumulation, dtype
// conversion, fills and the log-sum-exp merge. The methods are written once over ops;
// hostOps runs them on host tensors (the CPU reference path), deviceOps on a GPU
// (ops_device.go), so the two paths are the same algorithm.
type ops interface {
	// alloc returns a zeroed tensor.
	alloc(dt tensor.DType, shape ...int) (tensor.Tensor, error)
	// scratch returns a tensor of undefined contents, for a buffer that is written
	// whole before it is read (a kernel's output, a transfer's receive buffer, a
	// rearrangement's destination): on a device it costs no fill.
	scratch(dt tensor.DType, shape ...int) (tensor.Tensor, error)
	// free releases a tensor from alloc (a no-op on the host).
	free(ts ...tensor.Tensor)
	// partDType is the dtype of the per-step kernel outputs (partial out, dq, dk, dv)
	// for a problem in dt; accDType that of the dq accumulator.
	partDType(dt tensor.DType) tensor.DType
	accDType() tensor.DType
	// headsOut, headsIn and lseOut are the rearrangements around the all-to-alls.
	headsOut(x tensor.Tensor, u int, replicate bool) (tensor.Tensor, error)
	headsIn(in, x tensor.Tensor, u int, replicate bool) error
	lseOut(l tensor.Tensor, u int) (tensor.Tensor, error)
	// accumulate adds src into the accumulator dst.
	accumulate(dst, src tensor.Tensor) error
	// convert writes src's values into dst (same element count), rounding to dst's dtype.
	convert(dst, src tensor.Tensor) error
	// fill sets every element of t to v.
	fill(t tensor.Tensor, v float64) error
	// copyRuns copies runs of rows (along the first dimension, same dtype) from src to
	// dst, and addRuns adds runs of src's rows into the fp32 rows of dst; the runs'
	// destinations do not overlap, so a device does each in one launch (ops_runs.go).
	copyRuns(dst, src tensor.Tensor, runs []rowCopy) error
	addRuns(dst, src tensor.Tensor, runs []rowCopy) error
	// merger starts a log-sum-exp merge of [tokens, heads, dim] partial outputs.
	merger(tokens, heads, dim int) (merger, error)
	// merge writes into dst, ldst the log-sum-exp merge of the partials (a, la) and
	// (b, lb); dst may be a, ldst is none of la, lb (stepMerge is its user).
	merge(dst, ldst, a, la, b, lb tensor.Tensor) error
	// add writes a + b into dst (dst may be a).
	add(dst, a, b tensor.Tensor) error
	// mark returns a wait function that returns once the work enqueued so far has
	// finished: a transfer into a buffer the compute still reads waits on it.
	mark() (func() error, error)
	// fence waits until the enqueued work has finished (before a blocking collective
	// reads or writes buffers the compute wrote).
	fence() error
	// startExchange starts a ring exchange on c (send to next, receive from prev)
	// ordered after the compute enqueued so far, and returns the wait that orders what
	// follows (compute on recv, writes to send) after it.
	startExchange(c comm.Comm, next, prev int, send, recv []tensor.Tensor) (wait func() error, err error)
	// startGroup is startExchange for any sends and receives: body (Send and Recv on c)
	// runs inside c.Group, ordered the same way, and after the group whose wait is prev
	// (nil: none) when the communicator does not order its groups itself. Its wait may be
	// called more than once (ops_group.go).
	startGroup(c comm.Comm, prev func() error, body func() error) (wait func() error, err error)
	// upload and download move host tensors in and out of the ops' memory.
	upload(h *tensor.Host) (tensor.Tensor, error)
	download(dst *tensor.Host, t tensor.Tensor) error
	// device is the tensor.Device the buffers live on.
	device() tensor.Device
	// trim gives cached memory back (between cases, so each case's peak is its own).
	trim()
}

// merger accumulates partial attention results of the same queries over disjoint keys.
type merger interface {
	add(out, lse tensor.Tensor) error
	write(out, lse tensor.Tensor) error
	close()
}

// arena frees what it allocated, at once.
type arena struct {
	o  ops
	ts []tensor.Tensor
}

func (a *arena) alloc(dt tensor.DType, shape ...int) (tensor.Tensor, error) {
	t, err := a.o.alloc(dt, shape...)
	if err != nil {
		return nil, fmt.Errorf("cp: allocating %s%v: %w", dt, shape, err)
	}
	a.ts = append(a.ts, t)
	return t, nil
}

// scratch is alloc without the zero fill (ops.scratch): for buffers written whole
// before they are read.
func (a *arena) scratch(dt tensor.DType, shape ...int) (tensor.Tensor, error) {
	t, err := a.o.scratch(dt, shape...)
	if err != nil {
		return nil, fmt.Errorf("cp: allocating %s%v: %w", dt, shape, err)
	}
	a.ts = append(a.ts, t)
	return t, nil
}

// keep records a tensor allocated elsewhere (headsOut, lseOut) for release.
func (a *arena) keep(t tensor.Tensor) tensor.Tensor {
	a.ts = append(a.ts, t)
	return t
}

func (a *arena) release() {
	if a == nil {
		return
	}
	a.o.free(a.ts...)
	a.ts = nil
}

// hostOps are the ops on host tensors, computing in float64 where the methods always
// have (dq accumulates in fp64, partial outputs are fp32, the merge is float64).
type hostOps struct{ cpu *tensor.CPU }

func (hostOps) alloc(dt tensor.DType, shape ...int) (tensor.Tensor, error) {
	return tensor.NewHost(dt, shape...), nil
}
func (hostOps) scratch(dt tensor.DType, shape ...int) (tensor.Tensor, error) {
	return tensor.NewHost(dt, shape...), nil
}
func (hostOps) free(...tensor.Tensor)               {}
func (hostOps) partDType(tensor.DType) tensor.DType { return tensor.FP32 }
func (hostOps) accDType() tensor.DType              { return tensor.FP64 }
func (hostOps) mark() (func() error, error)         { return func() error { return nil }, nil }
func (hostOps) fence() error                        { return nil }

func (o hostOps) startExchange(c comm.Comm, next, prev int, send, recv []tensor.Tensor) (func() error, error) {
	return hostExchange(o, c, next, prev, send, recv)
}

// hostExchange runs the exchange in a goroutine, after a host wait (in that goroutine,
// not the compute's) for the compute enqueued so far, since the receive buffer was read
// by the step before the current one; the returned wait joins it.
func hostExchange(o ops, c comm.Comm, next, prev int, send, recv []tensor.Tensor) (func() error, error) {
	ready, err := o.mark()
	if err != nil {
		return nil, fmt.Errorf("cp: marking the compute: %w", err)
	}
	ch := async(func() error {
		if err := ready(); err != nil {
			return err
		}
		return exchange(c, next, prev, send, recv)
	})
	return func() error { return <-ch }, nil
}
func (hostOps) upload(h *tensor.Host) (tensor.Tensor, error) { return h, nil }
func (hostOps) trim()                                        {}
func (o hostOps) device() tensor.Device                      { return o.cpu }

func (hostOps) download(dst *tensor.Host, t tensor.Tensor) error {
	h, err := asHost("download", t)
	if err != nil {
		return err
	}
	if h != dst {
		return convert(dst, h)
	}
	return nil
}

func (hostOps) headsOut(x tensor.Tensor, u int, replicate bool) (tensor.Tensor, error) {
	h, err := asHost("headsOut", x)
	if err != nil {
		return nil, err
	}
	return headsOut(h, u, replicate), nil
}

func (hostOps) headsIn(in, x tensor.Tensor, u int, replicate bool) error {
	hs, err := hosts([]string{"headsIn input", "headsIn output"}, in, x)
	if err != nil {
		return err
	}
	headsIn(hs[0], hs[1], u, replicate)
	return nil
}

func (hostOps) lseOut(l tensor.Tensor, u int) (tensor.Tensor, error) {
	h, err := asHost("lseOut", l)
	if err != nil {
		return nil, err
	}
	return lseOut(h, u), nil
}

func (hostOps) accumulate(dst, src tensor.Tensor) error {
	hs, err := hosts([]string{"accumulator", "partial"}, dst, src)
	if err != nil {
		return err
	}
	if hs[0].Numel() != hs[1].Numel() {
		return fmt.Errorf("cp: accumulating %v into %v", hs[1].Shape(), hs[0].Shape())
	}
	accumulate(hs[0], hs[1])
	return nil
}

func (hostOps) convert(dst, src tensor.Tensor) error {
	hs, err := hosts([]string{"destination", "source"}, dst, src)
	if err != nil {
		return err
	}
	return convert(hs[0], hs[1])
}

func (hostOps) fill(t tensor.Tensor, v float64) error {
	h, err := asHost("fill", t)
	if err != nil {
		return err
	}
	h.Fill(v)
	return nil
}

func (hostOps) merge(dst, ldst, a, la, b, lb tensor.Tensor) error {
	hs, err := hosts([]string{"merged out", "merged lse", "first out", "first lse", "second out", "second lse"}, dst, ldst, a, la, b, lb)
	if err != nil {
		return err
	}
	return mergePair(hs[0], hs[1], hs[2], hs[3], hs[4], hs[5])
}

func (hostOps) add(dst, a, b tensor.Tensor) error {
	hs, err := hosts([]string{"sum", "first addend", "second addend"}, dst, a, b)
	if err != nil {
		return err
	}
	if hs[1].Numel() != hs[0].Numel() || hs[2].Numel() != hs[0].Numel() {
		return fmt.Errorf("cp: adding %v and %v into %v", hs[1].Shape(), hs[2].Shape(), hs[0].Shape())
	}
	for i := range hs[0].Numel() {
		hs[0].Set(i, hs[1].At(i)+hs[2].At(i))
	}
	return nil
}

func (hostOps) merger(tokens, heads, dim int) (merger, error) {
	return hostMerger{NewLSEMerger(tokens, heads, dim)}, nil
}

type hostMerger struct{ m *LSEMerger }

func (h hostMerger) add(out, lse tensor.Tensor) error {
	hs, err := hosts([]string{"partial out", "partial lse"}, out, lse)
	if err != nil {
		return err
	}
	return h.m.Add(hs[0], hs[1])
}

func (h hostMerger) write(out, lse tensor.Tensor) error {
	hs, err := hosts([]string{"out", "lse"}, out, lse)
	if err != nil {
		return err
	}
	return h.m.Write(hs[0], hs[1])
}

func (hostMerger) close() {}

func asHost(name string, t tensor.Tensor) (*tensor.Host, error) {
	h, err := tensor.AsHost(t)
	if err != nil {
		return nil, fmt.Errorf("cp: %s: %w (the run's ops are the host's)", name, err)
	}
	return h, nil
}

// hosts converts tensors, naming the first that is not a host tensor.
func hosts(names []string, ts ...tensor.Tensor) ([]*tensor.Host, error) {
	out := make([]*tensor.Host, len(ts))
	for i, t := range ts {
		h, err := asHost(names[i], t)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// headsOut splits x [T, H, D] into u row blocks for an all-to-all: block j holds all T
// tokens of the j-th group of H/u heads, or, when replicate is set (H < u), of head
// j*H/u alone: [u*T, max(H/u, 1), D].
func headsOut(x *tensor.Host, u int, replicate bool) *tensor.Host {
	sh := x.Shape()
	t, h, d := sh[0], sh[1], sh[2]
	hu := h / u
	if replicate {
		hu = 1
	}
	es := x.DType().Size()
	out := tensor.NewHost(x.DType(), u*t, hu, d)
	row := hu * d * es
	for j := range u {
		h0 := j * hu
		if replicate {
			h0 = j * h / u
		}
		for i := range t {
			src := (i*h + h0) * d * es
			dst := (j*t + i) * row
			copy(out.Data[dst:dst+row], x.Data[src:src+row])
		}
	}
	return out
}

// headsIn is the inverse of headsOut after the all-to-all back: in [u*T, hu, D] holds in
// block j this rank's tokens for head group j; it writes them into x [T, H, D]. With
// replicate, the u/H replicas of a head are summed (the gradients of a replicated head).
func headsIn(in, x *tensor.Host, u int, replicate bool) {
	sh := x.Shape()
	t, h, d := sh[0], sh[1], sh[2]
	if !replicate {
		hu := h / u
		es := x.DType().Size()
		row := hu * d * es
		for j := range u {
			for i := range t {
				src := (j*t + i) * row
				dst := (i*h + j*hu) * d * es
				copy(x.Data[dst:dst+row], in.Data[src:src+row])
			}
		}
		return
	}
	acc := make([]float64, x.Numel())
	for j := range u {
		hh := j * h / u
		for i := range t {
			for e := range d {
				acc[(i*h+hh)*d+e] += in.At((j*t+i)*d + e)
			}
		}
	}
	x.SetFloat64s(acc)
}

// lseOut rearranges lse [hu, u*T] (this rank's heads over the group's tokens) into u row
// blocks [u*hu, T]: block s holds the columns of rank s's tokens. After the all-to-all
// the received [u*hu, T] is this rank's [H, T] directly.
func lseOut(l *tensor.Host, u int) *tensor.Host {
	sh := l.Shape()
	hu, n := sh[0], sh[1]
	t := n / u
	es := l.DType().Size()
	out := tensor.NewHost(l.DType(), u*hu, t)
	row := t * es
	for s := range u {
		for h := range hu {
			src := (h*n + s*t) * es
			dst := (s*hu + h) * row
			copy(out.Data[dst:dst+row], l.Data[src:src+row])
		}
	}
	return out
}

// accumulate adds src into dst in dst's precision (an fp32 or fp64 accumulator).
func accumulate(dst, src *tensor.Host) {
	for i := range dst.Numel() {
		dst.Set(i, dst.At(i)+src.At(i))
	}
}

// convert writes src's values into dst (rounding to dst's dtype).
func convert(dst, src *tensor.Host) error {
	if dst.Numel() != src.Numel() {
		return fmt.Errorf("cp: copy of %v into %v", src.Shape(), dst.Shape())
	}
	if dst.DType() == src.DType() {
		copy(dst.Data, src.Data)
		return nil
	}
	for i := range dst.Numel() {
		dst.Set(i, src.At(i))
	}
	return nil
}
