package cp

import (
	"fmt"
	"math"
	"sync"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/internal/cuda/devops"
	"github.com/longca/longca/tensor"
)

// devicePrims are the device primitives deviceOps is built from: memory, ordering, and
// the helper kernels of internal/cuda/devops. cudaPrims are the GPU's; the tests run deviceOps
// on a host emulation of the same primitives, so everything above them (offsets,
// strides, dtypes, the order of operations) is checked on the CPU too.
type devicePrims interface {
	Device() tensor.Device
	// Alloc returns uninitialised memory; Free releases it after the enqueued work.
	Alloc(dt tensor.DType, shape ...int) (tensor.Tensor, error)
	Free(ts ...tensor.Tensor)
	// Trim frees cached memory nothing holds.
	Trim()
	// Sync waits for the enqueued work; Mark returns a wait for the work enqueued so far.
	Sync() error
	Mark() (func() error, error)
	// Record returns an event marking the work enqueued so far; WaitEvent makes the
	// compute stream wait (on the device) for an event; DestroyEvent frees one.
	Record() (comm.Event, error)
	WaitEvent(ev comm.Event) error
	DestroyEvent(ev comm.Event)
	CopyIn(dst tensor.Tensor, src *tensor.Host) error
	CopyOut(dst *tensor.Host, src tensor.Tensor) error
	// The helper kernels (devops.Ops).
	CopyRows(dst, src tensor.Tensor, rows int, rowBytes, dstOff, dstStride, srcOff, srcStride int64) error
	// The batched row kernels (devops.Ops, runs.go): RunsReady says whether they can run.
	RunsReady() error
	CopyRuns(dst, src, table tensor.Tensor, n int, total int, rowBytes int64) error
	AddRuns(dst, src, table tensor.Tensor, n int, total int, rowElems int64) error
	HeadsSum(x, in tensor.Tensor, u int) error
	Accumulate(dst, src tensor.Tensor) error
	Convert(dst, src tensor.Tensor) error
	Fill(t tensor.Tensor, v float64) error
	Add(dst, a, b tensor.Tensor) error
	Merge(dst, ldst, a, la, b, lb tensor.Tensor) error
}

// cudaPrims are the primitives on one GPU: the helper kernels launch on the device's
// stream, the one the attention kernel uses, so they are ordered with it without
// synchronisation.
type cudaPrims struct {
	*devops.Ops
	g    *cuda.Device
	pool *devops.Pool
}

func (c cudaPrims) Device() tensor.Device { return c.g }
func (c cudaPrims) Alloc(dt tensor.DType, shape ...int) (tensor.Tensor, error) {
	return c.pool.Get(dt, shape...)
}
func (c cudaPrims) Sync() error                                       { return c.g.Sync() }
func (c cudaPrims) CopyIn(dst tensor.Tensor, src *tensor.Host) error  { return c.g.CopyIn(dst, src) }
func (c cudaPrims) CopyOut(dst *tensor.Host, src tensor.Tensor) error { return c.g.CopyOut(dst, src) }

// Free returns buffers to the device's pool: the next user of a buffer is work on the
// same stream, ordered after the work that used it, so no synchronisation is needed.
func (c cudaPrims) Free(ts ...tensor.Tensor) {
	for _, t := range ts {
		if t != nil {
			_ = c.pool.Put(t) // only the pool's own buffers reach here
		}
	}
}

// Trim frees the pool's cached buffers.
func (c cudaPrims) Trim() { c.pool.Release() }

// Mark records an event on the compute stream; the wait is for a transfer's goroutine,
// so the compute goroutine never blocks on it.
func (c cudaPrims) Mark() (func() error, error) {
	ev, err := c.g.Record(c.g.Stream())
	if err != nil {
		return nil, err
	}
	return func() error {
		err := c.g.EventSync(ev)
		if derr := c.g.DestroyEvent(ev); err == nil {
			err = derr
		}
		return err
	}, nil
}

// Record implements devicePrims: an event on the compute stream.
func (c cudaPrims) Record() (comm.Event, error) {
	ev, err := c.g.Record(c.g.Stream())
	return comm.Event(ev), err
}

// WaitEvent implements devicePrims.
func (c cudaPrims) WaitEvent(ev comm.Event) error {
	return c.g.StreamWait(c.g.Stream(), cuda.Event(ev))
}

// DestroyEvent implements devicePrims.
func (c cudaPrims) DestroyEvent(ev comm.Event) { _ = c.g.DestroyEvent(cuda.Event(ev)) }

// Fill of zero is a byte memset, for any dtype.
func (c cudaPrims) Fill(t tensor.Tensor, v float64) error {
	if v == 0 && !math.Signbit(v) {
		return c.g.MemsetOn(c.g.Stream(), t, 1, 0)
	}
	return c.Ops.Fill(t, v)
}

// deviceOps are the ops on a device: every buffer is device memory. The per-step kernel
// outputs are in part, or in the problem's dtype when part is 0 (kernels/cuda writes
// its outputs in the problem's dtype: bf16 partial gradients, accumulated in fp32).
type deviceOps struct {
	p    devicePrims
	part tensor.DType
	// tables keeps the batched copies' runs tables on the device (ops_runs.go); nil
	// uploads one per call.
	tables *runTables
}

var (
	devOpsMu sync.Mutex
	devOps   = map[*cuda.Device]cudaPrims{} // helper modules and pools, one per device
)

func newDeviceOps(k DeviceKernel) (ops, error) {
	g := k.CUDADevice()
	devOpsMu.Lock()
	defer devOpsMu.Unlock()
	c, ok := devOps[g]
	if !ok {
		o, err := devops.New(g, g.Stream())
		if err != nil {
			return nil, err
		}
		c = cudaPrims{Ops: o, g: g, pool: devops.NewPool(g)}
		devOps[g] = c
	}
	d := deviceOps{p: c, tables: &runTables{}}
	if f, ok := k.(FP32Partials); ok && f.FP32Partials() {
		d.part = tensor.FP32
	}
	return d, nil
}

func (d deviceOps) alloc(dt tensor.DType, shape ...int) (tensor.Tensor, error) {
	b, err := d.p.Alloc(dt, shape...)
	if err != nil {
		return nil, err
	}
	if err := d.p.Fill(b, 0); err != nil {
		d.p.Free(b)
		return nil, err
	}
	return b, nil
}

// scratch is pooled memory as it comes (ops.scratch): no fill is enqueued.
func (d deviceOps) scratch(dt tensor.DType, shape ...int) (tensor.Tensor, error) {
	return d.p.Alloc(dt, shape...)
}

func (d deviceOps) trim()                    { d.dropTables(); d.p.Trim() }
func (d deviceOps) free(ts ...tensor.Tensor) { d.p.Free(ts...) }
func (d deviceOps) partDType(dt tensor.DType) tensor.DType {
	if d.part != 0 {
		return d.part
	}
	return dt
}
func (deviceOps) accDType() tensor.DType        { return tensor.FP32 }
func (d deviceOps) device() tensor.Device       { return d.p.Device() }
func (d deviceOps) fence() error                { return d.p.Sync() }
func (d deviceOps) mark() (func() error, error) { return d.p.Mark() }

// startExchange implements ops: on a stream-ordered communicator (comm.Ordered) the
// exchange is enqueued after an event of the compute stream and the compute stream
// waits for its done event, so no host thread waits on an event; otherwise it runs in a
// goroutine after a host wait for the compute (hostExchange).
func (d deviceOps) startExchange(c comm.Comm, next, prev int, send, recv []tensor.Tensor) (func() error, error) {
	oc, ok := c.(comm.Ordered)
	if !ok || !oc.StreamOrdered() {
		return hostExchange(d, c, next, prev, send, recv)
	}
	after, err := d.p.Record()
	if err != nil {
		return nil, fmt.Errorf("cp: marking the compute: %w", err)
	}
	done, err := oc.GroupAfter(after, func() error { return exchangeIn(c, next, prev, send, recv) })
	d.p.DestroyEvent(after)
	if err != nil {
		return nil, err
	}
	return func() error {
		if done == 0 {
			return nil
		}
		err := d.p.WaitEvent(done)
		d.p.DestroyEvent(done)
		return err
	}, nil
}
func (d deviceOps) download(dst *tensor.Host, t tensor.Tensor) error { return d.p.CopyOut(dst, t) }

func (d deviceOps) upload(h *tensor.Host) (tensor.Tensor, error) {
	b, err := d.p.Alloc(h.DType(), h.Shape()...)
	if err != nil {
		return nil, err
	}
	if err := d.p.CopyIn(b, h); err != nil {
		d.p.Free(b)
		return nil, err
	}
	return b, nil
}

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
	out, err := d.p.Alloc(x.DType(), u*t, hu, dim) // the row copies write it whole
	if err != nil {
		return nil, err
	}
	row := int64(hu*dim) * es
	for j := range u {
		h0 := j * hu
		if replicate {
			h0 = j * h / u
		}
		if err := d.p.CopyRows(out, x, t, row, int64(j*t)*row, row, int64(h0*dim)*es, int64(h*dim)*es); err != nil {
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
		return d.p.HeadsSum(x, in, u)
	}
	hu := h / u
	es := int64(x.DType().Size())
	row := int64(hu*dim) * es
	for j := range u {
		if err := d.p.CopyRows(x, in, t, row, int64(j*hu*dim)*es, int64(h*dim)*es, int64(j*t)*row, row); err != nil {
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
	out, err := d.p.Alloc(l.DType(), u*hu, t) // the row copies write it whole
	if err != nil {
		return nil, err
	}
	row := int64(t) * es
	for s := range u {
		if err := d.p.CopyRows(out, l, hu, row, int64(s*hu)*row, row, int64(s*t)*es, int64(n)*es); err != nil {
			d.free(out)
			return nil, err
		}
	}
	return out, nil
}

func (d deviceOps) accumulate(dst, src tensor.Tensor) error { return d.p.Accumulate(dst, src) }
func (d deviceOps) add(dst, a, b tensor.Tensor) error       { return d.p.Add(dst, a, b) }
func (d deviceOps) merge(dst, ldst, a, la, b, lb tensor.Tensor) error {
	return d.p.Merge(dst, ldst, a, la, b, lb)
}
func (d deviceOps) convert(dst, src tensor.Tensor) error  { return d.p.Convert(dst, src) }
func (d deviceOps) fill(t tensor.Tensor, v float64) error { return d.p.Fill(t, v) }

func (d deviceOps) merger(tokens, heads, dim int) (merger, error) {
	a := &arena{o: d}
	m := &deviceMerger{d: d, a: a}
	var err error
	if m.acc, err = a.scratch(tensor.FP32, tokens, heads, dim); err == nil {
		if m.lacc[0], err = a.scratch(tensor.FP32, heads, tokens); err == nil {
			m.lacc[1], err = a.scratch(tensor.FP32, heads, tokens)
		}
	}
	if err != nil {
		a.release()
		return nil, err
	}
	return m, nil
}

// deviceMerger is the log-sum-exp merge as a kernel, into an fp32 accumulator, for a
// method that does not know its number of partials in advance (stepMerge is the
// cheaper merge of a known number). The accumulators are not filled: the first partial
// is copied in (a row it saw no key for holds out = 0 and lse = -inf, the kernels'
// contract, which is what the merge of it into empty accumulators gives), the later
// ones merged in place, the lse into the other of two buffers (the kernel's lse output
// may not alias an input). A merge that saw no partial writes out = 0, lse = -inf.
type deviceMerger struct {
	d    deviceOps
	a    *arena
	acc  tensor.Tensor
	lacc [2]tensor.Tensor // the running lse is lacc[n%2]
	n    int              // partials added
}

func (m *deviceMerger) add(out, lse tensor.Tensor) error {
	m.n++
	if m.n == 1 {
		if err := m.d.p.Convert(m.acc, out); err != nil {
			return err
		}
		return m.d.p.Convert(m.lacc[1], lse)
	}
	return m.d.p.Merge(m.acc, m.lacc[m.n%2], m.acc, m.lacc[(m.n-1)%2], out, lse)
}

func (m *deviceMerger) write(out, lse tensor.Tensor) error {
	if m.n == 0 {
		if err := m.d.p.Fill(out, 0); err != nil {
			return err
		}
		return m.d.p.Fill(lse, math.Inf(-1))
	}
	if err := m.d.p.Convert(out, m.acc); err != nil {
		return err
	}
	return m.d.p.Convert(lse, m.lacc[m.n%2])
}

func (m *deviceMerger) close() { m.a.release() }
