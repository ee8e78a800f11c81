package local

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// runAll runs fn on every rank in its own goroutine and returns the errors by rank.
func runAll(cs []comm.Comm, fn func(c comm.Comm) error) []error {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = fn(c) }()
	}
	wg.Wait()
	return errs
}

func must(t *testing.T, errs []error) {
	t.Helper()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
}

// val is a value that names its origin: rank r, element i.
func val(r, i int) float64 { return float64(r*1000 + i) }

func filled(dt tensor.DType, n, r int) *tensor.Host {
	h := tensor.NewHost(dt, n, 2)
	for i := range 2 * n {
		h.Set(i, val(r, i))
	}
	return h
}

func TestSendRecvInOrder(t *testing.T) {
	cs := New(3, WithTimeout(5*time.Second))
	must(t, runAll(cs, func(c comm.Comm) error {
		if c.Rank() == 0 {
			for i := range 5 {
				b := tensor.NewHost(tensor.FP32, 4)
				b.Fill(float64(i))
				if err := c.Send(b, 2); err != nil {
					return err
				}
			}
			return nil
		}
		if c.Rank() == 2 {
			for i := range 5 {
				b := tensor.NewHost(tensor.FP32, 4)
				if err := c.Recv(b, 0); err != nil {
					return err
				}
				if b.At(3) != float64(i) {
					return fmt.Errorf("message %d arrived as %v", i, b.At(3))
				}
			}
		}
		return nil
	}))
	if got := cs[0].Counters(); got.BytesSent != 5*16 || got.Messages != 5 {
		t.Fatalf("rank 0 counters %+v, want 80 bytes in 5 messages", got)
	}
	if got := cs[2].Counters(); got.BytesSent != 0 {
		t.Fatalf("rank 2 sent %d bytes, want 0", got.BytesSent)
	}
}

func TestGroupRingCannotDeadlock(t *testing.T) {
	for _, n := range []int{1, 2, 5} {
		cs := New(n, WithTimeout(5*time.Second))
		must(t, runAll(cs, func(c comm.Comm) error {
			r, n := c.Rank(), c.Size()
			send, recv := filled(tensor.BF16, 3, r), tensor.NewHost(tensor.BF16, 3, 2)
			// Receive first, then send: only Group makes this order safe.
			err := c.Group(func() error {
				if err := c.Recv(recv, (r+n-1)%n); err != nil {
					return err
				}
				return c.Send(send, (r+1)%n)
			})
			if err != nil {
				return err
			}
			from := (r + n - 1) % n
			for i := range 6 {
				if recv.At(i) != tensor.Round(tensor.BF16, val(from, i)) {
					return fmt.Errorf("element %d = %v, want rank %d's", i, recv.At(i), from)
				}
			}
			return nil
		}))
	}
}

func TestCollectives(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		for _, dt := range []tensor.DType{tensor.FP32, tensor.FP64, tensor.BF16} {
			t.Run(fmt.Sprintf("n%d/%s", n, dt), func(t *testing.T) {
				cs := New(n, WithTimeout(5*time.Second))
				rows := 2 * n // two rows of two elements per block
				must(t, runAll(cs, func(c comm.Comm) error {
					r := c.Rank()
					// AllToAll: block b of rank r goes to rank b.
					send, recv := filled(dt, rows, r), tensor.NewHost(dt, rows, 2)
					if err := c.AllToAll(send, recv); err != nil {
						return err
					}
					per := 2 * rows / n // elements per block
					for s := range n {
						for j := range per {
							want := tensor.Round(dt, val(s, r*per+j))
							if got := recv.At(s*per + j); got != want {
								return fmt.Errorf("alltoall: block %d element %d = %v, want %v", s, j, got, want)
							}
						}
					}
					// AllGather.
					mine := filled(dt, 2, r)
					all := tensor.NewHost(dt, 2*n, 2)
					if err := c.AllGather(mine, all); err != nil {
						return err
					}
					for s := range n {
						for j := range 4 {
							if got, want := all.At(4*s+j), tensor.Round(dt, val(s, j)); got != want {
								return fmt.Errorf("allgather: rank %d element %d = %v, want %v", s, j, got, want)
							}
						}
					}
					// ReduceScatter (sum) of small integers: exact in every dtype.
					rs := tensor.NewHost(dt, rows, 2)
					for i := range 2 * rows {
						rs.Set(i, float64(r+1)*float64(i%7))
					}
					part := tensor.NewHost(dt, rows/n, 2)
					if err := c.ReduceScatter(rs, part); err != nil {
						return err
					}
					tri := float64(n * (n + 1) / 2)
					for j := range per {
						if got, want := part.At(j), tri*float64((r*per+j)%7); got != want {
							return fmt.Errorf("reducescatter: element %d = %v, want %v", j, got, want)
						}
					}
					// AllReduce sum and max, with -inf kept as -inf.
					ar := tensor.NewHost(dt, 3)
					ar.SetFloat64s([]float64{float64(r), math.Inf(-1), float64(-r)})
					mx := ar.Clone()
					if err := c.AllReduce(ar, comm.Sum); err != nil {
						return err
					}
					if err := c.AllReduce(mx, comm.Max); err != nil {
						return err
					}
					if ar.At(0) != tri-float64(n) || !math.IsInf(ar.At(1), -1) || mx.At(0) != float64(n-1) || mx.At(2) != 0 || !math.IsInf(mx.At(1), -1) {
						return fmt.Errorf("allreduce: sum %v max %v", ar.Float64s(), mx.Float64s())
					}
					return c.Barrier()
				}))
				// Counters: alltoall 3/4... every collective sends to the n-1 others.
				bs := int64(dt.Size())
				blk := int64(2*rows/n) * bs
				want := int64(n-1) * (blk + 4*bs + blk + 3*bs + 3*bs)
				for r, c := range cs {
					if got := c.Counters().BytesSent; got != want {
						t.Errorf("rank %d counted %d bytes, want %d", r, got, want)
					}
				}
			})
		}
	}
}

func TestSplitMesh(t *testing.T) {
	// 8 ranks as 2 x 4: row groups by r/4, column groups by r%4, reversed key order.
	cs := New(8, WithTimeout(5*time.Second))
	must(t, runAll(cs, func(c comm.Comm) error {
		r := c.Rank()
		row, err := c.Split(r/4, -r)
		if err != nil {
			return err
		}
		col, err := c.Split(r%4, r)
		if err != nil {
			return err
		}
		if row.Size() != 4 || col.Size() != 2 {
			return fmt.Errorf("sizes %d, %d", row.Size(), col.Size())
		}
		if row.Rank() != 3-r%4 || col.Rank() != r/4 {
			return fmt.Errorf("rank %d is row rank %d, col rank %d", r, row.Rank(), col.Rank())
		}
		// Sum of world ranks in each group, through each group alone.
		b := tensor.NewHost(tensor.FP64, 1)
		b.Set(0, float64(r))
		if err := row.AllReduce(b, comm.Sum); err != nil {
			return err
		}
		if want := float64(16*(r/4) + 6); b.At(0) != want {
			return fmt.Errorf("row sum %v, want %v", b.At(0), want)
		}
		b.Set(0, float64(r))
		if err := col.AllReduce(b, comm.Sum); err != nil {
			return err
		}
		if want := float64(2*(r%4) + 4); b.At(0) != want {
			return fmt.Errorf("col sum %v, want %v", b.At(0), want)
		}
		// Point to point inside the sub-group uses sub-group ranks.
		if col.Rank() == 0 {
			return col.Send(b, 1)
		}
		return col.Recv(b, 0)
	}))
}

func TestMissingRankTimesOut(t *testing.T) {
	cs := New(4, WithTimeout(200*time.Millisecond))
	t0 := time.Now()
	errs := runAll(cs, func(c comm.Comm) error {
		if c.Rank() == 2 {
			return nil // never arrives
		}
		b := tensor.NewHost(tensor.FP32, 4)
		return c.AllReduce(b, comm.Sum)
	})
	if time.Since(t0) > 3*time.Second {
		t.Fatalf("took %v", time.Since(t0))
	}
	for r, err := range errs {
		if r == 2 {
			continue
		}
		var pe *comm.PeerError
		if !errors.As(err, &pe) || pe.Rank != 2 || !errors.Is(err, comm.ErrTimeout) {
			t.Fatalf("rank %d: got %v, want a timeout naming rank 2", r, err)
		}
	}
	// A Recv nobody answers also times out.
	err := cs[0].Recv(tensor.NewHost(tensor.FP32, 1), 3)
	if !errors.Is(err, comm.ErrTimeout) {
		t.Fatalf("recv: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	cs := New(2, WithTimeout(time.Second))
	c := cs[0]
	if err := c.Send(tensor.NewHost(tensor.FP32, 1), 2); err == nil {
		t.Error("send to rank 2 of 2 accepted")
	}
	if err := c.AllToAll(tensor.NewHost(tensor.FP32, 3), tensor.NewHost(tensor.FP32, 3)); err == nil {
		t.Error("alltoall of 3 rows over 2 ranks accepted")
	}
	if err := c.AllGather(tensor.NewHost(tensor.FP32, 2), tensor.NewHost(tensor.FP32, 2)); err == nil {
		t.Error("allgather into a too small buffer accepted")
	}
	// A size mismatch between a sent message and the receive buffer is an error.
	errs := runAll(cs, func(c comm.Comm) error {
		if c.Rank() == 0 {
			return c.Send(tensor.NewHost(tensor.FP32, 3), 1)
		}
		return c.Recv(tensor.NewHost(tensor.FP32, 2), 0)
	})
	if errs[1] == nil {
		t.Error("recv of 12 bytes into 8 accepted")
	}
	_ = c.Close()
	if err := c.Barrier(); err == nil {
		t.Error("barrier on a closed rank accepted")
	}
}

func TestRandomAllReduceMatchesSerialSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 5
	in := make([][]float64, n)
	want := make([]float64, 64)
	for r := range in {
		in[r] = make([]float64, 64)
		for i := range in[r] {
			in[r][i] = rng.NormFloat64()
			want[i] += in[r][i]
		}
	}
	cs := New(n)
	must(t, runAll(cs, func(c comm.Comm) error {
		b := tensor.NewHost(tensor.FP64, 64)
		b.SetFloat64s(in[c.Rank()])
		if err := c.AllReduce(b, comm.Sum); err != nil {
			return err
		}
		for i, v := range b.Float64s() {
			if math.Abs(v-want[i]) > 1e-12 {
				return fmt.Errorf("element %d = %v, want %v", i, v, want[i])
			}
		}
		return nil
	}))
}

// countingMover is a Mover of another kind (as a device variant would be): the
// communicator must move every byte through it.
type countingMover struct {
	HostMover
	mu             sync.Mutex
	staged, placed int64
}

func (m *countingMover) Stage(src tensor.Tensor, off, n int64) (Message, error) {
	m.mu.Lock()
	m.staged += n
	m.mu.Unlock()
	return m.HostMover.Stage(src, off, n)
}

func (m *countingMover) Put(dst tensor.Tensor, off int64, msg Message) error {
	m.mu.Lock()
	m.placed += msg.Len()
	m.mu.Unlock()
	return m.HostMover.Put(dst, off, msg)
}

func TestCustomMover(t *testing.T) {
	mv := &countingMover{}
	cs := New(3, WithMover(mv), WithTimeout(5*time.Second))
	must(t, runAll(cs, func(c comm.Comm) error {
		send, recv := filled(tensor.FP32, 3, c.Rank()), tensor.NewHost(tensor.FP32, 3, 2)
		if err := c.AllToAll(send, recv); err != nil {
			return err
		}
		if got, want := recv.At(0), val(0, 2*c.Rank()); got != want {
			return fmt.Errorf("alltoall through the mover: %v, want %v", got, want)
		}
		return nil
	}))
	// Each rank stages its 3 blocks of 8 bytes (the self block too) and places 3.
	if mv.staged != 3*3*8 || mv.placed != 3*3*8 {
		t.Fatalf("mover staged %d and placed %d bytes, want 72 and 72", mv.staged, mv.placed)
	}
}

// TestAbortWakesTheGroup: rank 0 of a sub-group fails and aborts it while its peers
// wait there (a receive, an all-gather); they return at once with comm.ErrAborted,
// later calls on the sub-group fail, and the world the sub-group was split from still
// works (the CP harness agrees on the case's status through it).
func TestAbortWakesTheGroup(t *testing.T) {
	const n = 3
	world := New(n, WithTimeout(time.Minute))
	subs := make([]comm.Comm, n)
	must(t, runAll(world, func(c comm.Comm) error {
		s, err := c.Split(0, c.Rank())
		subs[c.Rank()] = s
		return err
	}))
	start := time.Now()
	errs := runAll(world, func(c comm.Comm) error {
		r := c.Rank()
		s := subs[r]
		var err error
		switch r {
		case 0:
			time.Sleep(20 * time.Millisecond)
			return s.(comm.Aborter).Abort(errors.New("out of memory"))
		case 1:
			err = s.Recv(tensor.NewHost(tensor.FP32, 4), 0)
		case 2:
			err = s.AllGather(tensor.NewHost(tensor.FP32, 2), tensor.NewHost(tensor.FP32, 6))
		}
		if !errors.Is(err, comm.ErrAborted) || !strings.Contains(err.Error(), "out of memory") {
			return fmt.Errorf("rank %d: %v, want an abort naming the reason", r, err)
		}
		if err := s.Barrier(); !errors.Is(err, comm.ErrAborted) {
			return fmt.Errorf("rank %d: barrier after the abort: %v", r, err)
		}
		return nil
	})
	must(t, errs)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the waiting ranks returned after %v", took)
	}
	must(t, runAll(world, func(c comm.Comm) error { return c.Barrier() }))
}

// TestRunReleasesThePeersOfAFailedRank: a rank whose fn fails in Run is gone, and its
// peers waiting for it, in the world or in a sub-group, fail at once instead of after the
// timeout (an in-process cp rank that could not create its results file held the others
// for the whole --timeout, deaf to Ctrl-C); Run returns the failed rank's error alone.
func TestRunReleasesThePeersOfAFailedRank(t *testing.T) {
	start := time.Now()
	err := Run(3, func(c comm.Comm) error {
		sub, err := c.Split(0, c.Rank())
		if err != nil {
			return err
		}
		switch c.Rank() {
		case 1:
			return errors.New("results file exists")
		case 2:
			return sub.AllReduce(tensor.NewHost(tensor.FP32, 2), comm.Sum)
		}
		return c.Barrier()
	}, WithTimeout(20*time.Second))
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Run returned after %v; want the peers released at once", took)
	}
	if err == nil || err.Error() != "rank 1: results file exists" {
		t.Errorf("Run: %v; want rank 1's failure alone", err)
	}
}
