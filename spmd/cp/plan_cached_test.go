package cp

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/longca/longca/kernels"
	"github.com/longca/longca/mask"
	"github.com/longca/longca/tensor"
)

// TestCachedMakesOnce: ranks that ask for one sub-mask at once wait for the one making it
// (usp's Ulysses groups under simulate had each made their own copy: a rank's memory and
// time each), and all get the same; a maker that panics wakes them, and one of them makes it.
func TestCachedMakesOnce(t *testing.T) {
	var pl Plan
	var made atomic.Int32
	want := mask.Mask{SeqQ: 7, SeqK: 9}
	f := func() mask.Mask {
		made.Add(1)
		time.Sleep(30 * time.Millisecond)
		return want
	}
	const ranks = 8
	got := make([]mask.Mask, ranks)
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[r] = pl.cached(0, 1, f)
		}()
	}
	wg.Wait()
	if n := made.Load(); n != 1 {
		t.Errorf("%d ranks asking at once made the sub-mask %d times, want once", ranks, n)
	}
	for r, m := range got {
		if m.SeqQ != want.SeqQ || m.SeqK != want.SeqK {
			t.Errorf("rank %d got %+v", r, m)
		}
	}

	// a maker that panics: the others are woken and one of them makes it
	var calls atomic.Int32
	start := make(chan struct{})
	boom := func() mask.Mask {
		if calls.Add(1) == 1 {
			<-start
			panic("boom")
		}
		return want
	}
	done := make(chan mask.Mask, ranks)
	go func() {
		defer func() { recover(); done <- mask.Mask{SeqQ: -1} }()
		pl.cached(2, 3, boom)
	}()
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	for range ranks - 1 {
		go func() { done <- pl.cached(2, 3, boom) }()
	}
	time.Sleep(20 * time.Millisecond) // (the others waiting for the first)
	close(start)
	timeout := time.After(10 * time.Second)
	for range ranks {
		select {
		case m := <-done:
			if m.SeqQ != -1 && m.SeqQ != want.SeqQ {
				t.Errorf("after the maker's panic a rank got %+v", m)
			}
		case <-timeout:
			t.Fatal("ranks waiting for a maker that panicked were never woken")
		}
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("made %d times after a panic, want twice (the panic, then one of the waiters)", n)
	}
}

// A panic while the all-gather's keys are laid out (gatherSort here) leaves nothing half
// made behind: a later GatherMask lays them out again and gives the sub-mask a fresh plan
// gives. With a sync.Once the first call's partial keys (appended, never ordered) stayed.
func TestGatherKeysAfterAPanicAreWhole(t *testing.T) {
	docs := []mask.Range{{Start: 0, End: 13}, {Start: 13, End: 14}, {Start: 14, End: 40}}
	p := kernels.Problem{HeadsQ: 4, HeadsKV: 2, HeadDim: 4, DType: tensor.BF16, Mask: causal(40)}
	plan := func() *Plan {
		meth, err := New("ring-allgather")
		if err != nil {
			t.Fatal(err)
		}
		pl, err := meth.Plan(Config{Ranks: 2, Docs: docs}, p)
		if err != nil {
			t.Fatal(err)
		}
		return pl
	}
	want := plan().GatherMask(1)

	pl := plan()
	real := gatherSort
	gatherSort = func([]Piece) ([]int, bool) { panic("boom") }
	func() {
		defer func() { _ = recover() }()
		pl.GatherMask(0)
		t.Error("the stand-in sort did not panic")
	}()
	gatherSort = real
	var got mask.Mask
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("GatherMask after a panicked layout panicked: %v", r)
			}
		}()
		got = pl.GatherMask(1)
	}()
	if got.SeqQ != want.SeqQ || got.SeqK != want.SeqK || got.Area() != want.Area() || len(got.Slices) != len(want.Slices) {
		t.Fatalf("after a panicked layout: %dx%d area %d, %d slices; a fresh plan's %dx%d area %d, %d slices",
			got.SeqQ, got.SeqK, got.Area(), len(got.Slices), want.SeqQ, want.SeqK, want.Area(), len(want.Slices))
	}
	for i := range got.Slices {
		if got.Slices[i] != want.Slices[i] {
			t.Fatalf("slice %d: %+v, want %+v", i, got.Slices[i], want.Slices[i])
		}
	}
}
