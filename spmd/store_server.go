package spmd

import (
	"bufio"
	"crypto/hmac"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"
)

// StoreConfig says which job a store serves and how much it may wait and hold. Both the
// server (rank 0) and every client use the same one.
type StoreConfig struct {
	// Size is the number of ranks.
	Size int
	// Job is the job's identity (World.Job); a client of another job is refused.
	Job string
	// Secret is the job's shared secret; nil leaves the job id alone to tell jobs apart,
	// which proves nothing to a stranger who can read it (docs/cluster.md, Security).
	Secret Secret
	// Timeout bounds every wait the store serves, whatever a client asks (--timeout).
	Timeout time.Duration
	// MaxBytes bounds the bytes of all keys and values held; 0 means DefaultStoreBytes.
	MaxBytes int64

	// launches holds the launch ids of this process (nil: the process's own cache).
	launches *launchCache
}

// DefaultStoreBytes is the default bound on what a store holds: far above what a job
// keeps there (an address per rank, an NCCL id).
const DefaultStoreBytes = 64 << 20

// handshakeTimeout bounds how long a connection may take to say its hello: a rank
// answers the greeting within a round trip, so a connection still silent after this is
// not a rank.
const handshakeTimeout = 3 * time.Second

// MaxTimeout bounds --timeout wherever it is a deadline (a year): past it, deadline
// arithmetic would overflow time.Duration.
const MaxTimeout = 365 * 24 * time.Hour

// clampTimeout is d within (0, MaxTimeout]; def when d is not positive.
func clampTimeout(d, def time.Duration) time.Duration {
	switch {
	case d <= 0:
		return def
	case d > MaxTimeout:
		return MaxTimeout
	}
	return d
}

// closeGrace bounds how long Close lets waiting ranks receive their last reply.
const closeGrace = time.Second

func (c StoreConfig) timeout() time.Duration { return clampTimeout(c.Timeout, DefaultTimeout) }

func (c StoreConfig) launchCache() *launchCache {
	if c.launches == nil {
		return launches
	}
	return c.launches
}

func (c StoreConfig) maxBytes() int64 {
	if c.MaxBytes <= 0 {
		return DefaultStoreBytes
	}
	return c.MaxBytes
}

// maxPending bounds the connections that have not said a good hello yet: small, and
// apart from the ranks that joined. When it is reached the oldest such connection is
// dropped for the new one, so a flood of silent connections cannot keep a rank out: a
// rank's hello takes one round trip, a flood's connections wait for their deadline.
func (c StoreConfig) maxPending() int { return 32 + min(c.Size, 224) }

// StoreServer is the bootstrap store that rank 0 hosts: a key-value map of byte values
// that ranks set and wait for, and named barriers over all ranks. A connection must
// prove, by its hello, that it is a rank of this job (StoreConfig) before anything it
// sends is read further; until then nothing is stored and it holds no rank. Every wait
// ends within the configured timeout, the bytes held are bounded, and Close returns
// without waiting on any client. Since the store knows which rank holds each
// connection, a wait that times out, or that a rank leaves, names the missing ranks.
type StoreServer struct {
	lns    []net.Listener
	cfg    StoreConfig
	key    []byte
	launch []byte        // this launch's id (launch.go)
	done   chan struct{} // closed by Close: every wait ends
	ended  chan struct{} // closed when the job is ended (endLocked): every wait fails

	mu       sync.Mutex
	kv       map[string][]byte
	kvBytes  int64
	waiters  map[string][]chan reply
	barriers map[string]*barrier
	busy     int          // requests read and not yet answered
	joined   map[int]bool // ranks that said hello
	left     map[int]bool // ranks whose connection closed
	closed   bool
	conns    map[net.Conn]int // the rank on each connection; -1 before its hello
	pending  int              // connections before their hello
	waiting  []net.Conn       // the connections before their hello, oldest first
	refused  int              // connections refused or dropped before a good hello
	evicted  int              // of those, dropped to make room for a newer connection
	badHello map[int]string   // why the hello of a connection claiming a rank was refused
	endWhy   string           // why the job was ended ("" while it runs)
	wg       sync.WaitGroup
}

// barrier is one named barrier: who arrived, where to answer them, and when it ends.
type barrier struct {
	arrived  map[int]chan reply
	deadline time.Time
}

// ServeStore listens on every address of addrs ("127.0.0.1:29517", "10.0.0.1:0") for
// the ranks of cfg and serves until Close.
func ServeStore(addrs []string, cfg StoreConfig) (*StoreServer, error) {
	if cfg.Size < 1 {
		return nil, fmt.Errorf("spmd: store for %d ranks", cfg.Size)
	}
	s := &StoreServer{cfg: cfg, key: storeKey(cfg.Job, cfg.Secret), launch: cfg.launchCache().forServer(cfg.Job),
		done: make(chan struct{}), ended: make(chan struct{}),
		kv: map[string][]byte{}, waiters: map[string][]chan reply{}, barriers: map[string]*barrier{},
		joined: map[int]bool{}, left: map[int]bool{}, conns: map[net.Conn]int{}, badHello: map[int]string{}}
	for _, a := range addrs {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			for _, l := range s.lns {
				l.Close()
			}
			return nil, &bindError{addr: a, err: err}
		}
		s.lns = append(s.lns, ln)
	}
	for _, ln := range s.lns {
		s.wg.Add(1)
		go s.accept(ln)
	}
	return s, nil
}

// Addr is the first address the store listens on ("" with none).
func (s *StoreServer) Addr() string {
	if len(s.lns) == 0 {
		return ""
	}
	return s.lns[0].Addr().String()
}

// Addrs are the addresses the store listens on.
func (s *StoreServer) Addrs() []string {
	out := make([]string, len(s.lns))
	for i, ln := range s.lns {
		out[i] = ln.Addr().String()
	}
	return out
}

// Refused counts the connections refused or dropped before a good hello (strangers,
// other jobs, and ranks whose hello failed).
func (s *StoreServer) Refused() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// deliverLocked hands p to a waiting connection.
func (s *StoreServer) deliverLocked(ch chan reply, p reply) {
	select {
	case ch <- p:
	default:
	}
}

// Close stops the store: every waiting rank is answered (stClosed, naming the ranks its
// barrier still lacked), given at most closeGrace to receive it, and every connection
// is dropped. It never waits on a client.
func (s *StoreServer) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	for _, ln := range s.lns {
		ln.Close()
	}
	for end := time.Now().Add(closeGrace); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		s.mu.Lock()
		n := s.busy
		s.mu.Unlock()
		if n <= 0 {
			break
		}
	}
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Shutdown stops taking connections and waits (at most d) until every rank has closed
// its connection, so that replies still on their way are delivered; then it closes.
// Connections that never said a good hello do not hold it up.
func (s *StoreServer) Shutdown(d time.Duration) error {
	for _, ln := range s.lns {
		ln.Close()
	}
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		ranks := len(s.conns) - s.pending
		s.mu.Unlock()
		if ranks == 0 {
			break
		}
	}
	err := s.Close()
	// Strangers refused while the job went on were said nowhere (the twelfth pass): one
	// line on rank 0, once the store is done.
	s.mu.Lock()
	refused, evicted := s.refused, s.evicted
	s.mu.Unlock()
	if refused > 0 {
		note := ""
		if evicted > 0 {
			note = fmt.Sprintf(", %d of them dropped to make room", evicted)
		}
		Warn(fmt.Sprintf("spmd: the store on port %s refused %d connections that did not say this job's hello%s: something else connected to it", s.port(), refused, note))
	}
	return err
}

func (s *StoreServer) accept(ln net.Listener) {
	defer s.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.take(c)
	}
}

// take serves a new connection, or drops it when the store is closed or too many
// connections wait for their hello.
func (s *StoreServer) take(c net.Conn) {
	s.mu.Lock()
	if s.closed {
		s.refused++
		s.mu.Unlock()
		c.Close()
		return
	}
	if len(s.waiting) >= s.cfg.maxPending() {
		// Drop the oldest silent connection (its goroutine counts it refused).
		s.waiting[0].Close()
		s.waiting = s.waiting[1:]
		s.evicted++
	}
	s.conns[c] = -1
	s.pending++
	s.waiting = append(s.waiting, c)
	s.mu.Unlock()
	s.wg.Add(1)
	go s.serve(c)
}

// serve authenticates one connection, then answers its rank's requests in order until
// it closes.
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
		} else {
			s.pending--
			s.refused++
			s.unwaitLocked(c)
		}
		s.mu.Unlock()
	}()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	rank = s.handshake(c, r, w)
	if rank < 0 {
		return
	}
	for {
		q, err := readRequest(r, true)
		if err != nil {
			return
		}
		s.mu.Lock()
		s.busy++
		why := s.endWhy
		s.mu.Unlock()
		var p reply
		switch {
		case why != "":
			p = reply{status: stErr, payload: []byte(why)}
		case q.op == opSet:
			p = s.set(q.key, q.val)
		case q.op == opGet:
			p = s.get(q.key, s.wait(q.arg))
		case q.op == opBarrier:
			p = s.barrier(q.key, rank, s.wait(q.arg))
		default:
			p = reply{status: stErr, payload: []byte(fmt.Sprintf("unknown store op %d", q.op))}
		}
		c.SetWriteDeadline(time.Now().Add(min(s.cfg.timeout(), handshakeTimeout)))
		err = p.write(w)
		if err == nil {
			err = w.Flush()
		}
		s.mu.Lock()
		s.busy--
		s.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// wait is how long a request may wait: what the client asks, within the store's bound.
func (s *StoreServer) wait(asked int64) time.Duration {
	d := time.Duration(asked)
	if d <= 0 || d > s.cfg.timeout() {
		return s.cfg.timeout()
	}
	return d
}

// handshake greets a connection and reads its hello: the MAC must prove the job's key,
// the world size and launch must be this store's, the rank free. It returns the rank,
// or -1 after refusing (with a reason, when the hello was readable). A caller that has
// not proven the key learns nothing of the job from the refusal. A hello that proves the
// key but claims a taken rank, another world size or another launch comes from a second
// launch holding the same key (two jobs on one port without a secret or job id): the
// store then ends the job for every rank, so that neither job runs with the other's ranks.
func (s *StoreServer) handshake(c net.Conn, r *bufio.Reader, w *bufio.Writer) int {
	c.SetDeadline(time.Now().Add(min(s.cfg.timeout(), handshakeTimeout)))
	nonce := randomBytes(nonceBytes)
	w.Write(storeMagic)
	w.Write(nonce)
	if w.Flush() != nil {
		return -1
	}
	q, err := readRequest(r, false)
	if err != nil {
		return -1 // a stranger's bytes: no answer
	}
	refuse := func(format string, args ...any) int {
		p := reply{status: stErr, payload: []byte("hello refused: " + fmt.Sprintf(format, args...))}
		if p.write(w) == nil {
			w.Flush()
		}
		return -1
	}
	if q.key != s.cfg.Job {
		return refuse("this store serves another job, not %q: another job uses this port (set MASTER_PORT apart, see docs/cluster.md)", q.key)
	}
	if n := len(q.val); n != nonceBytes+macBytes && n != nonceBytes+macBytes+launchBytes {
		return refuse("malformed hello")
	}
	clientNonce, mac, launch := q.val[:nonceBytes], q.val[nonceBytes:nonceBytes+macBytes], q.val[nonceBytes+macBytes:]
	if q.rank < 0 || q.arg < 1 || q.rank >= q.arg || q.arg > MaxWorld {
		return refuse("rank %d is outside the world of %d ranks it claims", q.rank, q.arg)
	}
	if !hmac.Equal(mac, handshakeMAC(s.key, "client", nonce, clientNonce, s.cfg.Job, int(q.rank), int(q.arg), launch)) {
		s.noteBadHello(int(q.rank), fmt.Sprintf("a connection claiming rank %d was refused: its hello was not signed with the key rank 0 holds (a different %s, or none; or not the job's: another process on the port, with rank %d never started)", q.rank, EnvToken, q.rank))
		return refuse("authentication failed: this rank does not hold the job's secret (%s / %s, or MPI's) that rank 0 holds", EnvToken, EnvTokenFile)
	}
	s.mu.Lock()
	why := s.endWhy
	switch {
	case why != "":
	case q.arg != int64(s.cfg.Size):
		why = s.endLocked(fmt.Sprintf("a process of a %d-rank job with this job's key reached the store of this %d-rank job: two jobs share port %s without a secret (set %s, or LONGCA_JOB_ID, or MASTER_PORT apart); both end", q.arg, s.cfg.Size, s.port(), EnvToken))
	case len(launch) > 0 && !hmac.Equal(launch, s.launch):
		why = s.endLocked(fmt.Sprintf("rank %d of another launch with this job's key reached the store: two jobs share port %s without a secret (set %s, or LONGCA_JOB_ID, or MASTER_PORT apart); both end", q.rank, s.port(), EnvToken))
	case s.joined[int(q.rank)]:
		why = s.endLocked(fmt.Sprintf("rank %d joined twice: two processes have the same rank (two jobs on port %s without a secret, or a launcher's environment that repeats a rank; set %s or LONGCA_JOB_ID); the job ends", q.rank, s.port(), EnvToken))
	}
	if why != "" {
		s.mu.Unlock()
		return refuse("%s", why)
	}
	rank := int(q.rank)
	s.joined[rank] = true
	delete(s.left, rank)
	delete(s.badHello, rank)
	s.conns[c] = rank
	s.pending--
	s.unwaitLocked(c)
	s.mu.Unlock()
	p := reply{payload: append(handshakeMAC(s.key, "server", nonce, clientNonce, s.cfg.Job, rank, s.cfg.Size, s.launch), s.launch...)}
	if p.write(w) != nil || w.Flush() != nil {
		s.mu.Lock()
		s.conns[c] = -1 // undo: the deferred cleanup treats it as never joined
		delete(s.joined, rank)
		s.pending++
		s.mu.Unlock()
		return -1
	}
	c.SetDeadline(time.Time{})
	return rank
}

// MaxWorld is the most ranks a world may have: what a hello may claim, a launcher may give,
// cp --ranks and simulate --gpus may ask for.
const MaxWorld = 1 << 20

// port is the port the store listens on, for messages.
func (s *StoreServer) port() string {
	if len(s.lns) == 0 {
		return "?"
	}
	_, p, _ := net.SplitHostPort(s.lns[0].Addr().String())
	return p
}

// endLocked ends the job: every wait and every later request fails with why.
func (s *StoreServer) endLocked(why string) string {
	if s.endWhy == "" {
		s.endWhy = why
		close(s.ended)
	}
	return s.endWhy
}

// Ended says why the store ended the job ("" while it has not).
func (s *StoreServer) Ended() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.endWhy
}

// noteBadHello keeps why the hello of a connection claiming rank was refused, for the
// error of a wait that misses that rank (a rank with another token "did not arrive"
// says too little). Only ranks of the world are kept, so the map stays bounded.
func (s *StoreServer) noteBadHello(rank int, why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rank >= 0 && rank < s.cfg.Size && !s.joined[rank] && len(s.badHello) < maxListed {
		s.badHello[rank] = why
	}
}

// unwaitLocked removes c from the connections waiting for their hello.
func (s *StoreServer) unwaitLocked(c net.Conn) {
	for i, w := range s.waiting {
		if w == c {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			return
		}
	}
}

// notesLocked explains the missing ranks whose hello was refused, or the connections
// the store dropped before their hello (a flood on the port), for a timeout's error.
func (s *StoreServer) notesLocked(missing []int64) string {
	var notes []string
	for _, r := range missing {
		if why, ok := s.badHello[int(r)]; ok {
			notes = append(notes, why)
		}
	}
	if s.evicted > 0 {
		notes = append(notes, fmt.Sprintf("the store dropped %d connections that did not say hello in time to make room (something else is connecting to port %s)", s.evicted, s.port()))
	}
	return strings.Join(notes, "; ")
}

func (s *StoreServer) set(key string, val []byte) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	const overhead = 64 // map entry, slice headers
	add := int64(len(key) + len(val) + overhead)
	if old, ok := s.kv[key]; ok {
		add -= int64(len(key) + len(old) + overhead)
	}
	if s.kvBytes+add > s.cfg.maxBytes() {
		return reply{status: stErr, payload: []byte(fmt.Sprintf("store full: %d bytes held, %d more would pass its %d-byte bound", s.kvBytes, add, s.cfg.maxBytes()))}
	}
	s.kvBytes += add
	s.kv[key] = append([]byte(nil), val...)
	for _, ch := range s.waiters[key] {
		s.deliverLocked(ch, reply{payload: s.kv[key]})
	}
	delete(s.waiters, key)
	return reply{}
}

// Held is the number of bytes the store's keys and values count for.
func (s *StoreServer) Held() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.kvBytes
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
		return p
	case <-t.C:
	case <-s.done:
	case <-s.ended:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.endWhy != "" {
		return reply{status: stErr, payload: []byte(s.endWhy)}
	}
	select { // set may have answered while the lock was free
	case p := <-ch:
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
	if s.closed {
		return reply{status: stClosed, payload: []byte(fmt.Sprintf("rank 0 closed the store before key %q was set", key))}
	}
	return reply{status: stTimeout, payload: []byte(fmt.Sprintf("key %q was not set within %s", key, timeout))}
}

func (s *StoreServer) barrier(name string, rank int, timeout time.Duration) reply {
	s.mu.Lock()
	b := s.barriers[name]
	if b == nil {
		// One deadline for every rank of the barrier: they all time out together, each
		// naming the ranks that never came (not rank 0, which would close first).
		b = &barrier{arrived: map[int]chan reply{}, deadline: time.Now().Add(timeout)}
		s.barriers[name] = b
	}
	ch := make(chan reply, 1)
	b.arrived[rank] = ch
	if gone := s.goneLocked(b); len(gone) > 0 {
		missing, total := listed(gone)
		s.deliverLocked(ch, reply{status: stGone, missing: missing, total: total})
	} else if len(b.arrived) == s.cfg.Size {
		for _, c := range b.arrived {
			s.deliverLocked(c, reply{})
		}
		delete(s.barriers, name)
	}
	s.mu.Unlock()
	t := time.NewTimer(time.Until(b.deadline))
	defer t.Stop()
	select {
	case p := <-ch:
		return p
	case <-t.C:
	case <-s.done:
	case <-s.ended:
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.endWhy != "" {
		return reply{status: stErr, payload: []byte(s.endWhy)}
	}
	select {
	case p := <-ch:
		return p
	default:
	}
	missing, total := listed(s.missingLocked(b))
	if s.closed {
		return reply{status: stClosed, missing: missing, total: total, payload: []byte("rank 0 closed the store")}
	}
	return reply{status: stTimeout, missing: missing, total: total, payload: []byte(s.notesLocked(missing))}
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
	for r := 0; r < s.cfg.Size; r++ {
		if _, ok := b.arrived[r]; !ok {
			out = append(out, int64(r))
		}
	}
	return out
}
