// Package local is a comm.Comm whose ranks are goroutines of one process: messages are
// copied into per-pair mailboxes, and every collective is built from those point-to-point
// messages, so the bytes a rank sends are counted exactly as a network would carry them.
// It serves the CPU tests of the context-parallel methods and one-process runs.
//
// The data movement goes through a Mover (host memory by default), so a device variant
// (device-to-device copies on one GPU) only supplies another Mover.
package local

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/longca/longca/comm"
)

// DefaultTimeout bounds every blocking call unless WithTimeout says otherwise.
const DefaultTimeout = 2 * time.Minute

// Option configures New.
type Option func(*config)

type config struct {
	timeout time.Duration
	mover   Mover
	links   *linkState // nil: no emulated links
}

// WithTimeout bounds every blocking call (Recv, every collective, Split): a rank that
// does not arrive within d fails its peers with a comm.PeerError wrapping comm.ErrTimeout.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithMover replaces the host-memory Mover, e.g. by one that copies on a device.
func WithMover(m Mover) Option { return func(c *config) { c.mover = m } }

// New returns n communicators, one per rank, that talk to each other in this process.
// Give each to its own goroutine: one Comm is used by one goroutine at a time (a
// Group may run in a helper goroutine while the owner computes without communicating).
func New(n int, opts ...Option) []comm.Comm {
	cfg := config{timeout: DefaultTimeout, mover: HostMover{}}
	for _, o := range opts {
		o(&cfg)
	}
	w := &world{cfg: cfg, groups: map[groupKey]*group{}}
	members := make([]int, n)
	for i := range members {
		members[i] = i
	}
	g := w.newGroup(members)
	out := make([]comm.Comm, n)
	for r := range out {
		out[r] = &Comm{w: w, g: g, rank: r}
	}
	return out
}

// world is what all ranks of one New share.
type world struct {
	cfg    config
	mu     sync.Mutex
	groups map[groupKey]*group // sub-groups made by Split, found by the ranks that join them
}

// groupKey names the sub-group of a Split: parent, the parent's split number, color.
type groupKey struct {
	parent *group
	seq    int
	color  int
}

// group is a set of ranks (world ranks in group order) and their mailboxes.
type group struct {
	members []int
	boxes   [][][nTags]*mailbox // [src][dst][tag], in group ranks

	abortOnce sync.Once
	abortCh   chan struct{} // closed by Abort: every wait in the group returns
	abortErr  error         // the reason, set before abortCh is closed
}

// aborted returns the group's abort reason, or nil.
func (g *group) aborted() error {
	select {
	case <-g.abortCh:
		return g.abortErr
	default:
		return nil
	}
}

// Message tags keep user point-to-point traffic apart from collective traffic.
const (
	tagP2P = iota
	tagColl
	nTags
)

func (w *world) newGroup(members []int) *group {
	n := len(members)
	g := &group{members: members, boxes: make([][][nTags]*mailbox, n), abortCh: make(chan struct{})}
	for s := range g.boxes {
		g.boxes[s] = make([][nTags]*mailbox, n)
		for d := range g.boxes[s] {
			for t := range nTags {
				g.boxes[s][d][t] = newMailbox()
			}
		}
	}
	return g
}

// Comm is one rank's view of a group.
type Comm struct {
	w        *world
	g        *group
	rank     int // in g
	splitSeq int

	mu       sync.Mutex
	counters comm.Counters
	groupDep int
	pending  []pendingRecv
	closed   bool

	lane   Lane // made by the first GroupAfter (an OrderedMover's)
	onLane bool // inside GroupAfter: point-to-point data goes through lane
}

var _ comm.Comm = (*Comm)(nil)

// Rank is this rank's index in the group.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks in the group.
func (c *Comm) Size() int { return len(c.g.members) }

// WorldRank is this rank's index among all ranks made by New.
func (c *Comm) WorldRank() int { return c.g.members[c.rank] }

// Counters reports the bytes and messages this rank has sent to other ranks through
// this communicator (sub-groups made by Split count their own).
func (c *Comm) Counters() comm.Counters {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counters
}

// Close releases this rank's transfer lane, if it has one; later calls on this rank
// fail.
func (c *Comm) Close() error {
	c.mu.Lock()
	c.closed = true
	lane := c.lane
	c.lane = nil
	c.mu.Unlock()
	if lane != nil {
		return lane.Close()
	}
	return nil
}

// Abort aborts this rank's group: every call of every rank of the group that waits or
// comes later fails at once with an error wrapping comm.ErrAborted and reason. The CP
// harness aborts a run's sub-groups when this rank failed inside a method, so that its
// peers, waiting there for it, return and the ranks agree on the case's status through
// the (healthy) world communicator. Sub-groups split from the group later are not
// affected; the parent group is not either.
func (c *Comm) Abort(reason error) error {
	if reason == nil {
		reason = fmt.Errorf("local: rank %d aborted", c.WorldRank())
	}
	c.g.abort(c.WorldRank(), reason)
	return nil
}

// abort aborts g once, by world rank by.
func (g *group) abort(by int, reason error) {
	g.abortOnce.Do(func() {
		g.abortErr = fmt.Errorf("aborted by world rank %d: %w", by, reason)
		close(g.abortCh)
	})
}

// Run makes n ranks with New, runs fn on each in its own goroutine, and returns the
// ranks' errors joined, each prefixed by its rank. A rank whose fn fails is gone, as a
// process that exits is: every group it belongs to is aborted, so that its peers waiting
// for it fail at once rather than after the timeout (a cp rank that could not create its
// results file held the others for the whole --timeout, deaf to Ctrl-C), and their
// errors, which only echo its failure, are left out of the result.
func Run(n int, fn func(c comm.Comm) error, opts ...Option) error {
	cs := New(n, opts...)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(c); err != nil {
				errs[i] = fmt.Errorf("rank %d: %w", i, err)
				c.(*Comm).abortAll(peerFailed{rank: i})
			}
		}()
	}
	wg.Wait()
	var own []error // the failures that are not another rank's, echoed
	for _, err := range errs {
		if err != nil && !errors.As(err, new(peerFailed)) {
			own = append(own, err)
		}
	}
	if len(own) > 0 {
		return errors.Join(own...)
	}
	return errors.Join(errs...)
}

// peerFailed is the abort reason of a rank whose fn failed in Run.
type peerFailed struct{ rank int }

func (e peerFailed) Error() string { return fmt.Sprintf("rank %d failed and left", e.rank) }

// abortAll aborts every group this rank is a member of: its world and every sub-group
// split from it.
func (c *Comm) abortAll(reason error) {
	me := c.WorldRank()
	c.w.mu.Lock()
	groups := []*group{c.g}
	for _, g := range c.w.groups {
		if slices.Contains(g.members, me) {
			groups = append(groups, g)
		}
	}
	c.w.mu.Unlock()
	for _, g := range groups {
		g.abort(me, reason)
	}
}
