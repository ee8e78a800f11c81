package spmd

import (
	"encoding/binary"
	"fmt"
	"io"
)

// The store's wire format: a request is op, key, value, rank, timeout; a reply is a
// status and a payload (the value, or the error's text).
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
	stGone // a rank left before the wait completed
)

// maxFrame bounds one key or value (the NCCL id is 128 bytes; addresses are short).
const maxFrame = 64 << 20

type request struct {
	op      byte
	key     string
	val     []byte
	rank    int64 // the hello's rank; for a barrier, the caller's
	timeout int64 // nanoseconds the server may wait
}

type reply struct {
	status   byte
	payload  []byte
	missing  []int64 // ranks that did not arrive or left
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

func readBytes(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	l := binary.LittleEndian.Uint32(n[:])
	if l > maxFrame {
		return nil, fmt.Errorf("store frame of %d bytes is over the %d limit", l, maxFrame)
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
	return writeInt(w, q.timeout)
}

func readRequest(r io.Reader) (request, error) {
	var q request
	var op [1]byte
	if _, err := io.ReadFull(r, op[:]); err != nil {
		return q, err
	}
	q.op = op[0]
	k, err := readBytes(r)
	if err != nil {
		return q, err
	}
	q.key = string(k)
	if q.val, err = readBytes(r); err != nil {
		return q, err
	}
	if q.rank, err = readInt(r); err != nil {
		return q, err
	}
	q.timeout, err = readInt(r)
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
	return nil
}

func readReply(r io.Reader) (reply, error) {
	var p reply
	var st [1]byte
	if _, err := io.ReadFull(r, st[:]); err != nil {
		return p, err
	}
	p.status = st[0]
	var err error
	if p.payload, err = readBytes(r); err != nil {
		return p, err
	}
	n, err := readInt(r)
	if err != nil {
		return p, err
	}
	if n < 0 || n > 1<<20 {
		return p, fmt.Errorf("store reply lists %d ranks", n)
	}
	p.missing = make([]int64, n)
	for i := range p.missing {
		if p.missing[i], err = readInt(r); err != nil {
			return p, err
		}
	}
	return p, nil
}
