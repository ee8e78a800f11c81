// Package comm defines the communicator interface the context-parallel methods use.
// Implementations: comm/local (ranks as goroutines of one process), comm/mpi (MPI
// through cgo, build tag mpi), comm/nccl (NCCL through dlopen).
package comm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/longca/longca/internal/textcut"
	"github.com/longca/longca/tensor"
)

// Op is a reduction.
type Op uint8

const (
	Sum Op = iota
	Max
)

func (o Op) String() string {
	if o == Max {
		return "max"
	}
	return "sum"
}

// Comm is a group of ranks. Every call is collective over the group (all ranks call it
// in the same order), except Send and Recv. Buffers are dense tensors; the first
// dimension is the one split over ranks in AllToAll, AllGather and ReduceScatter (rank
// r's part is the r-th of Size equal row blocks).
//
// Send and Recv between a pair are matched in order. Inside Group, the sends and
// receives are issued together and complete when Group returns, so a ring exchange
// (send to the next, receive from the previous) cannot deadlock.
type Comm interface {
	Rank() int
	Size() int
	// Split makes sub-groups: ranks with the same color form one, ordered by key.
	Split(color, key int) (Comm, error)
	Group(fn func() error) error
	Send(buf tensor.Tensor, peer int) error
	Recv(buf tensor.Tensor, peer int) error
	// AllToAll sends the r-th row block of send to rank r and receives rank r's block
	// into the r-th row block of recv.
	AllToAll(send, recv tensor.Tensor) error
	// AllGather puts rank r's send into the r-th row block of recv.
	AllGather(send, recv tensor.Tensor) error
	// ReduceScatter reduces (sums) send over ranks; rank r keeps the r-th row block.
	ReduceScatter(send, recv tensor.Tensor) error
	AllReduce(buf tensor.Tensor, op Op) error
	Barrier() error
	// Counters reports what this rank has sent so far.
	Counters() Counters
	Close() error
}

// Versioned is a Comm that names the library under it and its version ({"nccl":"2.28.3"}):
// a CP row records them beside its kernel's, in kernel_versions.
type Versioned interface {
	Versions() map[string]string
}

// Event is a point in a device stream's work: a CUDA event handle (CUevent) of the
// ranks' context, opaque to comm.
type Event uintptr

// Ordered is a communicator that orders point-to-point transfers on device streams,
// with events, instead of on host threads: the transfers of a ring step are enqueued
// after the compute that frees their buffers, and the compute of the next step is
// enqueued after them, and no host thread waits on an event in between.
type Ordered interface {
	// StreamOrdered says whether GroupAfter can be used here (the backend moves data on
	// device streams).
	StreamOrdered() bool
	// GroupAfter issues fn's sends and receives (Send and Recv inside fn, point to point
	// only) so that they start on the device once the work after marks has finished, and
	// returns without waiting for them, with done: the mark of their completion, which
	// the caller's stream waits on before it reads what was received or writes what was
	// sent. The caller owns both events (it may destroy after once GroupAfter returned,
	// and destroys done after waiting on it). done is 0 when there is nothing to wait for.
	GroupAfter(after Event, fn func() error) (done Event, err error)
	// Settle waits, bounded by the communicator's timeout, until every transfer issued
	// by GroupAfter has finished, and reports their failure: at the end of a method, so
	// a dead peer fails the rank instead of hanging its device.
	Settle() error
}

// Counters count the bytes and messages a rank sent, so the bytes a CP method claims
// to move (CommBytes) can be checked against what was moved.
type Counters struct {
	BytesSent int64
	Messages  int64
}

// ErrTimeout is wrapped by errors from a collective or rendezvous that ran out of time.
var ErrTimeout = errors.New("timed out")

// ErrAborted is wrapped by the errors of calls on an aborted communicator (Aborter).
var ErrAborted = errors.New("communicator aborted")

// Aborter is a communicator that can be aborted: every call of every rank of the group
// that waits, or comes later, fails (at once in one process; at the backend's timeout or
// failure detection across processes) with an error wrapping ErrAborted where the
// backend can say so. A rank that fails inside a collective its peers wait in aborts the
// group, so they return instead of waiting for it.
type Aborter interface {
	Abort(reason error) error
}

// PeerError says which rank failed or never arrived.
type PeerError struct {
	Rank int
	Op   string
	Err  error
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("%s: rank %d: %v", e.Op, e.Rank, e.Err)
}

func (e *PeerError) Unwrap() error { return e.Err }

// HostPair returns a and b as host tensors of one dtype (the send and receive buffers of
// a collective on a host backend), or says which condition failed.
func HostPair(a, b tensor.Tensor) (*tensor.Host, *tensor.Host, error) {
	ha, err := tensor.AsHost(a)
	if err != nil {
		return nil, nil, err
	}
	hb, err := tensor.AsHost(b)
	if err != nil {
		return nil, nil, err
	}
	if ha.DType() != hb.DType() {
		return nil, nil, fmt.Errorf("dtypes %s and %s differ", ha.DType(), hb.DType())
	}
	return ha, hb, nil
}

// ShareText is rank root's text on every rank of c, cut to at most size bytes at a
// character boundary: one all-reduce (max) of its bytes as float64, root's bytes and
// zeros on the other ranks, so that it takes only the collective every backend has. Every
// rank calls it with the same root and size; text is read on root only, and ends at its
// first zero byte.
func ShareText(c Comm, root int, text string, size int) (string, error) {
	buf := tensor.NewHost(tensor.FP64, max(size, 1))
	if c.Rank() == root {
		t := textcut.Prefix(text, size)
		for i := range len(t) {
			buf.Set(i, float64(t[i]))
		}
	}
	if err := c.AllReduce(buf, Max); err != nil {
		return "", err
	}
	var b strings.Builder
	for i := range size {
		x := byte(buf.At(i))
		if x == 0 {
			break
		}
		b.WriteByte(x)
	}
	return b.String(), nil
}
