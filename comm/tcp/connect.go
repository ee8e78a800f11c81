package tcp

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"bufio"

	"github.com/longca/longca/comm"
)

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
	accepted := make(chan error, 1)
	go func() { accepted <- m.acceptHigher(ctx) }()
	for p := 0; p < rank; p++ {
		if err := m.dial(ctx, rv, p); err != nil {
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
	m.peers[p] = &peer{conn: c, w: bufio.NewWriterSize(c, 1<<16)}
}

// dial connects to lower rank p and says who this is.
func (m *mesh) dial(ctx context.Context, rv Rendezvous, p int) error {
	addr, err := rv.Get(addrKey(p), p)
	if err != nil {
		return fmt.Errorf("tcp: rank %d: address of rank %d: %w", m.rank, p, err)
	}
	d := net.Dialer{Timeout: m.timeout}
	c, err := d.DialContext(ctx, "tcp", string(addr))
	if err != nil {
		return &comm.PeerError{Rank: p, Op: "tcp connect", Err: fmt.Errorf("dial %s: %w", addr, err)}
	}
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(m.rank))
	c.SetDeadline(time.Now().Add(m.timeout))
	if _, err := c.Write(b[:]); err != nil {
		c.Close()
		return &comm.PeerError{Rank: p, Op: "tcp connect", Err: err}
	}
	c.SetDeadline(time.Time{})
	m.addPeer(p, c)
	return nil
}

// acceptHigher takes one connection from each higher rank; ranks that never connect are
// named when the timeout passes.
func (m *mesh) acceptHigher(ctx context.Context) error {
	want := m.size - 1 - m.rank
	deadline := time.Now().Add(m.timeout)
	for got := 0; got < want; {
		m.ln.(*net.TCPListener).SetDeadline(deadline)
		c, err := m.ln.Accept()
		if err != nil {
			var missing []int
			for p := m.rank + 1; p < m.size; p++ {
				if m.peers[p] == nil {
					missing = append(missing, p)
				}
			}
			return &comm.PeerError{Rank: missing[0], Op: "tcp connect",
				Err: fmt.Errorf("rank(s) %v did not connect to rank %d within %s: %w", missing, m.rank, m.timeout, comm.ErrTimeout)}
		}
		c.SetDeadline(deadline)
		var b [8]byte
		if _, err := io.ReadFull(c, b[:]); err != nil {
			c.Close()
			continue
		}
		c.SetDeadline(time.Time{})
		p := int(binary.LittleEndian.Uint64(b[:]))
		if p <= m.rank || p >= m.size || m.peers[p] != nil {
			c.Close()
			return fmt.Errorf("tcp: rank %d: a connection claims rank %d, which is not a new higher rank (two processes with one rank?)", m.rank, p)
		}
		m.addPeer(p, c)
		got++
	}
	return nil
}
