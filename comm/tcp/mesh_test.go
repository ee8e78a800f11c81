package tcp

import (
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"
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
