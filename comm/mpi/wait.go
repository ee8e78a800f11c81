//go:build mpi

package mpi

/*
#include "lc_mpi.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/longca/longca/comm"
)

// reqs is an array of MPI requests in C memory (MPI writes them while we poll), with
// the Go buffers the requests use pinned until they complete.
type reqs struct {
	p   *C.MPI_Request
	n   int
	pin runtime.Pinner
}

func newReqs(n int) *reqs {
	if n == 0 {
		n = 1
	}
	r := &reqs{p: (*C.MPI_Request)(C.malloc(C.size_t(n) * C.size_t(unsafe.Sizeof(C.MPI_Request(nil)))))}
	C.lc_null_reqs(r.p, C.int(n))
	return r
}

// next is the address of the next request slot.
func (r *reqs) next() *C.MPI_Request {
	s := unsafe.Slice(r.p, r.n+1)
	r.n++
	return &s[r.n-1]
}

// buf pins b and returns its address for MPI (nil for an empty buffer).
func (r *reqs) buf(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	r.pin.Pin(&b[0])
	return unsafe.Pointer(&b[0])
}

func (r *reqs) free() {
	r.pin.Unpin()
	C.free(unsafe.Pointer(r.p))
}

// wait polls the requests until all complete or the timeout passes. On a timeout it
// runs the presence exchange to name the ranks that did not arrive, and leaves the
// requests (and their pinned buffers) to the abort that must follow.
func (c *Comm) wait(what string, r *reqs, peers []int) error {
	// The presence exchange takes the last quarter (at most 5s) of the timeout.
	deadline := time.Now().Add(c.timeout - c.grace())
	sleep := time.Microsecond
	for {
		var flag C.int
		mu.Lock()
		rc := C.lc_testall(C.int(r.n), r.p, &flag)
		mu.Unlock()
		if err := check(what, rc); err != nil {
			r.free()
			return err
		}
		if flag != 0 {
			r.free()
			return nil
		}
		if time.Now().After(deadline) {
			return c.timedOut(what, peers)
		}
		if sleep < 200*time.Microsecond {
			runtime.Gosched()
			sleep *= 2
		} else {
			time.Sleep(sleep)
		}
	}
}

// presenceTag marks presence notes on the side communicator.
const presenceTag = 7001

// timedOut names the missing ranks: this rank tells every rank of the group that it
// is alive and stuck in op number seq, then waits a grace period for the same note from
// each; the ranks that stay silent did not arrive. peers narrows the suspects for a
// point-to-point wait.
func (c *Comm) timedOut(what string, peers []int) error {
	n := c.size
	grace := c.grace()
	send := make([]byte, 8)
	recv := make([]byte, 8*n)
	r := newReqs(2 * n)
	recvReq := make([]*C.MPI_Request, n)
	mu.Lock()
	for p := 0; p < n; p++ {
		if p == c.rank {
			continue
		}
		C.MPI_Isend(r.buf(send), 8, C.lc_type(0), C.int(p), presenceTag, c.side, r.next())
		recvReq[p] = r.next()
		C.MPI_Irecv(r.buf(recv[8*p:8*p+8]), 8, C.lc_type(0), C.int(p), presenceTag, c.side, recvReq[p])
	}
	mu.Unlock()
	arrived := make([]bool, n)
	arrived[c.rank] = true
	end := time.Now().Add(grace)
	for time.Now().Before(end) {
		all := true
		mu.Lock()
		for p := range n {
			if arrived[p] {
				continue
			}
			var flag C.int
			C.lc_test(recvReq[p], &flag)
			arrived[p] = flag != 0
			all = all && arrived[p]
		}
		mu.Unlock()
		if all {
			break
		}
		time.Sleep(time.Millisecond)
	}
	var missing []int
	for p := range n {
		if !arrived[p] {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 { // everyone is alive and waiting: the calls do not match
		return fmt.Errorf("mpi: %s did not complete within %s although every rank is alive: ranks called different collectives or mismatched sizes: %w", what, c.timeout, comm.ErrTimeout)
	}
	waiting := ""
	if len(peers) > 0 {
		waiting = fmt.Sprintf(" (this rank waited on rank(s) %v)", c.worldRanks(dedupe(peers)))
	}
	return &comm.PeerError{Rank: c.world(missing[0]), Op: "mpi " + what,
		Err: fmt.Errorf("rank(s) %v did not arrive within %s%s: %w", c.worldRanks(missing), c.timeout, waiting, comm.ErrTimeout)}
}

// grace is the part of the timeout kept for the presence exchange.
func (c *Comm) grace() time.Duration { return min(c.timeout/4, 5*time.Second) }

func dedupe(xs []int) []int {
	var out []int
	for _, x := range xs {
		if !contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}
