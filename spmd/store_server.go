package spmd

import (
	"bufio"
	"fmt"
	"net"
	"sort"
	"sync"
	"time"
)

// StoreServer is the bootstrap store that rank 0 hosts: a key-value map of byte values
// that ranks set and wait for, and named barriers over all ranks. It knows which rank
// holds each connection, so a wait that times out, or that a rank leaves, names the
// missing ranks.
type StoreServer struct {
	ln   net.Listener
	size int

	mu       sync.Mutex
	kv       map[string][]byte
	waiters  map[string][]chan reply
	barriers map[string]*barrier
	sending  int          // replies handed to waiting connections, not yet written
	joined   map[int]bool // ranks that said hello
	left     map[int]bool // ranks whose connection closed
	closed   bool
	conns    map[net.Conn]bool
	wg       sync.WaitGroup
}

// barrier is one named barrier: who arrived, and where to answer them.
type barrier struct {
	arrived map[int]chan reply
}

// ServeStore listens on addr (":29517", "127.0.0.1:0") for size ranks and serves until
// Close.
func ServeStore(addr string, size int) (*StoreServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("spmd: store: listen on %s: %w (another run on this port? choose another with --master-port or MASTER_PORT)", addr, err)
	}
	s := &StoreServer{ln: ln, size: size, kv: map[string][]byte{}, waiters: map[string][]chan reply{},
		barriers: map[string]*barrier{}, joined: map[int]bool{}, left: map[int]bool{}, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address the store listens on.
func (s *StoreServer) Addr() string { return s.ln.Addr().String() }

// deliverLocked hands p to a waiting connection and counts it until it is written.
func (s *StoreServer) deliverLocked(ch chan reply, p reply) {
	select {
	case ch <- p:
		s.sending++
	default:
	}
}

// Close stops the store and drops every connection, once the replies already handed to
// waiting ranks (the last barrier's, say) are written, or after two seconds.
func (s *StoreServer) Close() error {
	s.ln.Close()
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		s.mu.Lock()
		n := s.sending
		s.mu.Unlock()
		if n <= 0 {
			break
		}
	}
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.ln.Close() // may be closed already by Shutdown
	s.wg.Wait()
	return nil
}

// Shutdown stops taking connections and waits (at most d) until every rank has closed
// its connection, so that replies still on their way are delivered; then it closes.
func (s *StoreServer) Shutdown(d time.Duration) error {
	s.ln.Close()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		n := len(s.conns)
		s.mu.Unlock()
		if n == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	return s.Close()
}

func (s *StoreServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.mu.Unlock()
		s.wg.Add(1)
		go s.serve(c)
	}
}

// serve answers one rank's requests in order until its connection closes.
func (s *StoreServer) serve(c net.Conn) {
	defer s.wg.Done()
	rank := -1
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		if rank >= 0 {
			s.left[rank] = true
			s.failBarriers(rank)
		}
		s.mu.Unlock()
	}()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	for {
		q, err := readRequest(r)
		if err != nil {
			return
		}
		var p reply
		switch q.op {
		case opHello:
			rank, p = s.hello(int(q.rank))
		case opSet:
			s.set(q.key, q.val)
		case opGet:
			p = s.get(q.key, time.Duration(q.timeout))
		case opBarrier:
			p = s.barrier(q.key, rank, time.Duration(q.timeout))
		default:
			p = reply{status: stErr, payload: []byte(fmt.Sprintf("unknown store op %d", q.op))}
		}
		if rank < 0 && q.op != opHello {
			p = reply{status: stErr, payload: []byte("store: request before hello")}
		}
		err = p.write(w)
		if err == nil {
			err = w.Flush()
		}
		if p.fromChan {
			s.mu.Lock()
			s.sending--
			s.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

func (s *StoreServer) hello(rank int) (int, reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case rank < 0 || rank >= s.size:
		return -1, reply{status: stErr, payload: []byte(fmt.Sprintf("rank %d is outside the store's world of %d", rank, s.size))}
	case s.joined[rank] && !s.left[rank]:
		return -1, reply{status: stErr, payload: []byte(fmt.Sprintf("rank %d joined twice: two processes have the same rank (check the launcher's environment)", rank))}
	}
	s.joined[rank] = true
	delete(s.left, rank)
	return rank, reply{}
}

func (s *StoreServer) set(key string, val []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kv[key] = append([]byte(nil), val...)
	for _, ch := range s.waiters[key] {
		s.deliverLocked(ch, reply{payload: s.kv[key]})
	}
	delete(s.waiters, key)
}

func (s *StoreServer) get(key string, timeout time.Duration) reply {
	s.mu.Lock()
	if v, ok := s.kv[key]; ok {
		s.mu.Unlock()
		return reply{payload: v}
	}
	ch := make(chan reply, 1)
	s.waiters[key] = append(s.waiters[key], ch)
	s.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case p := <-ch:
		p.fromChan = true
		return p
	case <-t.C:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select { // set may have answered while the lock was free
	case p := <-ch:
		p.fromChan = true
		return p
	default:
	}
	ws := s.waiters[key]
	for i, w := range ws {
		if w == ch {
			s.waiters[key] = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	return reply{status: stTimeout, payload: []byte(fmt.Sprintf("key %q was not set within %s", key, timeout))}
}

func (s *StoreServer) barrier(name string, rank int, timeout time.Duration) reply {
	if rank < 0 {
		return reply{status: stErr}
	}
	s.mu.Lock()
	b := s.barriers[name]
	if b == nil {
		b = &barrier{arrived: map[int]chan reply{}}
		s.barriers[name] = b
	}
	ch := make(chan reply, 1)
	b.arrived[rank] = ch
	if gone := s.goneLocked(b); len(gone) > 0 {
		s.deliverLocked(ch, reply{status: stGone, missing: gone})
	} else if len(b.arrived) == s.size {
		for _, c := range b.arrived {
			s.deliverLocked(c, reply{})
		}
		delete(s.barriers, name)
	}
	s.mu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case p := <-ch:
		p.fromChan = true
		return p
	case <-t.C:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case p := <-ch:
		p.fromChan = true
		return p
	default:
	}
	return reply{status: stTimeout, missing: s.missingLocked(b)}
}

// failBarriers answers the waiting barriers that rank will now never reach.
func (s *StoreServer) failBarriers(rank int) {
	for name, b := range s.barriers {
		if _, ok := b.arrived[rank]; ok {
			continue
		}
		for _, c := range b.arrived {
			s.deliverLocked(c, reply{status: stGone, missing: []int64{int64(rank)}})
		}
		delete(s.barriers, name)
	}
}

// goneLocked lists the ranks that left and have not arrived at b.
func (s *StoreServer) goneLocked(b *barrier) []int64 {
	var out []int64
	for r := range s.left {
		if _, ok := b.arrived[r]; !ok {
			out = append(out, int64(r))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func (s *StoreServer) missingLocked(b *barrier) []int64 {
	var out []int64
	for r := 0; r < s.size; r++ {
		if _, ok := b.arrived[r]; !ok {
			out = append(out, int64(r))
		}
	}
	return out
}
