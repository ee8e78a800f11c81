package nccl

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// TestNoUseAfterDestroy is the lifecycle of a CP run on one rank (the world, the four
// sub-groups a cp.Run splits, their use, and their destruction in the order Run.Close
// used: a parent before its children) on the fake NCCL, which counts every call on a
// communicator that is being destroyed, destroyed or aborted. The watchdog used to poll
// ncclCommGetAsyncError while ncclCommDestroy ran (NCCL: "corrupted comm object
// detected"), and then aborted the freed communicator: the crash of the one-rank
// `longca cp --backend nccl` runs on the H200.
func TestNoUseAfterDestroy(t *testing.T) {
	c := newFakeComm(t, fakeLib, doneStream, 10*time.Second)
	l := c.Lib()
	before := fakeCounter(t, l, "fake_use_after_destroy")
	ulysses, err := c.Split(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	ring, err := c.Split(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := ring.Split(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	outer, err := ring.Split(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := hostDev{tensor.NewHost(tensor.FP32, 8)}
	for _, s := range []*Comm{ulysses.(*Comm), ring.(*Comm), inner.(*Comm), outer.(*Comm)} {
		if err := s.AllReduce(buf, 0); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range []*Comm{ulysses.(*Comm), ring.(*Comm), inner.(*Comm), outer.(*Comm), c} {
		if err := s.Close(); err != nil {
			t.Errorf("close %d: %v", i, err)
		}
		if err := s.Close(); err != nil { // a second Close does nothing
			t.Errorf("second close %d: %v", i, err)
		}
	}
	if got := fakeCounter(t, l, "fake_use_after_destroy") - before; got != 0 {
		t.Fatalf("%d NCCL calls on a communicator being destroyed or destroyed", got)
	}
}

// TestAbortWhileWaiting aborts a communicator from another goroutine while its owner
// waits in a receive no one sends (as the runtime does when a peer failed): the owner
// fails at once, and nothing asks the aborted (freed) communicator anything afterwards.
func TestAbortWhileWaiting(t *testing.T) {
	comms := newFakeWorld(t, 2, fakeLib, time.Minute)
	l := comms[0].Lib()
	before := fakeCounter(t, l, "fake_use_after_destroy")
	buf := hostDev{tensor.NewHost(tensor.FP32, 4)}
	done := make(chan error, 1)
	go func() { done <- comms[1].Group(func() error { return comms[1].Recv(buf, 0) }) }()
	time.Sleep(20 * time.Millisecond) // the owner is inside its wait
	reason := errors.New("rank 0 failed")
	comms[1].Abort(reason)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "rank 0 failed") && !strings.Contains(err.Error(), "aborted") {
			t.Errorf("receive after the abort: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the receive did not return after the abort")
	}
	if err := comms[1].Barrier(); err == nil {
		t.Error("a barrier on the aborted communicator succeeded")
	}
	comms[0].Abort(reason)
	if got := fakeCounter(t, l, "fake_use_after_destroy") - before; got != 0 {
		t.Fatalf("%d NCCL calls on an aborted or destroyed communicator", got)
	}
}

// orderedStream is a fake OrderedStream: it records the events waited for and made, and
// counts the host's queries of completion.
type orderedStream struct {
	FuncStream
	mu      sync.Mutex
	waited  []uintptr
	made    uintptr
	queries *atomic.Int32
}

func (s *orderedStream) WaitEvent(ev uintptr) error {
	s.mu.Lock()
	s.waited = append(s.waited, ev)
	s.mu.Unlock()
	return nil
}

func (s *orderedStream) RecordEvent() (uintptr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.made++
	return 1000 + s.made, nil
}

// TestGroupAfterWaitsOnTheDevice: GroupAfter makes the communicator's stream wait for
// the compute's event, enqueues the exchange, and returns the event of its end without
// asking the stream anything (no host wait); Settle then waits for the stream.
func TestGroupAfterWaitsOnTheDevice(t *testing.T) {
	var queries atomic.Int32
	query := func() (bool, error) { queries.Add(1); return true, nil }
	streams := []*orderedStream{{FuncStream: FuncStream{Ptr: 1, QueryFn: query}, queries: &queries}, {FuncStream: FuncStream{Ptr: 2, QueryFn: query}, queries: &queries}}
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	x := newChanExchange()
	comms := make([]*Comm, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			comms[r], errs[r] = New(context.Background(), r, 2, x.forRank(r), streams[r], 10*time.Second, WithLibrary(fakeLib))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	if !comms[0].StreamOrdered() {
		t.Fatal("a communicator on an OrderedStream is not StreamOrdered")
	}
	before := queries.Load()
	send := []hostDev{{tensor.NewHost(tensor.FP32, 4)}, {tensor.NewHost(tensor.FP32, 4)}}
	recv := []hostDev{{tensor.NewHost(tensor.FP32, 4)}, {tensor.NewHost(tensor.FP32, 4)}}
	for r := range 2 {
		send[r].Fill(float64(r + 1))
	}
	done := make([]comm.Event, 2)
	for r, c := range comms {
		wg.Go(func() {
			done[r], errs[r] = c.GroupAfter(comm.Event(77+r), func() error {
				if err := c.Send(send[r], 1-r); err != nil {
					return err
				}
				return c.Recv(recv[r], 1-r)
			})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if q := queries.Load() - before; q != 0 {
		t.Errorf("GroupAfter asked the stream %d times: a host wait", q)
	}
	for r, s := range streams {
		if len(s.waited) != 1 || s.waited[0] != uintptr(77+r) || done[r] != comm.Event(1000+s.made) {
			t.Errorf("rank %d: waited for %v, done %d (made %d)", r, s.waited, done[r], s.made)
		}
		if recv[r].At(0) != float64(2-r) {
			t.Errorf("rank %d received %v", r, recv[r].At(0))
		}
	}
	for _, c := range comms {
		if err := c.Settle(); err != nil {
			t.Fatal(err)
		}
	}
	if queries.Load() == before {
		t.Error("Settle did not wait for the stream")
	}
}
