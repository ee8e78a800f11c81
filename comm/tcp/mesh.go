// Package tcp is a comm.Comm over TCP sockets between processes, in host memory: every
// pair of ranks holds one connection, found through a rendezvous store (spmd's, hosted by
// rank 0). It lets srun without MPI, torchrun-style launches and CPU-only CI run the
// same SPMD binary. Each connection's reader drains messages into per-sender queues at
// once, so a send never waits for its receive and no exchange pattern can deadlock; a
// peer that exits is noticed when its connection closes, one that hangs when the
// timeout passes, and both are named in a comm.PeerError.
package tcp

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/longca/longca/comm"
)

// Rendezvous is what New needs of the bootstrap store: publish a value, wait for a
// rank's value, and a barrier over all ranks.
type Rendezvous interface {
	Set(key string, val []byte) error
	Get(key string, owner int) ([]byte, error)
	Barrier(name string) error
}

// Message tags keep point-to-point traffic apart from collective traffic.
const (
	tagP2P uint8 = iota
	tagColl
	tagAbort // the sender gave up: the payload says why
)

// qkey names one queue: messages of one communicator from one sender with one tag.
type qkey struct {
	comm uint64
	src  int
	tag  uint8
}

type queue struct {
	msgs  [][]byte
	ready chan struct{}
}

type peer struct {
	conn  net.Conn
	mu    sync.Mutex // one writer at a time
	w     *bufio.Writer
	ended chan struct{} // closed when the reader of conn has returned
}

// mesh is the connections of one process to every other rank, shared by the world
// communicator and every sub-group split from it.
type mesh struct {
	rank, size int
	timeout    time.Duration
	peers      []*peer // nil at rank's own index
	ln         net.Listener

	mu      sync.Mutex
	queues  map[qkey]*queue
	dead    []error // why each peer's connection ended
	closed  bool
	aborted bool
	wg      sync.WaitGroup
}

func (m *mesh) queue(k qkey) *queue {
	q := m.queues[k]
	if q == nil {
		q = &queue{ready: make(chan struct{}, 1)}
		m.queues[k] = q
	}
	return q
}

// deliver queues a message and wakes its receiver.
func (m *mesh) deliver(k qkey, b []byte) {
	m.mu.Lock()
	q := m.queue(k)
	q.msgs = append(q.msgs, b)
	m.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// maxMessage bounds one message's length as its header says it: far above any K/V
// block or collective a host-memory communicator moves (a rank's whole share of the
// largest case is a few GiB), far below what make would refuse.
const maxMessage = 64 << 30

// read drains one peer's connection until it ends.
func (m *mesh) read(src int, c net.Conn) {
	defer m.wg.Done()
	if p := m.peers[src]; p != nil && p.ended != nil {
		defer close(p.ended)
	}
	r := bufio.NewReaderSize(c, 1<<16)
	var hdr [17]byte
	for {
		_, err := io.ReadFull(r, hdr[:])
		var b []byte
		if err == nil {
			n := binary.LittleEndian.Uint64(hdr[9:])
			if n > maxMessage {
				// Only a corrupt stream says this (the peer proved the job's key): a length
				// that would panic in make or run the host out of memory ends the peer.
				err = fmt.Errorf("a message of %d bytes, over the %d a message may have: the stream is corrupt", n, uint64(maxMessage))
			} else {
				b = make([]byte, n)
				_, err = io.ReadFull(r, b)
			}
		}
		if err != nil {
			m.mu.Lock()
			if m.dead[src] == nil {
				if m.closed {
					m.dead[src] = fmt.Errorf("communicator closed")
				} else if err == io.EOF || err == io.ErrUnexpectedEOF {
					m.dead[src] = fmt.Errorf("connection closed: the rank exited or closed its communicator")
				} else {
					m.dead[src] = fmt.Errorf("connection lost: %v", err)
				}
			}
			m.mu.Unlock()
			m.wake(src)
			return
		}
		if hdr[8] == tagAbort {
			m.mu.Lock()
			m.dead[src] = readAbort(src, b)
			m.mu.Unlock()
			m.wake(src) // a rank waiting on src fails now, naming the culprit
			continue
		}
		m.deliver(qkey{comm: binary.LittleEndian.Uint64(hdr[:8]), src: src, tag: hdr[8]}, b)
	}
}

// wake wakes every receiver waiting on src, to see that it is dead.
func (m *mesh) wake(src int) {
	m.mu.Lock()
	var wake []*queue
	for k, q := range m.queues {
		if k.src == src {
			wake = append(wake, q)
		}
	}
	m.mu.Unlock()
	for _, q := range wake {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
}

// send writes one message to world rank dst (to itself: straight into its queue); a
// failed write is reported as writeFailed says.
func (m *mesh) send(id uint64, tag uint8, dst int, b []byte) error {
	if dst == m.rank {
		m.deliver(qkey{comm: id, src: dst, tag: tag}, append([]byte(nil), b...))
		return nil
	}
	if err := m.write(id, tag, dst, b, m.timeout); err != nil {
		return m.writeFailed(dst, err)
	}
	return nil
}

// write writes one message to peer dst, failing when it takes longer than limit.
func (m *mesh) write(id uint64, tag uint8, dst int, b []byte, limit time.Duration) error {
	p := m.peers[dst]
	p.mu.Lock()
	defer p.mu.Unlock()
	var hdr [17]byte
	binary.LittleEndian.PutUint64(hdr[:8], id)
	hdr[8] = tag
	binary.LittleEndian.PutUint64(hdr[9:], uint64(len(b)))
	p.conn.SetWriteDeadline(time.Now().Add(limit))
	if _, err := p.w.Write(hdr[:]); err != nil {
		return err
	}
	if _, err := p.w.Write(b); err != nil {
		return err
	}
	return p.w.Flush()
}

// abortGrace bounds how long a failed write waits for the reader of its peer's
// connection to reach the end of the stream (an abort the peer sent before it closed).
const abortGrace = 2 * time.Second

// writeFailed is why a write to dst failed: dst's abort when dst sent one before its
// connection closed, else err. A write to a rank that gave up and exited fails as soon
// as the close comes back, often before this rank's reader has read the abort queued
// ahead of it (a rank stopped with SIGSTOP and resumed blamed "rank 0: broken pipe"
// instead of relaying why rank 0 stopped): so unless the write timed out (the peer is
// there but not reading, and its stream has not ended), it waits up to abortGrace for
// the reader to reach the end of dst's stream, which a broken connection makes prompt.
func (m *mesh) writeFailed(dst int, err error) error {
	var ne net.Error
	if p := m.peers[dst]; p.ended != nil && !(errors.As(err, &ne) && ne.Timeout()) {
		t := time.NewTimer(min(abortGrace, m.timeout))
		select {
		case <-p.ended:
		case <-t.C:
		}
		t.Stop()
	}
	m.mu.Lock()
	dead := m.dead[dst]
	m.mu.Unlock()
	var g *gaveUp
	if errors.As(dead, &g) {
		return g
	}
	return err
}

// recv takes the next message of (id, src, tag), waiting at most the timeout.
func (m *mesh) recv(id uint64, tag uint8, src int) ([]byte, error) {
	k := qkey{comm: id, src: src, tag: tag}
	timer := time.NewTimer(m.timeout)
	defer timer.Stop()
	for {
		m.mu.Lock()
		q := m.queue(k)
		if len(q.msgs) > 0 {
			b := q.msgs[0]
			q.msgs[0] = nil
			q.msgs = q.msgs[1:]
			m.mu.Unlock()
			return b, nil
		}
		dead := m.dead[src]
		m.mu.Unlock()
		if dead != nil {
			return nil, dead
		}
		select {
		case <-q.ready:
		case <-timer.C:
			return nil, fmt.Errorf("nothing arrived within %s: %w", m.timeout, comm.ErrTimeout)
		}
	}
}

// abort tells every peer, once and best-effort, why this rank stops: so that a rank
// waiting on this one reports the first failure, not the cascade.
func (m *mesh) abort(err error) {
	m.mu.Lock()
	if m.aborted {
		m.mu.Unlock()
		return
	}
	m.aborted = true
	dead := append([]error(nil), m.dead...)
	m.mu.Unlock()
	msg := abortMessage(m.rank, err)
	for p, pr := range m.peers {
		if pr != nil && dead[p] == nil {
			m.write(0, tagAbort, p, msg, time.Second) // best effort: no wait on a failure
		}
	}
}

// gaveUp is a peer's abort: the rank that stopped first (culprit) and why. A rank that
// waited on the relaying rank blames the culprit, not the relay (rank 3 must not blame
// rank 1 for rank 2's death).
type gaveUp struct {
	relay, culprit int
	why            string
}

func (g *gaveUp) Error() string {
	if g.relay == g.culprit {
		return "the rank gave up: " + g.why
	}
	return fmt.Sprintf("rank %d gave up after it lost rank %d: %s", g.relay, g.culprit, g.why)
}

// abortMessage is the abort's payload: the culprit (the peer err names, else this rank)
// as 8 bytes, then the reason.
func abortMessage(rank int, err error) []byte {
	culprit := rank
	var pe *comm.PeerError
	if errors.As(err, &pe) && pe.Rank >= 0 {
		culprit = pe.Rank
	}
	b := binary.LittleEndian.AppendUint64(nil, uint64(culprit))
	return append(b, fmt.Sprintf("rank %d: %v", rank, err)...)
}

// readAbort reads an abort from src; a culprit outside the world is src itself.
func readAbort(src int, b []byte) *gaveUp {
	g := &gaveUp{relay: src, culprit: src}
	if len(b) >= 8 {
		if c := binary.LittleEndian.Uint64(b[:8]); c < 1<<20 {
			g.culprit = int(c)
		}
		b = b[8:]
	}
	g.why = string(b)
	return g
}

func (m *mesh) close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	if m.ln != nil {
		m.ln.Close()
	}
	for _, p := range m.peers {
		if p != nil {
			p.conn.Close()
		}
	}
	m.wg.Wait()
	return nil
}
