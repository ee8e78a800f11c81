package check

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// deviceRun holds the candidate's tensors on its own device, freed together.
type deviceRun struct {
	dev  tensor.Device
	name string
	live []tensor.Tensor
}

// alloc allocates on the device; poison fills the tensor with NaN first.
func (d *deviceRun) alloc(what string, dt tensor.DType, shape []int, poison bool) (tensor.Tensor, error) {
	t, err := d.dev.Alloc(dt, shape...)
	if err != nil {
		return nil, fmt.Errorf("%s: allocating %s %s%v on %s: %w", d.name, what, dt, shape, d.dev.Name(), err)
	}
	d.live = append(d.live, t)
	if poison {
		if err := d.dev.Poison(t); err != nil {
			return nil, fmt.Errorf("%s: poisoning %s: %w", d.name, what, err)
		}
	}
	return t, nil
}

// upload allocates a device copy of h.
func (d *deviceRun) upload(what string, h *tensor.Host) (tensor.Tensor, error) {
	t, err := d.alloc(what, h.DType(), h.Shape(), false)
	if err != nil {
		return nil, err
	}
	if err := d.dev.CopyIn(t, h); err != nil {
		return nil, fmt.Errorf("%s: copying %s to %s: %w", d.name, what, d.dev.Name(), err)
	}
	return t, nil
}

// download copies a device tensor back to the host.
func (d *deviceRun) download(what string, t tensor.Tensor) (*tensor.Host, error) {
	h := tensor.NewHost(t.DType(), t.Shape()...)
	if err := d.dev.CopyOut(h, t); err != nil {
		return nil, fmt.Errorf("%s: copying %s from %s: %w", d.name, what, d.dev.Name(), err)
	}
	return h, nil
}

func (d *deviceRun) free() {
	for _, t := range d.live {
		d.dev.Free(t)
	}
	d.live = nil
}

// runDevice runs the candidate on its device: outputs (out, dq, dk, dv in p.DType, lse
// fp32) are poisoned with NaN before each pass, so an element it does not write shows.
func runDevice(ctx context.Context, k kernels.Kernel, p kernels.Problem, qh, kh, vh, douth *tensor.Host, backward bool) (Outputs, error) {
	d := &deviceRun{dev: k.Device(), name: k.Name()}
	defer d.free()
	qs, kvs, ls := p.Shapes()
	var in [3]tensor.Tensor
	for i, h := range []*tensor.Host{qh, kh, vh} {
		t, err := d.upload([]string{"q", "k", "v"}[i], h)
		if err != nil {
			return Outputs{}, err
		}
		in[i] = t
	}
	out, err := d.alloc("out", p.DType, qs, true)
	if err != nil {
		return Outputs{}, err
	}
	lse, err := d.alloc("lse", tensor.FP32, ls, true)
	if err != nil {
		return Outputs{}, err
	}
	if err := k.Forward(ctx, p, in[0], in[1], in[2], out, lse); err != nil {
		return Outputs{}, passError(k, "forward", err)
	}
	var o Outputs
	if o.Out, err = d.download("out", out); err != nil {
		return o, err
	}
	if o.LSE, err = d.download("lse", lse); err != nil || !backward {
		return o, err
	}
	dout, err := d.upload("dout", douth)
	if err != nil {
		return o, err
	}
	var g [3]tensor.Tensor
	for i, shape := range [][]int{qs, kvs, kvs} {
		if g[i], err = d.alloc([]string{"dq", "dk", "dv"}[i], p.DType, shape, true); err != nil {
			return o, err
		}
	}
	if err := k.Backward(ctx, p, in[0], in[1], in[2], out, lse, dout, g[0], g[1], g[2]); err != nil {
		return o, passError(k, "backward", err)
	}
	for i, dst := range []**tensor.Host{&o.DQ, &o.DK, &o.DV} {
		if *dst, err = d.download([]string{"dq", "dk", "dv"}[i], g[i]); err != nil {
			return o, err
		}
	}
	return o, nil
}

// RunDevice runs kernel k on its device with host inputs (poisoned outputs, as a check
// does) and brings the outputs back: what a test comparing two runs of one kernel needs.
func RunDevice(ctx context.Context, k kernels.Kernel, p kernels.Problem, q, kk, v, dout *tensor.Host, backward bool) (Outputs, error) {
	return runDevice(ctx, k, p, q, kk, v, dout, backward)
}

// passError labels a pass's failure with the pass, unless it is the failure of an
// earlier phase (kernels.PhaseError: an external worker's hello or supports) that the
// pass only reported: that one names its own phase.
func passError(k kernels.Kernel, pass string, err error) error {
	var pe *kernels.PhaseError
	if errors.As(err, &pe) {
		return err
	}
	label := k.Name() + " " + pass
	if strings.HasPrefix(err.Error(), label+": ") { // the kernel labelled it so already (exec: workers)
		return err
	}
	return fmt.Errorf("%s: %w", label, err)
}
