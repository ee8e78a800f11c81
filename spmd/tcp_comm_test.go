package spmd_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/spmd"
	"github.com/longca/longca/tensor"
)

type notHost struct{ tensor.Tensor }

// TestArgumentErrors: bad buffers are refused with the operation named, before any
// byte moves, so the ranks stay in step.
func TestArgumentErrors(t *testing.T) {
	comms, err := spmd.LocalTCP(context.Background(), 2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer comms[1].Close()
	defer comms[0].Close()
	c := comms[0]
	h := tensor.NewHost(tensor.FP32, 3, 2)
	cases := []struct {
		want string
		err  error
	}{
		{"not in host memory", c.Send(notHost{h}, 1)},
		{"outside the group", c.Send(h, 2)},
		{"outside the group", c.Recv(h, -1)},
		{"does not split over 2", c.AllToAll(h, tensor.NewHost(tensor.FP32, 3, 2))},
		{"not 2 ranks", c.AllGather(h, tensor.NewHost(tensor.FP32, 3, 2))},
		{"dtypes", c.AllGather(h, tensor.NewHost(tensor.FP64, 6, 2))},
		{"does not split", c.ReduceScatter(h, tensor.NewHost(tensor.FP32, 1, 2))},
	}
	for _, tc := range cases {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("error %v, want one saying %q", tc.err, tc.want)
		}
	}
	if _, err := c.Split(-1, 0); err == nil {
		t.Error("negative color: no error")
	}
}

// TestSizeMismatch: a receive of the wrong size fails on the receiver, naming the sender.
func TestSizeMismatch(t *testing.T) {
	comms, err := spmd.LocalTCP(context.Background(), 2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer comms[1].Close()
	defer comms[0].Close()
	var wg sync.WaitGroup
	var sendErr, recvErr error
	wg.Add(2)
	go func() { defer wg.Done(); sendErr = comms[0].Send(tensor.NewHost(tensor.FP32, 4), 1) }()
	go func() { defer wg.Done(); recvErr = comms[1].Recv(tensor.NewHost(tensor.FP32, 5), 0) }()
	wg.Wait()
	var pe *comm.PeerError
	if sendErr != nil || !errors.As(recvErr, &pe) || pe.Rank != 0 || !strings.Contains(recvErr.Error(), "16 bytes where 20") {
		t.Errorf("send %v; recv %v", sendErr, recvErr)
	}
}

// TestManyMessagesInOrder: messages between a pair arrive in order, sends complete
// without their receives (1000 sends before the first receive).
func TestManyMessagesInOrder(t *testing.T) {
	comms, err := spmd.LocalTCP(context.Background(), 2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer comms[1].Close()
	defer comms[0].Close()
	const n = 1000
	for i := range n {
		h := tensor.NewHost(tensor.FP64, 1)
		h.Set(0, float64(i))
		if err := comms[0].Send(h, 1); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		h := tensor.NewHost(tensor.FP64, 1)
		if err := comms[1].Recv(h, 0); err != nil || h.At(0) != float64(i) {
			t.Fatalf("message %d: %v, %v", i, h.At(0), err)
		}
	}
	if got := comms[0].Counters(); got.BytesSent != 8*n || got.Messages != n {
		t.Errorf("counters %+v, want %d bytes in %d messages", got, 8*n, n)
	}
}
