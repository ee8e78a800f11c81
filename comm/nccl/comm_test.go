package nccl

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/longca/longca/comm"
	"github.com/longca/longca/tensor"
)

// selfExchange is the bootstrap of a world of one.
func selfExchange(id []byte) ([]byte, error) { return id, nil }

func newFakeComm(t *testing.T, path string, s Stream, timeout time.Duration) *Comm {
	t.Helper()
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	var binds atomic.Int32
	c, err := New(context.Background(), 0, 1, selfExchange, s, timeout, WithLibrary(path),
		WithThreadSetup(func() error { binds.Add(1); return nil }), WithMaxPoll(100*time.Microsecond))
	if err != nil {
		t.Fatal(err)
	}
	if binds.Load() != 1 {
		t.Errorf("thread setup ran %d times", binds.Load())
	}
	return c
}

// randDev makes a device-posing tensor of random values.
func randDev(rng *rand.Rand, dt tensor.DType, shape ...int) hostDev {
	h := tensor.NewHost(dt, shape...)
	for i := range h.Numel() {
		h.Set(i, rng.NormFloat64())
	}
	return hostDev{h}
}

func sameBits(t *testing.T, what string, got, want hostDev) {
	t.Helper()
	if string(got.Data) != string(want.Data) {
		t.Errorf("%s: %v differs from %v", what, got.Shape(), want.Shape())
	}
}

func TestCommOneRankOperations(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, path := range []string{fakeLib, fakeLibNoA2A} {
		c := newFakeComm(t, path, doneStream, 10*time.Second)
		if c.Rank() != 0 || c.Size() != 1 || c.Handle() == 0 {
			t.Fatalf("rank %d size %d handle %#x", c.Rank(), c.Size(), c.Handle())
		}
		if v := comm.Comm(c).(comm.Versioned).Versions(); len(v) != 1 || v["nccl"] != "2.28.3" {
			t.Fatalf("Versions() = %v, want the library's 2.28.3 under nccl", v)
		}
		for _, dt := range []tensor.DType{tensor.BF16, tensor.FP16, tensor.FP32, tensor.FP64} {
			src := randDev(rng, dt, 6, 3, 4)
			dst := hostDev{tensor.NewHost(dt, 6, 3, 4)}
			if err := c.Group(func() error {
				if err := c.Send(src, 0); err != nil {
					return err
				}
				return c.Recv(dst, 0)
			}); err != nil {
				t.Fatalf("%v self send/recv: %v", dt, err)
			}
			sameBits(t, dt.String()+" self send/recv", dst, src)

			for name, op := range map[string]func(a, b tensor.Tensor) error{
				"alltoall": c.AllToAll, "allgather": c.AllGather, "reducescatter": c.ReduceScatter,
			} {
				in := randDev(rng, dt, 8, 5)
				out := hostDev{tensor.NewHost(dt, 8, 5)}
				if err := op(in, out); err != nil {
					t.Fatalf("%s %v: %v", name, dt, err)
				}
				sameBits(t, name+" "+dt.String(), out, in)
			}
			buf := randDev(rng, dt, 7)
			want := hostDev{tensor.NewHost(dt, 7)}
			copy(want.Data, buf.Data)
			for _, o := range []comm.Op{comm.Sum, comm.Max} {
				if err := c.AllReduce(buf, o); err != nil {
					t.Fatal(err)
				}
				sameBits(t, "allreduce "+o.String(), buf, want)
			}
		}
		if err := c.Barrier(); err != nil {
			t.Error(err)
		}
		if got := c.Counters(); got != (comm.Counters{}) {
			t.Errorf("a world of one sent %+v to others", got)
		}
		l := c.Lib()
		before := fakeCounter(t, l, "fake_destroys")
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if got := fakeCounter(t, l, "fake_destroys"); got != before+1 {
			t.Errorf("Close destroyed %d communicators", got-before)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		if err := c.AllReduce(randDev(rng, tensor.FP32, 2), comm.Sum); err == nil || !strings.Contains(err.Error(), "closed") {
			t.Errorf("after Close: %v", err)
		}
	}
}

func TestCommSplit(t *testing.T) {
	c := newFakeComm(t, fakeLib, doneStream, 10*time.Second)
	defer c.Close()
	sub, err := c.Split(3, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sub.Rank() != 0 || sub.Size() != 1 {
		t.Errorf("split: rank %d of %d", sub.Rank(), sub.Size())
	}
	rng := rand.New(rand.NewPCG(3, 4))
	in, out := randDev(rng, tensor.FP32, 4, 2), hostDev{tensor.NewHost(tensor.FP32, 4, 2)}
	if err := sub.AllGather(in, out); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "allgather on the split", out, in)
	if err := sub.Close(); err != nil {
		t.Error(err)
	}
	if _, err := c.Split(-1, 0); err == nil || !strings.Contains(err.Error(), "joined no group") {
		t.Errorf("negative color: %v", err)
	}
}

func TestCommRefusesBadArguments(t *testing.T) {
	c := newFakeComm(t, fakeLib, doneStream, 10*time.Second)
	defer c.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	f32 := randDev(rng, tensor.FP32, 4)
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"host tensor", c.Send(tensor.NewHost(tensor.FP32, 4), 0), "*tensor.Host, not a device tensor"},
		{"nil", c.Recv(nil, 0), "buf is nil"},
		{"peer", c.Send(f32, 1), "peer 1 is not a rank of this communicator of 1"},
		{"negative peer", c.Recv(f32, -1), "peer -1"},
		{"types", c.AllGather(f32, randDev(rng, tensor.BF16, 4)), "fp32 into bf16"},
		{"sizes", c.AllGather(f32, randDev(rng, tensor.FP32, 8)), "allgather of 4 elements from 1 ranks into 8"},
		{"scatter sizes", c.ReduceScatter(f32, randDev(rng, tensor.FP32, 3)), "reducescatter of 4 elements over 1 ranks into 3"},
		{"dtype", c.AllReduce(hostDev{tensor.NewHost(tensor.FP64, 1)}, comm.Op(9)), "no NCCL reduction"},
		// Alone, a send to oneself never matches: the fake refuses it as NCCL would hang.
		{"unmatched", c.Send(f32, 0), "ncclInvalidUsage"},
	}
	for _, k := range cases {
		if k.err == nil || !strings.Contains(k.err.Error(), k.want) {
			t.Errorf("%s: %v, want %q", k.name, k.err, k.want)
		}
	}
	// None of these broke the communicator.
	out := hostDev{tensor.NewHost(tensor.FP32, 4)}
	if err := c.AllGather(f32, out); err != nil {
		t.Errorf("after refused calls: %v", err)
	}
}

func TestCommGroupFailureAborts(t *testing.T) {
	c := newFakeComm(t, fakeLib, doneStream, 10*time.Second)
	l := c.Lib()
	before := fakeCounter(t, l, "fake_aborts")
	boom := errors.New("kernel launch failed")
	err := c.Group(func() error { return boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "aborted") {
		t.Errorf("group: %v", err)
	}
	if got := fakeCounter(t, l, "fake_aborts") - before; got != 1 {
		t.Errorf("%d aborts", got)
	}
	if err := c.Barrier(); err == nil || !strings.Contains(err.Error(), "aborted communicator") {
		t.Errorf("after abort: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("close after abort: %v", err)
	}
}

// A group NCCL refuses at ncclGroupEnd (as NCCL 2.28 refuses an unmatched receive from
// self, seen on the H200) aborts the communicator once, like a failing group body: later
// calls fail at once.
func TestCommGroupEndRefusalAborts(t *testing.T) {
	c := newFakeComm(t, fakeLib, doneStream, 10*time.Second)
	l := c.Lib()
	before := fakeCounter(t, l, "fake_aborts")
	buf := hostDev{tensor.NewHost(tensor.FP32, 4)}
	err := c.Group(func() error { return c.Recv(buf, 0) })
	if err == nil || !strings.Contains(err.Error(), "ncclInvalidUsage") || !strings.Contains(err.Error(), "aborted") {
		t.Fatalf("group with an unmatched self receive: %v", err)
	}
	if got := fakeCounter(t, l, "fake_aborts") - before; got != 1 {
		t.Errorf("%d aborts, want 1", got)
	}
	if err := c.Barrier(); err == nil || !strings.Contains(err.Error(), "aborted communicator") {
		t.Errorf("after the refused group: %v", err)
	}
}

func TestCommWatchdogTimeout(t *testing.T) {
	var hung atomic.Bool
	s := FuncStream{Ptr: 1, QueryFn: func() (bool, error) { return !hung.Load(), nil }}
	const timeout = 300 * time.Millisecond
	c := newFakeComm(t, fakeLib, s, timeout)
	l := c.Lib()
	aborts := fakeCounter(t, l, "fake_aborts")
	destroys := fakeCounter(t, l, "fake_destroys")
	rng := rand.New(rand.NewPCG(8, 9))
	in, out := randDev(rng, tensor.BF16, 2, 8), hostDev{tensor.NewHost(tensor.BF16, 2, 8)}
	if err := c.AllGather(in, out); err != nil {
		t.Fatal(err)
	}
	hung.Store(true)
	start := time.Now()
	err := c.AllToAll(in, out)
	took := time.Since(start)
	if !errors.Is(err, comm.ErrTimeout) || !strings.Contains(err.Error(), "ncclAlltoAll") {
		t.Errorf("hung alltoall: %v", err)
	}
	if took < timeout || took > timeout+2*time.Second {
		t.Errorf("gave up after %v with a %v timeout", took, timeout)
	}
	start = time.Now()
	err = c.Group(func() error { return c.Send(in, 0) })
	if err == nil || !strings.Contains(err.Error(), "aborted communicator") || time.Since(start) > timeout/2 {
		t.Errorf("after the timeout: %v (%v)", err, time.Since(start))
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
	if got := fakeCounter(t, l, "fake_aborts") - aborts; got != 1 {
		t.Errorf("%d aborts, want 1", got)
	}
	if got := fakeCounter(t, l, "fake_destroys") - destroys; got != 0 {
		t.Errorf("an aborted communicator was destroyed %d times", got)
	}
}

func TestCommAsyncError(t *testing.T) {
	s := FuncStream{Ptr: 1, QueryFn: func() (bool, error) { return false, nil }}
	c := newFakeComm(t, fakeLib, s, time.Minute)
	t.Setenv("FAKE_NCCL_ASYNC", "2")
	rng := rand.New(rand.NewPCG(10, 11))
	start := time.Now()
	err := c.AllReduce(randDev(rng, tensor.FP32, 16), comm.Sum)
	var ne *Error
	if !errors.As(err, &ne) || ne.Code != SystemError {
		t.Fatalf("async error: %v", err)
	}
	for _, want := range []string{"ncclAllReduce (sum)", "ncclSystemError", "fake error string 2", "fake last error", "aborted"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("took %v", time.Since(start))
	}
	c.Close()
}

func TestNewInitTimeout(t *testing.T) {
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	t.Setenv("FAKE_NCCL_INIT_HANG", "1")
	start := time.Now()
	_, err := New(context.Background(), 0, 1, selfExchange, doneStream, 40*time.Millisecond, WithLibrary(fakeLib))
	if !errors.Is(err, comm.ErrTimeout) || !strings.Contains(err.Error(), "ncclCommInitRank") || !strings.Contains(err.Error(), "rank 0 of 1") {
		t.Errorf("hung init: %v", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %v", took)
	}
}

func TestNewRefuses(t *testing.T) {
	cases := []struct {
		rank, size int
		ex         Exchange
		s          Stream
		opts       []Option
		want       string
	}{
		{3, 2, selfExchange, doneStream, nil, "rank 3 is not in a world of 2"},
		{0, 1, selfExchange, nil, nil, "no CUDA stream"},
		{0, 1, selfExchange, doneStream, []Option{WithLibrary("/nonexistent/libnccl.so.2")}, "cannot open /nonexistent/libnccl.so.2"},
		{0, 1, nil, doneStream, []Option{WithLibrary(fakeLib)}, "no id exchange"},
		{0, 1, selfExchange, doneStream, []Option{WithLibrary(fakeLib), WithThreadSetup(func() error { return errors.New("cuCtxSetCurrent: invalid context") })}, "invalid context"},
	}
	for _, k := range cases {
		_, err := New(context.Background(), k.rank, k.size, k.ex, k.s, time.Second, k.opts...)
		if err == nil || !strings.Contains(err.Error(), k.want) {
			t.Errorf("%v, want %q", err, k.want)
		}
	}
}
