package harness

import (
	"context"
	"errors"
	"testing"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/results"
	"github.com/longca/longca/tensor"
)

// stalling is the ref kernel whose forward waits for the sweep to be stopped, as a
// torch worker's request does while Ctrl-C arrives.
type stalling struct {
	kernels.Kernel
	started chan struct{}
}

func (s stalling) Forward(ctx context.Context, p kernels.Problem, q, k, v, out, lse tensor.Tensor) error {
	close(s.started)
	<-ctx.Done()
	return ctx.Err()
}

// A case that Ctrl-C interrupts measured nothing: RunAll stops with ctx's error and does
// not hand that case's row on (it was written as the kernel's "error" before: the H200
// call of 15:44 has "torch:cudnn ... error: context canceled" for a case SIGINT cut),
// while the rows finished before it are kept.
func TestInterruptedCaseIsNotARow(t *testing.T) {
	s := Sweep{SeqLens: []int{256}, Heads: []Heads{{2, 1}}, HeadDim: 8, DType: tensor.FP32, Kernels: []string{"ref", "stall"},
		Masks: []string{"full"}, Passes: []kernels.Pass{kernels.Fwd}, Seed: 1}
	cs := s.Cases()
	if len(cs) != 2 {
		t.Fatalf("%d cases, want 2", len(cs))
	}
	started := make(chan struct{})
	r := &Runner{Warmup: 0, Iters: 1, NewKernel: func(name string) (kernels.Kernel, error) {
		if name == "stall" {
			return stalling{ref.New(ref.Options{}), started}, nil
		}
		return ref.New(ref.Options{}), nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-started; cancel() }()
	var rows []results.Row
	err := r.RunAll(ctx, cs, func(i int, row results.Row) error { rows = append(rows, row); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("RunAll: %v, want context.Canceled", err)
	}
	if len(rows) != 1 || rows[0].Kernel != "ref" || rows[0].Status != results.StatusOK {
		t.Fatalf("rows %+v; want the finished ref row alone", rows)
	}
}
