package tcp

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/longca/longca/comm"
)

// Keyed is a Rendezvous that holds a key only the job's ranks share (spmd's
// authenticated store): New then makes every peer connection prove it, so a stranger
// who connects to a rank's socket is dropped instead of taking a rank.
type Keyed interface {
	MeshKey() []byte
}

// meshHandshake bounds how long a connection may take to prove itself.
const meshHandshake = 10 * time.Second

// meshPending bounds the connections to a rank's mesh port waiting to prove themselves,
// as the store bounds those before their hello: 32 and the world, at most 256.
func meshPending(size int) int { return 32 + min(size, 224) }

const meshNonce = 32

// meshMAC is what a dialing rank sends to prove it holds the key: over the acceptor's
// nonce, the dialer's rank and the acceptor's.
func meshMAC(key, nonce []byte, from, to int) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("longca-mesh"))
	m.Write(nonce)
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], uint64(from))
	binary.LittleEndian.PutUint64(b[8:], uint64(to))
	m.Write(b[:])
	return m.Sum(nil)
}

func meshKeyOf(rv Rendezvous) []byte {
	if k, ok := rv.(Keyed); ok {
		return k.MeshKey()
	}
	return nil
}

// New connects rank to every other of size ranks and returns its world communicator.
// It listens on host (an address of this machine that the other ranks can reach),
// publishes the address through rv, dials the lower ranks and accepts the higher ones.
// timeout bounds the set-up and, later, every receive and collective.
func New(ctx context.Context, rank, size int, rv Rendezvous, host string, timeout time.Duration) (*Comm, error) {
	m := &mesh{rank: rank, size: size, timeout: timeout, peers: make([]*peer, size),
		queues: map[qkey]*queue{}, dead: make([]error, size)}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("tcp: rank %d: listen on %s: %w", rank, host, err)
	}
	m.ln = ln
	fail := func(err error) (*Comm, error) {
		m.close()
		return nil, err
	}
	if err := rv.Set(addrKey(rank), []byte(ln.Addr().String())); err != nil {
		return fail(fmt.Errorf("tcp: rank %d: publish address: %w", rank, err))
	}
	key := meshKeyOf(rv)
	accepted := make(chan error, 1)
	go func() { accepted <- m.acceptHigher(key) }()
	for p := 0; p < rank; p++ {
		if err := m.dial(ctx, rv, p, key); err != nil {
			return fail(err)
		}
	}
	if err := <-accepted; err != nil {
		return fail(err)
	}
	for p, pr := range m.peers {
		if pr != nil {
			m.wg.Add(1)
			go m.read(p, pr.conn)
		}
	}
	if err := rv.Barrier("tcp/connected"); err != nil {
		return fail(fmt.Errorf("tcp: rank %d: %w", rank, err))
	}
	return &Comm{m: m, members: identity(size), rank: rank, id: 1}, nil
}

func addrKey(r int) string { return "tcp/addr/" + strconv.Itoa(r) }

func identity(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func (m *mesh) addPeer(p int, c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	m.peers[p] = &peer{conn: c, w: bufio.NewWriterSize(c, 1<<16), ended: make(chan struct{})}
}

// dial connects to lower rank p and proves who this is: it reads p's nonce and answers
// with its rank and their MAC.
func (m *mesh) dial(ctx context.Context, rv Rendezvous, p int, key []byte) error {
	addr, err := rv.Get(addrKey(p), p)
	if err != nil {
		return fmt.Errorf("tcp: rank %d: address of rank %d: %w", m.rank, p, err)
	}
	d := net.Dialer{Timeout: m.timeout}
	c, err := d.DialContext(ctx, "tcp", string(addr))
	if err != nil {
		return &comm.PeerError{Rank: p, Op: "tcp connect", Err: fmt.Errorf("dial %s: %w", addr, err)}
	}
	c.SetDeadline(time.Now().Add(min(m.timeout, meshHandshake)))
	nonce := make([]byte, meshNonce)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(m.rank))
	_, err = io.ReadFull(c, nonce)
	if err == nil {
		_, err = c.Write(append(b[:], meshMAC(key, nonce, m.rank, p)...))
	}
	if err != nil {
		c.Close()
		return &comm.PeerError{Rank: p, Op: "tcp connect", Err: err}
	}
	c.SetDeadline(time.Time{})
	m.addPeer(p, c)
	return nil
}

// acceptHigher takes one proven connection from each higher rank; ranks that never
// connect are named when the timeout passes. Each connection proves itself on its own
// goroutine, so one that stays silent (or is a stranger's) holds up no other; it is
// dropped, not counted. The listener closes once every higher rank is in.
func (m *mesh) acceptHigher(key []byte) error {
	want := m.size - 1 - m.rank
	if want == 0 {
		m.ln.Close()
		return nil
	}
	deadline := time.Now().Add(m.timeout)
	type joined struct {
		p int
		c net.Conn
	}
	in := make(chan joined)
	done := make(chan struct{})
	defer close(done)
	var dropped atomic.Int64 // connections that did not prove themselves, or were evicted
	go func() {
		ln := m.ln.(*net.TCPListener)
		ln.SetDeadline(deadline)
		// The connections not yet proven, oldest first, at most meshPending: past that the
		// oldest is dropped, so that a flood of silent ones neither holds a rank out nor
		// spends the process's files (2000 of them under ulimit -n 1024 made Accept fail
		// with EMFILE, which ended this loop: no rank was taken after it).
		var mu sync.Mutex
		var waiting []net.Conn
		evictOldest := func() {
			if len(waiting) > 0 {
				waiting[0].Close()
				waiting = waiting[1:]
			}
		}
		var backoff time.Duration
		for {
			c, err := ln.Accept()
			if err != nil {
				var ne net.Error
				if errors.Is(err, net.ErrClosed) || errors.As(err, &ne) && ne.Timeout() {
					return
				}
				// out of files, or another passing error: free the oldest waiting
				// connection's file and try again shortly
				mu.Lock()
				evictOldest()
				mu.Unlock()
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				select {
				case <-done:
					return
				case <-time.After(backoff):
				}
				continue
			}
			backoff = 0
			mu.Lock()
			if len(waiting) >= meshPending(m.size) {
				evictOldest()
			}
			waiting = append(waiting, c)
			mu.Unlock()
			go func() {
				p, err := m.prove(c, key, deadline)
				mu.Lock()
				if i := slices.Index(waiting, c); i >= 0 {
					waiting = slices.Delete(waiting, i, i+1)
				}
				mu.Unlock()
				if err != nil {
					dropped.Add(1)
					c.Close()
					return
				}
				select {
				case in <- joined{p, c}:
				case <-done:
					c.Close()
				}
			}()
		}
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for got := 0; got < want; {
		select {
		case j := <-in:
			if m.peers[j.p] != nil {
				j.c.Close()
				return fmt.Errorf("tcp: rank %d: rank %d connected twice (two processes with one rank?)", m.rank, j.p)
			}
			m.addPeer(j.p, j.c)
			got++
		case <-timer.C:
			var missing []int
			for p := m.rank + 1; p < m.size; p++ {
				if m.peers[p] == nil {
					missing = append(missing, p)
				}
			}
			stranger := ""
			if n := dropped.Load(); n > 0 {
				stranger = fmt.Sprintf(" (%d connections to its port %s did not prove themselves and were dropped: something else is connecting to it)", n, m.ln.Addr())
			}
			return &comm.PeerError{Rank: missing[0], Op: "tcp connect",
				Err: fmt.Errorf("rank(s) %v did not connect to rank %d within %s%s: %w", missing, m.rank, m.timeout, stranger, comm.ErrTimeout)}
		}
	}
	m.ln.Close()
	return nil
}

// prove sends a connection a nonce and checks its answer: a higher rank of this world
// and the MAC of the job's key.
func (m *mesh) prove(c net.Conn, key []byte, deadline time.Time) (int, error) {
	c.SetDeadline(minTime(deadline, time.Now().Add(meshHandshake)))
	nonce := make([]byte, meshNonce)
	if _, err := rand.Read(nonce); err != nil {
		return 0, err
	}
	if _, err := c.Write(nonce); err != nil {
		return 0, err
	}
	var b [8 + sha256.Size]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return 0, err
	}
	p := int(binary.LittleEndian.Uint64(b[:8]))
	if p <= m.rank || p >= m.size || !hmac.Equal(b[8:], meshMAC(key, nonce, p, m.rank)) {
		return 0, fmt.Errorf("tcp: a connection to rank %d claimed rank %d without the job's key", m.rank, p)
	}
	c.SetDeadline(time.Time{})
	return p, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
