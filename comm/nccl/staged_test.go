package nccl

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/commtest"
	"github.com/longca/longca/tensor"
)

// hostStager is a Stager whose "device" memory is host memory posing as device
// tensors (what the fake NCCL reads); it counts live allocations.
type hostStager struct{ live, allocs atomic.Int64 }

func (s *hostStager) Alloc(dt tensor.DType, shape ...int) (tensor.Tensor, error) {
	s.live.Add(1)
	s.allocs.Add(1)
	h := tensor.NewHost(dt, shape...)
	for i := range h.Data {
		h.Data[i] = 0xA5 // garbage, as fresh device memory would be
	}
	return hostDev{h}, nil
}

func (s *hostStager) Free(t tensor.Tensor) { s.live.Add(-1) }

func (s *hostStager) CopyIn(dst tensor.Tensor, src *tensor.Host) error {
	d, ok := dst.(hostDev)
	if !ok || len(d.Data) != len(src.Data) {
		return fmt.Errorf("copy in of %d bytes into %T", len(src.Data), dst)
	}
	copy(d.Data, src.Data)
	return nil
}

func (s *hostStager) CopyOut(dst *tensor.Host, src tensor.Tensor) error {
	d, ok := src.(hostDev)
	if !ok || len(d.Data) != len(dst.Data) {
		return fmt.Errorf("copy out of %T into %d bytes", src, len(dst.Data))
	}
	copy(dst.Data, d.Data)
	return nil
}

// TestStagedCommTable runs the shared comm test table (host tensors) over the fake
// NCCL through the staging wrapper, at 1 to 4 ranks, and checks every staging buffer
// was freed.
func TestStagedCommTable(t *testing.T) {
	for _, path := range []string{fakeLib, fakeLibNoA2A} {
		for _, n := range []int{1, 2, 3, 4} {
			t.Run(fmt.Sprintf("%d-ranks-a2a-%v", n, path == fakeLib), func(t *testing.T) {
				comms := newFakeWorld(t, n, path, 20*time.Second)
				st := &hostStager{}
				staged := make([]comm.Comm, n)
				for r, c := range comms {
					staged[r] = NewStaged(c, st)
				}
				commtest.Run(t, staged)
				if live := st.live.Load(); live != 0 {
					t.Errorf("%d staging buffers not freed", live)
				}
				if st.allocs.Load() == 0 {
					t.Error("nothing was staged")
				}
			})
		}
	}
}

func TestStagedPassesDeviceTensors(t *testing.T) {
	comms := newFakeWorld(t, 1, fakeLib, 20*time.Second)
	st := &hostStager{}
	s := NewStaged(comms[0], st)
	a := fillDev(tensor.FP32, []int{4}, func(i int) float64 { return float64(i) })
	b := fillDev(tensor.FP32, []int{4}, func(int) float64 { return 0 })
	if err := s.Group(func() error {
		if err := s.Send(a, 0); err != nil {
			return err
		}
		return s.Recv(b, 0)
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.AllGather(a, b); err != nil {
		t.Fatal(err)
	}
	if err := check("device tensors through Staged", b, func(i int) float64 { return float64(i) }); err != nil {
		t.Error(err)
	}
	if st.allocs.Load() != 0 {
		t.Errorf("device tensors were staged %d times", st.allocs.Load())
	}
}
