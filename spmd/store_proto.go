package spmd

import (
	"encoding/binary"
	"fmt"
	"io"
)

// The store's wire format. On connecting, the server sends storeMagic and a nonce. The
// client's first request must be a hello: key the job id, value the client's nonce, its
// MAC (handshakeMAC, role "client") and the launch id it holds from an earlier bootstrap
// of this process (none on the first), rank its rank, arg the world size. The server
// answers a good hello with its own MAC (role "server") and its launch id, which the
// client checks before trusting anything else it says; it closes the connection on
// anything else. A request is op, key, value, rank, arg; a reply is a status, a payload
// (the value, a MAC, or the error's text), the first ranks a wait is missing (at most
// maxListed) and how many it is missing in all.
const (
	opHello byte = iota + 1
	opSet
	opGet
	opBarrier
)

const (
	stOK byte = iota
	stErr
	stTimeout
	stGone   // a rank left before the wait completed
	stClosed // the store closed while this rank waited
)

// storeMagic starts the server's greeting: the protocol and its version.
var storeMagic = []byte("LCSTORE3")

const (
	nonceBytes = 32
	macBytes   = 32
	// launchBytes is the size of a launch id (launch.go).
	launchBytes = 16
	// maxListed bounds the missing ranks a reply lists; the total says how many there are.
	maxListed = 16
	// maxKey bounds a key (keys are short names: "tcp/addr/17", "nccl/id").
	maxKey = 1 << 10
	// maxValue bounds a value (the NCCL id is 128 bytes, addresses are short).
	maxValue = 1 << 20
	// maxHelloValue bounds the value of a hello, read before the client is known.
	maxHelloValue = nonceBytes + macBytes + launchBytes
	// maxJobID bounds the job id of a hello.
	maxJobID = 256
)

type request struct {
	op   byte
	key  string
	val  []byte
	rank int64 // the hello's rank
	arg  int64 // hello: the world size; get, barrier: nanoseconds the client may wait
}

type reply struct {
	status   byte
	payload  []byte
	missing  []int64 // ranks that did not arrive or left: the first maxListed
	total    int64   // how many ranks are missing in all (at least len(missing))
	fromChan bool    // handed over by another connection's request (not sent on the wire)
}

func writeBytes(w io.Writer, b []byte) error {
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(b)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	_, err := w.Write(b)
	return err
}

// readBytes reads one length-prefixed frame of at most limit bytes; a longer one is an
// error before anything is allocated.
func readBytes(r io.Reader, limit int, what string) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	l := binary.LittleEndian.Uint32(n[:])
	if l > uint32(limit) {
		return nil, fmt.Errorf("store %s of %d bytes is over the %d-byte limit", what, l, limit)
	}
	b := make([]byte, l)
	_, err := io.ReadFull(r, b)
	return b, err
}

func writeInt(w io.Writer, v int64) error {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(v))
	_, err := w.Write(b[:])
	return err
}

func readInt(r io.Reader) (int64, error) {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(b[:])), nil
}

func (q request) write(w io.Writer) error {
	if _, err := w.Write([]byte{q.op}); err != nil {
		return err
	}
	if err := writeBytes(w, []byte(q.key)); err != nil {
		return err
	}
	if err := writeBytes(w, q.val); err != nil {
		return err
	}
	if err := writeInt(w, q.rank); err != nil {
		return err
	}
	return writeInt(w, q.arg)
}

// readRequest reads one request; before the hello (authed false) only a hello with a
// short job id and value is read.
func readRequest(r io.Reader, authed bool) (request, error) {
	var q request
	var op [1]byte
	if _, err := io.ReadFull(r, op[:]); err != nil {
		return q, err
	}
	q.op = op[0]
	keyLimit, valLimit := maxKey, maxValue
	if !authed {
		if q.op != opHello {
			return q, fmt.Errorf("request %d before the hello", q.op)
		}
		keyLimit, valLimit = maxJobID, maxHelloValue
	}
	k, err := readBytes(r, keyLimit, "key")
	if err != nil {
		return q, err
	}
	q.key = string(k)
	if q.val, err = readBytes(r, valLimit, "value"); err != nil {
		return q, err
	}
	if q.rank, err = readInt(r); err != nil {
		return q, err
	}
	q.arg, err = readInt(r)
	return q, err
}

func (p reply) write(w io.Writer) error {
	if _, err := w.Write([]byte{p.status}); err != nil {
		return err
	}
	if err := writeBytes(w, p.payload); err != nil {
		return err
	}
	if err := writeInt(w, int64(len(p.missing))); err != nil {
		return err
	}
	for _, m := range p.missing {
		if err := writeInt(w, m); err != nil {
			return err
		}
	}
	return writeInt(w, max(p.total, int64(len(p.missing))))
}

// listed bounds a list of missing ranks to what a reply carries, and counts them.
func listed(ranks []int64) ([]int64, int64) {
	n := int64(len(ranks))
	if len(ranks) > maxListed {
		ranks = ranks[:maxListed]
	}
	return ranks, n
}

// readReply reads one reply of a store of size ranks.
func readReply(r io.Reader, size int) (reply, error) {
	var p reply
	var st [1]byte
	if _, err := io.ReadFull(r, st[:]); err != nil {
		return p, err
	}
	p.status = st[0]
	var err error
	if p.payload, err = readBytes(r, maxValue, "reply"); err != nil {
		return p, err
	}
	n, err := readInt(r)
	if err != nil {
		return p, err
	}
	if n < 0 || n > int64(min(size, maxListed)) {
		return p, fmt.Errorf("store reply lists %d ranks of %d", n, size)
	}
	p.missing = make([]int64, n)
	for i := range p.missing {
		if p.missing[i], err = readInt(r); err != nil {
			return p, err
		}
		if p.missing[i] < 0 || p.missing[i] >= int64(size) {
			return p, fmt.Errorf("store reply names rank %d of %d", p.missing[i], size)
		}
	}
	if p.total, err = readInt(r); err != nil {
		return p, err
	}
	if p.total < n || p.total > int64(size) {
		return p, fmt.Errorf("store reply counts %d missing ranks of %d", p.total, size)
	}
	return p, nil
}
