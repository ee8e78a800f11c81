package nccl

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/longca/longca/comm"
)

// Comm is a comm.Comm over an NCCL communicator. Buffers are device tensors
// (tensor.DeviceBuffer). Every operation is enqueued on the communicator's stream
// and has completed when the call returns (inside Group: when Group returns), so a
// buffer may be reused or read at once; the watchdog bounds each wait by the timeout.
// A Comm is used by one goroutine at a time, like any comm.Comm.
type Comm struct {
	lib        *Lib
	handle     uintptr
	rank, size int
	stream     Stream
	ctx        context.Context
	opts       options
	w          *worker
	g          *guard
	wd         watchdog

	scratch    uintptr // 4+ device bytes for Barrier
	ownScratch bool

	depth   int      // Group nesting
	pending []string // what the open group holds, to name it in errors
	async   bool     // inside GroupAfter: the group is enqueued, not waited for

	mu       sync.Mutex
	counters comm.Counters
	closed   bool
}

var _ comm.Comm = (*Comm)(nil)

// New makes rank's communicator of a world of size ranks: rank 0 makes the NCCL id,
// exchange shares it (the spmd bootstrap), and ncclCommInitRank joins everyone, on the
// CUDA device current on the communicator's thread (see WithThreadSetup). Every
// operation is enqueued on stream; one that does not complete within timeout (<= 0: no
// limit) aborts the communicator and fails with comm.ErrTimeout. Cancelling ctx aborts
// too.
func New(ctx context.Context, rank, size int, exchange Exchange, stream Stream, timeout time.Duration, opts ...Option) (*Comm, error) {
	if size < 1 || rank < 0 || rank >= size {
		return nil, fmt.Errorf("nccl: rank %d is not in a world of %d ranks", rank, size)
	}
	if stream == nil {
		return nil, fmt.Errorf("nccl: rank %d: no CUDA stream given", rank)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	lib := o.lib
	if lib == nil {
		var err error
		if lib, err = Open(o.libNames...); err != nil {
			return nil, err
		}
	}
	w, err := newWorker(o.bind)
	if err != nil {
		return nil, fmt.Errorf("nccl: rank %d: setting up the NCCL thread: %w", rank, err)
	}
	c := &Comm{lib: lib, rank: rank, size: size, stream: stream, ctx: ctx, opts: o, w: w}
	// Until ncclCommInitRank returns there is no handle to abort: a timeout only fails.
	c.g = &guard{}
	c.wd = watchdog{timeout: timeout, maxPoll: o.maxPoll, spin: o.spin, g: c.g}
	id, err := ShareID(rank, exchange, func() (UniqueID, error) {
		var id UniqueID
		err := c.host("ncclGetUniqueId", func() (err error) { id, err = lib.GetUniqueID(); return err })
		return id, err
	})
	if err != nil {
		w.stop()
		return nil, err
	}
	var h uintptr
	if err := c.host("ncclCommInitRank", func() (err error) { h, err = lib.CommInitRank(size, id, rank); return err }); err != nil {
		w.stop() // a thread stuck in init stays stuck: the rank is failing anyway
		return nil, fmt.Errorf("nccl: rank %d of %d: %w", rank, size, err)
	}
	c.setHandle(h)
	if err := c.checkShape(rank, size); err != nil {
		w.stop()
		return nil, err
	}
	if err := c.makeScratch(); err != nil {
		c.Abort(err)
		w.stop()
		return nil, err
	}
	return c, nil
}

// setHandle arms the guard to abort this communicator.
func (c *Comm) setHandle(h uintptr) {
	c.handle = h
	c.g = &guard{abort: func() error { return c.lib.CommAbort(h) }}
	c.wd.g = c.g
}

// checkShape asks NCCL for the communicator's rank and size and compares them.
func (c *Comm) checkShape(rank, size int) error {
	n, err := c.lib.CommCount(c.handle)
	if err != nil {
		return c.g.fail(err)
	}
	r, err := c.lib.CommUserRank(c.handle)
	if err != nil {
		return c.g.fail(err)
	}
	if n != size || r != rank {
		return c.g.fail(fmt.Errorf("nccl: communicator is rank %d of %d, want rank %d of %d", r, n, rank, size))
	}
	return nil
}

// makeScratch finds Barrier its buffer: the caller's, or 256 bytes from ncclMemAlloc.
func (c *Comm) makeScratch() error {
	if c.opts.scratch != 0 || c.size == 1 {
		c.scratch = c.opts.scratch
		return nil
	}
	if !c.lib.Has("ncclMemAlloc") {
		return nil // Barrier says what is missing
	}
	var p uintptr
	err := c.host("ncclMemAlloc", func() (err error) { p, err = c.lib.MemAlloc(256); return err })
	if err != nil {
		return fmt.Errorf("nccl: rank %d: barrier buffer: %w", c.rank, err)
	}
	c.scratch, c.ownScratch = p, true
	return nil
}

// Rank is this rank's index in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks.
func (c *Comm) Size() int { return c.size }

// Handle is the ncclComm_t.
func (c *Comm) Handle() uintptr { return c.handle }

// Lib is the NCCL library the communicator uses.
func (c *Comm) Lib() *Lib { return c.lib }

// Versions names NCCL's version ({"nccl":"2.28.3"}; comm.Versioned).
func (c *Comm) Versions() map[string]string {
	return map[string]string{"nccl": c.lib.VersionString()}
}

// Stream is the stream every operation is enqueued on.
func (c *Comm) Stream() Stream { return c.stream }

// Counters reports the bytes and messages this rank has sent to other ranks: a send
// to itself counts nothing; collectives count what NCCL's algorithms send (AllGather
// (n-1)|send|, ReduceScatter and AllToAll (n-1)/n|send|, AllReduce (ring) 2(n-1)/n|buf|).
func (c *Comm) Counters() comm.Counters {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counters
}

func (c *Comm) count(bytes, messages int64) {
	c.mu.Lock()
	c.counters.BytesSent += bytes
	c.counters.Messages += messages
	c.mu.Unlock()
}

// Abort aborts the communicator (ncclCommAbort, once) and fails every later call
// with reason: for the runtime, when it learns another rank has failed.
func (c *Comm) Abort(reason error) error {
	if reason == nil {
		reason = fmt.Errorf("nccl: rank %d: aborted", c.rank)
	}
	return c.g.fail(reason)
}

// usable says why the communicator cannot take op, or nil.
func (c *Comm) usable(op string) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("nccl: %s on a closed communicator", op)
	}
	return c.g.check(op)
}

// host runs one NCCL host call on the communicator's thread, watched: a call that
// blocks past the timeout (a peer that never arrives) aborts the communicator.
func (c *Comm) host(op string, fn func() error) error {
	cl := c.w.submit(fn)
	if err := c.wd.wait(c.ctx, op, &hostTarget{c: c, call: cl}); err != nil {
		return err
	}
	return cl.err
}

// complete waits, watched, until everything enqueued on the stream has finished.
func (c *Comm) complete(op string) error {
	return c.wd.wait(c.ctx, op, &streamTarget{c: c})
}

// run enqueues one operation and, outside a group, waits for it to complete.
func (c *Comm) run(op string, enqueue func() error) error {
	if err := c.usable(op); err != nil {
		return err
	}
	if c.depth > 0 {
		c.pending = append(c.pending, op)
		return c.host(op, enqueue)
	}
	if err := c.host(op, enqueue); err != nil {
		return err
	}
	return c.complete(op)
}

// Group issues fn's sends, receives and collectives together (ncclGroupStart/End)
// and returns when all have completed. Nested groups join the outer one. If fn or
// ncclGroupEnd fails, the communicator is aborted, since peers may be waiting on the
// part already enqueued.
func (c *Comm) Group(fn func() error) error {
	if err := c.usable("group"); err != nil {
		return err
	}
	if c.depth > 0 {
		return fn()
	}
	if err := c.host("ncclGroupStart", c.lib.GroupStart); err != nil {
		return err
	}
	c.depth, c.pending = 1, c.pending[:0]
	ferr := fn()
	c.depth = 0
	op := c.groupName()
	eerr := c.host(op, c.lib.GroupEnd)
	if ferr != nil {
		return c.g.fail(fmt.Errorf("nccl: rank %d: %s: %w; communicator aborted so peers do not wait on it", c.rank, op, ferr))
	}
	if eerr != nil {
		// NCCL refused the group (e.g. a receive from self with no matching send): what
		// was enqueued is undefined, so the communicator is aborted as for a failing fn.
		return c.g.fail(fmt.Errorf("nccl: rank %d: %s: %w; communicator aborted", c.rank, op, eerr))
	}
	if c.async {
		return nil // GroupAfter: completion is marked by an event, and Settle waits
	}
	return c.complete(op)
}

// StreamOrdered implements comm.Ordered: the communicator's stream waits for and
// records events (DeviceStream's does).
func (c *Comm) StreamOrdered() bool {
	_, ok := c.stream.(OrderedStream)
	return ok
}

// GroupAfter implements comm.Ordered: the communicator's stream waits (on the device)
// for after, fn's sends and receives are enqueued there as one group, and done is an
// event recorded after them; nothing waits on the host for their completion (Settle
// does, once, at the end of a method).
func (c *Comm) GroupAfter(after comm.Event, fn func() error) (comm.Event, error) {
	os, ok := c.stream.(OrderedStream)
	if !ok {
		return 0, fmt.Errorf("nccl: GroupAfter on a stream that cannot wait for events")
	}
	if err := c.usable("group"); err != nil {
		return 0, err
	}
	if after != 0 {
		if err := os.WaitEvent(uintptr(after)); err != nil {
			return 0, fmt.Errorf("nccl: waiting for the compute: %w", err)
		}
	}
	c.async = true
	err := c.Group(fn)
	c.async = false
	if err != nil {
		return 0, err
	}
	ev, err := os.RecordEvent()
	return comm.Event(ev), err
}

// Settle implements comm.Ordered: a watched wait until the stream has finished what was
// enqueued (a peer that never comes aborts the communicator at the timeout).
func (c *Comm) Settle() error {
	if err := c.usable("settle"); err != nil {
		return err
	}
	return c.complete("transfers issued by GroupAfter")
}

// groupName names the open group by what it holds (the first few operations).
func (c *Comm) groupName() string {
	const show = 6
	ops := c.pending
	more := ""
	if len(ops) > show {
		more = fmt.Sprintf(", and %d more", len(ops)-show)
		ops = ops[:show]
	}
	return "group [" + strings.Join(ops, ", ") + more + "]"
}

// hostTarget watches a host call.
type hostTarget struct {
	c    *Comm
	call *call
}

func (t *hostTarget) done() (bool, error)         { return t.call.done() }
func (t *hostTarget) asyncError() (Result, error) { return t.c.asyncError() }
func (t *hostTarget) describe(r Result) error     { return t.c.describe(r) }

// streamTarget watches the communicator's stream.
type streamTarget struct{ c *Comm }

func (t *streamTarget) done() (bool, error)         { return t.c.stream.Query() }
func (t *streamTarget) asyncError() (Result, error) { return t.c.asyncError() }
func (t *streamTarget) describe(r Result) error     { return t.c.describe(r) }

func (c *Comm) asyncError() (Result, error) {
	if c.handle == 0 {
		return Success, nil
	}
	return c.lib.CommGetAsyncError(c.handle)
}

func (c *Comm) describe(r Result) error {
	return &Error{Op: "ncclCommGetAsyncError", Code: r, Msg: c.lib.ErrorString(r), Last: c.lib.LastError(c.handle)}
}

// Close frees the communicator (ncclCommDestroy) and its thread. After a failure the
// communicator was already aborted (and freed by NCCL), and Close only stops using it.
//
// While ncclCommDestroy runs, nothing asks the communicator anything: the watchdog only
// waits for the call to return (within the timeout), since NCCL frees the object under
// it. (It used to poll ncclCommGetAsyncError meanwhile, which read the freed object,
// failed with "corrupted comm object detected", and aborted the freed communicator:
// the heap corruption of the one-rank `longca cp --backend nccl` runs.)
func (c *Comm) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	if c.g.failed() {
		c.w.stop()
		return nil
	}
	var err error
	if c.ownScratch {
		err = c.host("ncclMemFree", func() error { return c.lib.MemFree(c.scratch) })
	}
	c.g.startClose()
	h := c.handle
	if derr := c.host("ncclCommDestroy", func() error { return c.lib.CommDestroy(h) }); derr != nil && err == nil {
		err = derr
	}
	c.handle = 0
	c.w.stop()
	return err
}
