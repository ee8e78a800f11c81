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
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return errClosed
	}
	if peer < 0 || peer >= c.Size() {
		return fmt.Errorf("local: %s to peer %d of a group of %d", op, peer, c.Size())
	}
	return nil
}

// post stages n bytes of buf from off and puts them in peer's mailbox.
func (c *Comm) post(tag int, buf tensor.Tensor, off, n int64, peer int) error {
	var m Message = emptyMsg{}
	if n > 0 {
		var err error
		if m, err = c.w.cfg.mover.Stage(buf, off, n); err != nil {
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

// fetch waits for the next message from peer, naming peer (by world rank) on timeout.
func (c *Comm) fetch(op string, tag int, peer int, deadline time.Time) (Message, error) {
	m, ok := c.g.boxes[peer][c.rank][tag].take(deadline)
	if !ok {
		return nil, &comm.PeerError{Rank: c.g.members[peer], Op: "local " + op, Err: fmt.Errorf("%w after %v (world rank %d waiting)", comm.ErrTimeout, c.w.cfg.timeout, c.WorldRank())}
	}
	return landed(m), nil
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
