package kernels

import (
	"fmt"
	"slices"

	"github.com/longca/longca/tensor"
)

// Arg is one tensor argument of a kernel call with the dtype and shape it must have.
type Arg struct {
	name  string
	t     tensor.Tensor
	dt    tensor.DType
	shape []int
}

// Want is the argument name, t, which must be of dtype dt and the given shape.
func Want(name string, t tensor.Tensor, dt tensor.DType, shape []int) Arg {
	return Arg{name, t, dt, shape}
}

// DeviceArgs checks that every argument is a B (a device kernel's own buffer type) of its
// dtype and shape, and returns them in order; errors start with who and name the
// argument.
func DeviceArgs[B tensor.Tensor](who string, args ...Arg) ([]B, error) {
	out := make([]B, len(args))
	for i, a := range args {
		b, ok := a.t.(B)
		if !ok {
			return nil, fmt.Errorf("%s: %s is %T, not a device tensor", who, a.name, a.t)
		}
		if b.DType() != a.dt || !slices.Equal(b.Shape(), a.shape) {
			return nil, fmt.Errorf("%s: %s is %s%v, want %s%v", who, a.name, b.DType(), b.Shape(), a.dt, a.shape)
		}
		out[i] = b
	}
	return out, nil
}

// ForwardArgs are the checked arguments of a forward call (q, k, v, out, lse).
func ForwardArgs[B tensor.Tensor](who string, p Problem, q, k, v, out, lse tensor.Tensor) ([]B, error) {
	qs, kvs, ls := p.Shapes()
	return DeviceArgs[B](who, Want("q", q, p.DType, qs), Want("k", k, p.DType, kvs), Want("v", v, p.DType, kvs),
		Want("out", out, p.DType, qs), Want("lse", lse, tensor.FP32, ls))
}

// BackwardArgs are the checked arguments of a backward call (q, k, v, out, lse, dout, dq,
// dk, dv).
func BackwardArgs[B tensor.Tensor](who string, p Problem, q, k, v, out, lse, dout, dq, dk, dv tensor.Tensor) ([]B, error) {
	qs, kvs, ls := p.Shapes()
	return DeviceArgs[B](who, Want("q", q, p.DType, qs), Want("k", k, p.DType, kvs), Want("v", v, p.DType, kvs),
		Want("out", out, p.DType, qs), Want("lse", lse, tensor.FP32, ls), Want("dout", dout, p.DType, qs),
		Want("dq", dq, p.DType, qs), Want("dk", dk, p.DType, kvs), Want("dv", dv, p.DType, kvs))
}
