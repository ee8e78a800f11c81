package spmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/longca/longca/comm"
)

// Store is one rank's connection to the bootstrap store. Its calls are serialised: one
// request at a time on the connection.
type Store struct {
	rank, size int
	timeout    time.Duration
	conn       net.Conn
	r          *bufio.Reader
	w          *bufio.Writer
	mu         sync.Mutex
}

// DialStore connects rank to the store at addr, retrying until rank 0 has started it or
// timeout has passed (then the error is a comm.PeerError naming rank 0).
func DialStore(ctx context.Context, addr string, rank, size int, timeout time.Duration) (*Store, error) {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		d := net.Dialer{Timeout: time.Until(deadline)}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			s := &Store{rank: rank, size: size, timeout: timeout, conn: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}
			if _, err := s.do("hello", request{op: opHello, rank: int64(rank)}); err != nil {
				c.Close()
				return nil, err
			}
			return s, nil
		}
		last = err
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, &comm.PeerError{Rank: 0, Op: "connect to the store at " + addr,
				Err: fmt.Errorf("rank 0 did not serve it within %s (%v): %w", timeout, last, comm.ErrTimeout)}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// LocalAddr is the address of this end of the store connection: the interface that
// reaches rank 0, which is where peers can reach this rank too.
func (s *Store) LocalAddr() net.Addr { return s.conn.LocalAddr() }

// Timeout is how long each wait may last.
func (s *Store) Timeout() time.Duration { return s.timeout }

// Set stores val under key.
func (s *Store) Set(key string, val []byte) error {
	_, err := s.do("set "+key, request{op: opSet, key: key, val: val})
	return err
}

// Get waits for key to be set and returns its value. owner is the rank expected to set
// it, named in the error when it does not in time.
func (s *Store) Get(key string, owner int) ([]byte, error) {
	p, err := s.do("get "+key, request{op: opGet, key: key, timeout: int64(s.timeout)})
	if err != nil {
		var pe *comm.PeerError
		if errors.As(err, &pe) && pe.Rank < 0 {
			pe.Rank = owner
		}
		return nil, err
	}
	return p.payload, nil
}

// Barrier waits until every rank has reached the barrier called name.
func (s *Store) Barrier(name string) error {
	_, err := s.do("barrier "+name, request{op: opBarrier, key: name, timeout: int64(s.timeout)})
	return err
}

// Broadcast shares data from root with every rank under key: root sets it, the others
// wait for it. It returns the bytes on every rank.
func (s *Store) Broadcast(key string, root int, data []byte) ([]byte, error) {
	if s.rank == root {
		return data, s.Set(key, data)
	}
	return s.Get(key, root)
}

// Close drops the connection; the store sees this rank leave.
func (s *Store) Close() error { return s.conn.Close() }

// do sends one request and reads its reply, turning the store's statuses into errors.
func (s *Store) do(what string, q request) (reply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The server answers a wait within the timeout; past that (and a grace) rank 0 is gone.
	s.conn.SetDeadline(time.Now().Add(s.timeout + 5*time.Second))
	if err := q.write(s.w); err != nil {
		return reply{}, s.lost(what, err)
	}
	if err := s.w.Flush(); err != nil {
		return reply{}, s.lost(what, err)
	}
	p, err := readReply(s.r)
	if err != nil {
		return reply{}, s.lost(what, err)
	}
	switch p.status {
	case stOK:
		return p, nil
	case stErr:
		return p, fmt.Errorf("spmd: store %s: %s", what, p.payload)
	case stTimeout:
		if len(p.missing) == 0 {
			return p, &comm.PeerError{Rank: -1, Op: "store " + what, Err: fmt.Errorf("%s: %w", p.payload, comm.ErrTimeout)}
		}
		return p, &comm.PeerError{Rank: int(p.missing[0]), Op: "store " + what,
			Err: fmt.Errorf("rank(s) %v did not arrive within %s: %w", p.missing, s.timeout, comm.ErrTimeout)}
	case stGone:
		return p, &comm.PeerError{Rank: int(p.missing[0]), Op: "store " + what,
			Err: fmt.Errorf("rank(s) %v left (exited or closed the connection) before arriving", p.missing)}
	}
	return p, fmt.Errorf("spmd: store %s: unknown status %d", what, p.status)
}

// lost is the error for a broken connection to rank 0's store.
func (s *Store) lost(what string, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = fmt.Errorf("%v: %w", err, comm.ErrTimeout)
	}
	return &comm.PeerError{Rank: 0, Op: "store " + what, Err: fmt.Errorf("lost the store hosted by rank 0: %w", err)}
}
