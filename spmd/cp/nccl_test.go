package cp

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/nccl"
	"github.com/longca/longca/comm/nccl/ncclfake"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/kernels/ref"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// hostDevice is host memory posing as device memory for the fake NCCL (which reads and
// writes host memory): the Stager of nccl.Staged, so the methods' host tensors travel.
type hostDevice struct{}

// hostBuf is a host tensor with a "device" pointer.
type hostBuf struct{ *tensor.Host }

func (b hostBuf) DevicePtr() uintptr { return uintptr(unsafe.Pointer(&b.Data[0])) }

func (hostDevice) Alloc(dt tensor.DType, shape ...int) (tensor.Tensor, error) {
	return hostBuf{tensor.NewHost(dt, shape...)}, nil
}
func (hostDevice) Free(tensor.Tensor) {}
func (hostDevice) CopyIn(dst tensor.Tensor, src *tensor.Host) error {
	copy(dst.(hostBuf).Data, src.Data)
	return nil
}
func (hostDevice) CopyOut(dst *tensor.Host, src tensor.Tensor) error {
	copy(dst.Data, src.(hostBuf).Data)
	return nil
}

var (
	fakeOnce sync.Once
	fakeLib  string
	fakeErr  error
)

// fakeNCCL builds the fake libnccl once per test binary.
func fakeNCCL(t *testing.T) string {
	fakeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "cp-fakenccl")
		if err != nil {
			fakeErr = err
			return
		}
		fakeLib, _, fakeErr = ncclfake.Build(dir)
	})
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	return fakeLib
}

// fakeWorld makes n NCCL ranks (goroutines of this process) on the fake library,
// staged through host memory.
func fakeWorld(t *testing.T, lib string, n int) []comm.Comm {
	ids := make(chan []byte, n)
	done := make(chan struct{})
	out := make([]comm.Comm, n)
	errs := make([]error, n)
	stream := nccl.FuncStream{Ptr: 1, QueryFn: func() (bool, error) { return true, nil }}
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			exchange := func(id []byte) ([]byte, error) {
				if r == 0 {
					for range n - 1 {
						ids <- id
					}
					close(done)
					return id, nil
				}
				<-done
				return <-ids, nil
			}
			c, err := nccl.New(context.Background(), r, n, exchange, stream, 30*time.Second, nccl.WithLibrary(lib))
			if err != nil {
				errs[r] = err
				return
			}
			out[r] = nccl.NewStaged(c, hostDevice{})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMethodsOverNCCL runs every method on one rank and on two (goroutines of this
// process) over the fake libnccl (comm/nccl/ncclfake) through nccl.Staged, each checked
// against the reference, every run closed, then the world: the fake counts every NCCL
// call on a communicator being destroyed, destroyed or aborted, and there must be none.
// It is the one-rank `longca cp --backend nccl` crash of the H200 on the CPU: the
// watchdog asked each sub-group being destroyed for its asynchronous error ("corrupted
// comm object detected") and then aborted the freed communicator.
func TestMethodsOverNCCL(t *testing.T) {
	lib := fakeNCCL(t)
	spec, err := mask.Build("causal_document", 128, mask.Options{Seed: 3, Window: 16, BlockSize: 32})
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := spec.Docs()
	p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 8, DType: tensor.BF16, Mask: spec.Mask}
	var handle *nccl.Lib
	for _, n := range []int{1, 2} {
		world := fakeWorld(t, lib, n)
		handle = world[0].(*nccl.Staged).Lib()
		for _, name := range Names() {
			m, _ := New(name)
			pl, err := m.Plan(Config{Ranks: n, Docs: docs}, p)
			if err != nil {
				t.Fatal(err)
			}
			errs := make([]error, n)
			var wg sync.WaitGroup
			for r, c := range world {
				wg.Add(1)
				go func() {
					defer wg.Done()
					run, err := NewRun(pl, ref.New(ref.Options{}), c)
					if err != nil {
						errs[r] = err
						return
					}
					rep, err := CheckRank(context.Background(), m, run, CheckOptions{Seed: 5, Backward: true})
					if err == nil && !rep.Pass {
						err = fmt.Errorf("wrong: %v", rep)
					}
					errs[r] = errors.Join(err, run.Close())
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("%s on %d NCCL rank(s): %v", name, n, err)
			}
		}
		for r, c := range world {
			if err := c.Close(); err != nil {
				t.Fatalf("closing NCCL rank %d of %d: %v", r, n, err)
			}
		}
	}
	ptr, err := handle.Symbol("fake_use_after_destroy")
	if err != nil {
		t.Fatal(err)
	}
	if uses := *(*int32)(ptr); uses != 0 {
		t.Fatalf("%d NCCL calls on a communicator being destroyed, destroyed or aborted", uses)
	}
}
