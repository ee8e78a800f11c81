package local

import (
	"testing"
	"time"
)

// TestReserveSlowLinkDoesNotWrap: a message whose time on the wire is past
// time.Duration's range arrives at the latest time there is, not before it left (the
// float-to-Duration conversion wrapped to a negative time: no wait at all).
func TestReserveSlowLinkDoesNotWrap(t *testing.T) {
	l := Links{GPUsPerNode: 1, RanksPerGPU: 1, Local: Link{Bandwidth: 1}, Intra: Link{Bandwidth: 1}, Inter: Link{Bandwidth: 1e-3}}
	s := &linkState{l: l, free: map[port]time.Time{}}
	now := time.Now()
	if got := s.reserve(0, 1, 1<<40, now); got.Sub(now) < 200*365*24*time.Hour {
		t.Errorf("2^40 bytes at 1 mB/s arrive %v after they left, want the longest wait (292 years)", got.Sub(now))
	}
	// An ordinary message is as before: bytes / bandwidth.
	s = &linkState{l: testLinks, free: map[port]time.Time{}}
	if got := s.reserve(0, 2, 1e6, now); got.Sub(now) != time.Second+20*time.Millisecond {
		t.Errorf("1 MB at 1 MB/s with 20 ms latency: %v, want 1.02s", got.Sub(now))
	}
}
