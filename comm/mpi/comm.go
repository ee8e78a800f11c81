//go:build mpi

package mpi

/*
#include "lc_mpi.h"
*/
import "C"

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// Comm is one rank's MPI communicator. One goroutine uses it at a time.
type Comm struct {
	c, side    C.MPI_Comm // side carries the presence notes after a timeout
	rank, size int
	members    []int // world ranks, in this group's order
	timeout    time.Duration
	world_     bool

	cmu      sync.Mutex
	counters comm.Counters
	group    *groupOps
}

var _ comm.Comm = (*Comm)(nil)

type groupOps struct {
	ops []p2p
}

type p2p struct {
	send bool
	h    *tensor.Host
	peer int
}

// World initialises MPI and returns the world communicator; every later call is bounded
// by timeout.
func World(timeout time.Duration) (*Comm, error) {
	if err := Init(); err != nil {
		return nil, err
	}
	c, err := wrap(C.lc_world(), timeout, nil)
	if err != nil {
		return nil, err
	}
	c.world_ = true
	return c, nil
}

// wrap makes a Comm of an MPI communicator, with its side communicator and member list
// (parent's members mapped through, or the identity for the world).
func wrap(h C.MPI_Comm, timeout time.Duration, parent *Comm) (*Comm, error) {
	var rank, size C.int
	mu.Lock()
	defer mu.Unlock()
	if err := check("MPI_Comm_rank", C.MPI_Comm_rank(h, &rank)); err != nil {
		return nil, err
	}
	if err := check("MPI_Comm_size", C.MPI_Comm_size(h, &size)); err != nil {
		return nil, err
	}
	c := &Comm{c: h, rank: int(rank), size: int(size), timeout: timeout}
	if err := check("MPI_Comm_dup", C.MPI_Comm_dup(h, &c.side)); err != nil {
		return nil, err
	}
	C.MPI_Comm_set_errhandler(h, C.MPI_ERRORS_RETURN)
	c.members = make([]int, c.size)
	if parent == nil {
		for i := range c.members {
			c.members[i] = i
		}
	}
	return c, nil
}

// Rank is this rank's index in the group.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks in the group.
func (c *Comm) Size() int { return c.size }

// Versions names the MPI library ({"mpi":"Open MPI v4.1.6"}: MPI_Get_library_version's
// first line up to its first comma; comm.Versioned).
func (c *Comm) Versions() map[string]string {
	v, _, _ := strings.Cut(LibraryVersion(), ",")
	return map[string]string{"mpi": strings.TrimSpace(v)}
}

func (c *Comm) world(p int) int { return c.members[p] }

func (c *Comm) worldRanks(ps []int) []int {
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = c.members[p]
	}
	return out
}

// Counters reports the bytes and messages this rank sent to other ranks: for
// collectives, the bytes the usual algorithms send (a ring's for all-reduce), since MPI
// does not say what it moved.
func (c *Comm) Counters() comm.Counters {
	c.cmu.Lock()
	defer c.cmu.Unlock()
	return c.counters
}

func (c *Comm) count(bytes int64, msgs int64) {
	c.cmu.Lock()
	c.counters.BytesSent += bytes
	c.counters.Messages += msgs
	c.cmu.Unlock()
}

// Close frees a sub-group's communicator; on the world communicator it ends MPI in
// this process (MPI_Finalize), so close every sub-group first.
func (c *Comm) Close() error {
	mu.Lock()
	C.MPI_Comm_free(&c.side)
	if !c.world_ {
		defer mu.Unlock()
		return check("MPI_Comm_free", C.MPI_Comm_free(&c.c))
	}
	mu.Unlock()
	return Finalize()
}

func asHost(t tensor.Tensor, what string) (*tensor.Host, error) {
	h, err := tensor.AsHost(t)
	if err != nil {
		return nil, fmt.Errorf("mpi: %s: %w", what, err)
	}
	return h, nil
}

func (c *Comm) p2p(send bool, buf tensor.Tensor, peer int) error {
	what := map[bool]string{true: "send", false: "recv"}[send]
	h, err := asHost(buf, what)
	if err != nil {
		return err
	}
	if peer < 0 || peer >= c.size {
		return fmt.Errorf("mpi: %s: peer %d is outside the group of %d", what, peer, c.size)
	}
	if len(h.Data) > math.MaxInt32 {
		return fmt.Errorf("mpi: %s: %d bytes are over MPI's 2 GiB count limit: send it in parts", what, len(h.Data))
	}
	if c.group != nil {
		c.group.ops = append(c.group.ops, p2p{send, h, peer})
		return nil
	}
	return c.runP2P(what, []p2p{{send, h, peer}})
}

// Send sends buf to group rank peer (issued at the end of a Group inside one).
func (c *Comm) Send(buf tensor.Tensor, peer int) error { return c.p2p(true, buf, peer) }

// Recv receives buf from group rank peer (issued at the end of a Group inside one).
func (c *Comm) Recv(buf tensor.Tensor, peer int) error { return c.p2p(false, buf, peer) }

// Group runs fn and then issues its sends and receives together (MPI_Isend, MPI_Irecv,
// one wait for all), so any exchange pattern completes.
func (c *Comm) Group(fn func() error) error {
	if c.group != nil {
		return fn()
	}
	c.group = &groupOps{}
	err := fn()
	g := c.group
	c.group = nil
	if err != nil || len(g.ops) == 0 {
		return err
	}
	return c.runP2P("group send/recv", g.ops)
}

const p2pTag = 11

func (c *Comm) runP2P(what string, ops []p2p) error {
	r := newReqs(len(ops))
	var peers []int
	var sent, msgs int64
	mu.Lock()
	for _, o := range ops {
		n := C.int(len(o.h.Data))
		var rc C.int
		if o.send {
			rc = C.MPI_Isend(r.buf(o.h.Data), n, C.lc_type(0), C.int(o.peer), p2pTag, c.c, r.next())
			if o.peer != c.rank {
				sent += int64(len(o.h.Data))
				msgs++
			}
		} else {
			rc = C.MPI_Irecv(r.buf(o.h.Data), n, C.lc_type(0), C.int(o.peer), p2pTag, c.c, r.next())
		}
		if rc != C.MPI_SUCCESS {
			mu.Unlock()
			return check(what, rc)
		}
		peers = append(peers, o.peer)
	}
	mu.Unlock()
	c.count(sent, msgs)
	return c.wait(what, r, peers)
}

// Split makes sub-groups (MPI_Comm_split): ranks with the same color (>= 0) form one,
// ordered by key, then by rank. MPI_Comm_split blocks, so it runs beside a timer.
func (c *Comm) Split(color, key int) (comm.Comm, error) {
	if color < 0 {
		return nil, fmt.Errorf("mpi: split: color %d is negative", color)
	}
	// Learn the new group's members first (an all-gather that times out cleanly), so
	// that MPI_Comm_split runs only once every rank is known to be here.
	mine := tensor.NewHost(tensor.FP64, 1, 3)
	mine.Set(0, float64(color))
	mine.Set(1, float64(key))
	mine.Set(2, float64(c.rank))
	all := tensor.NewHost(tensor.FP64, c.size, 3)
	if err := c.AllGather(mine, all); err != nil {
		return nil, fmt.Errorf("mpi: split: %w", err)
	}
	var nc C.MPI_Comm
	mu.Lock()
	rc := C.MPI_Comm_split(c.c, C.int(color), C.int(key), &nc)
	mu.Unlock()
	if err := check("MPI_Comm_split", rc); err != nil {
		return nil, err
	}
	sub, err := wrap(nc, c.timeout, c)
	if err != nil {
		return nil, err
	}
	// Members in MPI's order: by key, then by parent rank.
	i := 0
	type e struct{ key, rank int }
	var es []e
	for p := range c.size {
		if int(all.At(3*p)) == color {
			es = append(es, e{int(all.At(3*p + 1)), p})
		}
	}
	for a := 1; a < len(es); a++ { // insertion sort, stable
		for b := a; b > 0 && es[b].key < es[b-1].key; b-- {
			es[b], es[b-1] = es[b-1], es[b]
		}
	}
	for _, x := range es {
		sub.members[i] = c.members[x.rank]
		i++
	}
	return sub, nil
}
