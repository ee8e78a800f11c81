package cp

import (
	"fmt"
	"math"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// Tracer is a kernel that stands in for a GPU when a method is traced rather than run
// (longca simulate, package sim): the method's code runs unchanged, but its tensors are
// placeholders without data, and every kernel call, helper operation and transfer is
// reported to the tracer in program order instead of being computed. The helper
// operations are those of the device path (ops_device.go), launch for launch, so a
// trace is what the GPU would be asked to do.
type Tracer interface {
	kernels.Kernel
	// Alloc returns a placeholder tensor (no data).
	Alloc(dt tensor.DType, shape ...int) (tensor.Tensor, error)
	// Helper reports a helper operation on the compute stream (a rearrangement,
	// accumulation, conversion, fill or log-sum-exp merge) of the given kernel launches,
	// reading and writing the given tensors.
	Helper(name string, launches int, reads, writes []tensor.Tensor) error
	// Transfer runs fn, a transfer the method overlaps with its compute: it may start once
	// the compute reported so far is done. The tracer runs fn before returning, so the
	// communication fn reports belongs to this transfer.
	Transfer(fn func() error) error
	// PartialDType is the dtype of the per-step kernel outputs for a problem in dt (fp32
	// for a kernel with fp32 partials, as kernels/cuda has).
	PartialDType(dt tensor.DType) tensor.DType
}

// traceOps are the ops of a traced run: each operation is reported to the Tracer with
// the launches the device path makes for it.
type traceOps struct{ t Tracer }

// startExchange implements ops: a traced exchange runs at once, in program order (the
// Tracer times it as the overlapped transfer it is), and its wait returns nothing.
func (o traceOps) startExchange(c comm.Comm, next, prev int, send, recv []tensor.Tensor) (func() error, error) {
	err := o.t.Transfer(func() error { return exchange(c, next, prev, send, recv) })
	return func() error { return nil }, err
}

func (o traceOps) alloc(dt tensor.DType, shape ...int) (tensor.Tensor, error) {
	t, err := o.t.Alloc(dt, shape...)
	if err != nil {
		return nil, err
	}
	// The device path zeroes every buffer it allocates (deviceOps.alloc).
	return t, o.t.Helper("fill", 1, nil, []tensor.Tensor{t})
}

// scratch is a placeholder with no fill reported (deviceOps.scratch enqueues none).
func (o traceOps) scratch(dt tensor.DType, shape ...int) (tensor.Tensor, error) {
	return o.t.Alloc(dt, shape...)
}

func (traceOps) free(...tensor.Tensor) {}
func (traceOps) trim()                 {}
func (o traceOps) partDType(dt tensor.DType) tensor.DType {
	return o.t.PartialDType(dt)
}
func (traceOps) accDType() tensor.DType { return tensor.FP32 }

// mark is never waited on: transfers run inline (traceOps.transfer).
func (traceOps) mark() (func() error, error) { return func() error { return nil }, nil }

// fence orders a blocking collective after the compute: a trace's compute stream and
// the collectives issued from it are in program order already.
func (traceOps) fence() error { return nil }

func (o traceOps) device() tensor.Device { return o.t.Device() }

func (traceOps) upload(*tensor.Host) (tensor.Tensor, error) {
	return nil, fmt.Errorf("cp: a traced run holds no data: allocate its inputs with the tracer")
}

func (traceOps) download(*tensor.Host, tensor.Tensor) error {
	return fmt.Errorf("cp: a traced run holds no data to download")
}

func (o traceOps) headsOut(x tensor.Tensor, u int, replicate bool) (tensor.Tensor, error) {
	t, h, d, err := shape3(x)
	if err != nil {
		return nil, err
	}
	hu := h / u
	if replicate {
		hu = 1
	}
	out, err := o.scratch(x.DType(), u*t, hu, d)
	if err != nil {
		return nil, err
	}
	return out, o.t.Helper("heads-out", u, []tensor.Tensor{x}, []tensor.Tensor{out})
}

func (o traceOps) headsIn(in, x tensor.Tensor, u int, replicate bool) error {
	launches := u
	if replicate {
		launches = 1 // one summing kernel (HeadsSum)
	}
	return o.t.Helper("heads-in", launches, []tensor.Tensor{in}, []tensor.Tensor{x})
}

func (o traceOps) lseOut(l tensor.Tensor, u int) (tensor.Tensor, error) {
	sh := l.Shape()
	if len(sh) != 2 {
		return nil, fmt.Errorf("cp: lse of shape %v, want [heads, tokens]", sh)
	}
	out, err := o.scratch(l.DType(), u*sh[0], sh[1]/u)
	if err != nil {
		return nil, err
	}
	return out, o.t.Helper("lse-out", u, []tensor.Tensor{l}, []tensor.Tensor{out})
}

func (o traceOps) accumulate(dst, src tensor.Tensor) error {
	if dst.Numel() != src.Numel() {
		return fmt.Errorf("cp: accumulating %v into %v", src.Shape(), dst.Shape())
	}
	return o.t.Helper("accumulate", 1, []tensor.Tensor{dst, src}, []tensor.Tensor{dst})
}

func (o traceOps) convert(dst, src tensor.Tensor) error {
	if dst.Numel() != src.Numel() {
		return fmt.Errorf("cp: copy of %v into %v", src.Shape(), dst.Shape())
	}
	return o.t.Helper("convert", 1, []tensor.Tensor{src}, []tensor.Tensor{dst})
}

// add reports the add kernel: dst = a + b (in place when dst is a).
func (o traceOps) add(dst, a, b tensor.Tensor) error {
	if a.Numel() != dst.Numel() || b.Numel() != dst.Numel() {
		return fmt.Errorf("cp: adding %v and %v into %v", a.Shape(), b.Shape(), dst.Shape())
	}
	return o.t.Helper("add", 1, []tensor.Tensor{a, b}, []tensor.Tensor{dst})
}

// merge reports the merge kernel as if every row had keys on both sides (the kernel
// skips the reads of a side without keys, and in place the rows b has none for: a
// trace has no data to tell, so it counts the most).
func (o traceOps) merge(dst, ldst, a, la, b, lb tensor.Tensor) error {
	if a.Numel() != dst.Numel() || b.Numel() != dst.Numel() {
		return fmt.Errorf("cp: merge of %v and %v into %v", a.Shape(), b.Shape(), dst.Shape())
	}
	return o.t.Helper("merge", 1, []tensor.Tensor{a, la, b, lb}, []tensor.Tensor{dst, ldst})
}

func (o traceOps) fill(t tensor.Tensor, _ float64) error {
	return o.t.Helper("fill", 1, nil, []tensor.Tensor{t})
}

func (o traceOps) merger(tokens, heads, dim int) (merger, error) {
	acc, err := o.scratch(tensor.FP32, tokens, heads, dim)
	if err != nil {
		return nil, err
	}
	lacc, err := o.scratch(tensor.FP32, heads, tokens)
	if err != nil {
		return nil, err
	}
	return &traceMerger{o: o, acc: acc, lacc: lacc}, nil
}

// traceMerger reports the device merger's kernels (deviceMerger): the first partial
// copied in (two conversions), a merge per later one, two conversions at the end (two
// fills when no partial came).
type traceMerger struct {
	o         traceOps
	acc, lacc tensor.Tensor
	n         int
}

func (m *traceMerger) add(out, lse tensor.Tensor) error {
	m.n++
	if m.n == 1 {
		if err := m.o.convert(m.acc, out); err != nil {
			return err
		}
		return m.o.convert(m.lacc, lse)
	}
	return m.o.t.Helper("merge", 1, []tensor.Tensor{m.acc, m.lacc, out, lse}, []tensor.Tensor{m.acc, m.lacc})
}

func (m *traceMerger) write(out, lse tensor.Tensor) error {
	if m.n == 0 {
		if err := m.o.fill(out, 0); err != nil {
			return err
		}
		return m.o.fill(lse, math.Inf(-1))
	}
	if err := m.o.convert(out, m.acc); err != nil {
		return err
	}
	return m.o.convert(lse, m.lacc)
}

func (*traceMerger) close() {}

// Traced says whether k is a Tracer: a run with it records instead of computing.
func Traced(k kernels.Kernel) bool {
	_, ok := k.(Tracer)
	return ok
}
