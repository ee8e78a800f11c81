package local

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Link is one class of emulated connection between ranks.
type Link struct {
	// Bandwidth is the bytes per second one port moves in one direction.
	Bandwidth float64
	// Latency is added to every message after its last byte left.
	Latency time.Duration
	// Shared makes one port serve a whole node (a whole GPU for Local) instead of one per
	// GPU (per rank for Local).
	Shared bool
}

// Links emulates a cluster's connections between in-process ranks: world rank r runs on
// GPU r/RanksPerGPU of node GPU/GPUsPerNode; ranks on one GPU talk over Local, GPUs of a
// node over Intra, nodes over Inter. A message waits for its sender's port of its
// class (messages leave a port one after another), is on the wire bytes/bandwidth, and
// arrives a latency later; the receiver cannot take it before. A message to oneself is
// a local copy and is not delayed; a Split's control messages are not delayed either.
type Links struct {
	GPUsPerNode, RanksPerGPU int
	Local, Intra, Inter      Link
}

// Validate checks the layout and that every link has a positive bandwidth.
func (l Links) Validate() error {
	if l.GPUsPerNode < 1 || l.RanksPerGPU < 1 {
		return fmt.Errorf("local: links: %d GPUs per node and %d ranks per GPU: need at least 1 of each", l.GPUsPerNode, l.RanksPerGPU)
	}
	for _, k := range []struct {
		name string
		l    Link
	}{{"local", l.Local}, {"intra", l.Intra}, {"inter", l.Inter}} {
		if !(k.l.Bandwidth > 0) || k.l.Latency < 0 {
			return fmt.Errorf("local: links: %s link of %g bytes/s and latency %v: need a positive bandwidth and a latency >= 0", k.name, k.l.Bandwidth, k.l.Latency)
		}
	}
	return nil
}

// WithLinks delays every message between ranks as l says (see Links); New panics if l
// does not Validate, so check it first.
func WithLinks(l Links) Option {
	if err := l.Validate(); err != nil {
		panic(err)
	}
	return func(c *config) { c.links = &linkState{l: l, free: map[port]time.Time{}} }
}

// linkState is the emulator's ports: when each is free next.
type linkState struct {
	l    Links
	mu   sync.Mutex
	free map[port]time.Time
}

type port struct {
	class int // 1 local, 2 intra, 3 inter
	owner int // the rank, GPU or node the port belongs to
}

// reserve puts a message of n bytes from world rank src to dst on its port at now and
// returns when it arrives.
func (s *linkState) reserve(src, dst int, n int64, now time.Time) time.Time {
	l := s.l
	gpu := func(r int) int { return r / l.RanksPerGPU }
	node := func(r int) int { return gpu(r) / l.GPUsPerNode }
	var link Link
	var p port
	switch {
	case gpu(src) == gpu(dst):
		link, p = l.Local, port{1, src}
		if link.Shared {
			p.owner = gpu(src)
		}
	case node(src) == node(dst):
		link, p = l.Intra, port{2, gpu(src)}
		if link.Shared {
			p.owner = node(src)
		}
	default:
		link, p = l.Inter, port{3, gpu(src)}
		if link.Shared {
			p.owner = node(src)
		}
	}
	// The longest wait at most: a large message on a slow link took a time past
	// time.Duration's range, which wrapped to a negative one (no wait at all).
	wire := time.Duration(math.MaxInt64)
	if ns := float64(n) / link.Bandwidth * float64(time.Second); ns < math.MaxInt64 {
		wire = time.Duration(ns)
	}
	s.mu.Lock()
	depart := now
	if f := s.free[p]; f.After(depart) {
		depart = f
	}
	done := depart.Add(wire)
	s.free[p] = done
	s.mu.Unlock()
	return done.Add(link.Latency)
}

// delayed is a message in flight on an emulated link: it may be taken at arrive.
type delayed struct {
	Message
	arrive time.Time
}

// landed waits until m arrives (for an emulated link) and returns the message itself; false
// where the deadline comes first (a message that lands after it has timed out: a link of
// latency_us 1e9 waited out 17 minutes past --timeout, and past an interrupt) or the group
// is aborted.
func landed(m Message, deadline time.Time, abort <-chan struct{}) (Message, bool) {
	d, ok := m.(delayed)
	if !ok {
		return m, true
	}
	wait, late := time.Until(d.arrive), d.arrive.After(deadline)
	if late {
		wait = time.Until(deadline)
	}
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-abort:
			return nil, false
		}
	}
	return d.Message, !late
}
