package spmd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/longca/longca/comm"
)

// Store is one rank's connection to the bootstrap store. Its calls are serialised: one
// request at a time on the connection.
type Store struct {
	rank, size int
	timeout    time.Duration
	addr       string
	key        []byte // the job's store key, proven in the hello
	conn       net.Conn
	r          *bufio.Reader
	w          *bufio.Writer
	mu         sync.Mutex
	held       bool // HoldStore's: Close leaves it to the hold's release
}

// refusal is a dial that reached something that is not this job's store, or a store
// that refused this rank: no point retrying.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

func refused(format string, args ...any) error { return &refusal{fmt.Sprintf(format, args...)} }

// DialStore connects rank to the store of cfg at addr, retrying until rank 0 has started
// it or cfg's timeout has passed (then the error is a comm.PeerError naming rank 0). The
// handshake proves to the store that this rank holds the job's key, and the store's
// answer proves the same of it: a store of another job, or something else on the port,
// is an error at once.
func DialStore(ctx context.Context, addr string, rank int, cfg StoreConfig) (*Store, error) {
	timeout := cfg.timeout()
	deadline := time.Now().Add(timeout)
	var last error
	dropped := 0 // connections the store took and then dropped before the hello ended
	for {
		d := net.Dialer{Timeout: time.Until(deadline)}
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			s := &Store{rank: rank, size: cfg.Size, timeout: timeout, addr: addr, conn: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}
			err = s.hello(cfg)
			if err == nil {
				return s, nil
			}
			c.Close()
			var rf *refusal
			if errors.As(err, &rf) {
				return nil, &comm.PeerError{Rank: 0, Op: "connect to the store at " + addr, Err: err}
			}
			var pe *comm.PeerError
			if errors.As(err, &pe) {
				return nil, err
			}
			// The store was not ready, or dropped this connection for a newer one while
			// silent connections crowd it: try again.
			dropped++
		}
		last = err
		if ctx.Err() != nil || time.Now().After(deadline) {
			if dropped > 0 {
				return nil, &comm.PeerError{Rank: 0, Op: "connect to the store at " + addr,
					Err: fmt.Errorf("a store listens there but dropped this rank's connection %d times before its hello ended (last: %v) within %s: it is crowded by connections that never say hello (something else connects to the port) or is closing: %w", dropped, last, timeout, comm.ErrTimeout)}
			}
			return nil, &comm.PeerError{Rank: 0, Op: "connect to the store at " + addr,
				Err: fmt.Errorf("rank 0 did not serve it within %s (%v): %w", timeout, last, comm.ErrTimeout)}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// hello reads the store's greeting, proves this rank's key and checks the store's proof.
func (s *Store) hello(cfg StoreConfig) error {
	s.conn.SetDeadline(time.Now().Add(min(s.timeout, handshakeTimeout)))
	defer s.conn.SetDeadline(time.Time{})
	greet := make([]byte, len(storeMagic)+nonceBytes)
	if _, err := io.ReadFull(s.r, greet); err != nil {
		return fmt.Errorf("reading the store's greeting: %w", err)
	}
	if !bytes.Equal(greet[:len(storeMagic)], storeMagic) {
		return refused("the service at %s does not speak longca's store protocol (%s): another program, or a longca of another version, holds the port", s.addr, storeMagic)
	}
	key := storeKey(cfg.Job, cfg.Secret)
	s.key = key
	serverNonce, clientNonce := greet[len(storeMagic):], randomBytes(nonceBytes)
	launch := cfg.launchCache().held(cfg.Job)
	val := append(append(clientNonce, handshakeMAC(key, "client", serverNonce, clientNonce, cfg.Job, s.rank, cfg.Size, launch)...), launch...)
	q := request{op: opHello, key: cfg.Job, rank: int64(s.rank), arg: int64(cfg.Size), val: val}
	if err := q.write(s.w); err != nil {
		return err
	}
	if err := s.w.Flush(); err != nil {
		return err
	}
	p, err := readReply(s.r, cfg.Size)
	if err != nil {
		return fmt.Errorf("reading the store's answer to the hello: %w", err)
	}
	switch {
	case p.status == stErr:
		return refused("the store at %s refused rank %d: %s", s.addr, s.rank, printable(p.payload))
	case p.status != stOK:
		return refused("the store at %s answered the hello with status %d", s.addr, p.status)
	case len(p.payload) != macBytes+launchBytes:
		return refused("the store at %s answered the hello with %d bytes, not a proof and a launch id", s.addr, len(p.payload))
	}
	mac, served := p.payload[:macBytes], p.payload[macBytes:]
	switch {
	case !hmac.Equal(mac, handshakeMAC(key, "server", serverNonce, clientNonce, cfg.Job, s.rank, cfg.Size, served)):
		return refused("the store at %s did not prove it belongs to job %q (a stranger on the port, or the ranks hold different secrets)", s.addr, cfg.Job)
	case !cfg.launchCache().learn(cfg.Job, served):
		return refused("the store at %s belongs to another launch of job %q than this process joined before: two jobs share the port without a secret (set %s, or LONGCA_JOB_ID, or MASTER_PORT apart)", s.addr, cfg.Job, EnvToken)
	}
	return nil
}

// printable quotes at most 200 bytes of text from a peer.
func printable(b []byte) string {
	s := string(b)
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return '?'
	}, s)
}

// MeshKey is a key for the job's peer connections (comm/tcp), derived from the store's:
// only ranks that passed the store's handshake hold it.
func (s *Store) MeshKey() []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("longca-mesh-key"))
	return m.Sum(nil)
}

// LocalAddr is the address of this end of the store connection: the interface that
// reaches rank 0, which is where peers can reach this rank too.
func (s *Store) LocalAddr() net.Addr { return s.conn.LocalAddr() }

// Timeout is how long each wait may last.
func (s *Store) Timeout() time.Duration { return s.timeout }

// Set stores val under key.
func (s *Store) Set(key string, val []byte) error {
	if len(key) > maxKey || len(val) > maxValue {
		return fmt.Errorf("spmd: store set %s: %d-byte key, %d-byte value: over the store's %d and %d", key, len(key), len(val), maxKey, maxValue)
	}
	_, err := s.do("set "+key, request{op: opSet, key: key, val: val})
	return err
}

// Get waits for key to be set and returns its value. owner is the rank expected to set
// it, named in the error when it does not in time.
func (s *Store) Get(key string, owner int) ([]byte, error) {
	p, err := s.do("get "+key, request{op: opGet, key: key, arg: int64(s.timeout)})
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
	_, err := s.do("barrier "+name, request{op: opBarrier, key: name, arg: int64(s.timeout)})
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

// Close drops the connection; the store sees this rank leave. A store that HoldStore
// holds stays open until the hold is released.
func (s *Store) Close() error {
	if s.held {
		return nil
	}
	return s.conn.Close()
}

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
	p, err := readReply(s.r, s.size)
	if err != nil {
		return reply{}, s.lost(what, err)
	}
	switch p.status {
	case stOK:
		return p, nil
	case stErr:
		return p, fmt.Errorf("spmd: store %s: %s", what, printable(p.payload))
	case stTimeout:
		if len(p.missing) == 0 {
			return p, &comm.PeerError{Rank: -1, Op: "store " + what, Err: fmt.Errorf("%s: %w", printable(p.payload), comm.ErrTimeout)}
		}
		note := ""
		if len(p.payload) > 0 {
			note = " (" + printable(p.payload) + ")"
		}
		return p, &comm.PeerError{Rank: int(p.missing[0]), Op: "store " + what,
			Err: fmt.Errorf("rank(s) %s did not arrive within %s%s: %w", rankList(p.missing, p.total), s.timeout, note, comm.ErrTimeout)}
	case stGone:
		if len(p.missing) == 0 {
			break
		}
		return p, &comm.PeerError{Rank: int(p.missing[0]), Op: "store " + what,
			Err: fmt.Errorf("rank(s) %s left (exited or closed the connection) before arriving", rankList(p.missing, p.total))}
	case stClosed:
		if len(p.missing) == 0 {
			return p, &comm.PeerError{Rank: -1, Op: "store " + what, Err: fmt.Errorf("%s", printable(p.payload))}
		}
		return p, &comm.PeerError{Rank: int(p.missing[0]), Op: "store " + what,
			Err: fmt.Errorf("%s while rank(s) %s had not arrived", printable(p.payload), rankList(p.missing, p.total))}
	}
	return p, fmt.Errorf("spmd: store %s: unknown status %d", what, p.status)
}

// rankList prints the first ranks of a list and how many there are in all: "[2]",
// "[1 2 3 ... 16] (199999 in all)".
func rankList(first []int64, total int64) string {
	s := fmt.Sprint(first)
	if total > int64(len(first)) {
		s = strings.TrimSuffix(s, "]") + fmt.Sprintf(" ...] (%d in all)", total)
	}
	return s
}

// lost is the error for a broken connection to rank 0's store.
func (s *Store) lost(what string, err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = fmt.Errorf("%v: %w", err, comm.ErrTimeout)
	}
	return &comm.PeerError{Rank: 0, Op: "store " + what, Err: fmt.Errorf("lost the store hosted by rank 0: %w", err)}
}
