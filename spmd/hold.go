package spmd

import (
	"context"
	"sync"
	"time"
)

// holdKey is the context key of a storeHold.
type holdKey struct{}

// storeHold is one rank's bootstrap store kept open across the Bootstraps of a job.
type storeHold struct {
	mu       sync.Mutex
	w        World
	timeout  time.Duration
	st       *Store
	srv      *StoreServer // rank 0's
	released bool
}

// HoldStore returns ctx carrying a hold on this rank's bootstrap store, and the function
// that lets it go. The first Bootstrap under the context opens the store as usual; it
// then stays open, and every later Bootstrap of the same world under the context (the TCP
// or NCCL backend's, Share's) returns that store, whose Close does nothing, without a
// second join. Rank 0 thus binds MASTER_PORT once for the job: when it bound the port
// anew for each bootstrap, another process could take the port in between, and then rank
// 0 failed naming the port and the others waited out the timeout. Each use still ends
// with a barrier of its own before rank 0 returns, as on a store of its own.
//
// release ends the hold: the rank drops its connection, and rank 0 closes the store,
// first waiting (at most the timeout, and 10 s) for the other ranks to drop theirs when ok
// (the job went well: replies may be on their way), at once otherwise (a peer may be
// gone). It does nothing when no Bootstrap ran under the context, and nothing the second
// time.
func HoldStore(ctx context.Context) (context.Context, func(ok bool)) {
	h := &storeHold{}
	return context.WithValue(ctx, holdKey{}, h), h.release
}

// bootstrap is Bootstrap under the hold: the held store of w, opened on the first call.
// A world other than the held one, or a call after release, opens a store of its own.
func (h *storeHold) bootstrap(ctx context.Context, w World, timeout time.Duration) (*Store, *StoreServer, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.released, h.st != nil && !sameStore(h.w, w):
		return bootstrap(ctx, w, timeout)
	case h.st != nil:
		return h.st, nil, nil
	}
	st, srv, err := bootstrap(ctx, w, timeout)
	if err != nil {
		return nil, nil, err
	}
	st.held = true
	h.w, h.timeout, h.st, h.srv = w, timeout, st, srv
	return st, nil, nil
}

func (h *storeHold) release(ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.released {
		return
	}
	h.released = true
	if h.st == nil {
		return
	}
	h.st.conn.Close()
	if h.srv != nil {
		d := time.Duration(0)
		if ok {
			d = min(h.timeout, 10*time.Second)
		}
		h.srv.Shutdown(d) // (with 0, it closes at once, and still says of strangers)
	}
}

// sameStore says whether worlds a and b are the same rank of one job's store.
func sameStore(a, b World) bool {
	return a.Rank == b.Rank && a.Size == b.Size && a.Job == b.Job && a.MasterAddr == b.MasterAddr &&
		a.MasterPort == b.MasterPort && a.LocalSize == b.LocalSize && string(a.Token) == string(b.Token)
}
