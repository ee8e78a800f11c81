package tcp

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// A header whose length no message can have (a corrupt stream) ends that peer with an
// error naming the length: it panicked in make (1<<62) or would run the host out of
// memory. A receive from the peer fails with it at once, not at the timeout.
func TestMeshRefusesAbsurdLength(t *testing.T) {
	for _, n := range []uint64{1 << 62, maxMessage + 1} {
		a, b := net.Pipe()
		m := &mesh{rank: 0, size: 2, timeout: 10 * time.Second, peers: make([]*peer, 2),
			queues: map[qkey]*queue{}, dead: make([]error, 2)}
		m.wg.Add(1)
		go m.read(1, a)
		var hdr [17]byte
		binary.LittleEndian.PutUint64(hdr[:8], 1)
		hdr[8] = tagP2P
		binary.LittleEndian.PutUint64(hdr[9:], n)
		go b.Write(hdr[:])
		start := time.Now()
		_, err := m.recv(1, tagP2P, 1)
		if err == nil || !strings.Contains(err.Error(), "the stream is corrupt") {
			t.Errorf("length %d: receive error %v, want the corrupt stream named", n, err)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("length %d: the receive failed after %s, want at once", n, el)
		}
		b.Close()
		a.Close()
		m.wg.Wait()
	}
}

// meshPair is two ranks' meshes joined by one loopback TCP connection; rank 0's reader
// runs at once, rank 1's once start1 is called (a rank stopped, then resumed).
func meshPair(t *testing.T, timeout time.Duration) (c0, c1 *Comm, start1 func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	d, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a := <-accepted
	if a == nil {
		t.Fatal("accept failed")
	}
	mk := func(rank int, c net.Conn) *mesh {
		m := &mesh{rank: rank, size: 2, timeout: timeout, peers: make([]*peer, 2),
			queues: map[qkey]*queue{}, dead: make([]error, 2)}
		m.addPeer(1-rank, c)
		m.wg.Add(1)
		return m
	}
	m0, m1 := mk(0, a), mk(1, d)
	go m0.read(1, a)
	c0 = &Comm{m: m0, members: identity(2), rank: 0, id: 1}
	c1 = &Comm{m: m1, members: identity(2), rank: 1, id: 1}
	t.Cleanup(func() { c0.Close(); c1.Close() })
	return c0, c1, func() { go m1.read(0, d) }
}

// A rank that was stopped while its peer gave up on it, then resumed, relays the peer's
// abort when its first send fails, not "broken pipe": rank 0's abort sits in the
// connection ahead of its close, and the send waits for rank 1's reader to reach it,
// whether the reader had read it already or starts after the send has failed (a resumed
// process's sender can run first).
func TestWriteFailureRelaysAbort(t *testing.T) {
	for _, readerFirst := range []bool{true, false} {
		c0, c1, start1 := meshPair(t, time.Second)
		buf := tensor.NewHost(tensor.FP32, 256)
		// Rank 1 is "stopped": rank 0 waits on it, gives up (its abort goes to rank 1) and exits.
		if err := c0.Recv(buf, 1); err == nil || !strings.Contains(err.Error(), "nothing arrived") {
			t.Fatalf("rank 0's receive: %v, want a timeout", err)
		}
		c0.Close()
		if readerFirst {
			start1()
			time.Sleep(100 * time.Millisecond)
		} else {
			time.AfterFunc(200*time.Millisecond, start1) // resumed: the reader runs late
		}
		var err error
		for i := 0; i < 100 && err == nil; i++ { // the first writes may land in the socket's buffer
			err = c1.Send(buf, 0)
			time.Sleep(10 * time.Millisecond)
		}
		if err == nil {
			t.Fatalf("reader first %v: rank 1's sends to the closed rank 0 all succeeded", readerFirst)
		}
		var pe *comm.PeerError
		if msg := err.Error(); !errors.As(err, &pe) || !strings.Contains(msg, "rank 0 gave up after it lost rank 1") ||
			!strings.Contains(msg, "nothing arrived within") {
			t.Errorf("reader first %v: rank 1's send failed with %q, want rank 0's abort relayed", readerFirst, msg)
		}
	}
}

// TestMeshDropsASilentFlood: connections to a rank's mesh port that do not prove
// themselves are held at most meshPending at a time, the oldest dropped for a newer one,
// so that a flood of them cannot spend the process's files (2000 under ulimit -n 1024
// made Accept fail with EMFILE, which ended the accept loop: no rank was taken after it,
// the twelfth pass); the timeout's error says something else connected.
func TestMeshDropsASilentFlood(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &mesh{rank: 0, size: 2, timeout: 2 * time.Second, ln: ln, peers: make([]*peer, 2),
		queues: map[qkey]*queue{}, dead: make([]error, 2)}
	errc := make(chan error, 1)
	go func() { errc <- m.acceptHigher([]byte("the job's key")) }()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range meshPending(2) + 10 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// the oldest is dropped at once (not after meshHandshake): its nonce, then the end
	conns[0].SetReadDeadline(time.Now().Add(time.Second))
	_, err = io.Copy(io.Discard, conns[0])
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("the oldest of %d silent connections was still open after a second", len(conns))
	}
	err = <-errc
	if err == nil || !strings.Contains(err.Error(), "did not prove themselves and were dropped") {
		t.Errorf("rank 1 never came: %v; want the dropped connections named", err)
	}
}
