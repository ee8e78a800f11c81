package nccl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// newFakeWorld starts n ranks of the fake NCCL in this process, one goroutine each,
// sharing the id through a channel exchange.
func newFakeWorld(t *testing.T, n int, path string, timeout time.Duration, opts ...Option) []*Comm {
	t.Helper()
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	x := newChanExchange()
	comms := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			comms[r], errs[r] = New(context.Background(), r, n, x.forRank(r), doneStream, timeout,
				append([]Option{WithLibrary(path)}, opts...)...)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range comms {
			c.Close()
		}
	})
	return comms
}

// onAll runs fn on every rank at once and joins the ranks' errors.
func onAll(comms []*Comm, fn func(c *Comm) error) error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() {
			if err := fn(c); err != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// val is element i of rank r's data: small integers, exact in every dtype and sum.
func val(r, i int) float64 { return float64((r*7+i)%13 - 6) }

func fillDev(dt tensor.DType, shape []int, f func(i int) float64) hostDev {
	h := tensor.NewHost(dt, shape...)
	for i := range h.Numel() {
		h.Set(i, f(i))
	}
	return hostDev{h}
}

func check(what string, got hostDev, want func(i int) float64) error {
	for i := range got.Numel() {
		if v, w := got.At(i), want(i); v != w {
			return fmt.Errorf("%s: element %d = %v, want %v", what, i, v, w)
		}
	}
	return nil
}

func TestWorldOperations(t *testing.T) {
	const rows, cols = 3, 5
	blk := rows * cols
	for _, path := range []string{fakeLib, fakeLibNoA2A} {
		for _, n := range []int{2, 3, 4} {
			comms := newFakeWorld(t, n, path, 20*time.Second)
			for _, dt := range []tensor.DType{tensor.BF16, tensor.FP16, tensor.FP32, tensor.FP64} {
				err := onAll(comms, func(c *Comm) error {
					r := c.Rank()
					next, prev := (r+1)%n, (r+n-1)%n
					src := fillDev(dt, []int{rows, cols}, func(i int) float64 { return val(r, i) })
					dst := fillDev(dt, []int{rows, cols}, func(int) float64 { return 99 })
					if err := c.Group(func() error {
						if err := c.Send(src, next); err != nil {
							return err
						}
						return c.Recv(dst, prev)
					}); err != nil {
						return err
					}
					ag := fillDev(dt, []int{n * rows, cols}, func(int) float64 { return 99 })
					if err := c.AllGather(src, ag); err != nil {
						return err
					}
					a2aSrc := fillDev(dt, []int{n * rows, cols}, func(i int) float64 { return val(r, i) })
					a2a := fillDev(dt, []int{n * rows, cols}, func(int) float64 { return 99 })
					if err := c.AllToAll(a2aSrc, a2a); err != nil {
						return err
					}
					rs := fillDev(dt, []int{rows, cols}, func(int) float64 { return 99 })
					if err := c.ReduceScatter(a2aSrc, rs); err != nil {
						return err
					}
					sum := fillDev(dt, []int{rows, cols}, func(i int) float64 { return val(r, i) })
					mx := fillDev(dt, []int{rows, cols}, func(i int) float64 { return val(r, i) })
					if err := c.AllReduce(sum, comm.Sum); err != nil {
						return err
					}
					if err := c.AllReduce(mx, comm.Max); err != nil {
						return err
					}
					if err := c.Barrier(); err != nil {
						return err
					}
					over := func(f func(acc, v float64) float64, i int) float64 {
						acc := val(0, i)
						for q := 1; q < n; q++ {
							acc = f(acc, val(q, i))
						}
						return acc
					}
					add := func(a, b float64) float64 { return a + b }
					bigger := func(a, b float64) float64 { return max(a, b) }
					return errors.Join(
						check("ring send/recv", dst, func(i int) float64 { return val(prev, i) }),
						check("allgather", ag, func(i int) float64 { return val(i/blk, i%blk) }),
						check("alltoall", a2a, func(i int) float64 { return val(i/blk, r*blk+i%blk) }),
						check("reducescatter", rs, func(i int) float64 { return over(add, r*blk+i) }),
						check("allreduce sum", sum, func(i int) float64 { return over(add, i) }),
						check("allreduce max", mx, func(i int) float64 { return over(bigger, i) }),
					)
				})
				if err != nil {
					t.Fatalf("%s, %d ranks, %v: %v", path, n, dt, err)
				}
			}
		}
	}
}

func TestWorldCounters(t *testing.T) {
	const n = 4
	comms := newFakeWorld(t, n, fakeLib, 20*time.Second)
	dt := tensor.FP32
	err := onAll(comms, func(c *Comm) error {
		r := c.Rank()
		step := func(what string, wantBytes, wantMsgs int64, fn func() error) error {
			before := c.Counters()
			if err := fn(); err != nil {
				return err
			}
			d := c.Counters()
			if db, dm := d.BytesSent-before.BytesSent, d.Messages-before.Messages; db != wantBytes || dm != wantMsgs {
				return fmt.Errorf("%s counted %d bytes, %d messages; want %d, %d", what, db, dm, wantBytes, wantMsgs)
			}
			return nil
		}
		one := fillDev(dt, []int{8, 4}, func(int) float64 { return 1 })
		all := fillDev(dt, []int{n * 8, 4}, func(int) float64 { return 1 })
		out := fillDev(dt, []int{n * 8, 4}, func(int) float64 { return 0 })
		self := fillDev(dt, []int{8, 4}, func(int) float64 { return 0 })
		b := one.Bytes() // 128
		return errors.Join(
			step("ring send", b, 1, func() error {
				return c.Group(func() error {
					if err := c.Send(one, (r+1)%n); err != nil {
						return err
					}
					return c.Recv(self, (r+n-1)%n)
				})
			}),
			step("self send", 0, 0, func() error {
				return c.Group(func() error {
					if err := c.Send(one, r); err != nil {
						return err
					}
					return c.Recv(self, r)
				})
			}),
			step("allgather", (n-1)*b, n-1, func() error { return c.AllGather(one, out) }),
			step("alltoall", (n-1)*b, n-1, func() error { return c.AllToAll(all, out) }),
			step("reducescatter", (n-1)*b, n-1, func() error { return c.ReduceScatter(all, self) }),
			step("allreduce", 2*(n-1)*all.Bytes()/n, 2*(n-1), func() error { return c.AllReduce(all, comm.Sum) }),
		)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestWorldSplit(t *testing.T) {
	const n = 5
	comms := newFakeWorld(t, n, fakeLib, 20*time.Second)
	err := onAll(comms, func(c *Comm) error {
		r := c.Rank()
		sub, err := c.Split(r%2, -r) // by parity, in reverse rank order
		if err != nil {
			return err
		}
		defer sub.Close()
		size := (n - r%2 + 1) / 2
		if sub.Size() != size || sub.Rank() != size-1-r/2 {
			return fmt.Errorf("split gave rank %d of %d, want %d of %d", sub.Rank(), sub.Size(), size-1-r/2, size)
		}
		buf := fillDev(tensor.FP32, []int{4}, func(int) float64 { return float64(r) })
		if err := sub.AllReduce(buf, comm.Max); err != nil {
			return err
		}
		top := r % 2
		for q := range n {
			if q%2 == r%2 {
				top = q
			}
		}
		if err := check("max over the split", buf, func(int) float64 { return float64(top) }); err != nil {
			return err
		}
		return sub.Barrier()
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWorldMissingPeer: rank 1 never joins an all-reduce, so rank 0 waits on it (in the
// host here; on the device with NCCL). The watchdog must abort rank 0's communicator
// after the timeout, once, with an error naming the operation.
func TestWorldMissingPeer(t *testing.T) {
	const timeout = 50 * time.Millisecond
	comms := newFakeWorld(t, 2, fakeLib, timeout)
	l := comms[0].Lib()
	aborts := fakeCounter(t, l, "fake_aborts")
	buf := fillDev(tensor.FP32, []int{16}, func(int) float64 { return 1 })
	start := time.Now()
	err := comms[0].AllReduce(buf, comm.Sum)
	took := time.Since(start)
	if !errors.Is(err, comm.ErrTimeout) || !strings.Contains(err.Error(), "ncclAllReduce (sum)") || !strings.Contains(err.Error(), "aborted") {
		t.Errorf("missing peer: %v", err)
	}
	if took < timeout || took > timeout+3*time.Second {
		t.Errorf("gave up after %v with a %v timeout", took, timeout)
	}
	if err := comms[0].Barrier(); err == nil || !strings.Contains(err.Error(), "aborted communicator") {
		t.Errorf("after the abort: %v", err)
	}
	if got := fakeCounter(t, l, "fake_aborts") - aborts; got != 1 {
		t.Errorf("%d aborts, want 1", got)
	}
}
