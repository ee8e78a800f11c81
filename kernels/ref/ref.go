// Package ref is the CPU reference attention: any mask, forward and backward, inputs
// read as stored (bf16, fp16, fp32, fp64) and every sum taken in float64. It visits only
// the allowed (q, k) pairs of the mask and spreads heads x row blocks over every core.
//
// With Options.Emulate set it is instead the "naive low-precision" baseline of the
// correctness rule (FlashAttention's attention_ref(upcast=False)): scores and sums in
// fp32, and the probabilities, dP and dS rounded to the emulated type before each
// matrix product, so its error against the exact reference sets the tolerance.
package ref

import (
	"context"
	"fmt"
	"runtime"
	"strconv"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

func init() {
	kernels.Register("ref", "CPU float64 reference, any mask", func(kernels.Options) (kernels.Kernel, error) {
		return New(Options{}), nil
	})
}

// Options configure a reference kernel.
type Options struct {
	// Emulate, when BF16, FP16 or FP32, makes the kernel compute as a naive kernel in that
	// type would: fp32 scores and accumulation, P, dP and dS rounded to Emulate before the
	// products that use them. Zero or FP64 means the exact float64 reference.
	Emulate tensor.DType
}

// Kernel is the CPU reference attention kernel.
type Kernel struct {
	opt Options
	dev *tensor.CPU
}

var _ kernels.Kernel = (*Kernel)(nil)

// New makes a reference kernel on its own CPU device.
func New(opt Options) *Kernel {
	if opt.Emulate == tensor.FP64 {
		opt.Emulate = 0
	}
	return &Kernel{opt: opt, dev: &tensor.CPU{}}
}

// Name is "ref", or "ref-naive-<dtype>" in emulation mode.
func (r *Kernel) Name() string {
	if r.opt.Emulate != 0 {
		return "ref-naive-" + r.opt.Emulate.String()
	}
	return "ref"
}

// Device is the CPU.
func (r *Kernel) Device() tensor.Device { return r.dev }

var _ kernels.Describer = (*Kernel)(nil)

// Describe records the threads the kernel runs on (parallelFor's bound, GOMAXPROCS: the
// environment variable, else the CPUs this process may use) under "gomaxprocs": they set
// its speed as the GPU sets a device kernel's, and GOMAXPROCS=1 ran it on one core with
// nothing in the row to say so.
func (r *Kernel) Describe(kernels.Problem, kernels.Pass) kernels.Info {
	return kernels.Info{Versions: map[string]string{"gomaxprocs": strconv.Itoa(runtime.GOMAXPROCS(0))}}
}

// Supports accepts every valid problem.
func (r *Kernel) Supports(p kernels.Problem) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("%s: %w", r.Name(), err)
	}
	masks := p.HeadMasks
	if len(masks) == 0 {
		masks = []mask.Mask{p.Mask}
	}
	for i, m := range masks {
		if m.SeqQ != p.Mask.SeqQ || m.SeqK != p.Mask.SeqK {
			return fmt.Errorf("%s: head mask %d is %dx%d, the problem %dx%d", r.Name(), i, m.SeqQ, m.SeqK, p.Mask.SeqQ, p.Mask.SeqK)
		}
		if err := m.Validate(); err != nil {
			return fmt.Errorf("%s: head mask %d: %w", r.Name(), i, err)
		}
	}
	return nil
}

// Forward writes out (in its own dtype) and lse (natural log, per [head, query]; any
// float dtype, fp32 by contract). A row with no allowed key gets out 0 and lse -inf.
func (r *Kernel) Forward(ctx context.Context, p kernels.Problem, q, k, v, out, lse tensor.Tensor) error {
	if err := r.Supports(p); err != nil {
		return err
	}
	qs, kvs, ls := p.Shapes()
	hs, err := hosts(r.Name(), []tensor.Tensor{q, k, v, out, lse}, []string{"q", "k", "v", "out", "lse"}, [][]int{qs, kvs, kvs, qs, ls})
	if err != nil {
		return err
	}
	if r.opt.Emulate != 0 {
		e := newEngine[float32](p, r.opt.Emulate, hs[0], hs[1], hs[2])
		return e.forward(ctx, hs[3], hs[4])
	}
	e := newEngine[float64](p, 0, hs[0], hs[1], hs[2])
	return e.forward(ctx, hs[3], hs[4])
}

// Backward overwrites dq, dk and dv given the forward's out and lse, using
// D = rowsum(dout * out) and P = exp(scale*q.k - lse).
func (r *Kernel) Backward(ctx context.Context, p kernels.Problem, q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	if err := r.Supports(p); err != nil {
		return err
	}
	qs, kvs, ls := p.Shapes()
	hs, err := hosts(r.Name(), []tensor.Tensor{q, k, v, out, lse, dout, dq, dk, dv},
		[]string{"q", "k", "v", "out", "lse", "dout", "dq", "dk", "dv"},
		[][]int{qs, kvs, kvs, qs, ls, qs, qs, kvs, kvs})
	if err != nil {
		return err
	}
	if r.opt.Emulate != 0 {
		e := newEngine[float32](p, r.opt.Emulate, hs[0], hs[1], hs[2])
		return e.backward(ctx, hs[3], hs[4], hs[5], hs[6], hs[7], hs[8])
	}
	e := newEngine[float64](p, 0, hs[0], hs[1], hs[2])
	return e.backward(ctx, hs[3], hs[4], hs[5], hs[6], hs[7], hs[8])
}

// hosts checks that every tensor is a host tensor of the expected shape.
func hosts(kernel string, ts []tensor.Tensor, names []string, shapes [][]int) ([]*tensor.Host, error) {
	out := make([]*tensor.Host, len(ts))
	for i, t := range ts {
		h, ok := t.(*tensor.Host)
		if !ok {
			return nil, fmt.Errorf("%s: %s is %T, not a host tensor", kernel, names[i], t)
		}
		if !sameShape(h.Shape(), shapes[i]) {
			return nil, fmt.Errorf("%s: %s has shape %v, want %v", kernel, names[i], h.Shape(), shapes[i])
		}
		out[i] = h
	}
	return out, nil
}

func sameShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// DeterministicBackward is true: the reference's results are bit-identical at any core
// count and run after run.
func (r *Kernel) DeterministicBackward() bool { return true }
