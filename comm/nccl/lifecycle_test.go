package nccl

import (
	"errors"
	"strings"
	"testing"
	"time"

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
