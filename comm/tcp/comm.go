package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// Comm is one rank's view of a group of ranks over the mesh. One goroutine uses a Comm
// at a time.
type Comm struct {
	m       *mesh
	members []int // world ranks, in group order
	rank    int   // index in members
	id      uint64

	mu       sync.Mutex
	counters comm.Counters
	splits   int
	group    *pending // non-nil inside Group
	closed   bool
}

var _ comm.Comm = (*Comm)(nil)

// pending holds a Group's sends and receives until it ends.
type pending struct {
	sends []op
	recvs []op
}

type op struct {
	h    *tensor.Host
	peer int
}

// Rank is this rank's index in the group.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks in the group.
func (c *Comm) Size() int { return len(c.members) }

// Counters reports the bytes and messages this rank sent to other ranks through this
// communicator (sub-groups count their own).
func (c *Comm) Counters() comm.Counters {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counters
}

// Close closes the connections when called on the world communicator; on a sub-group
// it only stops that group.
func (c *Comm) Close() error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	if c.id == 1 {
		return c.m.close()
	}
	return nil
}

func asHost(t tensor.Tensor, what string) (*tensor.Host, error) {
	h, err := tensor.AsHost(t)
	if err != nil {
		return nil, fmt.Errorf("tcp: %s: %w", what, err)
	}
	return h, nil
}

func (c *Comm) checkPeer(peer int, what string) error {
	if peer < 0 || peer >= len(c.members) {
		return fmt.Errorf("tcp: %s: peer %d is outside the group of %d", what, peer, len(c.members))
	}
	if c.closed {
		return fmt.Errorf("tcp: %s: communicator is closed", what)
	}
	return nil
}

// peerErr names the peer (its world rank, and its group rank when they differ).
func (c *Comm) peerErr(what string, peer int, err error) error {
	w := c.members[peer]
	if w != peer {
		err = fmt.Errorf("(rank %d of this group) %w", peer, err)
	}
	pe := &comm.PeerError{Rank: w, Op: "tcp " + what, Err: err}
	var g *gaveUp
	if errors.As(err, &g) && g.culprit != w && g.culprit < c.m.size {
		pe.Rank = g.culprit // the rank that stopped first, not the one that relayed it
	}
	c.m.abort(pe)
	return pe
}

// sendBytes sends to group rank peer and counts what leaves this rank.
func (c *Comm) sendBytes(what string, tag uint8, peer int, b []byte) error {
	if err := c.m.send(c.id, tag, c.members[peer], b); err != nil {
		return c.peerErr(what, peer, err)
	}
	if peer != c.rank {
		c.mu.Lock()
		c.counters.BytesSent += int64(len(b))
		c.counters.Messages++
		c.mu.Unlock()
	}
	return nil
}

// recvBytes receives from group rank peer into dst, which must have the sent size.
func (c *Comm) recvBytes(what string, tag uint8, peer int, dst []byte) error {
	b, err := c.m.recv(c.id, tag, c.members[peer])
	if err != nil {
		return c.peerErr(what, peer, err)
	}
	if len(b) != len(dst) {
		return c.peerErr(what, peer, fmt.Errorf("sent %d bytes where %d were expected (mismatched buffers or call order)", len(b), len(dst)))
	}
	copy(dst, b)
	return nil
}

// Send sends buf to group rank peer (deferred to the end of a Group inside one).
func (c *Comm) Send(buf tensor.Tensor, peer int) error {
	h, err := asHost(buf, "send")
	if err != nil {
		return err
	}
	if err := c.checkPeer(peer, "send"); err != nil {
		return err
	}
	if c.group != nil {
		c.group.sends = append(c.group.sends, op{h, peer})
		return nil
	}
	return c.sendBytes("send", tagP2P, peer, h.Data)
}

// Recv receives buf from group rank peer (deferred to the end of a Group inside one).
func (c *Comm) Recv(buf tensor.Tensor, peer int) error {
	h, err := asHost(buf, "recv")
	if err != nil {
		return err
	}
	if err := c.checkPeer(peer, "recv"); err != nil {
		return err
	}
	if c.group != nil {
		c.group.recvs = append(c.group.recvs, op{h, peer})
		return nil
	}
	return c.recvBytes("recv", tagP2P, peer, h.Data)
}

// Group runs fn, then issues its sends and then its receives. Sends complete without
// their receives (the peer's reader queues them), so any exchange pattern completes.
func (c *Comm) Group(fn func() error) error {
	if c.group != nil {
		return fn() // nested: the outer Group issues everything
	}
	c.group = &pending{}
	err := fn()
	g := c.group
	c.group = nil
	if err != nil {
		return err
	}
	for _, s := range g.sends {
		if err := c.sendBytes("send", tagP2P, s.peer, s.h.Data); err != nil {
			return err
		}
	}
	for _, r := range g.recvs {
		if err := c.recvBytes("recv", tagP2P, r.peer, r.h.Data); err != nil {
			return err
		}
	}
	return nil
}

// Split makes sub-groups: ranks with the same color (>= 0) form one, ordered by key and
// then by rank.
func (c *Comm) Split(color, key int) (comm.Comm, error) {
	if color < 0 {
		return nil, fmt.Errorf("tcp: split: color %d is negative", color)
	}
	n := len(c.members)
	mine := make([]byte, 16)
	binary.LittleEndian.PutUint64(mine, uint64(int64(color)))
	binary.LittleEndian.PutUint64(mine[8:], uint64(int64(key)))
	all := make([]byte, 16*n)
	if err := c.gatherBytes("split", mine, all); err != nil {
		return nil, err
	}
	type entry struct{ rank, key int }
	var same []entry
	for r := 0; r < n; r++ {
		if int(int64(binary.LittleEndian.Uint64(all[16*r:]))) == color {
			same = append(same, entry{r, int(int64(binary.LittleEndian.Uint64(all[16*r+8:])))})
		}
	}
	sort.SliceStable(same, func(i, j int) bool { return same[i].key < same[j].key })
	sub := &Comm{m: c.m, members: make([]int, len(same))}
	for i, e := range same {
		sub.members[i] = c.members[e.rank]
		if e.rank == c.rank {
			sub.rank = i
		}
	}
	c.splits++
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%d/%d", c.id, c.splits, color)
	sub.id = h.Sum64() | 2 // never 1, the world's id
	return sub, nil
}
