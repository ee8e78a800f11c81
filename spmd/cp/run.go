package cp

import (
	"errors"
	"fmt"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/kernels"
	"github.com/longca/longca/tensor"
)

// Run is one rank's state for a plan: the kernel, the communicator and its sub-groups
// (the rank's Ulysses group, ring, and the ring's inner and outer rings), and what the
// last Forward saved for Backward.
type Run struct {
	Plan   *Plan
	Kernel kernels.Kernel
	Comm   comm.Comm
	// U and R are this rank's place in the mesh.
	U, R int

	ulysses, ring, inner, outer comm.Comm
	saved                       *saved
	ops                         ops
	live                        [4]comm.Comm // the sub-groups while NoComm swaps them
}

// saved is the head-sharded forward state a Ulysses backward reuses, as autograd would.
type saved struct {
	q                      tensor.Tensor // the forward's q, to match Backward's
	qh, kh, vh, outh, lseh tensor.Tensor
	a                      *arena // owns the tensors above
}

// dropSaved releases what the last Forward saved.
func (r *Run) dropSaved() {
	if r.saved != nil {
		r.saved.a.release()
		r.saved = nil
	}
}

// Device is where the run's tensors live: the host for a CPU (or staged) kernel, the
// GPU for a device kernel. Method tensors handed to Forward and Backward must be there.
func (r *Run) Device() tensor.Device { return r.ops.device() }

// Upload copies a host tensor into a new tensor on the run's device (the host tensor
// itself on the host); Download copies one back. Free releases an uploaded tensor.
func (r *Run) Upload(h *tensor.Host) (tensor.Tensor, error) { return r.ops.upload(h) }

// Download copies t (from Upload or a method's output) into the host tensor dst.
func (r *Run) Download(dst *tensor.Host, t tensor.Tensor) error {
	if err := r.ops.fence(); err != nil {
		return err
	}
	return r.ops.download(dst, t)
}

// ReleaseCache gives the device memory the run's pool keeps for reuse back, so a
// measurement's peak starts from what is really held.
func (r *Run) ReleaseCache() { r.ops.trim() }

// Free releases tensors from Upload (nothing on the host).
func (r *Run) Free(ts ...tensor.Tensor) { r.ops.free(ts...) }

// NewRun splits c into the plan's sub-groups. It is collective: every rank calls it.
func NewRun(pl *Plan, k kernels.Kernel, c comm.Comm) (*Run, error) {
	cfg := pl.Config
	if c.Size() != cfg.Ranks {
		return nil, fmt.Errorf("%s: plan for %d ranks on a communicator of %d", pl.Method, cfg.Ranks, c.Size())
	}
	o, err := opsFor(k)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", pl.Method, err)
	}
	r := &Run{Plan: pl, Kernel: k, Comm: c, ops: o}
	r.U, r.R = pl.Coords(c.Rank())
	ws := cfg.Ring / cfg.Windows // ranks per window
	if r.ulysses, err = c.Split(r.R, r.U); err != nil {
		return nil, fmt.Errorf("%s: ulysses group: %w", pl.Method, err)
	}
	if r.ring, err = c.Split(r.U, r.R); err != nil {
		return nil, fmt.Errorf("%s: ring group: %w", pl.Method, err)
	}
	if r.inner, err = r.ring.Split(r.R/ws, r.R%ws); err != nil {
		return nil, fmt.Errorf("%s: inner ring: %w", pl.Method, err)
	}
	if r.outer, err = r.ring.Split(r.R%ws, r.R/ws); err != nil {
		return nil, fmt.Errorf("%s: outer ring: %w", pl.Method, err)
	}
	return r, nil
}

// SetNoComm turns every transfer of the run's methods off (on) or back on: ring
// exchanges, all-to-alls, all-gathers, reduce-scatters and dK/dV hops return at once
// without moving anything, while the kernels run the same steps (with the same
// sub-masks) on whatever the buffers hold. The outputs are then meaningless; the harness
// times a pass this way to measure what the transfers add to a step (overlap).
func (r *Run) SetNoComm(on bool) {
	subs := []*comm.Comm{&r.ulysses, &r.ring, &r.inner, &r.outer}
	if on == (r.live[0] != nil) {
		return
	}
	for i, c := range subs {
		if on {
			r.live[i], *c = *c, silent{*c}
		} else {
			*c, r.live[i] = r.live[i], nil
		}
	}
}

// Abort aborts the run's sub-groups (those that can be, comm.Aborter), so that peers
// waiting in them for this rank return; the world communicator the run was given is not
// touched. The run cannot be used afterwards; Close it.
func (r *Run) Abort(reason error) {
	r.SetNoComm(false)
	for _, c := range []comm.Comm{r.ulysses, r.ring, r.inner, r.outer} {
		if a, ok := c.(comm.Aborter); ok {
			_ = a.Abort(reason) // best effort: the rank is failing anyway
		}
	}
}

// Counters sums what this rank sent through the communicator and its sub-groups.
func (r *Run) Counters() comm.Counters {
	var t comm.Counters
	for _, c := range []comm.Comm{r.Comm, r.ulysses, r.ring, r.inner, r.outer} {
		x := c.Counters()
		t.BytesSent += x.BytesSent
		t.Messages += x.Messages
	}
	return t
}

// Close closes the sub-groups (not the communicator the run was given), children
// before the group they were split from, and gives the device memory the run cached
// back. Every sub-group is closed even when one fails; the errors are joined.
func (r *Run) Close() error {
	r.SetNoComm(false)
	r.dropSaved()
	r.ops.trim()
	var errs []error
	for _, c := range []comm.Comm{r.outer, r.inner, r.ring, r.ulysses} {
		if c == nil {
			continue
		}
		if err := c.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// async runs fn in a goroutine: the transfer that overlaps the current step's compute.
func async(fn func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	return ch
}

// exchange sends send to peer next and receives recv from peer prev in one group.
func exchange(c comm.Comm, next, prev int, send, recv []tensor.Tensor) error {
	return c.Group(func() error { return exchangeIn(c, next, prev, send, recv) })
}

// exchangeIn is the body of an exchange's group: the sends and receives.
func exchangeIn(c comm.Comm, next, prev int, send, recv []tensor.Tensor) error {
	for i := range send {
		if err := c.Send(send[i], next); err != nil {
			return err
		}
		if err := c.Recv(recv[i], prev); err != nil {
			return err
		}
	}
	return nil
}

// settle waits for the transfers the run's ordered sub-groups issued (comm.Ordered), so
// a peer that never comes fails this rank (at the communicator's timeout) instead of
// leaving its device waiting. A sub-group of one rank issued none: no wait. The methods
// settle after enqueuing all their work, since the wait is on the host and the device
// would idle while the host sees the transfers done and enqueues what follows.
func (r *Run) settle() error {
	for _, c := range []comm.Comm{r.inner, r.outer} {
		if c.Size() < 2 {
			continue
		}
		if oc, ok := c.(comm.Ordered); ok && oc.StreamOrdered() {
			if err := oc.Settle(); err != nil {
				return err
			}
		}
	}
	return nil
}

// settled is err, or else the settle's error, naming the method.
func (r *Run) settled(err error) error {
	if err != nil {
		return err
	}
	if err := r.settle(); err != nil {
		return fmt.Errorf("%s: %w", r.Plan.Method, err)
	}
	return nil
}

// silent is a sub-group whose data movement does nothing (Run.SetNoComm).
type silent struct{ comm.Comm }

func (silent) Group(fn func() error) error            { return fn() }
func (silent) Send(tensor.Tensor, int) error          { return nil }
func (silent) Recv(tensor.Tensor, int) error          { return nil }
func (silent) AllToAll(_, _ tensor.Tensor) error      { return nil }
func (silent) AllGather(_, _ tensor.Tensor) error     { return nil }
func (silent) ReduceScatter(_, _ tensor.Tensor) error { return nil }
func (silent) AllReduce(tensor.Tensor, comm.Op) error { return nil }
func (silent) Barrier() error                         { return nil }

// GroupAfter enqueues nothing: there is nothing to wait for.
func (silent) GroupAfter(comm.Event, func() error) (comm.Event, error) { return 0, nil }

// Settle has nothing to wait for.
func (silent) Settle() error { return nil }

// StreamOrdered is the sub-group's own, so the methods take the same path (events, or a
// host goroutine) with the transfers as without.
func (s silent) StreamOrdered() bool {
	oc, ok := s.Comm.(comm.Ordered)
	return ok && oc.StreamOrdered()
}
