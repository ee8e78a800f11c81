//go:build gpu

package nccl

// GPU checks, for a machine with CUDA and NCCL (build: go test -c -tags gpu -o
// bin/nccl.test ./comm/nccl; run: comm/nccl/gpucheck.sh). With no launcher the world is
// one rank (self send/receive, every collective); under mpirun -np N (one GPU per rank)
// the same tests run over N ranks.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/comm/commtest"
	"github.com/longca/longca/internal/cuda"
	"github.com/longca/longca/tensor"
)

// gpuRank is this process's place in an mpirun world (rank 0 of 1 without one), read
// from Open MPI's environment: comm/nccl does not depend on spmd's launcher discovery.
type gpuRank struct{ rank, size, local int }

func gpuRankOf(t *testing.T) gpuRank {
	t.Helper()
	r := gpuRank{size: 1}
	for _, v := range []struct {
		name string
		dst  *int
	}{{"OMPI_COMM_WORLD_RANK", &r.rank}, {"OMPI_COMM_WORLD_SIZE", &r.size}, {"OMPI_COMM_WORLD_LOCAL_RANK", &r.local}} {
		if s := os.Getenv(v.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("%s=%q", v.name, s)
			}
			*v.dst = n
		}
	}
	return r
}

// fileExchange shares rank 0's id through a file in $LONGCA_NCCL_TEST_DIR (gpucheck.sh
// makes one per run): the bootstrap of the multi-rank GPU checks.
func fileExchange(t *testing.T, r gpuRank) Exchange {
	if r.size == 1 {
		return func(id []byte) ([]byte, error) { return id, nil }
	}
	dir := os.Getenv("LONGCA_NCCL_TEST_DIR")
	if dir == "" {
		t.Fatal("several ranks: set LONGCA_NCCL_TEST_DIR to a folder every rank sees (gpucheck.sh does)")
	}
	path := filepath.Join(dir, "nccl-id")
	return func(id []byte) ([]byte, error) {
		if r.rank == 0 {
			if err := os.WriteFile(path+".tmp", id, 0o644); err != nil {
				return nil, err
			}
			return id, os.Rename(path+".tmp", path)
		}
		for start := time.Now(); time.Since(start) < time.Minute; time.Sleep(10 * time.Millisecond) {
			if b, err := os.ReadFile(path); err == nil && len(b) == len(id) {
				return b, nil
			}
		}
		return nil, fmt.Errorf("rank %d: no NCCL id in %s after a minute", r.rank, path)
	}
}

// gpuWorld opens this rank's GPU (the local rank's) and the world's communicator.
func gpuWorld(t *testing.T, opts ...Option) (*Comm, *cuda.Device, gpuRank) {
	t.Helper()
	w := gpuRankOf(t)
	if len(opts) > 0 && w.size != 1 {
		t.Fatalf("options are only tested with one rank, have %d", w.size)
	}
	g, err := cuda.Open(w.local)
	if err != nil {
		t.Fatal(err)
	}
	s, err := DeviceStream(g)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(context.Background(), w.rank, w.size, fileExchange(t, w), s, 2*time.Minute,
		append([]Option{WithThreadSetup(DeviceThread(g))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c, g, w
}

func upload(t *testing.T, g *cuda.Device, dt tensor.DType, shape []int, f func(i int) float64) *cuda.Buffer {
	t.Helper()
	h := tensor.NewHost(dt, shape...)
	for i := range h.Numel() {
		h.Set(i, f(i))
	}
	b, err := g.AllocBuffer(dt, shape...)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CopyIn(b, h); err != nil {
		t.Fatal(err)
	}
	return b
}

func download(t *testing.T, g *cuda.Device, b *cuda.Buffer) []float64 {
	t.Helper()
	h := tensor.NewHost(b.DType(), b.Shape()...)
	if err := g.CopyOut(h, b); err != nil {
		t.Fatal(err)
	}
	return h.Float64s()
}

func expect(t *testing.T, what string, got []float64, want func(i int) float64) {
	t.Helper()
	bad := 0
	for i, v := range got {
		if w := want(i); v != w {
			if bad < 3 {
				t.Errorf("%s: element %d = %v, want %v", what, i, v, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d elements wrong", what, bad, len(got))
	}
}

func TestGPUOperations(t *testing.T) {
	c, g, _ := gpuWorld(t)
	defer c.Close()
	r, n := c.Rank(), c.Size()
	t.Logf("NCCL %s (%s), rank %d of %d on %s, ncclAlltoAll %v", c.Lib().VersionString(), c.Lib().Path(), r, n, g.Name(), c.Lib().Has("ncclAlltoAll"))
	const rows, cols = 4, 33 // per rank block: odd sizes catch stride slips
	for _, dt := range []tensor.DType{tensor.BF16, tensor.FP16, tensor.FP32, tensor.FP64} {
		name := dt.String()
		blk := rows * cols
		// Ring exchange in a group (with one rank: a send to itself).
		next, prev := (r+1)%n, (r+n-1)%n
		src := upload(t, g, dt, []int{rows, cols}, func(i int) float64 { return val(r, i) })
		dst := upload(t, g, dt, []int{rows, cols}, func(int) float64 { return 99 })
		if err := c.Group(func() error {
			if err := c.Send(src, next); err != nil {
				return err
			}
			return c.Recv(dst, prev)
		}); err != nil {
			t.Fatalf("%s ring send/recv: %v", name, err)
		}
		expect(t, name+" ring send/recv", download(t, g, dst), func(i int) float64 { return val(prev, i) })

		// AllGather: block q of recv is rank q's send.
		ag := upload(t, g, dt, []int{n * rows, cols}, func(int) float64 { return 99 })
		if err := c.AllGather(src, ag); err != nil {
			t.Fatalf("%s allgather: %v", name, err)
		}
		expect(t, name+" allgather", download(t, g, ag), func(i int) float64 { return val(i/blk, i%blk) })

		// AllToAll, by ncclAlltoAll where present: block q of rank r's send is val(r, q*blk+i);
		// rank r receives block r of every rank q.
		a2aSrc := upload(t, g, dt, []int{n * rows, cols}, func(i int) float64 { return val(r, i) })
		a2a := upload(t, g, dt, []int{n * rows, cols}, func(int) float64 { return 99 })
		if err := c.AllToAll(a2aSrc, a2a); err != nil {
			t.Fatalf("%s alltoall: %v", name, err)
		}
		expect(t, name+" alltoall", download(t, g, a2a), func(i int) float64 { return val(i/blk, r*blk+i%blk) })

		// ReduceScatter: rank r keeps block r of the sum over ranks.
		rs := upload(t, g, dt, []int{rows, cols}, func(int) float64 { return 99 })
		if err := c.ReduceScatter(a2aSrc, rs); err != nil {
			t.Fatalf("%s reducescatter: %v", name, err)
		}
		expect(t, name+" reducescatter", download(t, g, rs), func(i int) float64 {
			s := 0.0
			for q := range n {
				s += val(q, r*blk+i)
			}
			return s
		})

		// AllReduce, sum and max, in place.
		for _, op := range []comm.Op{comm.Sum, comm.Max} {
			ar := upload(t, g, dt, []int{rows, cols}, func(i int) float64 { return val(r, i) })
			if err := c.AllReduce(ar, op); err != nil {
				t.Fatalf("%s allreduce %v: %v", name, op, err)
			}
			expect(t, name+" allreduce "+op.String(), download(t, g, ar), func(i int) float64 {
				s := val(0, i)
				for q := 1; q < n; q++ {
					if op == comm.Sum {
						s += val(q, i)
					} else {
						s = max(s, val(q, i))
					}
				}
				return s
			})
			g.Free(ar)
		}
		for _, b := range []*cuda.Buffer{src, dst, ag, a2aSrc, a2a, rs} {
			g.Free(b)
		}
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	// Counters: per rank, what NCCL's algorithms send to other ranks.
	before := c.Counters()
	buf := upload(t, g, tensor.FP32, []int{n * 8}, func(i int) float64 { return 1 })
	if err := c.AllReduce(buf, comm.Sum); err != nil {
		t.Fatal(err)
	}
	if d := c.Counters().BytesSent - before.BytesSent; d != 2*int64(n-1)*buf.Bytes()/int64(n) {
		t.Errorf("allreduce of %d bytes over %d ranks counted %d bytes", buf.Bytes(), n, d)
	}
	expect(t, "allreduce of ones", download(t, g, buf), func(int) float64 { return float64(n) })
}

// TestGPUCommTable runs the shared comm test table (host tensors, staged through the
// GPU) over NCCL, as `longca selftest comm --backend nccl` does.
func TestGPUCommTable(t *testing.T) {
	c, g, _ := gpuWorld(t)
	defer c.Close()
	failed := commtest.RunRank(NewStaged(c, g), func(name string, err error) {
		if err != nil {
			t.Errorf("rank %d: %s: %v", c.Rank(), name, err)
		}
	})
	t.Logf("rank %d of %d: %d of %d cases failed", c.Rank(), c.Size(), failed, len(commtest.Cases()))
}

func TestGPUSplit(t *testing.T) {
	c, g, _ := gpuWorld(t)
	defer c.Close()
	r := c.Rank()
	sub, err := c.Split(r%2, -r) // two groups by parity, in reverse rank order
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	want := (c.Size() - r%2 + 1) / 2
	if sub.Size() != want || sub.Rank() != want-1-r/2 {
		t.Errorf("rank %d: split gave rank %d of %d, want %d of %d", r, sub.Rank(), sub.Size(), want-1-r/2, want)
	}
	buf := upload(t, g, tensor.FP32, []int{16}, func(int) float64 { return float64(r) })
	if err := sub.AllReduce(buf, comm.Max); err != nil {
		t.Fatal(err)
	}
	top := r % 2 // the largest rank of my parity
	for q := range c.Size() {
		if q%2 == r%2 {
			top = q
		}
	}
	expect(t, "allreduce max on the split", download(t, g, buf), func(int) float64 { return float64(top) })
	if err := sub.Barrier(); err != nil {
		t.Error(err)
	}
}

func TestGPUAllToAllBySendRecv(t *testing.T) {
	c, g, _ := gpuWorld(t, WithP2PAllToAll())
	defer c.Close()
	src := upload(t, g, tensor.BF16, []int{6, 10}, func(i int) float64 { return val(0, i) })
	dst := upload(t, g, tensor.BF16, []int{6, 10}, func(int) float64 { return 99 })
	if err := c.AllToAll(src, dst); err != nil {
		t.Fatal(err)
	}
	expect(t, "alltoall by send/recv", download(t, g, dst), func(i int) float64 { return val(0, i) })
}

// TestGPUWatchdogHungRecv posts a receive that no send matches: NCCL enqueues it and
// the stream never drains. The watchdog must abort the communicator within the timeout
// and name the operation. Run it alone (gpucheck.sh does): an aborted kernel may leave
// the device unusable for the rest of the process.
func TestGPUWatchdogHungRecv(t *testing.T) {
	if w := gpuRankOf(t); w.size != 1 {
		t.Fatalf("run with one rank (world of %d)", w.size)
	}
	g, err := cuda.Open(0)
	if err != nil {
		t.Fatal(err)
	}
	s, err := DeviceStream(g)
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 3 * time.Second
	c, err := New(context.Background(), 0, 1, func(id []byte) ([]byte, error) { return id, nil }, s, timeout, WithThreadSetup(DeviceThread(g)))
	if err != nil {
		t.Fatal(err)
	}
	buf := upload(t, g, tensor.FP32, []int{1024}, func(int) float64 { return 0 })
	start := time.Now()
	err = c.Group(func() error { return c.Recv(buf, 0) })
	took := time.Since(start)
	t.Logf("after %v: %v", took, err)
	if err == nil {
		t.Fatal("an unmatched receive completed")
	}
	if !errors.Is(err, comm.ErrTimeout) && !strings.Contains(err.Error(), "nccl") {
		t.Errorf("error neither a timeout nor NCCL's: %v", err)
	}
	if !strings.Contains(err.Error(), "ncclRecv") && !strings.Contains(err.Error(), "ncclGroupEnd") {
		t.Errorf("error does not name the operation: %v", err)
	}
	if took > timeout+30*time.Second {
		t.Errorf("took %v with a %v timeout", took, timeout)
	}
	start = time.Now()
	if err := c.Barrier(); err == nil || time.Since(start) > time.Second {
		t.Errorf("after the abort: %v in %v", err, time.Since(start))
	}
	fmt.Println("watchdog:", err)
}
