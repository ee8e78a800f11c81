package local

import (
	"errors"
	"fmt"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// errClosed is returned by calls on a closed rank.
var errClosed = errors.New("local: communicator is closed")

// pendingRecv is a Recv issued inside Group, completed when Group returns.
type pendingRecv struct {
	buf  tensor.Tensor
	peer int
}

func (c *Comm) checkPeer(op string, peer int) error {
	if err := c.usable("local " + op); err != nil {
		return err
	}
	if peer < 0 || peer >= c.Size() {
		return fmt.Errorf("local: %s to peer %d of a group of %d", op, peer, c.Size())
	}
	return nil
}

// post stages n bytes of buf from off and puts them in peer's mailbox (point-to-point
// data inside GroupAfter is staged on the rank's lane, without waiting).
func (c *Comm) post(tag int, buf tensor.Tensor, off, n int64, peer int) error {
	var m Message = emptyMsg{}
	if n > 0 {
		stage := c.w.cfg.mover.Stage
		c.mu.Lock()
		if c.onLane && tag == tagP2P {
			stage = c.lane.Stage
		}
		c.mu.Unlock()
		var err error
		if m, err = stage(buf, off, n); err != nil {
			return err
		}
	}
	if ls := c.w.cfg.links; ls != nil && peer != c.rank {
		m = delayed{m, ls.reserve(c.WorldRank(), c.g.members[peer], n, time.Now())}
	}
	c.g.boxes[c.rank][peer][tag].put(m)
	if peer != c.rank {
		c.mu.Lock()
		c.counters.BytesSent += n
		c.counters.Messages++
		c.mu.Unlock()
	}
	return nil
}

// usable says why this rank cannot take op: closed, or its group aborted.
func (c *Comm) usable(op string) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return errClosed
	}
	if err := c.g.aborted(); err != nil {
		return fmt.Errorf("%s: %w: %w", op, comm.ErrAborted, err)
	}
	return nil
}

// fetch waits for the next message from peer, naming peer (by world rank) on timeout.
func (c *Comm) fetch(op string, tag int, peer int, deadline time.Time) (Message, error) {
	m, ok := c.g.boxes[peer][c.rank][tag].take(deadline, c.g.abortCh)
	if ok {
		m, ok = landed(m, deadline, c.g.abortCh)
	}
	if !ok {
		if err := c.g.aborted(); err != nil {
			return nil, fmt.Errorf("local %s: %w: %w", op, comm.ErrAborted, err)
		}
		return nil, &comm.PeerError{Rank: c.g.members[peer], Op: "local " + op, Err: fmt.Errorf("%w after %v (world rank %d waiting)", comm.ErrTimeout, c.w.cfg.timeout, c.WorldRank())}
	}
	return m, nil
}

func (c *Comm) deadline() time.Time { return time.Now().Add(c.w.cfg.timeout) }

// Send copies buf into peer's mailbox; it never blocks.
func (c *Comm) Send(buf tensor.Tensor, peer int) error {
	if err := c.checkPeer("send", peer); err != nil {
		return err
	}
	return c.post(tagP2P, buf, 0, buf.Bytes(), peer)
}

// Recv waits for the next message from peer and copies it into buf. Inside Group it
// is only recorded, and completed when Group returns.
func (c *Comm) Recv(buf tensor.Tensor, peer int) error {
	if err := c.checkPeer("recv", peer); err != nil {
		return err
	}
	c.mu.Lock()
	if c.groupDep > 0 {
		c.pending = append(c.pending, pendingRecv{buf, peer})
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	return c.recvNow(buf, peer, c.deadline())
}

func (c *Comm) recvNow(buf tensor.Tensor, peer int, deadline time.Time) error {
	m, err := c.fetch("recv", tagP2P, peer, deadline)
	if err != nil {
		return err
	}
	if m.Len() != buf.Bytes() {
		return fmt.Errorf("local: recv of a %d-byte message from rank %d into a %d-byte buffer", m.Len(), peer, buf.Bytes())
	}
	if m.Len() == 0 {
		return nil
	}
	c.mu.Lock()
	lane := c.lane
	if !c.onLane {
		lane = nil
	}
	c.mu.Unlock()
	if lane != nil {
		return lane.Put(buf, 0, m)
	}
	return c.w.cfg.mover.Put(buf, 0, m)
}

// Group runs fn with its receives deferred until fn returns, then completes them: the
// sends and receives of fn are issued together, so any exchange pattern is deadlock-free.
func (c *Comm) Group(fn func() error) error {
	c.mu.Lock()
	c.groupDep++
	c.mu.Unlock()
	err := fn()
	c.mu.Lock()
	c.groupDep--
	var todo []pendingRecv
	if c.groupDep == 0 {
		todo, c.pending = c.pending, nil
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	deadline := c.deadline()
	for _, r := range todo {
		if err := c.recvNow(r.buf, r.peer, deadline); err != nil {
			return err
		}
	}
	return nil
}

// emptyMsg is a zero-byte message (barriers, empty tensors): no Mover involved.
type emptyMsg struct{}

func (emptyMsg) Len() int64 { return 0 }

// StreamOrdered implements comm.Ordered: true when the Mover is an OrderedMover (the
// device mover of ranks that share a GPU).
func (c *Comm) StreamOrdered() bool {
	_, ok := c.w.cfg.mover.(OrderedMover)
	return ok
}

// GroupAfter implements comm.Ordered: fn's sends are staged on this rank's lane after
// the work after marks, its receives wait (on the host) only for their messages to be
// posted and are then enqueued on the lane after the message's copy; done marks the
// lane's work. No host thread waits on an event.
func (c *Comm) GroupAfter(after comm.Event, fn func() error) (comm.Event, error) {
	om, ok := c.w.cfg.mover.(OrderedMover)
	if !ok {
		return 0, fmt.Errorf("local: GroupAfter needs a device mover (this one moves host memory)")
	}
	if err := c.usable("local group"); err != nil {
		return 0, err
	}
	c.mu.Lock()
	lane := c.lane
	c.mu.Unlock()
	if lane == nil {
		var err error
		if lane, err = om.NewLane(); err != nil {
			return 0, err
		}
		c.mu.Lock()
		c.lane = lane
		c.mu.Unlock()
	}
	if err := lane.Wait(after); err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.onLane = true
	c.mu.Unlock()
	err := c.Group(fn)
	c.mu.Lock()
	c.onLane = false
	c.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return lane.Mark()
}

// Settle implements comm.Ordered: the lane's copies need no peer, so nothing can hang;
// their errors surface at the device's next synchronisation.
func (c *Comm) Settle() error { return nil }
