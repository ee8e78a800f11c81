package cp

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/longca/longca/mask"
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
