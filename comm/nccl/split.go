package nccl

import (
	"fmt"

	"github.com/longca/longca/comm"
)

// Split makes sub-communicators (ncclCommSplit, NCCL 2.18 and later): ranks with the
// same color form one, ordered by key. The child enqueues on the parent's stream and
// runs its NCCL calls on a thread of its own. Every rank must call it; a rank with a
// negative color still takes part (as NCCL_SPLIT_NOCOLOR) but gets an error, not a
// communicator.
func (c *Comm) Split(color, key int) (comm.Comm, error) {
	if err := c.usable("split"); err != nil {
		return nil, err
	}
	ncolor := color
	if color < 0 {
		ncolor = SplitNoColor
	}
	var h uintptr
	op := fmt.Sprintf("ncclCommSplit (color %d, key %d)", color, key)
	if err := c.host(op, func() (err error) { h, err = c.lib.CommSplit(c.handle, ncolor, key); return err }); err != nil {
		return nil, err
	}
	if color < 0 {
		return nil, fmt.Errorf("nccl: split: rank %d gave color %d and joined no group; use a color >= 0", c.rank, color)
	}
	if h == 0 {
		return nil, fmt.Errorf("nccl: %s returned no communicator on rank %d", op, c.rank)
	}
	w, err := newWorker(c.opts.bind)
	if err != nil {
		c.lib.CommAbort(h)
		return nil, fmt.Errorf("nccl: split: setting up the NCCL thread: %w", err)
	}
	child := &Comm{lib: c.lib, stream: c.stream, ctx: c.ctx, opts: c.opts, w: w, scratch: c.scratch}
	child.wd = watchdog{timeout: c.wd.timeout, maxPoll: c.wd.maxPoll, spin: c.wd.spin}
	child.setHandle(h)
	n, err := c.lib.CommCount(h)
	if err != nil {
		return nil, child.g.fail(err)
	}
	r, err := c.lib.CommUserRank(h)
	if err != nil {
		return nil, child.g.fail(err)
	}
	child.rank, child.size = r, n
	return child, nil
}
