// Package kerneltest holds kernels made for tests of the packages that run kernels.
package kerneltest

import (
	"context"
	"sync/atomic"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// CancelAt is one rank's kernel that calls Cancel (cancelling that rank's context, as a
// SIGTERM to that rank alone would) at its At'th call, forward or backward: in the middle
// of a CP method's exchange. At 0: never.
type CancelAt struct {
	kernels.Kernel
	At     int64
	Cancel func()
	calls  atomic.Int64
}

func (k *CancelAt) tick() {
	if k.calls.Add(1) == k.At {
		k.Cancel()
	}
}

func (k *CancelAt) Forward(ctx context.Context, p kernels.Problem, q, kk, v, out, lse tensor.Tensor) error {
	k.tick()
	return k.Kernel.Forward(ctx, p, q, kk, v, out, lse)
}

func (k *CancelAt) Backward(ctx context.Context, p kernels.Problem, q, kk, v, out, lse, dout, dq, dk, dv tensor.Tensor) error {
	k.tick()
	return k.Kernel.Backward(ctx, p, q, kk, v, out, lse, dout, dq, dk, dv)
}
